// The BPE model of a tokenizer.json ("model": {"type": "BPE", ...}): the vocabulary, the merges by
// rank, and the encoding of one pre-tokenized piece into token ids.
//
// Pure: anyone, any thread. Immutable after parse() except for the word cache, which sits behind
// its own mutex (encode() is const and may run on many threads at once). Never throws, never
// blocks beyond that mutex, never touches a device.
//
// Encoding a piece (Hugging Face tokenizers' models/bpe, which this follows step for step):
//   1. ignore_merges (Llama 3): a piece that is itself in the vocabulary is that one token.
//   2. The cache: a piece seen before (at most kCacheWords pieces of under kCacheWordBytes bytes; once
//      full it stops growing, as Hugging Face's does) gives its ids at once.
//   3. Each character becomes its token; one not in the vocabulary becomes, with byte_fallback, the
//      tokens <0xXX> of its UTF-8 bytes (when all exist), else the unk token (consecutive ones fused
//      with fuse_unk), else it is dropped.
//   4. Merges: repeatedly the adjacent pair of lowest rank (leftmost among equals) becomes the token
//      the merges list made of it, with a priority queue over a linked list of symbols, so a word of
//      n characters costs O(n log n), never a rescan per merge.
// Refused at parse(), with the reason: another model type (WordPiece, Unigram, WordLevel), dropout,
// a continuing_subword_prefix or end_of_word_suffix (BERT- and CLIP-style BPE), a merge whose parts
// or result are not in the vocabulary, an unk_token outside it, two tokens with one id, and sizes
// over the bounds below.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.hpp"

namespace ember::text {

/// Hash and equality that let an unordered_map keyed by std::string be searched by string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIds = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  /// Bounds on untrusted files: the largest real vocabularies hold ~260k tokens and ~1M merges.
  static constexpr int64_t kMaxVocab = int64_t{1} << 22;
  static constexpr size_t kMaxMerges = size_t{1} << 23;
  static constexpr size_t kMaxTokenBytes = 4096;
  /// The word cache: entries, and the longest piece cached (bytes).
  static constexpr size_t kCacheWords = 10000;
  static constexpr size_t kCacheWordBytes = 256;

  BpeModel();
  ~BpeModel();
  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;

  /// From tokenizer.json's "model". Errors name the field ("model.merges[12]: ...").
  static Result<BpeModel> parse(const nlohmann::json& model);

  /// Appends the ids of one piece (valid UTF-8, already in the model's alphabet).
  void encode(std::string_view piece, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  /// The token of `id`, or nullptr when the vocabulary has none.
  const std::string* id_to_token(int32_t id) const;
  /// One past the largest id in the vocabulary.
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }
  size_t vocab_count() const { return token_to_id_.size(); }
  size_t merge_count() const { return merges_.size(); }
  std::optional<int32_t> unk_id() const { return unk_id_; }
  bool byte_fallback() const { return byte_fallback_; }
  /// Pieces in the word cache now (for tests).
  size_t cached_words() const;

 private:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  struct Cache;

  /// Steps 3 and 4 above, without the cache.
  void encode_word(std::string_view piece, std::vector<int32_t>& out) const;
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  TokenIds token_to_id_;
  std::vector<const std::string*> id_to_token_;  // into token_to_id_'s keys (stable in a node map)
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<int32_t> unk_id_;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  std::array<int32_t, 256> byte_ids_{};  // <0xXX> tokens, -1 where absent
  std::unique_ptr<Cache> cache_;
};

}  // namespace ember::text
