// CUDA kernels of the general reductions: reduce (ReduceFn over any axes), argmax (and argmin), topk.
// Mirrors model/ops.hpp's contract: float32 accumulation (so sums agree with the CPU to float32
// rounding in a different order), exact indices, ties to the lower index (argmax's
// select_last_index: the higher).
#include <utility>

#include "gpu/cuda/cuda_kernels.hpp"

namespace ember::gpu::cuda {

namespace {

// -- reduce ----------------------------------------------------------------------------------------

// How partial results of F combine: sums (sum, mean, sum_square, l1, l2, and log_sum_exp's sum of
// exp(x - max)), max, min or products.
template <ReduceFn F>
__device__ float reduce_combine(float a, float b) {
  if constexpr (F == ReduceFn::max) return a < b ? b : a;
  else if constexpr (F == ReduceFn::min) return b < a ? b : a;
  else if constexpr (F == ReduceFn::prod) return a * b;
  else return a + b;
}

template <ReduceFn F>
__device__ float reduce_init() {
  if constexpr (F == ReduceFn::max) return -INFINITY;
  else if constexpr (F == ReduceFn::min) return INFINITY;
  else if constexpr (F == ReduceFn::prod) return 1.f;
  else return 0.f;
}

// One element into the accumulator; `shift` is log_sum_exp's max (exp(x - max) cannot overflow).
template <ReduceFn F>
__device__ float reduce_step(float acc, float v, float shift) {
  if constexpr (F == ReduceFn::sum_square || F == ReduceFn::l2) return acc + v * v;
  else if constexpr (F == ReduceFn::l1) return acc + fabsf(v);
  else if constexpr (F == ReduceFn::log_sum_exp) return acc + expf(v - shift);
  else return reduce_combine<F>(acc, v);
}

template <ReduceFn F>
__device__ float reduce_finish(float acc, int64_t count, float shift) {
  if constexpr (F == ReduceFn::mean) return acc / static_cast<float>(count);
  else if constexpr (F == ReduceFn::l2) return sqrtf(acc);
  else if constexpr (F == ReduceFn::log_sum_exp) return shift == -INFINITY ? -INFINITY : shift + logf(acc);
  else return acc;
}

// Block-wide reduce_combine<F>, every thread gets the result (block_sum's rules for scratch).
template <ReduceFn F>
__device__ float block_combine(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = reduce_combine<F>(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : reduce_init<F>();
  for (int o = 16; o > 0; o >>= 1) v = reduce_combine<F>(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// y[o] = F over the `count` elements x[kept(o) + reduced(r)]. kBlockPerOutput: one block per output
// (the reduced elements are contiguous at the end), else one thread per output (consecutive threads
// read consecutive kept elements).
template <ReduceFn F, bool kBlockPerOutput>
__global__ void reduce_kernel(const float* x, float* y, int64_t outputs, int64_t count, IndexMap<1> kept,
                              IndexMap<1> reduced) {
  constexpr bool kShifted = F == ReduceFn::log_sum_exp;
  constexpr ReduceFn kCombine = kShifted ? ReduceFn::sum : F;  // how partial accumulators merge
  auto at = [&](int64_t base, int64_t r) {
    if (reduced.flat) return x[base + r];
    int64_t off[1];
    map_offsets(reduced, r, off);
    return x[base + off[0]];
  };
  auto base_of = [&](int64_t o) {
    int64_t off[1];
    map_offsets(kept, o, off);
    return off[0];
  };
  if constexpr (kBlockPerOutput) {
    __shared__ float scratch[32];
    for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
      const int64_t base = base_of(o);
      float shift = 0.f;
      if constexpr (kShifted) {
        float m = -INFINITY;
        for (int64_t r = threadIdx.x; r < count; r += blockDim.x) m = reduce_combine<ReduceFn::max>(m, at(base, r));
        shift = block_combine<ReduceFn::max>(m, scratch);
      }
      float acc = reduce_init<F>();
      for (int64_t r = threadIdx.x; r < count; r += blockDim.x) acc = reduce_step<F>(acc, at(base, r), shift);
      acc = block_combine<kCombine>(acc, scratch);
      if (threadIdx.x == 0) y[o] = reduce_finish<F>(acc, count, shift);
    }
  } else {
    EMBER_GRID_LOOP(o, outputs) {
      const int64_t base = base_of(o);
      float shift = 0.f;
      if constexpr (kShifted) {
        shift = -INFINITY;
        for (int64_t r = 0; r < count; ++r) shift = reduce_combine<ReduceFn::max>(shift, at(base, r));
      }
      float acc = reduce_init<F>();
      for (int64_t r = 0; r < count; ++r) acc = reduce_step<F>(acc, at(base, r), shift);
      y[o] = reduce_finish<F>(acc, count, shift);
    }
  }
}

using ReduceKernel = void (*)(const float*, float*, int64_t, int64_t, IndexMap<1>, IndexMap<1>);

template <bool kBlockPerOutput, size_t... I>
const ReduceKernel* reduce_table(std::index_sequence<I...>) {
  static const ReduceKernel table[] = {reduce_kernel<static_cast<ReduceFn>(I), kBlockPerOutput>...};
  return table;
}

// -- argmax and topk ---------------------------------------------------------------------------------

// Whether candidate (va, ia) goes before (vb, ib): larger (smaller) first, ties to the lower index;
// index -1 is no candidate. A NaN counts as larger than any number (PyTorch's topk, as the CPU
// kernel): first when largest, last when smallest.
__device__ inline bool goes_before(float va, int64_t ia, float vb, int64_t ib, bool largest) {
  if (ia < 0) return false;
  if (ib < 0) return true;
  const bool an = isnan(va), bn = isnan(vb);
  if (an || bn) return an && bn ? ia < ib : (largest ? an : bn);
  if (va == vb) return ia < ib;
  return largest ? va > vb : va < vb;
}

// One thread per (outer, inner) position; the dim is walked with stride `inner`.
__global__ void argmax_kernel(const float* x, int64_t* y, int64_t outer, int64_t n, int64_t inner, bool largest,
                              bool last) {
  EMBER_GRID_LOOP(p, outer * inner) {
    const float* xs = x + (p / inner) * n * inner + p % inner;
    float best = xs[0];
    int64_t at = 0;
    // The first NaN wins, for max and min alike (numpy's argmax and argmin, as the CPU kernel).
    for (int64_t i = 1; i < n && !isnan(best); ++i) {
      const float v = xs[i * inner];
      if (isnan(v)) {
        best = v, at = i;
        break;
      }
      if (largest ? (v > best || (last && v == best)) : (v < best || (last && v == best))) best = v, at = i;
    }
    y[p] = at;
  }
}

// One block per row (an (outer, inner) position): k passes, each a block-wide selection of the best
// element not yet taken, marked in the row's slice of `taken` (the workspace's int64 per element).
// O(k * n / blockDim) per row: fine for the small k of classification heads and beam search.
__global__ void topk_kernel(const float* x, void* out, int64_t outer, int64_t n, int64_t inner, int64_t k,
                            bool largest, bool values, int64_t* taken) {
  __shared__ float best_v[32];
  __shared__ int64_t best_i[32];
  for (int64_t row = blockIdx.x; row < outer * inner; row += gridDim.x) {
    const int64_t o = row / inner, in = row % inner;
    const float* xs = x + o * n * inner + in;
    int64_t* mark = taken + row * n;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) mark[i] = 0;
    __syncthreads();
    for (int64_t j = 0; j < k; ++j) {
      float v = 0.f;
      int64_t at = -1;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        if (!mark[i] && goes_before(xs[i * inner], i, v, at, largest)) v = xs[i * inner], at = i;
      }
      for (int s = 16; s > 0; s >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, s);
        const int64_t oi = __shfl_xor_sync(0xffffffffu, at, s);
        if (goes_before(ov, oi, v, at, largest)) v = ov, at = oi;
      }
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
      if (lane == 0) best_v[warp] = v, best_i[warp] = at;
      __syncthreads();
      if (threadIdx.x == 0) {
        for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) {
          if (goes_before(best_v[w], best_i[w], v, at, largest)) v = best_v[w], at = best_i[w];
        }
        const int64_t dst = (o * k + j) * inner + in;
        if (values) static_cast<float*>(out)[dst] = v;
        else static_cast<int64_t*>(out)[dst] = at;
        mark[at] = 1;
      }
      __syncthreads();
    }
  }
}

}  // namespace

CudaKernelStatus cuda_reduce(const CudaKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& s = k.in_shape(0);
  uint32_t mask = 0;
  for (int i = 0; i < a.num_axes; ++i) mask |= 1u << (a.axes[i] < 0 ? a.axes[i] + s.rank : a.axes[i]);
  if (a.num_axes == 0 && !a.noop_with_empty_axes) mask = (1u << s.rank) - 1;
  // The kept dims and the reduced dims, each a shape with the input's strides.
  Shape kept_shape, reduced_shape;
  int64_t kept_strides[1][Shape::kMaxRank] = {}, reduced_strides[1][Shape::kMaxRank] = {};
  int64_t stride = 1;
  for (int d = s.rank - 1; d >= 0; --d) {
    const bool r = mask & (1u << d);
    Shape& shape = r ? reduced_shape : kept_shape;
    int64_t* strides = r ? reduced_strides[0] : kept_strides[0];
    for (int i = shape.rank; i > 0; --i) shape[i] = shape[i - 1], strides[i] = strides[i - 1];
    shape[0] = s[d], strides[0] = stride, ++shape.rank;
    stride *= s[d];
  }
  const int64_t outputs = kept_shape.numel(), count = reduced_shape.numel();
  if (outputs == 0) return {};
  const IndexMap<1> kept = make_index_map(kept_shape, kept_strides);
  const IndexMap<1> reduced = make_index_map(reduced_shape, reduced_strides);
  const bool block_per_output = s.rank > 0 && (mask & (1u << (s.rank - 1))) && s.last() > 1;
  constexpr auto kFns = std::make_index_sequence<static_cast<size_t>(ReduceFn::count)>();
  static const ReduceKernel* const per_block = reduce_table<true>(kFns);
  static const ReduceKernel* const per_thread = reduce_table<false>(kFns);
  if (block_per_output) {
    per_block[a.fn]<<<grid_for(outputs, 1), row_block(count), 0, k.stream>>>(k.in_f32(0), k.out_f32(), outputs, count,
                                                                              kept, reduced);
  } else {
    per_thread[a.fn]<<<grid_for(outputs), kBlock, 0, k.stream>>>(k.in_f32(0), k.out_f32(), outputs, count, kept,
                                                                 reduced);
  }
  return launched("reduce_kernel");
}

CudaKernelStatus cuda_argmax(const CudaKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& s = k.in_shape(0);
  const int d = a.dim < 0 ? a.dim + s.rank : a.dim;
  const int64_t outer = s.prod(0, d), n = s[d], inner = s.prod(d + 1, s.rank);
  if (outer * inner == 0) return {};
  argmax_kernel<<<grid_for(outer * inner), kBlock, 0, k.stream>>>(k.in_f32(0), static_cast<int64_t*>(k.output), outer,
                                                                  n, inner, a.fn == 0, a.select_last_index);
  return launched("argmax_kernel");
}

CudaKernelStatus cuda_topk(const CudaKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& s = k.in_shape(0);
  const int d = a.dim < 0 ? a.dim + s.rank : a.dim;
  const int64_t outer = s.prod(0, d), n = s[d], inner = s.prod(d + 1, s.rank);
  if (outer * inner == 0 || a.k == 0) return {};
  topk_kernel<<<grid_for(outer * inner, 1), row_block(n), 0, k.stream>>>(
      k.in_f32(0), k.output, outer, n, inner, a.k, a.largest, a.values_output, static_cast<int64_t*>(k.workspace));
  return launched("topk_kernel");
}

}  // namespace ember::gpu::cuda
