// The BPE model's two lookup tables, flat and open-addressed: TokenTable (token text <-> id) and
// MergeTable (a pair of ids -> its merge's rank and result). Node-based std::unordered_maps cost a heap
// node per entry and a cache miss per probe, which made loading Llama 3's file (128k tokens, 280k
// merges) take over a second; these keep every token's text in one arena and probe a flat array.
//
// Pure: anyone, any thread; immutable after they are filled (the BPE model fills them in parse() and only
// reads them afterwards). Linear probing, at most half full, so a probe sequence is short; the hash is
// std::hash (token text) or a multiplicative one (id pairs). Sizes are bounded by the caller (BpeModel's
// kMaxVocab and kMaxMerges).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::text {

class TokenTable {
 public:
  void reserve(size_t tokens);

  /// Adds `token` with `id`; false (and nothing added) when the token is there already.
  bool insert(std::string_view token, int32_t id);

  std::optional<int32_t> find(std::string_view token) const;
  size_t size() const { return entries_.size(); }

  /// The i-th token inserted and its id (i < size()).
  std::string_view token_at(size_t i) const { return view(entries_[i]); }
  int32_t id_at(size_t i) const { return entries_[i].id; }

 private:
  struct Entry {
    size_t hash;
    uint32_t offset;  // into arena_
    uint32_t length;
    int32_t id;
  };
  std::string_view view(const Entry& e) const { return std::string_view(arena_).substr(e.offset, e.length); }
  void grow(size_t slots);

  std::string arena_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> slots_;  // 1 + index into entries_; 0 is empty
};

class MergeTable {
 public:
  struct Merge {
    int32_t rank;
    int32_t id;
  };

  void reserve(size_t merges);

  /// Sets the merge of (a, b) (ids >= 0), replacing an earlier one.
  void set(int32_t a, int32_t b, Merge merge);

  /// The merge of (a, b), or nullptr.
  const Merge* find(int32_t a, int32_t b) const;
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge{};
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  size_t index(uint64_t k) const { return static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> shift_); }
  void grow(size_t slots);

  std::vector<Slot> slots_;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace ember::text
