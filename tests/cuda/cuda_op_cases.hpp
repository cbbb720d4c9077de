// The op cases of cuda_plugin_test: one layer each (op, attributes, input shapes, how its inputs
// are drawn), run on SimDevice everywhere and compared between SimDevice and CUDA on a GPU
// machine. cuda_plugin_test.cpp holds the cases of the coarse ops, cuda_op_cases_general.cpp those
// of the general ops (every UnaryFn, BinaryFn, ReduceFn, pad and resize mode, cast pair, ...).
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
};

/// Appends the general ops' cases (unary .. topk, and the new paths of the pools, softmax and
/// attention).
void add_general_op_cases(std::vector<OpCase>& cases);

}  // namespace ember::gpu::cuda_plugin_test
