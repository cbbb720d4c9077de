#include "text/token_table.hpp"

#include <algorithm>
#include <bit>
#include <functional>

namespace ember::text {

namespace token_table_detail {

/// The power of two of slots that keeps `entries` at most half full (at least 16).
size_t slots_for(size_t entries) { return std::bit_ceil(std::max<size_t>(16, entries * 2)); }

}  // namespace token_table_detail

void TokenTable::reserve(size_t tokens) {
  entries_.reserve(tokens);
  if (token_table_detail::slots_for(tokens) > slots_.size()) grow(token_table_detail::slots_for(tokens));
}

void TokenTable::grow(size_t slots) {
  slots_.assign(slots, 0);
  const size_t mask = slots - 1;
  for (size_t i = 0; i < entries_.size(); ++i) {
    size_t s = entries_[i].hash & mask;
    while (slots_[s] != 0) s = (s + 1) & mask;
    slots_[s] = static_cast<uint32_t>(i + 1);
  }
}

bool TokenTable::insert(std::string_view token, int32_t id) {
  if (find(token)) return false;
  if ((entries_.size() + 1) * 2 > slots_.size()) grow(token_table_detail::slots_for(entries_.size() + 1));
  const size_t hash = std::hash<std::string_view>{}(token);
  entries_.push_back({hash, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(token.size()), id});
  arena_.append(token);
  const size_t mask = slots_.size() - 1;
  size_t s = hash & mask;
  while (slots_[s] != 0) s = (s + 1) & mask;
  slots_[s] = static_cast<uint32_t>(entries_.size());
  return true;
}

std::optional<int32_t> TokenTable::find(std::string_view token) const {
  if (slots_.empty()) return std::nullopt;
  const size_t hash = std::hash<std::string_view>{}(token);
  const size_t mask = slots_.size() - 1;
  for (size_t s = hash & mask;; s = (s + 1) & mask) {
    const uint32_t slot = slots_[s];
    if (slot == 0) return std::nullopt;
    const Entry& e = entries_[slot - 1];
    if (e.hash == hash && e.length == token.size() && view(e) == token) return e.id;
  }
}

void MergeTable::reserve(size_t merges) {
  if (token_table_detail::slots_for(merges) > slots_.size()) grow(token_table_detail::slots_for(merges));
}

void MergeTable::grow(size_t slots) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(slots, Slot{});
  shift_ = 64 - std::countr_zero(slots);
  const size_t mask = slots - 1;
  for (const Slot& o : old) {
    if (o.key == kEmpty) continue;
    size_t s = index(o.key);
    while (slots_[s].key != kEmpty) s = (s + 1) & mask;
    slots_[s] = o;
  }
}

void MergeTable::set(int32_t a, int32_t b, Merge merge) {
  if ((size_ + 1) * 2 > slots_.size()) grow(token_table_detail::slots_for(size_ + 1));
  const uint64_t k = key(a, b);
  const size_t mask = slots_.size() - 1;
  size_t s = index(k);
  while (slots_[s].key != kEmpty && slots_[s].key != k) s = (s + 1) & mask;
  if (slots_[s].key == kEmpty) ++size_;
  slots_[s] = {k, merge};
}

const MergeTable::Merge* MergeTable::find(int32_t a, int32_t b) const {
  if (slots_.empty()) return nullptr;
  const uint64_t k = key(a, b);
  const size_t mask = slots_.size() - 1;
  for (size_t s = index(k);; s = (s + 1) & mask) {
    if (slots_[s].key == k) return &slots_[s].merge;
    if (slots_[s].key == kEmpty) return nullptr;
  }
}

}  // namespace ember::text
