// The added tokens of a tokenizer.json ("added_tokens": special tokens such as <|eot_id|> and <s>,
// and any tokens added after training): found in the text before the model sees it, so a token
// written in the text is that one id and never BPE's pieces of it.
//
// Pure: anyone, any thread; immutable after parse(). Matching follows Hugging Face tokenizers'
// AddedVocabulary (added_vocabulary.rs):
//   - Tokens with normalized=false are found in the raw text, those with normalized=true in each
//     normalized section (the tokenizer runs the two passes).
//   - At each position the longest token that starts there wins; the scan goes left to right and
//     never overlaps (leftmost-longest).
//   - single_word: a match with a letter, digit or '_' right before or after it is skipped.
//   - lstrip / rstrip: the match also takes the whitespace to its left / right (Unicode White_Space),
//     so that whitespace never reaches the model.
//   - special: with EncodeOptions::special_in_text false, special tokens are not looked for (their
//     text is encoded as ordinary text); non-special added tokens always are.
// Bounds: at most kMaxAddedTokens tokens of at most kMaxContentBytes bytes each.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.hpp"
#include "text/token_table.hpp"

namespace ember::text {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

/// A part of a text: either an added token (id >= 0) or ordinary text (id == -1) in [begin, end).
struct TextSection {
  size_t begin = 0;
  size_t end = 0;
  int32_t id = -1;
  bool operator==(const TextSection&) const = default;
};

class AddedTokens {
 public:
  static constexpr size_t kMaxAddedTokens = 1 << 20;
  static constexpr size_t kMaxContentBytes = 4096;

  /// From tokenizer.json's "added_tokens" (null or absent: none). Ids in [0, id_bound). Errors name
  /// the entry ("added_tokens[3].content: ...").
  static Result<AddedTokens> parse(const nlohmann::json& j, int64_t id_bound);

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  /// The token with this id, or nullptr.
  const AddedToken* find_id(int32_t id) const;
  /// The token with this content, or nullptr.
  const AddedToken* find_content(std::string_view content) const;

  /// Cuts `text` (valid UTF-8) into sections: the added tokens of the given pass (normalized or
  /// not), looking for special ones only when `special_in_text`, and the ordinary text between
  /// them (never empty). Appends to `out`.
  void split(std::string_view text, bool normalized_pass, bool special_in_text, std::vector<TextSection>& out) const;

 private:
  /// A trie over the contents of one pass: node 0 is the root; `token` is the index in tokens_ of
  /// the token ending at a node, or -1.
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t token = -1;
  };
  struct Trie {
    std::vector<Node> nodes{Node{}};
    std::array<bool, 256> first_byte{};
    void insert(std::string_view s, int32_t token);
    int32_t child(int32_t node, unsigned char b) const;
  };
  bool accept(const AddedToken& t, std::string_view text, size_t begin, size_t end, bool special_in_text) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;  // index in tokens_
  TokenTable by_content_;                      // content -> index in tokens_
  Trie raw_;
  Trie normalized_;
};

}  // namespace ember::text
