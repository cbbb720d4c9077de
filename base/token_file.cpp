#include "base/token_file.hpp"

#include <algorithm>
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

Result<std::vector<ApiToken>> read_api_tokens(const std::string& path, std::string_view what) {
  const std::string at = std::string(what) + " (" + path + ")";
  EMBER_ASSIGN_OR_RETURN(const std::string text, read_capped(path, at, kMaxListBytes));
  std::vector<ApiToken> tokens;
  EMBER_RETURN_IF_ERROR(for_each_entry(text, [&](size_t line_no, std::string_view line) -> Status {
    const std::string where = at + ": line " + std::to_string(line_no);
    const size_t gap = line.find_first_of(" \t");
    ApiToken t;
    t.token = std::string(line.substr(0, gap));
    if (gap != std::string_view::npos) {
      const std::string_view scope = line.substr(line.find_first_not_of(" \t", gap));
      if (scope != "admin") {
        return invalid_argument(where + ": after the token only the scope 'admin' may follow (a token holds no space)");
      }
      t.admin = true;
    }
    if (!printable(t.token)) return invalid_argument(where + ": a token holds a character outside printable ASCII");
    if (tokens.size() == kMaxTokens) return invalid_argument(at + ": more than 4096 tokens");
    tokens.push_back(std::move(t));
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
