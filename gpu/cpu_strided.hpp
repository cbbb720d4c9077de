// StridedLoop: how the CPU kernels walk a contiguous output while reading up to three operands
// through element strides (0 along a broadcast dim, permuted for a transpose, scaled by a slice's
// step). Built once per launch from shapes, never from data; walking it never allocates.
//
// Internal to the CPU kernels (kernels_cpu_*.cpp); pure, any thread. Invariants after build():
// dims of 1 are dropped and neighbouring dims every operand reads contiguously are merged, so the
// innermost dim is as long as it can be; rank >= 1 (a scalar is one dim of 1); strides may be
// negative (a slice with a negative step), offsets then stay within the operand by construction.
#pragma once

#include <algorithm>
#include <cstdint>

#include "gpu/cpu_parallel.hpp"
#include "model/tensor.hpp"

namespace ember::gpu {

struct StridedLoop {
  static constexpr int kMaxOperands = 3;
  int rank = 0;
  int operands = 0;
  int64_t dims[Shape::kMaxRank] = {};
  int64_t strides[kMaxOperands][Shape::kMaxRank] = {};
  int64_t base[kMaxOperands] = {};  // element offset of the output's first element in each operand

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  int64_t inner() const { return dims[rank - 1]; }
  int64_t inner_stride(int p) const { return strides[p][rank - 1]; }

  /// Output dims `out` (rank `r`), operand p's element strides in strides[p][0..r): drops dims of 1,
  /// merges contiguous neighbours.
  void build(int r, const int64_t* out) {
    int k = 0;
    for (int i = 0; i < r; ++i) {
      if (out[i] == 1) continue;
      dims[k] = out[i];
      for (int p = 0; p < operands; ++p) strides[p][k] = strides[p][i];
      ++k;
    }
    if (k == 0) {
      dims[0] = 1;
      for (int p = 0; p < operands; ++p) strides[p][0] = 0;
      k = 1;
    }
    rank = 1;
    for (int i = 1; i < k; ++i) {
      bool merge = true;
      for (int p = 0; p < operands; ++p) merge = merge && strides[p][rank - 1] == strides[p][i] * dims[i];
      if (merge) {
        dims[rank - 1] *= dims[i];
        for (int p = 0; p < operands; ++p) strides[p][rank - 1] = strides[p][i];
      } else {
        dims[rank] = dims[i];
        for (int p = 0; p < operands; ++p) strides[p][rank] = strides[p][i];
        ++rank;
      }
    }
  }

  /// Element offsets of every operand at the start of row `row` (a row = all dims but the last).
  void row_offsets(int64_t row, int64_t* off) const {
    for (int p = 0; p < operands; ++p) off[p] = base[p];
    for (int d = rank - 2; d >= 0; --d) {
      const int64_t i = row % dims[d];
      row /= dims[d];
      for (int p = 0; p < operands; ++p) off[p] += i * strides[p][d];
    }
  }
};

/// The loop reading `ins` (each broadcast against `out`, numpy rules) into a contiguous `out`.
inline StridedLoop broadcast_loop(const Shape& out, const Shape* const* ins, int n) {
  StridedLoop l;
  l.operands = n;
  for (int p = 0; p < n; ++p) {
    const Shape& s = *ins[p];
    int64_t stride = 1;
    for (int i = out.rank - 1; i >= 0; --i) {
      const int j = s.rank - out.rank + i;
      const int64_t d = j >= 0 ? s[j] : 1;
      l.strides[p][i] = d == 1 ? 0 : stride;
      stride *= d;
    }
  }
  l.build(out.rank, out.dims.data());
  return l;
}

/// Calls run(off, out_off, len) for runs of at most kRun output elements covering the loop:
/// operand p's run starts at element off[p] and advances by inner_stride(p); the output's at
/// out_off by 1. Runs go to the device's threads when the output has more than `parallel_above`.
template <class Run>
void for_each_run(const StridedLoop& l, int64_t parallel_above, Run&& run) {
  constexpr int64_t kRun = 1 << 14;
  const int64_t n = l.numel();
  if (n == 0) return;
  const int64_t inner = l.inner(), chunks = (inner + kRun - 1) / kRun;
  parallel_for(n / inner * chunks, n > parallel_above, [&](int64_t t) {
    const int64_t row = t / chunks, c0 = (t % chunks) * kRun;
    int64_t off[StridedLoop::kMaxOperands];
    l.row_offsets(row, off);
    for (int p = 0; p < l.operands; ++p) off[p] += c0 * l.inner_stride(p);
    run(off, row * inner + c0, std::min(kRun, inner - c0));
  });
}

/// Copies elements of `elem` bytes from `src` through operand 0 of `l` into contiguous `dst`.
inline void strided_copy(const StridedLoop& l, const uint8_t* src, uint8_t* dst, uint32_t elem) {
  auto typed = [&](auto tag) {
    using T = decltype(tag);
    const T* s = reinterpret_cast<const T*>(src);
    T* d = reinterpret_cast<T*>(dst);
    const int64_t st = l.inner_stride(0);
    for_each_run(l, 1 << 16, [&](const int64_t* off, int64_t o, int64_t len) {
      const T* x = s + off[0];
      T* y = d + o;
      if (st == 1) {
        std::copy(x, x + len, y);
      } else if (st == 0) {
        std::fill(y, y + len, x[0]);
      } else {
        for (int64_t i = 0; i < len; ++i) y[i] = x[i * st];
      }
    });
  };
  switch (elem) {
    case 1: typed(uint8_t{}); break;
    case 2: typed(uint16_t{}); break;
    case 4: typed(uint32_t{}); break;
    default: typed(uint64_t{}); break;
  }
}

}  // namespace ember::gpu
