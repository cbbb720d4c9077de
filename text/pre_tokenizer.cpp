#include "text/pre_tokenizer.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>

#include "text/byte_level.hpp"
#include "text/json_fields.hpp"
#include "text/utf8.hpp"

namespace ember::text {

namespace pre_tokenizer_detail {

/// Nested Sequences and their lengths, bounded (real files: one level, at most 4 steps).
constexpr int kMaxSequenceDepth = 4;
constexpr size_t kMaxSequenceSteps = 32;

/// A {"String": ...} or {"Regex": ...} pattern.
struct Pattern {
  std::string literal;
  std::optional<Regex> regex;
};

Result<Pattern> parse_pattern(const nlohmann::json& j, const std::string& where, bool literal_as_regex) {
  const nlohmann::json* p = member(j, "pattern");
  if (p == nullptr) return invalid_argument(where + ".pattern: missing");
  if (!p->is_object()) return type_error(where + ".pattern", "an object with String or Regex", *p);
  Pattern out;
  if (const auto* s = member(*p, "String")) {
    if (!s->is_string()) return type_error(where + ".pattern.String", "a string", *s);
    out.literal = s->get<std::string>();
    if (out.literal.empty()) return invalid_argument(where + ".pattern.String: empty");
    if (!valid_utf8(out.literal)) return invalid_argument(where + ".pattern.String: not valid UTF-8");
    if (literal_as_regex) {
      auto r = Regex::literal(out.literal);
      if (!r.ok()) return r.error().with_context(where + ".pattern");
      out.regex = std::move(r).value();
    }
    return out;
  }
  if (const auto* s = member(*p, "Regex")) {
    if (!s->is_string()) return type_error(where + ".pattern.Regex", "a string", *s);
    auto r = Regex::compile(s->get<std::string>());
    if (!r.ok()) return r.error().with_context(where + ".pattern");
    out.regex = std::move(r).value();
    return out;
  }
  return invalid_argument(where + ".pattern: neither String nor Regex");
}

/// The "type" of a step, and the Sequence's list under `list_key` when it is a Sequence.
Result<std::string> step_type(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return type_error(where, "an object", j);
  return string_field(j, "type", where);
}

Result<const nlohmann::json*> sequence_items(const nlohmann::json& j, std::string_view key, const std::string& where,
                                             int depth) {
  if (depth >= kMaxSequenceDepth) return invalid_argument(where + ": Sequences nested too deep");
  const nlohmann::json* items = member(j, key);
  if (items == nullptr) return invalid_argument(field_path(where, key) + ": missing");
  if (!items->is_array()) return type_error(field_path(where, key), "an array", *items);
  if (items->size() > kMaxSequenceSteps) return invalid_argument(field_path(where, key) + ": too many steps");
  return items;
}


/// The segments of `text` for `regex`: matches (true) and the gaps between them (false), in order,
/// covering the text; an empty text is one empty gap (Hugging Face's Pattern::find_matches).
Result<std::vector<std::pair<Span, bool>>> find_segments(const Regex& regex, std::string_view text) {
  std::vector<std::pair<Span, bool>> segments;
  if (text.empty()) {
    segments.push_back({Span{0, 0}, false});
    return segments;
  }
  std::vector<Span> matches;
  if (Status s = regex.find_all(text, matches); !s.ok()) return s.error();
  size_t prev = 0;
  for (const Span& m : matches) {
    if (m.begin != prev) segments.push_back({Span{prev, m.begin}, false});
    segments.push_back({m, true});
    prev = m.end;
  }
  if (prev != text.size()) segments.push_back({Span{prev, text.size()}, false});
  return segments;
}

/// `text` in the Unicode normalization form utf8proc's `options` name. ASCII is in every form already.
Result<std::string> unicode_normalize(std::string_view text, int options) {
  if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
    return std::string(text);
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &out, static_cast<utf8proc_option_t>(options));
  if (n < 0) return invalid_argument(std::string("Unicode normalization: ") + utf8proc_errmsg(n));
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

Result<SplitBehavior> parse_behavior(const nlohmann::json& j, const std::string& where) {
  auto b = string_field(j, "behavior", where);
  if (!b.ok()) return b.error();
  if (*b == "Removed") return SplitBehavior::removed;
  if (*b == "Isolated") return SplitBehavior::isolated;
  if (*b == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (*b == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (*b == "Contiguous") return SplitBehavior::contiguous;
  return invalid_argument(where + ".behavior: unknown \"" + *b + "\"");
}

}  // namespace pre_tokenizer_detail

// ---- Normalizer ----

Status Normalizer::parse_into(const nlohmann::json& j, std::vector<Step>& steps, int depth) {
  namespace d = pre_tokenizer_detail;
  const std::string where = depth == 0 ? "normalizer" : "normalizer(sequence item)";
  auto type = d::step_type(j, where);
  if (!type.ok()) return type.error();
  if (*type == "Sequence") {
    auto items = d::sequence_items(j, "normalizers", where, depth);
    if (!items.ok()) return items.error();
    for (const auto& item : **items) {
      if (Status s = parse_into(item, steps, depth + 1); !s.ok()) return s;
    }
    return Status::OK();
  }
  if (*type == "Prepend") {
    auto p = string_field(j, "prepend", where);
    if (!p.ok()) return p.error();
    if (!valid_utf8(*p)) return invalid_argument(where + ".prepend: not valid UTF-8");
    steps.push_back({Step::Kind::prepend, std::move(*p), {}, std::nullopt});
    return Status::OK();
  }
  if (*type == "Replace") {
    auto content = string_field(j, "content", where);
    if (!content.ok()) return content.error();
    if (!valid_utf8(*content)) return invalid_argument(where + ".content: not valid UTF-8");
    auto pattern = d::parse_pattern(j, where, /*literal_as_regex=*/false);
    if (!pattern.ok()) return pattern.error();
    steps.push_back({Step::Kind::replace, std::move(*content), std::move(pattern->literal), std::move(pattern->regex)});
    return Status::OK();
  }
  for (const auto& [name, options] : {std::pair{"NFC", UTF8PROC_STABLE | UTF8PROC_COMPOSE},
                                      {"NFD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE},
                                      {"NFKC", UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT},
                                      {"NFKD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT}}) {
    if (*type == name) {
      Step step{Step::Kind::unicode, {}, {}, std::nullopt};
      step.unicode_options = options;
      steps.push_back(std::move(step));
      return Status::OK();
    }
  }
  return unsupported(where + ": type \"" + *type +
                     "\" is not supported (Ember's tokenizer reads Prepend, Replace, NFC, NFD, NFKC, NFKD and "
                     "Sequence normalizers)");
}

Result<Normalizer> Normalizer::parse(const nlohmann::json& j) {
  Normalizer n;
  if (j.is_null()) return n;
  if (Status s = parse_into(j, n.steps_, 0); !s.ok()) return s.error();
  return n;
}

Result<std::string> Normalizer::apply(std::string_view text) const {
  std::string out(text);
  for (const Step& step : steps_) {
    if (step.kind == Step::Kind::prepend) {
      // Hugging Face prepends to non-empty text only.
      if (!out.empty()) out.insert(0, step.content);
      continue;
    }
    if (step.kind == Step::Kind::unicode) {
      auto normalized = pre_tokenizer_detail::unicode_normalize(out, step.unicode_options);
      if (!normalized.ok()) return normalized.error();
      out = std::move(normalized).value();
      continue;
    }
    if (!step.regex) {
      out = replace_all(out, step.literal, step.content);
      continue;
    }
    std::vector<Span> matches;
    if (Status s = step.regex->find_all(out, matches); !s.ok()) return s.error().with_context("normalizer Replace");
    std::string replaced;
    size_t prev = 0;
    for (const Span& m : matches) {
      replaced.append(out, prev, m.begin - prev);
      replaced.append(step.content);
      prev = m.end;
    }
    replaced.append(out, prev, std::string::npos);
    out = std::move(replaced);
  }
  return out;
}

// ---- Split behaviours ----

std::vector<Span> split_segments(const std::vector<std::pair<Span, bool>>& segments, SplitBehavior behavior) {
  // Hugging Face's NormalizedString::split: (span, remove) pairs, then the kept non-empty ones.
  std::vector<std::pair<Span, bool>> out;
  switch (behavior) {
    case SplitBehavior::removed:
      out = segments;
      break;
    case SplitBehavior::isolated:
      for (const auto& [span, is_match] : segments) out.push_back({span, false});
      break;
    case SplitBehavior::contiguous: {
      bool previous = false;
      for (const auto& [span, is_match] : segments) {
        if (is_match == previous && !out.empty())
          out.back().first.end = span.end;
        else
          out.push_back({span, false});
        previous = is_match;
      }
      break;
    }
    case SplitBehavior::merged_with_previous: {
      bool previous = false;
      for (const auto& [span, is_match] : segments) {
        if (is_match && !previous && !out.empty())
          out.back().first.end = span.end;
        else
          out.push_back({span, false});
        previous = is_match;
      }
      break;
    }
    case SplitBehavior::merged_with_next: {
      bool previous = false;
      for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
        const auto& [span, is_match] = *it;
        if (is_match && !previous && !out.empty())
          out.back().first.begin = span.begin;
        else
          out.push_back({span, false});
        previous = is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
  }
  std::vector<Span> kept;
  for (const auto& [span, remove] : out) {
    if (!remove && span.end > span.begin) kept.push_back(span);
  }
  return kept;
}

// ---- PreTokenizer ----

Status PreTokenizer::parse_into(const nlohmann::json& j, std::vector<Step>& steps, int depth) {
  namespace d = pre_tokenizer_detail;
  const std::string where = depth == 0 ? "pre_tokenizer" : "pre_tokenizer(sequence item)";
  auto type = d::step_type(j, where);
  if (!type.ok()) return type.error();
  if (*type == "Sequence") {
    auto items = d::sequence_items(j, "pretokenizers", where, depth);
    if (!items.ok()) return items.error();
    for (const auto& item : **items) {
      if (Status s = parse_into(item, steps, depth + 1); !s.ok()) return s;
    }
    return Status::OK();
  }
  Step step;
  if (*type == "ByteLevel") {
    step.kind = Step::Kind::byte_level;
    auto prefix = bool_field(j, "add_prefix_space", true, where);
    auto use_regex = bool_field(j, "use_regex", true, where);
    if (!prefix.ok()) return prefix.error();
    if (!use_regex.ok()) return use_regex.error();
    step.add_prefix_space = *prefix;
    if (*use_regex) {
      auto r = Regex::compile(kGpt2Pattern);
      if (!r.ok()) return r.error().with_context(where);
      step.regex = std::move(r).value();
    }
  } else if (*type == "Split") {
    step.kind = Step::Kind::split;
    auto pattern = d::parse_pattern(j, where, /*literal_as_regex=*/true);
    if (!pattern.ok()) return pattern.error();
    step.regex = std::move(pattern->regex);
    auto behavior = d::parse_behavior(j, where);
    if (!behavior.ok()) return behavior.error();
    step.behavior = *behavior;
    auto invert = bool_field(j, "invert", false, where);
    if (!invert.ok()) return invert.error();
    step.invert = *invert;
  } else if (*type == "Metaspace") {
    step.kind = Step::Kind::metaspace;
    auto replacement = string_field(j, "replacement", where);
    if (!replacement.ok()) return replacement.error();
    size_t end = 0;
    if (replacement->empty() || !valid_utf8(*replacement) ||
        (next_code_point(*replacement, end), end != replacement->size())) {
      return invalid_argument(where + ".replacement: must be one character");
    }
    step.replacement = std::move(*replacement);
    auto scheme = optional_string_field(j, "prepend_scheme", where);
    if (!scheme.ok()) return scheme.error();
    if (scheme->has_value()) {
      if (**scheme == "always")
        step.prepend = Step::Prepend::always;
      else if (**scheme == "first")
        step.prepend = Step::Prepend::first;
      else if (**scheme == "never")
        step.prepend = Step::Prepend::never;
      else
        return invalid_argument(where + ".prepend_scheme: unknown \"" + **scheme + "\"");
    } else {
      // Files before tokenizers 0.14 say add_prefix_space instead (true: always).
      auto prefix = bool_field(j, "add_prefix_space", true, where);
      if (!prefix.ok()) return prefix.error();
      step.prepend = *prefix ? Step::Prepend::always : Step::Prepend::never;
    }
    auto split = bool_field(j, "split", true, where);
    if (!split.ok()) return split.error();
    step.split_on_replacement = *split;
    if (step.split_on_replacement) {
      auto r = Regex::literal(step.replacement);
      if (!r.ok()) return r.error().with_context(where);
      step.regex = std::move(r).value();
    }
  } else {
    return unsupported(where + ": type \"" + *type +
                       "\" is not supported (Ember's tokenizer reads ByteLevel, Split, Metaspace and Sequence "
                       "pre-tokenizers)");
  }
  steps.push_back(std::move(step));
  return Status::OK();
}

Result<PreTokenizer> PreTokenizer::parse(const nlohmann::json& j) {
  PreTokenizer p;
  if (j.is_null()) return p;
  if (Status s = parse_into(j, p.steps_, 0); !s.ok()) return s.error();
  return p;
}

bool PreTokenizer::byte_level() const {
  for (const Step& s : steps_) {
    if (s.kind == Step::Kind::byte_level) return true;
  }
  return false;
}

Status PreTokenizer::run_step(const Step& step, std::vector<std::string>& pieces, bool at_text_start) {
  namespace d = pre_tokenizer_detail;
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    std::string& piece = pieces[i];
    if (piece.empty()) continue;
    switch (step.kind) {
      case Step::Kind::byte_level: {
        if (step.add_prefix_space && piece[0] != ' ') piece.insert(0, " ");
        if (!step.regex) {
          std::string mapped;
          append_byte_level(mapped, piece);
          out.push_back(std::move(mapped));
          break;
        }
        std::vector<Span> matches;
        if (Status s = step.regex->find_all(piece, matches); !s.ok()) return s;
        // GPT-2's pattern ends with \s+, so its matches cover the whole piece; split() keeps any gap
        // the same way a Split with Isolated would.
        std::vector<std::pair<Span, bool>> segments;
        size_t prev = 0;
        for (const Span& m : matches) {
          if (m.begin != prev) segments.push_back({Span{prev, m.begin}, false});
          segments.push_back({m, true});
          prev = m.end;
        }
        if (prev != piece.size()) segments.push_back({Span{prev, piece.size()}, false});
        for (const auto& [span, is_match] : segments) {
          std::string mapped;
          append_byte_level(mapped, std::string_view(piece).substr(span.begin, span.end - span.begin));
          out.push_back(std::move(mapped));
        }
        break;
      }
      case Step::Kind::split: {
        auto segments = d::find_segments(*step.regex, piece);
        if (!segments.ok()) return segments.error();
        if (step.invert) {
          for (auto& seg : *segments) seg.second = !seg.second;
        }
        for (const Span& span : split_segments(*segments, step.behavior)) {
          out.push_back(piece.substr(span.begin, span.end - span.begin));
        }
        break;
      }
      case Step::Kind::metaspace: {
        std::string replaced = replace_all(piece, " ", step.replacement);
        const bool prepend =
            step.prepend == Step::Prepend::always || (step.prepend == Step::Prepend::first && at_text_start && i == 0);
        if (prepend && replaced.compare(0, step.replacement.size(), step.replacement) != 0) {
          replaced.insert(0, step.replacement);
        }
        if (!step.split_on_replacement) {
          out.push_back(std::move(replaced));
          break;
        }
        auto segments = d::find_segments(*step.regex, replaced);
        if (!segments.ok()) return segments.error();
        for (const Span& span : split_segments(*segments, SplitBehavior::merged_with_next)) {
          out.push_back(replaced.substr(span.begin, span.end - span.begin));
        }
        break;
      }
    }
  }
  pieces = std::move(out);
  return Status::OK();
}

Status PreTokenizer::split(std::string_view section, bool at_text_start, std::vector<std::string>& pieces) const {
  std::vector<std::string> work{std::string(section)};
  for (const Step& step : steps_) {
    if (Status s = run_step(step, work, at_text_start); !s.ok()) return s.error().with_context("pre_tokenizer");
  }
  for (auto& p : work) {
    if (!p.empty()) pieces.push_back(std::move(p));
  }
  return Status::OK();
}

}  // namespace ember::text
