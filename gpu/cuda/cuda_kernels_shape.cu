// CUDA kernels of the general data-movement ops: constant, transpose, concat, slice, gather, expand
// and pad. They move elements without looking at them, so each is instantiated per element size
// (1, 2, 4 or 8 bytes), not per dtype. transpose, slice and expand are one strided copy through an
// IndexMap (permuted, stepped or zero strides); concat is one cudaMemcpy2DAsync per input; a copy
// that keeps the layout is one cudaMemcpyAsync. Exact: no arithmetic on the values.
#include <cstring>
#include <type_traits>

#include "gpu/cuda/cuda_kernels.hpp"

namespace ember::gpu::cuda {

namespace {

// Row-major element strides of s.
void contiguous_strides(const Shape& s, int64_t* strides) {
  int64_t n = 1;
  for (int d = s.rank - 1; d >= 0; --d) {
    strides[d] = n;
    n *= s[d];
  }
}

int dim_of(int64_t dim, int rank) { return static_cast<int>(dim < 0 ? dim + rank : dim); }

CudaKernelStatus copy_bytes(void* dst, const void* src, uint64_t bytes, cudaStream_t stream) {
  if (bytes == 0 || dst == src) return {};
  return cuda_call(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream),
                   "cudaMemcpyAsync (device to device)");
}

// y[i] = x[offset of i]; x may point at the first element of a slice.
template <class T>
__global__ void strided_copy_kernel(const T* x, T* y, int64_t n, IndexMap<1> m) {
  EMBER_GRID_LOOP(i, n) {
    int64_t off[1];
    map_offsets(m, i, off);
    y[i] = x[off[0]];
  }
}

// The output of k, element i, read from x (element size of the output) through `strides` (per
// output dim), or one contiguous copy when the map is flat.
CudaKernelStatus strided_copy(const CudaKernelArgs& k, const void* x, const int64_t (&strides)[1][Shape::kMaxRank]) {
  const Shape& out = k.out_shape();
  const int64_t n = out.numel();
  if (n == 0) return {};
  const IndexMap<1> m = make_index_map(out, strides);
  if (m.flat) return copy_bytes(k.output, x, k.args->output.desc.bytes(), k.stream);
  return by_element_size(dtype_size(k.args->output.desc.dtype), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    strided_copy_kernel<<<grid_for(n), kBlock, 0, k.stream>>>(static_cast<const T*>(x), static_cast<T*>(k.output), n, m);
    return launched("strided_copy_kernel");
  });
}

// y[o][j][r] = x[o][indices[j]][r], zeros for an index outside [-n, n).
template <class T, class Index>
__global__ void gather_kernel(const T* x, const Index* indices, T* y, int64_t total, int64_t n, int64_t count,
                              int64_t inner) {
  EMBER_GRID_LOOP(i, total) {
    const int64_t r = i % inner, t = i / inner;
    const int64_t j = t % count, o = t / count;
    int64_t idx = static_cast<int64_t>(indices[j]);
    if (idx < 0) idx += n;
    y[i] = (idx >= 0 && idx < n) ? x[(o * n + idx) * inner + r] : T{0};
  }
}

struct PadGeometry {
  int32_t rank;
  uint8_t mode;  // a PadMode
  int64_t in[Shape::kMaxRank], out[Shape::kMaxRank], begin[Shape::kMaxRank];
};

// One thread per output element: coordinate c of a dim reads input c - begin, which constant mode
// replaces by `value` outside [0, in), reflect mirrors about the edges without repeating them
// (pads are smaller than the dim), and edge clamps.
template <class T>
__global__ void pad_kernel(const T* x, T* y, int64_t total, PadGeometry g, T value) {
  EMBER_GRID_LOOP(i, total) {
    int64_t t = i, offset = 0, stride = 1;
    bool inside = true;
    for (int d = g.rank - 1; d >= 0; --d) {
      int64_t c = t % g.out[d] - g.begin[d];
      t /= g.out[d];
      const int64_t n = g.in[d];
      if (c < 0 || c >= n) {
        if (g.mode == static_cast<uint8_t>(PadMode::reflect)) c = c < 0 ? -c : 2 * (n - 1) - c;
        else if (g.mode == static_cast<uint8_t>(PadMode::edge)) c = c < 0 ? 0 : n - 1;
        else inside = false;
      }
      offset += c * stride;
      stride *= n;
    }
    y[i] = inside ? x[offset] : value;
  }
}

}  // namespace

CudaKernelStatus cuda_constant(const CudaKernelArgs& k) {
  return copy_bytes(k.output, k.weights[0], k.args->output.desc.bytes(), k.stream);
}

CudaKernelStatus cuda_transpose(const CudaKernelArgs& k) {
  const Shape& in = k.in_shape(0);
  int64_t in_strides[Shape::kMaxRank];
  contiguous_strides(in, in_strides);
  int64_t strides[1][Shape::kMaxRank] = {};
  for (int d = 0; d < in.rank; ++d) strides[0][d] = in_strides[k.attrs().axes[d]];
  return strided_copy(k, k.inputs[0], strides);
}

CudaKernelStatus cuda_slice(const CudaKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& in = k.in_shape(0);
  if (k.out_shape().numel() == 0) return {};
  int64_t strides[1][Shape::kMaxRank] = {};
  contiguous_strides(in, strides[0]);
  int64_t base = 0;
  // infer_output's clamping: numpy x[start:end:step] per listed axis.
  for (int i = 0; i < a.num_axes; ++i) {
    const int d = dim_of(a.axes[i], in.rank);
    const int64_t n = in[d], step = a.steps[i];
    int64_t start = a.starts[i] < 0 ? a.starts[i] + n : a.starts[i];
    start = step > 0 ? (start < 0 ? 0 : (start > n ? n : start)) : (start < -1 ? -1 : (start > n - 1 ? n - 1 : start));
    base += start * strides[0][d];
    strides[0][d] *= step;
  }
  const auto* x = static_cast<const uint8_t*>(k.inputs[0]) + base * dtype_size(k.args->inputs[0].desc.dtype);
  return strided_copy(k, x, strides);
}

CudaKernelStatus cuda_expand(const CudaKernelArgs& k) {
  int64_t strides[1][Shape::kMaxRank] = {};
  broadcast_strides(k.in_shape(0), k.out_shape().rank, strides[0]);
  return strided_copy(k, k.inputs[0], strides);
}

// One cudaMemcpy2DAsync per input: `outer` rows of the input's bytes along dims >= dim, written at
// the input's offset into rows of the output's (pitch = output row bytes).
CudaKernelStatus cuda_concat(const CudaKernelArgs& k) {
  const Shape& out = k.out_shape();
  const int d = dim_of(k.attrs().dim, out.rank);
  const uint64_t elem = dtype_size(k.args->output.desc.dtype);
  const int64_t outer = out.prod(0, d), inner = out.prod(d + 1, out.rank);
  if (out.numel() == 0) return {};
  const uint64_t pitch = static_cast<uint64_t>(out[d] * inner) * elem;
  uint64_t offset = 0;
  for (int i = 0; i < k.args->num_inputs; ++i) {
    const uint64_t width = static_cast<uint64_t>(k.in_shape(i)[d] * inner) * elem;
    auto* dst = static_cast<uint8_t*>(k.output) + offset;
    offset += width;
    if (width == 0) continue;
    if (outer == 1) {
      EMBER_CUDA_TRY(copy_bytes(dst, k.inputs[i], width, k.stream));
    } else if (pitch <= static_cast<uint64_t>(INT32_MAX)) {
      EMBER_CUDA_TRY(cuda_call(cudaMemcpy2DAsync(dst, pitch, k.inputs[i], width, width, static_cast<size_t>(outer),
                                                 cudaMemcpyDeviceToDevice, k.stream),
                               "cudaMemcpy2DAsync (device to device)"));
    } else {  // rows past the 2D copy's pitch limit: few of them, one copy each
      const auto* src = static_cast<const uint8_t*>(k.inputs[i]);
      for (int64_t r = 0; r < outer; ++r) EMBER_CUDA_TRY(copy_bytes(dst + r * pitch, src + r * width, width, k.stream));
    }
  }
  return {};
}

CudaKernelStatus cuda_gather(const CudaKernelArgs& k) {
  const Shape& x = k.in_shape(0);
  const int d = dim_of(k.attrs().dim, x.rank);
  const int64_t n = x[d], inner = x.prod(d + 1, x.rank), count = k.in_shape(1).numel();
  const int64_t total = k.out_shape().numel();
  if (total == 0) return {};
  const bool i64 = k.args->inputs[1].desc.dtype == DType::i64;
  return by_element_size(dtype_size(k.args->inputs[0].desc.dtype), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const auto* xs = static_cast<const T*>(k.inputs[0]);
    auto* y = static_cast<T*>(k.output);
    if (i64) {
      gather_kernel<<<grid_for(total), kBlock, 0, k.stream>>>(xs, static_cast<const int64_t*>(k.inputs[1]), y, total, n,
                                                              count, inner);
    } else {
      gather_kernel<<<grid_for(total), kBlock, 0, k.stream>>>(xs, static_cast<const int32_t*>(k.inputs[1]), y, total, n,
                                                              count, inner);
    }
    return launched("gather_kernel");
  });
}

CudaKernelStatus cuda_pad(const CudaKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& in = k.in_shape(0);
  const Shape& out = k.out_shape();
  const int64_t total = out.numel();
  if (total == 0) return {};
  PadGeometry g{in.rank, a.fn, {}, {}, {}};
  for (int d = 0; d < in.rank; ++d) g.in[d] = in[d], g.out[d] = out[d], g.begin[d] = a.pads[d];
  const DType dtype = k.args->inputs[0].desc.dtype;
  return by_element_size(dtype_size(dtype), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    T value{0};  // constant mode: `value` for float32, zero bytes for every other dtype
    if constexpr (sizeof(T) == sizeof(float)) {
      if (dtype == DType::f32) std::memcpy(&value, &a.alpha, sizeof(value));
    }
    pad_kernel<<<grid_for(total), kBlock, 0, k.stream>>>(static_cast<const T*>(k.inputs[0]), static_cast<T*>(k.output),
                                                         total, g, value);
    return launched("pad_kernel");
  });
}

}  // namespace ember::gpu::cuda
