// Helpers shared by the DeviceMemoryPool tests (device_memory_pool_test.cpp, ..._churn_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu/device_memory_pool.hpp"

namespace ember::gpu::pool_testing {

constexpr uint64_t KiB = 1ull << 10, MiB = 1ull << 20, GiB = 1ull << 30;
constexpr uint64_t kPart = 128 * MiB;
constexpr uint64_t kAttention = 9449472;  // one BERT-base / GPT-2 layer's 768x3072 matrix plus bias: 9.01 MiB

#define EXPECT_CONSISTENT(pool)                                   \
  do {                                                            \
    const Status s_ = (pool).check();                             \
    ASSERT_TRUE(s_.ok()) << s_.error().message();                 \
  } while (0)

inline DeviceMemoryPool make_pool(uint64_t capacity, DeviceMemoryPoolConfig config = {}) {
  auto pool = DeviceMemoryPool::create(capacity, std::move(config));
  EXPECT_TRUE(pool.ok()) << pool.error().message();
  return std::move(pool).value();
}

// "m<i>" (appended rather than "m" + to_string, which trips GCC 12's -Wrestrict false positive).
inline std::string name(int i) {
  std::string s = "m";
  s += std::to_string(i);
  return s;
}

inline std::vector<uint64_t> offsets(const DeviceMemoryPool& pool, const std::vector<BlockHandle>& handles) {
  std::vector<uint64_t> out;
  for (BlockHandle h : handles) out.push_back(pool.offset_of(h).value_or(UINT64_MAX));
  return out;
}

/// BERT-base's weight tensors, bytes: embeddings, then 12 layers of attention and feed-forward.
inline std::vector<uint64_t> bert_base() {
  std::vector<uint64_t> s = {93763584, 1585152};
  for (int i = 0; i < 12; ++i) s.insert(s.end(), {9449472, 6144, 9449472, 9440256, 6144});
  s.push_back(2362368);
  return s;
}

}  // namespace ember::gpu::pool_testing
