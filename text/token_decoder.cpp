#include "text/token_decoder.hpp"

#include "text/byte_level.hpp"
#include "text/json_fields.hpp"
#include "text/utf8.hpp"

namespace ember::text {

namespace token_decoder_detail {

constexpr int kMaxSequenceDepth = 4;
constexpr size_t kMaxSequenceSteps = 32;


/// The byte of a "<0xXX>" token, or -1.
int byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = t[i];
    int d = -1;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/// The one character of `s`, or an error naming `where`.
Result<char32_t> one_char(const std::string& s, const std::string& where) {
  size_t end = 0;
  if (s.empty() || !valid_utf8(s)) return invalid_argument(where + ": must be one character");
  const char32_t c = next_code_point(s, end);
  if (end != s.size()) return invalid_argument(where + ": must be one character");
  return c;
}

}  // namespace token_decoder_detail

Status TokenDecoder::parse_into(const nlohmann::json& j, std::vector<Step>& steps, int depth) {
  namespace d = token_decoder_detail;
  const std::string where = depth == 0 ? "decoder" : "decoder(sequence item)";
  if (!j.is_object()) return type_error(where, "an object", j);
  auto type = string_field(j, "type", where);
  if (!type.ok()) return type.error();
  Step step;
  if (*type == "Sequence") {
    if (depth >= d::kMaxSequenceDepth) return invalid_argument(where + ": Sequences nested too deep");
    const nlohmann::json* items = member(j, "decoders");
    if (items == nullptr) return invalid_argument(where + ".decoders: missing");
    if (!items->is_array()) return type_error(where + ".decoders", "an array", *items);
    if (items->size() > d::kMaxSequenceSteps) return invalid_argument(where + ".decoders: too many steps");
    for (const auto& item : *items) {
      if (Status s = parse_into(item, steps, depth + 1); !s.ok()) return s;
    }
    return Status::OK();
  }
  if (*type == "ByteLevel") {
    step.kind = Step::Kind::byte_level;
  } else if (*type == "ByteFallback") {
    step.kind = Step::Kind::byte_fallback;
  } else if (*type == "Fuse") {
    step.kind = Step::Kind::fuse;
  } else if (*type == "Replace") {
    step.kind = Step::Kind::replace;
    auto content = string_field(j, "content", where);
    if (!content.ok()) return content.error();
    step.content = std::move(*content);
    const nlohmann::json* p = member(j, "pattern");
    if (p == nullptr || !p->is_object())
      return invalid_argument(where + ".pattern: expected an object with String or Regex");
    if (const auto* s = member(*p, "String");
        s != nullptr && s->is_string() && !s->get_ref<const std::string&>().empty()) {
      step.literal = s->get<std::string>();
    } else if (const auto* r = member(*p, "Regex"); r != nullptr && r->is_string()) {
      auto re = Regex::compile(r->get<std::string>());
      if (!re.ok()) return re.error().with_context(where + ".pattern");
      step.regex = std::move(re).value();
    } else {
      return invalid_argument(where + ".pattern: expected a non-empty String or a Regex");
    }
  } else if (*type == "Strip") {
    step.kind = Step::Kind::strip;
    auto content = string_field(j, "content", where);
    if (!content.ok()) return content.error();
    auto c = d::one_char(*content, where + ".content");
    if (!c.ok()) return c.error();
    step.strip_char = *c;
    auto start = int_field(j, "start", 0, 1 << 20, where);
    auto stop = int_field(j, "stop", 0, 1 << 20, where);
    if (!start.ok()) return start.error();
    if (!stop.ok()) return stop.error();
    step.start = static_cast<size_t>(*start);
    step.stop = static_cast<size_t>(*stop);
  } else if (*type == "Metaspace") {
    step.kind = Step::Kind::metaspace;
    auto replacement = string_field(j, "replacement", where);
    if (!replacement.ok()) return replacement.error();
    if (auto c = d::one_char(*replacement, where + ".replacement"); !c.ok()) return c.error();
    step.content = std::move(*replacement);
    auto scheme = optional_string_field(j, "prepend_scheme", where);
    if (!scheme.ok()) return scheme.error();
    if (scheme->has_value()) {
      if (**scheme != "always" && **scheme != "first" && **scheme != "never") {
        return invalid_argument(where + ".prepend_scheme: unknown \"" + **scheme + "\"");
      }
      step.strip_first = **scheme != "never";
    } else {
      auto prefix = bool_field(j, "add_prefix_space", true, where);
      if (!prefix.ok()) return prefix.error();
      step.strip_first = *prefix;
    }
  } else {
    return unsupported(where + ": type \"" + *type +
                       "\" is not supported (Ember's tokenizer reads ByteLevel, Replace, ByteFallback, Fuse, Strip, "
                       "Metaspace and Sequence decoders)");
  }
  steps.push_back(std::move(step));
  return Status::OK();
}

Result<TokenDecoder> TokenDecoder::parse(const nlohmann::json& j) {
  TokenDecoder d;
  if (j.is_null()) return d;
  d.none_ = false;
  if (Status s = parse_into(j, d.steps_, 0); !s.ok()) return s.error();
  return d;
}

bool TokenDecoder::strips_leading_space() const {
  for (const Step& s : steps_) {
    if ((s.kind == Step::Kind::strip && s.start > 0 && s.strip_char == U' ') ||
        (s.kind == Step::Kind::metaspace && s.strip_first))
      return true;
  }
  return false;
}

void TokenDecoder::run_step(const Step& step, std::vector<std::string>& tokens) {
  namespace d = token_decoder_detail;
  switch (step.kind) {
    case Step::Kind::byte_level: {
      std::string bytes;
      for (const std::string& t : tokens) {
        const size_t mark = bytes.size();
        bool all = true;
        size_t i = 0;
        while (i < t.size()) {
          const int b = char_to_byte(next_code_point(t, i));
          if (b < 0) {
            all = false;
            break;
          }
          bytes.push_back(static_cast<char>(b));
        }
        if (!all) {
          bytes.resize(mark);
          bytes.append(t);
        }
      }
      tokens.assign(1, to_valid_utf8(bytes));
      return;
    }
    case Step::Kind::replace:
      for (std::string& t : tokens) {
        if (!step.regex) {
          t = replace_all(t, step.literal, step.content);
          continue;
        }
        std::vector<Span> matches;
        if (!step.regex->find_all(t, matches).ok()) continue;  // a regex that gives up leaves the token
        std::string out;
        size_t prev = 0;
        for (const Span& m : matches) {
          out.append(t, prev, m.begin - prev);
          out.append(step.content);
          prev = m.end;
        }
        out.append(t, prev, std::string::npos);
        t = std::move(out);
      }
      return;
    case Step::Kind::byte_fallback: {
      std::vector<std::string> out;
      out.reserve(tokens.size());
      std::string pending;
      auto flush = [&]() {
        if (pending.empty()) return;
        if (valid_utf8(pending)) {
          out.push_back(pending);
        } else {
          for (size_t k = 0; k < pending.size(); ++k) out.emplace_back(kReplacementChar);
        }
        pending.clear();
      };
      for (std::string& t : tokens) {
        const int b = d::byte_token(t);
        if (b >= 0) {
          pending.push_back(static_cast<char>(b));
          continue;
        }
        flush();
        out.push_back(std::move(t));
      }
      flush();
      tokens = std::move(out);
      return;
    }
    case Step::Kind::fuse: {
      std::string all;
      for (const std::string& t : tokens) all += t;
      tokens.assign(1, std::move(all));
      return;
    }
    case Step::Kind::strip:
      for (std::string& t : tokens) {
        std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, code point)
        size_t i = 0;
        while (i < t.size()) {
          const size_t at = i;
          chars.push_back({at, next_code_point(t, i)});
        }
        size_t first = 0;
        while (first < step.start && first < chars.size() && chars[first].second == step.strip_char) ++first;
        size_t last = chars.size();
        for (size_t k = 0; k < step.stop && last > first && chars[last - 1].second == step.strip_char; ++k) --last;
        const size_t b = first < chars.size() ? chars[first].first : t.size();
        const size_t e = last < chars.size() ? chars[last].first : t.size();
        t = t.substr(b, e - b);
      }
      return;
    case Step::Kind::metaspace:
      for (size_t k = 0; k < tokens.size(); ++k) {
        std::string t = replace_all(tokens[k], step.content, " ");
        if (k == 0 && step.strip_first && !t.empty() && t[0] == ' ') t.erase(0, 1);
        tokens[k] = std::move(t);
      }
      return;
  }
}

std::string TokenDecoder::decode(std::vector<std::string> tokens) const {
  if (none_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) out.push_back(' ');
      out += tokens[i];
    }
    return to_valid_utf8(out);
  }
  for (const Step& step : steps_) run_step(step, tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  // Every step keeps valid text valid except a Replace or Strip that cuts a byte-level token in
  // two; one check costs less than reasoning about each.
  return to_valid_utf8(out);
}

std::string clean_up_tokenization(std::string_view text) {
  namespace d = token_decoder_detail;
  std::string s(text);
  for (const auto& [from, to] : {std::pair<std::string_view, std::string_view>{" .", "."},
                                 {" ?", "?"},
                                 {" !", "!"},
                                 {" ,", ","},
                                 {" ' ", "'"},
                                 {" n't", "n't"},
                                 {" 'm", "'m"},
                                 {" 's", "'s"},
                                 {" 've", "'ve"},
                                 {" 're", "'re"}}) {
    s = replace_all(s, from, to);
  }
  return s;
}

}  // namespace ember::text
