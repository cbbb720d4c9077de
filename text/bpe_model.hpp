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
// The vocabulary and the merges live in flat tables (text/token_table.hpp).
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
#include <vector>

#include "base/status.hpp"
#include "text/token_table.hpp"

namespace ember::text {

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

  std::optional<int32_t> token_to_id(std::string_view token) const { return vocab_.find(token); }
  /// The token of `id` (valid as long as the model lives), or nullopt when the vocabulary has none.
  std::optional<std::string_view> id_to_token(int32_t id) const;
  /// One past the largest id in the vocabulary.
  int32_t id_limit() const { return static_cast<int32_t>(by_id_.size()); }
  size_t vocab_count() const { return vocab_.size(); }
  size_t merge_count() const { return merges_.size(); }
  std::optional<int32_t> unk_id() const { return unk_id_; }
  bool byte_fallback() const { return byte_fallback_; }
  /// Pieces in the word cache now (for tests).
  size_t cached_words() const;

 private:
  struct Cache;

  /// Steps 3 and 4 above, without the cache.
  void encode_word(std::string_view piece, std::vector<int32_t>& out) const;

  TokenTable vocab_;
  std::vector<int32_t> by_id_;  // id -> index in vocab_, -1 where no token has the id
  MergeTable merges_;
  std::optional<int32_t> unk_id_;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  std::array<int32_t, 256> byte_ids_{};  // <0xXX> tokens, -1 where absent
  std::unique_ptr<Cache> cache_;
};

}  // namespace ember::text
