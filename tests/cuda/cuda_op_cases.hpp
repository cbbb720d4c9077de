// The op cases of cuda_plugin_test: one layer each (op, attributes, input shapes, how its inputs
// are drawn), run on SimDevice everywhere and compared between SimDevice and CUDA on a GPU
// machine. cuda_plugin_test.cpp holds the cases of the coarse ops, cuda_op_cases_general.cpp those
// of the general ops (every UnaryFn, BinaryFn, ReduceFn, pad and resize mode, cast pair, ...),
// cuda_op_cases_kv_attention.cpp kv_attention's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/ops.hpp"

namespace ember::gpu::cuda_plugin_test {

struct OpCase {
  std::string name;
  OpKind op;
  LayerAttrs attrs;
  std::vector<TensorDesc> inputs;
  // How the inputs are drawn: floats uniform in [lo, hi], rounded to halves when `halves` (so that
  // comparisons, argmax and topk meet equal values); integers uniform in `ids` (default [-1,
  // num_embeddings]); uint8 0 or 1; float16/bfloat16 any finite bit pattern. A non-empty given[i]
  // replaces input i's random bytes.
  float lo = -2.f, hi = 2.f;
  bool halves = false;
  std::optional<std::pair<int64_t, int64_t>> ids;
  std::vector<std::vector<uint8_t>> given;
  // kv_attention: the KV blocks the step's kv_meta (given[2]) points into, as one pool of
  // kv_pool.size() bytes that run_case places on the device it runs on, kv_block_bytes a block.
  // The block-table entries of given[2] are 1-based block numbers of the pool (0: none), which
  // run_case turns into that device's addresses.
  std::vector<uint8_t> kv_pool;
  int64_t kv_block_bytes = 0;
};

/// Appends the general ops' cases (unary .. topk, and the new paths of the pools, softmax and
/// attention).
void add_general_op_cases(std::vector<OpCase>& cases);
/// Appends kv_attention's cases (cuda_op_cases_kv_attention.cpp).
void add_kv_attention_op_cases(std::vector<OpCase>& cases);

}  // namespace ember::gpu::cuda_plugin_test
