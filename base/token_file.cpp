#include "base/token_file.hpp"

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <optional>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace ember {

namespace {

constexpr size_t kMaxTokenFileBytes = 4096;

/// The whole of `path`, refused when longer than `max_bytes`; errors start with `at`.
Result<std::string> read_capped(const std::string& path, const std::string& at, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(at + ": cannot read: " + std::strerror(errno));
  std::string text;
  text.resize(max_bytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > max_bytes) {
    return invalid_argument(at + ": longer than " + std::to_string(max_bytes) + " bytes: not a token file");
  }
  return text;
}

}  // namespace

bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

namespace {

constexpr size_t kMaxListBytes = 1 << 20, kMaxTokens = 4096;

/// Calls `take(line_no, words)` for each line of `text` that is neither blank nor a comment, its
/// words split on spaces and tabs; stops at the first error `take` returns.
template <class Take>
Status for_each_entry(const std::string& text, Take take) {
  size_t line_no = 0;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++line_no;
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    const char* space = " \t\r";
    const size_t first = line.find_first_not_of(space);
    if (first == std::string_view::npos || line[first] == '#') continue;
    line = line.substr(first, line.find_last_not_of(space) - first + 1);
    EMBER_RETURN_IF_ERROR(take(line_no, line));
  }
  return Status::OK();
}

/// Whether every character of `s` may travel in an HTTP header's token (printable ASCII, no space).
bool printable(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char ch) { return ch > ' ' && ch <= '~'; });
}

}  // namespace

Result<std::vector<std::string>> read_token_list(const std::string& path, std::string_view what) {
  const std::string at = std::string(what) + " (" + path + ")";
  EMBER_ASSIGN_OR_RETURN(const std::string text, read_capped(path, at, kMaxListBytes));
  std::vector<std::string> tokens;
  EMBER_RETURN_IF_ERROR(for_each_entry(text, [&](size_t line_no, std::string_view line) -> Status {
    if (!printable(line)) {
      return invalid_argument(at + ": line " + std::to_string(line_no) +
                              ": a token holds a space or a character outside printable ASCII");
    }
    if (tokens.size() == kMaxTokens) return invalid_argument(at + ": more than 4096 tokens");
    tokens.emplace_back(line);
    return Status::OK();
  }));
  if (tokens.empty()) return invalid_argument(at + ": no token in the file");
  return tokens;
}

bool ApiToken::may_infer(std::string_view model) const {
  return infer_all || std::find(models.begin(), models.end(), model) != models.end();
}

namespace {

/// A positive decimal (rate=) or, `whole`, a positive integer below 2^32 (burst=, concurrent=).
std::optional<double> positive_number(std::string_view v, bool whole) {
  double x = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || !(x > 0) || !std::isfinite(x)) return std::nullopt;
  if (whole && (x != std::floor(x) || x > 4294967295.0)) return std::nullopt;
  return x;
}

bool label_char(char ch) {
  return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == ':' || ch == '-';
}

/// The words after a token (ApiToken's grammar) into `t`; the error says what is wrong, for the
/// caller to put after the line's place.
Status apply_words(std::string_view words, ApiToken& t) {
  std::vector<std::string_view> seen;
  bool scoped = false, admin = false, infer = false, repository = false, metrics = false;
  t.infer_all = false;
  t.metrics = false;
  while (!words.empty()) {
    const size_t gap = words.find_first_of(" \t");
    const std::string_view word = words.substr(0, gap);
    words = gap == std::string_view::npos ? std::string_view() : words.substr(words.find_first_not_of(" \t", gap));
    const size_t eq = word.find('=');
    const std::string_view key = word.substr(0, eq), value = eq == std::string_view::npos ? "" : word.substr(eq + 1);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return invalid_argument("'" + std::string(key) + "' twice");
    }
    seen.push_back(key);
    const bool valued = eq != std::string_view::npos;
    if (!valued && (key == "admin" || key == "infer" || key == "repository" || key == "metrics")) {
      scoped = true;
      (key == "admin" ? admin : key == "infer" ? infer : key == "repository" ? repository : metrics) = true;
      continue;
    }
    if (valued && key == "infer") {
      scoped = infer = true;
      for (size_t at = 0; at <= value.size();) {
        size_t comma = value.find(',', at);
        if (comma == std::string_view::npos) comma = value.size();
        const std::string_view model = value.substr(at, comma - at);
        if (model.empty()) return invalid_argument("infer= names an empty model (infer=NAME[,NAME...])");
        t.models.emplace_back(model);
        at = comma + 1;
      }
      continue;
    }
    if (valued && (key == "rate" || key == "burst" || key == "concurrent")) {
      auto x = positive_number(value, key != "rate");
      if (!x) {
        return invalid_argument(std::string(key) + "=" + std::string(value) + " is not a positive " +
                                (key == "rate" ? "number" : "whole number"));
      }
      if (key == "rate") t.rate = *x;
      else (key == "burst" ? t.burst : t.concurrent) = static_cast<uint32_t>(*x);
      continue;
    }
    if (valued && key == "name") {
      if (value.empty() || value.size() > 64 || !std::all_of(value.begin(), value.end(), label_char)) {
        return invalid_argument("name=" + std::string(value) + " is not a name ([A-Za-z0-9_.:-], 1 to 64)");
      }
      t.name = std::string(value);
      continue;
    }
    return invalid_argument("'" + std::string(word) +
                            "' is not a scope or a rate (admin, infer, infer=NAMES, repository, metrics, rate=R, "
                            "burst=N, concurrent=N, name=LABEL; a token holds no space)");
  }
  if (t.burst != 0 && t.rate == 0) return invalid_argument("burst= needs rate=");
  if (t.rate > 0 && t.burst == 0) t.burst = static_cast<uint32_t>(std::max(1.0, std::ceil(t.rate)));
  if (!scoped) infer = metrics = true;  // the scopes of a token before scopes existed
  if (admin) infer = repository = metrics = true;
  t.infer_all = infer && t.models.empty();
  if (admin) t.models.clear();
  t.repository = repository;
  t.metrics = metrics;
  return Status::OK();
}

}  // namespace

Result<ApiToken> parse_api_token(std::string_view line, std::string default_name) {
  const size_t gap = line.find_first_of(" \t");
  ApiToken t;
  t.token = std::string(line.substr(0, gap));
  if (t.token.empty() || !printable(t.token)) {
    return invalid_argument("a token holds a character outside printable ASCII");
  }
  const std::string_view words =
      gap == std::string_view::npos ? std::string_view() : line.substr(line.find_first_not_of(" \t", gap));
  EMBER_RETURN_IF_ERROR(apply_words(words, t));
  if (t.name.empty()) t.name = std::move(default_name);
  return t;
}

Result<std::vector<ApiToken>> read_api_tokens(const std::string& path, std::string_view what) {
  const std::string at = std::string(what) + " (" + path + ")";
  EMBER_ASSIGN_OR_RETURN(const std::string text, read_capped(path, at, kMaxListBytes));
  std::vector<ApiToken> tokens;
  std::vector<size_t> lines;
  EMBER_RETURN_IF_ERROR(for_each_entry(text, [&](size_t line_no, std::string_view line) -> Status {
    const std::string where = at + ": line " + std::to_string(line_no);
    auto parsed = parse_api_token(line, "line-" + std::to_string(line_no));
    if (!parsed.ok()) return parsed.error().with_context(where);
    ApiToken t = std::move(*parsed);
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i].token == t.token) {
        return invalid_argument(where + ": the same token as line " + std::to_string(lines[i]));
      }
      if (tokens[i].name == t.name) {
        return invalid_argument(where + ": name=" + t.name + " is line " + std::to_string(lines[i]) + "'s too");
      }
    }
    if (tokens.size() == kMaxTokens) return invalid_argument(at + ": more than 4096 tokens");
    tokens.push_back(std::move(t));
    lines.push_back(line_no);
    return Status::OK();
  }));
  if (tokens.empty()) return invalid_argument(at + ": no token in the file");
  return tokens;
}

Result<std::string> read_token_file(const std::string& path, std::string_view what) {
  const std::string at = std::string(what) + " (" + path + ")";
  EMBER_ASSIGN_OR_RETURN(const std::string text, read_capped(path, at, kMaxTokenFileBytes));
  const char* space = " \t\r\n";
  const size_t first = text.find_first_not_of(space);
  if (first == std::string::npos) return invalid_argument(at + ": the file is empty");
  const size_t last = text.find_last_not_of(space);
  return text.substr(first, last - first + 1);
}

}  // namespace ember
