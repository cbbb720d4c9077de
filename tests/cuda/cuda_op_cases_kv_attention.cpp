// kv_attention's cases of cuda_plugin_test (see cuda_op_cases.hpp): steps mixing a prefill with
// decodes whose earlier positions are already in the cache (a pool pre-filled with values of the
// cache's type), blocks out of order in the pool, positions crossing blocks and the CUDA kernel's
// chunks of 128, grouped-query, multi-query and multi-head layouts, rope_dim 0, < and = head_dim,
// head_dim at its maximum, float32, float16 and bfloat16 caches, the layer at kv_layer 0, 1 and 2.
#include <algorithm>
#include <cstring>
#include <random>

#include "model/half.hpp"
#include "tests/cuda/cuda_op_cases.hpp"

namespace ember::gpu::cuda_plugin_test {
namespace kv_cases {

// One sequence of the step: its tokens at positions first .. first + count - 1, its blocks as
// 1-based numbers of the pool in position order.
struct Seq {
  int64_t first, count;
  std::vector<int64_t> blocks;
};

template <class T>
std::vector<uint8_t> raw(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

OpCase make(std::string name, int64_t heads, int64_t kv_heads, int64_t dim, int64_t rope_dim, int64_t block_size,
            DType cache, int64_t kv_layer, const std::vector<Seq>& seqs) {
  LayerAttrs a;
  a.num_heads = heads, a.num_kv_heads = kv_heads, a.head_dim = dim, a.rope_dim = rope_dim, a.kv_layer = kv_layer;
  std::vector<int64_t> positions, owner;
  size_t width = 0;
  int64_t blocks = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (int64_t p = seqs[s].first; p < seqs[s].first + seqs[s].count; ++p) positions.push_back(p), owner.push_back(static_cast<int64_t>(s));
    width = std::max(width, seqs[s].blocks.size());
    for (int64_t b : seqs[s].blocks) blocks = std::max(blocks, b);
  }
  const auto tokens = static_cast<int64_t>(positions.size());
  std::vector<int64_t> meta = {static_cast<int64_t>(seqs.size()), block_size, static_cast<int64_t>(width),
                               cache == DType::f32 ? 0 : cache == DType::f16 ? 1 : 2};
  meta.insert(meta.end(), owner.begin(), owner.end());
  for (const Seq& s : seqs) {
    for (size_t b = 0; b < width; ++b) meta.push_back(b < s.blocks.size() ? s.blocks[b] : 0);
  }
  OpCase c{std::move(name), OpKind::kv_attention, a,
           {{DType::f32, Shape{tokens, (heads + 2 * kv_heads) * dim}},
            {DType::i64, Shape{tokens}},
            {DType::i64, Shape{static_cast<int64_t>(meta.size())}}}};
  c.lo = -1.f, c.hi = 1.f;
  c.given = {{}, raw(positions), raw(meta)};
  // Every block holds kv_layer + 1 layers; the whole pool is values in [-1, 1] of the cache's type,
  // so the positions before the step's hold what earlier steps would have written.
  c.kv_block_bytes = (kv_layer + 1) * kv_layer_bytes(a, block_size, cache);
  const int64_t elems = blocks * c.kv_block_bytes / static_cast<int64_t>(dtype_size(cache));
  std::mt19937 rng(static_cast<uint32_t>(elems));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> values(static_cast<size_t>(elems));
  for (float& v : values) v = u(rng);
  if (cache == DType::f32) {
    c.kv_pool = raw(values);
  } else {
    std::vector<uint16_t> half(values.size());
    for (size_t i = 0; i < values.size(); ++i) half[i] = cache == DType::f16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
    c.kv_pool = raw(half);
  }
  return c;
}

}  // namespace kv_cases

void add_kv_attention_op_cases(std::vector<OpCase>& cases) {
  using kv_cases::make;
  // A prefill of 6 across two blocks, a decode at 9 over three, a decode at 2 over one.
  cases.push_back(make("kv_attention_gqa_f32", 4, 2, 16, 8, 4, DType::f32, 1, {{0, 6, {3, 1}}, {9, 1, {5, 2, 6}}, {2, 1, {4}}}));
  cases.push_back(make("kv_attention_mqa_f16", 4, 1, 8, 8, 8, DType::f16, 0, {{0, 11, {2, 1}}, {20, 1, {3, 5, 4}}}));
  // A decode at 150 (chunks of 128 on CUDA, blocks of 16) beside a short prefill.
  cases.push_back(make("kv_attention_long_bf16", 8, 2, 32, 16, 16, DType::bf16, 2,
                       {{150, 1, {7, 3, 10, 1, 9, 2, 8, 4, 6, 5}}, {0, 3, {11}}}));
  // Multi-head, no rotary; a sequence continuing at 3 with two tokens of one step.
  cases.push_back(make("kv_attention_mha_no_rope_f32", 2, 2, 64, 0, 5, DType::f32, 1, {{0, 7, {2, 1}}, {3, 2, {3}}}));
  cases.push_back(make("kv_attention_max_head_dim_f16", 2, 1, kKvMaxHeadDim, 64, 2, DType::f16, 0, {{0, 3, {1, 2}}}));
}

}  // namespace ember::gpu::cuda_plugin_test
