// A regular expression as the tokenizer formats write them (Hugging Face's Split pre-tokenizer and
// Replace normalizer, GPT-2's pre-tokenizer pattern), compiled and run by PCRE2.
//
// Pure: anyone, any thread. A Regex is immutable after compile() and shared by copies; each call
// matches with scratch memory of its own thread, so concurrent calls never share state. Patterns come
// from untrusted files: compile() refuses patterns over kMaxPatternBytes and any PCRE2 refuses, and a
// match that exceeds PCRE2's match or heap limit (catastrophic backtracking) is an error, never a
// hang. Text must be valid UTF-8 (the tokenizer checks it once at its edge).
//
// Dialect: PCRE2 with UTF and UCP (\s, \w, \d and \p{..} are Unicode-aware; (?i) folds Unicode case),
// which reads the patterns of GPT-2, Llama 3, Qwen2 and Mistral's tokenizer.json as Oniguruma (what
// Hugging Face's tokenizers uses) reads them. One known difference: PCRE2's \s lacks U+0085 (NEL),
// which Oniguruma's has.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

struct pcre2_real_code_8;  // PCRE2's compiled pattern (pcre2.h stays out of this header)

namespace ember::text {

/// Bytes [begin, end) of a text.
struct Span {
  size_t begin = 0;
  size_t end = 0;
  bool operator==(const Span&) const = default;
};

class Regex {
 public:
  /// Longest pattern accepted, in bytes (the longest real one, GPT-4o's, is under 400).
  static constexpr size_t kMaxPatternBytes = 4096;

  /// `pattern` compiled (JIT when the platform has it); invalid_argument with PCRE2's reason and
  /// offset when it does not compile or is too long.
  static Result<Regex> compile(std::string_view pattern);

  /// A pattern matching `text` literally (Hugging Face's {"String": ...} patterns).
  static Result<Regex> literal(std::string_view text);

  /// Appends every non-empty match in `text`, left to right, not overlapping (an empty match
  /// advances the search by one character). invalid_argument when PCRE2 gives up on the text.
  Status find_all(std::string_view text, std::vector<Span>& out) const;

  /// Whether a match starts exactly at byte `pos` of `text`.
  Result<bool> matches_at(std::string_view text, size_t pos) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex(std::shared_ptr<pcre2_real_code_8> code, std::string pattern)
      : code_(std::move(code)), pattern_(std::move(pattern)) {}
  static Result<Regex> compile_with(std::string_view pattern, uint32_t options);

  std::shared_ptr<pcre2_real_code_8> code_;
  std::string pattern_;
};

}  // namespace ember::text
