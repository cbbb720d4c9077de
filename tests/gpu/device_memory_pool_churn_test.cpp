#include "gpu/device_memory_pool.hpp"
#include "tests/gpu/device_memory_pool_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace ember::gpu {
namespace device_memory_pool_churn_test {


using namespace pool_testing;

// -- churn: thousands of swap-ins and evictions --------------------------------------------

struct ChurnFigures {
  int swap_ins = 0, evicting_swap_ins = 0;
  int layout_misses = 0;          // swap-ins that had to evict although free bytes >= their footprint
  double used_when_full = 0;      // mean used/capacity just before a swap-in had to evict
  double mean_fragmentation = 0;  // stats().fragmentation, mean over all steps
  double max_fragmentation = 0;   // its maximum over steps with at least a quarter of the pool free
  double early_fragmentation = 0, late_fragmentation = 0;  // its mean over the 2nd and 4th quarter of steps
  double whole_partitions = 0;    // share of freed bytes that came back as whole free partitions
  double internal_waste = 0;      // mean (footprint - requested) / footprint
};

// An executor's life: swap models in (evicting random residents until can_fit says yes, as the
// eviction policy would) and out, checking every invariant after every step.
template <class MakeModel>
ChurnFigures churn(DeviceMemoryPool& pool, int steps, uint64_t seed, MakeModel make_model) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> live;
  ChurnFigures f;
  double full_sum = 0, waste_sum = 0, freed = 0, freed_whole = 0;
  std::vector<double> frag(static_cast<size_t>(steps), 0.0);
  auto evict = [&](size_t victim) {
    const uint32_t before = pool.stats().free_partitions;
    const uint64_t bytes = pool.free_model(live[victim]);
    freed += double(bytes);
    freed_whole += double(pool.stats().free_partitions - before) * double(pool.config().partition_bytes);
    live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
    return bytes;
  };
  for (int step = 0; step < steps; ++step) {
    if (live.empty() || rng() % 100 < 60) {
      const std::vector<uint64_t> sizes = make_model(rng);
      uint64_t need = 0;
      for (uint64_t b : sizes) need += pool.footprint(b);
      if (need > pool.capacity()) continue;
      const DeviceMemoryPoolStats before = pool.stats();
      uint64_t evicted = 0;
      while (!pool.can_fit(sizes)) {
        EXPECT_FALSE(live.empty());
        if (live.empty()) return f;
        evicted += evict(rng() % live.size());
      }
      ++f.swap_ins;
      if (evicted > 0) {
        ++f.evicting_swap_ins;
        f.layout_misses += before.free_bytes >= need;
        full_sum += double(before.used_bytes) / double(before.capacity_bytes);
      }
      const std::string model = name(step);
      const auto h = pool.allocate_model(model, sizes);
      EXPECT_TRUE(h.ok()) << "can_fit said yes: " << h.error().message();
      if (!h.ok()) return f;
      live.push_back(model);
    } else {
      evict(rng() % live.size());
    }
    const Status ok = pool.check();
    EXPECT_TRUE(ok.ok()) << "step " << step << ": " << ok.error().message();
    if (!ok.ok()) return f;
    const DeviceMemoryPoolStats s = pool.stats();
    frag[static_cast<size_t>(step)] = s.fragmentation;
    if (s.free_bytes * 4 >= s.capacity_bytes) f.max_fragmentation = std::max(f.max_fragmentation, s.fragmentation);
    waste_sum += s.used_bytes ? 1.0 - double(s.requested_bytes) / double(s.used_bytes) : 0.0;
  }
  auto mean = [&](int from, int to) { return std::accumulate(&frag[from], &frag[to], 0.0) / (to - from); };
  f.mean_fragmentation = mean(0, steps);
  f.early_fragmentation = mean(steps / 4, steps / 2);
  f.late_fragmentation = mean(3 * steps / 4, steps);
  f.internal_waste = waste_sum / steps;
  f.whole_partitions = freed > 0 ? freed_whole / freed : 0;
  f.used_when_full = f.evicting_swap_ins ? full_sum / f.evicting_swap_ins : 0;
  std::printf(
      "  swap-ins %d, %d evicting (%d with enough free bytes); used when full %.3f; fragmentation mean %.3f "
      "(2nd quarter %.3f, 4th %.3f), max %.3f with >= 1/4 free; freed as whole partitions %.3f; "
      "internal waste %.4f\n",
      f.swap_ins, f.evicting_swap_ins, f.layout_misses, f.used_when_full, f.mean_fragmentation, f.early_fragmentation,
      f.late_fragmentation, f.max_fragmentation, f.whole_partitions, f.internal_waste);
  return f;
}

TEST(DeviceMemoryPool, RandomSizesChurnStaysConsistentAndUnfragmented) {
  DeviceMemoryPool pool = make_pool(4 * GiB);
  // 1-40 blocks per model, log-uniform: 70% in [256 B, 4 MiB), 25% in [4, 64 MiB), 5% in [64, 300 MiB).
  auto make_model = [](std::mt19937_64& rng) {
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<uint64_t> sizes(1 + rng() % 40);
    for (uint64_t& b : sizes) {
      const double r = u(rng);
      const double lo = r < 0.70 ? 256.0 : r < 0.95 ? 4.0 * MiB : 64.0 * MiB;
      const double hi = r < 0.70 ? 4.0 * MiB : r < 0.95 ? 64.0 * MiB : 300.0 * MiB;
      b = static_cast<uint64_t>(lo * std::pow(hi / lo, u(rng)));
    }
    return sizes;
  };
  const ChurnFigures f = churn(pool, 4000, 7, make_model);
  // Measured (seed 7): used when full 0.853, fragmentation mean 0.604 (2nd quarter 0.605, 4th
  // 0.598), whole partitions 0.816, internal waste 0.003. The bounds leave room for tuning, not for
  // a regression: fragmentation must not build up over the run (no consolidation needed), and the
  // pool must run at least 82% full before it has to evict.
  EXPECT_GT(f.evicting_swap_ins, 200);
  EXPECT_GT(f.used_when_full, 0.82);
  EXPECT_LT(f.mean_fragmentation, 0.70);
  EXPECT_LT(f.late_fragmentation, f.early_fragmentation + 0.05);
  EXPECT_GT(f.whole_partitions, 0.75);
  EXPECT_LT(f.internal_waste, 0.01);
}

// The reference architectures' weights, cut by the executor's rule: consecutive layers up to the
// 2 MiB swap group, a layer above 2 MiB alone (bytes from `ember model new`; gpt2 stores its tied
// lm_head again, 147 MiB, like the embedding).
std::vector<uint64_t> reference_model(uint64_t which) {
  switch (which % 6) {
    case 0: return {3215360, 4198400, 41000};  // mlp
    case 1: {                                  // resnet50
      return {1908480, 1923072, 1988608, 528384,  2359296, 1069056, 2097152, 1069056, 2359296, 1069056, 1052672,
              2359296, 1069056, 1052672, 2359296, 1069056, 1052672, 2359296, 1069056, 1052672, 2359296, 1069056,
              2097152, 8192,    9437184, 8192,    4194304, 32768,   8388608, 32768,   4194304, 8192,    9437184,
              8192,    4194304, 32768,   4194304, 8192,    9437184, 8192,    4194304, 32768,   8196000};
    }
    case 2: return bert_base();
    case 3: {  // gpt2
      std::vector<uint64_t> s = {154389504, 3145728, 6144};
      for (int i = 0; i < 12; ++i) s.insert(s.end(), {9449472, 6144, 9449472, 9440256, 6144});
      s.push_back(154389504);
      return s;
    }
    case 4: return {1378560, 2097152, 1134592, 1081344, 8388608, 114728};  // resnet50-tiny
    default: return {319232};                                              // bert-base-tiny
  }
}

TEST(DeviceMemoryPool, ReferenceModelChurnStaysConsistentAndUnfragmented) {
  DeviceMemoryPool pool = make_pool(8 * GiB);
  const ChurnFigures f = churn(pool, 3000, 11, [](std::mt19937_64& rng) { return reference_model(rng()); });
  // Measured (seed 11): used when full 0.913, fragmentation mean 0.711 (2nd quarter 0.764, 4th
  // 0.750), whole partitions 0.669, internal waste 0.0075. GPT-2's two 147 MiB tensors need runs
  // across partitions and cause most of the evictions made while enough bytes were free.
  EXPECT_GT(f.evicting_swap_ins, 100);
  EXPECT_GT(f.used_when_full, 0.88);
  EXPECT_LT(f.mean_fragmentation, 0.80);
  EXPECT_LT(f.late_fragmentation, f.early_fragmentation + 0.05);
  EXPECT_GT(f.whole_partitions, 0.60);
  EXPECT_LT(f.internal_waste, 0.01);
}

}  // namespace device_memory_pool_churn_test
}  // namespace ember::gpu
