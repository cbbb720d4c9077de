// CPU kernels of the general data-movement ops: constant, transpose, concat, slice, gather, expand
// and pad. Each works on any dtype by element size; transpose, slice and expand are one strided
// copy (cpu_strided.hpp) whose strides say which input element each output element reads.
#include <algorithm>
#include <cstring>

#include "gpu/cpu_strided.hpp"
#include "gpu/kernels_cpu.hpp"

namespace ember::gpu {

namespace {

constexpr int64_t kParallelBytes = 1 << 17;

uint32_t elem_size(const CpuKernelArgs& k) { return dtype_size(k.args->output.desc.dtype); }

// Element strides of a contiguous shape.
void contiguous_strides(const Shape& s, int64_t* strides) {
  int64_t stride = 1;
  for (int i = s.rank - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= s[i];
  }
}

int axis_of(int64_t axis, int rank) { return static_cast<int>(axis < 0 ? axis + rank : axis); }

// Where output index `o` of a padded dim of `n` elements reads (begin = the begin pad), or -1 for
// the constant value. Reflect mirrors without repeating the edge; pads are below n (ops.hpp).
int64_t pad_source(int64_t o, int64_t begin, int64_t n, PadMode mode) {
  const int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::reflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);
      int64_t r = ((i % period) + period) % period;
      return r < n ? r : period - r;
    }
    case PadMode::edge: return i < 0 ? 0 : n - 1;
    default: return -1;
  }
}

}  // namespace

void cpu_constant(const CpuKernelArgs& k) {
  std::memcpy(k.output, k.weights[0], k.args->output.desc.bytes());
}

void cpu_transpose(const CpuKernelArgs& k) {
  const Shape& xs = k.in_shape(0);
  const Shape& ys = k.args->output.desc.shape;
  int64_t in_strides[Shape::kMaxRank];
  contiguous_strides(xs, in_strides);
  StridedLoop l;
  l.operands = 1;
  for (int i = 0; i < ys.rank; ++i) l.strides[0][i] = in_strides[k.attrs().axes[i]];
  l.build(ys.rank, ys.dims.data());
  strided_copy(l, k.inputs[0], k.output, elem_size(k));
}

void cpu_slice(const CpuKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const Shape& ys = k.args->output.desc.shape;
  if (ys.numel() == 0) return;
  StridedLoop l;
  l.operands = 1;
  contiguous_strides(xs, l.strides[0]);
  int64_t in_strides[Shape::kMaxRank];
  contiguous_strides(xs, in_strides);
  // Starts normalised as infer_output does (negative from the end, clamped to the valid range).
  for (int i = 0; i < a.num_axes; ++i) {
    const int d = axis_of(a.axes[i], xs.rank);
    const int64_t n = xs[d], step = a.steps[i];
    int64_t start = a.starts[i] < 0 ? a.starts[i] + n : a.starts[i];
    start = step > 0 ? std::clamp<int64_t>(start, 0, n) : std::clamp<int64_t>(start, -1, n - 1);
    l.base[0] += start * in_strides[d];
    l.strides[0][d] = in_strides[d] * step;
  }
  l.build(ys.rank, ys.dims.data());
  strided_copy(l, k.inputs[0], k.output, elem_size(k));
}

void cpu_expand(const CpuKernelArgs& k) {
  const Shape* shapes[] = {&k.in_shape(0)};
  const StridedLoop l = broadcast_loop(k.args->output.desc.shape, shapes, 1);
  strided_copy(l, k.inputs[0], k.output, elem_size(k));
}

void cpu_concat(const CpuKernelArgs& k) {
  const Shape& ys = k.args->output.desc.shape;
  const int d = axis_of(k.attrs().dim, ys.rank);
  const uint64_t elem = elem_size(k);
  const int64_t outer = ys.prod(0, d);
  const uint64_t inner_bytes = static_cast<uint64_t>(ys.prod(d + 1, ys.rank)) * elem;
  const uint64_t row_bytes = static_cast<uint64_t>(ys[d]) * inner_bytes;
  const int n = k.args->num_inputs;
  parallel_for(outer, k.args->output.desc.bytes() > kParallelBytes, [&](int64_t o) {
    uint8_t* dst = k.output + o * row_bytes;
    for (int i = 0; i < n; ++i) {
      const uint64_t bytes = static_cast<uint64_t>(k.in_shape(i)[d]) * inner_bytes;
      if (bytes) std::memcpy(dst, k.inputs[i] + o * bytes, bytes);
      dst += bytes;
    }
  });
}

void cpu_gather(const CpuKernelArgs& k) {
  const Shape& xs = k.in_shape(0);
  const int d = axis_of(k.attrs().dim, xs.rank);
  const uint64_t elem = elem_size(k);
  const int64_t outer = xs.prod(0, d), n = xs[d], count = k.in_shape(1).numel();
  const uint64_t inner_bytes = static_cast<uint64_t>(xs.prod(d + 1, xs.rank)) * elem;
  const bool wide = k.args->inputs[1].desc.dtype == DType::i64;
  const auto* idx64 = reinterpret_cast<const int64_t*>(k.inputs[1]);
  const auto* idx32 = reinterpret_cast<const int32_t*>(k.inputs[1]);
  if (inner_bytes == 0) return;
  parallel_for(outer * count, k.args->output.desc.bytes() > kParallelBytes, [&](int64_t t) {
    const int64_t o = t / count, j = t % count;
    int64_t i = wide ? idx64[j] : idx32[j];
    if (i < 0) i += n;
    uint8_t* dst = k.output + static_cast<uint64_t>(t) * inner_bytes;
    if (i < 0 || i >= n) std::memset(dst, 0, inner_bytes);  // outside [-n, n): zeros (ops.hpp)
    else std::memcpy(dst, k.inputs[0] + static_cast<uint64_t>(o * n + i) * inner_bytes, inner_bytes);
  });
}

// Each output row (all dims but the last) maps its outer indices to input ones, or to the constant
// value; along the last dim the pads are filled and the inside copied in one piece.
void cpu_pad(const CpuKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const Shape& ys = k.args->output.desc.shape;
  const auto mode = static_cast<PadMode>(a.fn);
  const uint32_t elem = elem_size(k);
  if (ys.numel() == 0) return;
  if (xs.rank == 0) {
    std::memcpy(k.output, k.inputs[0], elem);
    return;
  }
  const int r = xs.rank;
  const int64_t wi = xs[r - 1], wo = ys[r - 1], begin = a.pads[r - 1];
  // The constant's bytes: the float value for float32, zeros for every other dtype (ops.hpp).
  uint8_t value[8] = {};
  if (k.args->output.desc.dtype == DType::f32) std::memcpy(value, &a.alpha, 4);
  int64_t in_strides[Shape::kMaxRank];
  contiguous_strides(xs, in_strides);
  const int64_t rows = ys.numel() / wo;
  // Inside the last dim: output [lo, hi) reads input [lo - begin, hi - begin).
  const int64_t lo = std::clamp<int64_t>(begin, 0, wo), hi = std::clamp<int64_t>(begin + wi, lo, wo);
  parallel_for(rows, k.args->output.desc.bytes() > kParallelBytes, [&](int64_t row) {
    uint8_t* y = k.output + static_cast<uint64_t>(row * wo) * elem;
    int64_t src = 0;  // input row offset, in elements
    bool constant_row = false;
    for (int64_t d = r - 2, rest = row; d >= 0; --d) {
      const int64_t o = rest % ys[d];
      rest /= ys[d];
      const int64_t i = pad_source(o, a.pads[d], xs[d], mode);
      if (i < 0) constant_row = true;
      else src += i * in_strides[d];
    }
    const uint8_t* x = k.inputs[0] + static_cast<uint64_t>(src) * elem;
    auto put = [&](int64_t o, int64_t i) {
      if (i < 0) std::memcpy(y + o * elem, value, elem);
      else std::memcpy(y + o * elem, x + i * elem, elem);
    };
    if (constant_row) {
      for (int64_t o = 0; o < wo; ++o) put(o, -1);
      return;
    }
    for (int64_t o = 0; o < lo; ++o) put(o, pad_source(o, begin, wi, mode));
    if (hi > lo) std::memcpy(y + lo * elem, x + (lo - begin) * elem, static_cast<uint64_t>(hi - lo) * elem);
    for (int64_t o = hi; o < wo; ++o) put(o, pad_source(o, begin, wi, mode));
  });
}

}  // namespace ember::gpu
