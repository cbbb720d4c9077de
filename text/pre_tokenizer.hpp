// What happens to text before the BPE model sees it: the normalizer (tokenizer.json's "normalizer")
// and the pre-tokenizer ("pre_tokenizer") that cuts a normalized section into the pieces the model
// encodes one by one. The tokenizer (text/tokenizer.hpp) runs both on each section of text between
// added tokens.
//
// Pure: anyone, any thread; both are immutable after parse(). Text is valid UTF-8 (checked at the
// tokenizer's edge). The steps supported are what byte-level and SentencePiece-style BPE files use,
// with Hugging Face tokenizers' semantics (its normalizer.rs, split.rs, byte_level.rs,
// metaspace.rs):
//   normalizer     Prepend, Replace (String or Regex pattern), NFC, NFD, NFKC, NFKD (utf8proc, Unicode
//                  15; Qwen2's file asks for NFC), Sequence, null
//   pre_tokenizer  ByteLevel (add_prefix_space, use_regex: GPT-2's pattern), Split (String or Regex
//                  pattern; behavior Removed, Isolated, MergedWithPrevious, MergedWithNext,
//                  Contiguous; invert), Metaspace (replacement, prepend_scheme always / first /
//                  never or the older add_prefix_space, split), Sequence, null
// Anything else (Lowercase, Strip, StripAccents, BertNormalizer, Precompiled, Whitespace, Digits,
// Punctuation...) is refused by parse() with the type named: Ember does not guess at a normalization
// it does not perform.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "text/regex.hpp"

namespace ember::text {

class Normalizer {
 public:
  /// From tokenizer.json's "normalizer" (null: the identity). Errors name the field.
  static Result<Normalizer> parse(const nlohmann::json& j);

  bool empty() const { return steps_.empty(); }

  /// `text` normalized. Errors only when a Replace regex gives up on the text.
  Result<std::string> apply(std::string_view text) const;

 private:
  struct Step {
    enum class Kind { prepend, replace, unicode } kind;
    std::string content;         // what is prepended, or what replaces each match
    std::string literal;         // a String pattern (when regex is empty)
    std::optional<Regex> regex;  // a Regex pattern
    int unicode_options = 0;     // NFC..NFKD: utf8proc's options for the form
  };
  static Status parse_into(const nlohmann::json& j, std::vector<Step>& steps, int depth);

  std::vector<Step> steps_;
};

/// How a Split pre-tokenizer treats what its pattern matches (Hugging Face's SplitDelimiterBehavior).
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

/// Cuts text at the delimiters `is_delimiter` marks (segments in order, covering the text), as
/// `behavior` says; empty pieces are dropped. Exposed for tests.
std::vector<Span> split_segments(const std::vector<std::pair<Span, bool>>& segments, SplitBehavior behavior);

class PreTokenizer {
 public:
  /// From tokenizer.json's "pre_tokenizer" (null: the section is one piece). Errors name the field.
  static Result<PreTokenizer> parse(const nlohmann::json& j);

  /// Appends the pieces of one normalized section. `at_text_start`: the section begins at the start
  /// of the text (Metaspace's "first" scheme prepends only there). Errors only when a regex gives up.
  Status split(std::string_view section, bool at_text_start, std::vector<std::string>& pieces) const;

  /// Whether a ByteLevel step writes the pieces in GPT-2's byte alphabet.
  bool byte_level() const;

 private:
  struct Step {
    enum class Kind { byte_level, split, metaspace } kind;
    // byte_level
    bool add_prefix_space = false;
    std::optional<Regex> regex;  // byte_level with use_regex (GPT-2's pattern); split's pattern
    // split
    SplitBehavior behavior = SplitBehavior::isolated;
    bool invert = false;
    // metaspace
    std::string replacement;
    enum class Prepend { always, first, never } prepend = Prepend::always;
    bool split_on_replacement = false;
  };
  static Status parse_into(const nlohmann::json& j, std::vector<Step>& steps, int depth);
  static Status run_step(const Step& step, std::vector<std::string>& pieces, bool at_text_start);

  std::vector<Step> steps_;
};

/// GPT-2's pre-tokenizer pattern (what ByteLevel's use_regex splits with).
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace ember::text
