// tokenizer.json's "decoder": how the tokens of a sequence of ids become text again.
//
// Pure: anyone, any thread; immutable after parse(). The steps are Hugging Face tokenizers' decoders
// with their semantics (decoders/*.rs), each a function from a list of token strings to a list of
// strings, run in order, the results joined:
//   ByteLevel     each token's characters mapped back to GPT-2's bytes (a token with a character
//                 outside the alphabet, such as an added token, keeps its own bytes); all tokens
//                 become one string, invalid UTF-8 replaced (one U+FFFD per maximal subpart)
//   Replace       per token, a String or Regex pattern replaced by the content ("▁" -> " ")
//   ByteFallback  runs of <0xXX> tokens become their bytes when those are valid UTF-8, else one
//                 U+FFFD per byte
//   Fuse          all tokens joined into one
//   Strip         per token, up to `start` leading and `stop` trailing `content` characters removed
//   Metaspace     per token, the replacement character becomes ' '; the first token loses one leading
//                 space unless prepend_scheme is never
//   Sequence      the steps in order
// No decoder (null) joins the tokens with spaces, as Hugging Face does. Others (WordPiece, CTC,
// BPEDecoder) are refused by parse() with the type named. What decode() returns is always valid
// UTF-8, whatever the ids.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "text/regex.hpp"

namespace ember::text {

class TokenDecoder {
 public:
  /// From tokenizer.json's "decoder". Errors name the field.
  static Result<TokenDecoder> parse(const nlohmann::json& j);

  /// The text of `tokens` (token strings as the vocabulary spells them).
  std::string decode(std::vector<std::string> tokens) const;

  /// Whether a Metaspace or Strip step removes a leading space from the first token: what a
  /// streaming decoder must give context to (text/incremental_decoder.hpp).
  bool strips_leading_space() const;

 private:
  struct Step {
    enum class Kind { byte_level, replace, byte_fallback, fuse, strip, metaspace } kind;
    std::string literal;         // replace: a String pattern
    std::optional<Regex> regex;  // replace: a Regex pattern
    std::string content;         // replace: the replacement; metaspace: the replacement character
    char32_t strip_char = U' ';  // strip
    size_t start = 0;            // strip
    size_t stop = 0;             // strip
    bool strip_first = true;     // metaspace: prepend_scheme other than never
  };
  static Status parse_into(const nlohmann::json& j, std::vector<Step>& steps, int depth);
  static void run_step(const Step& step, std::vector<std::string>& tokens);

  bool none_ = true;  // no decoder at all
  std::vector<Step> steps_;
};

/// transformers' clean_up_tokenization: " ." -> ".", " ?" -> "?", " !" -> "!", " ," -> ",",
/// " ' " -> "'", " n't" -> "n't", " 'm" -> "'m", " 's" -> "'s", " 've" -> "'ve", " 're" -> "'re", in
/// that order. English-specific and lossy ("a , b" does not come back); off unless asked for.
std::string clean_up_tokenization(std::string_view text);

}  // namespace ember::text
