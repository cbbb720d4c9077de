// CUDA kernels for pooling and data movement: max/avg/global pooling, flatten/reshape, select.
// Mirrors kernels_cpu_layout.cpp.
#include "gpu/cuda/cuda_kernels.hpp"

namespace ember::gpu::cuda {

namespace {

struct PoolGeometry {
  int64_t planes, h, w, ho, wo;
  int64_t kh, kw, sh, sw, ph, pw;
};

// One thread per output element. Padding taps are skipped: max pooling pads with -inf, average
// pooling with zeros that add nothing but still count in the divisor (inv = 1 / (kh * kw)).
template <bool kMax>
__global__ void pool2d_kernel(const float* x, float* y, PoolGeometry g, float inv) {
  EMBER_GRID_LOOP(idx, g.planes * g.ho * g.wo) {
    int64_t t = idx;
    const int64_t ow = t % g.wo; t /= g.wo;
    const int64_t oh = t % g.ho;
    const int64_t p = t / g.ho;
    const float* plane = x + p * g.h * g.w;
    const int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    const int64_t hs = h0 > 0 ? h0 : 0, he = h0 + g.kh < g.h ? h0 + g.kh : g.h;
    const int64_t ws = w0 > 0 ? w0 : 0, we = w0 + g.kw < g.w ? w0 + g.kw : g.w;
    if constexpr (kMax) {
      float m = plane[hs * g.w + ws];
      for (int64_t i = hs; i < he; ++i)
        for (int64_t j = ws; j < we; ++j) {
          const float v = plane[i * g.w + j];
          m = m < v ? v : m;  // std::max(m, v), as the CPU kernel
        }
      y[idx] = m;
    } else {
      float s = 0.f;
      for (int64_t i = hs; i < he; ++i)
        for (int64_t j = ws; j < we; ++j) s += plane[i * g.w + j];
      y[idx] = s * inv;
    }
  }
}

// One block per plane (grid-stride over planes).
__global__ void global_avg_pool_kernel(const float* x, float* y, int64_t planes, int64_t hw) {
  __shared__ float scratch[32];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const float* plane = x + p * hw;
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < hw; i += blockDim.x) s += plane[i];
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) y[p] = s / static_cast<float>(hw);
  }
}

// y[o][r] = x[o][index][r] over elements of type T (any dtype of the same size).
template <class T>
__global__ void select_kernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, int64_t index) {
  EMBER_GRID_LOOP(idx, outer * inner) {
    const int64_t o = idx / inner, r = idx % inner;
    y[idx] = x[(o * n + index) * inner + r];
  }
}

template <class T>
CudaKernelStatus launch_select(const CudaKernelArgs& k, int64_t outer, int64_t n, int64_t inner, int64_t index) {
  select_kernel<<<grid_for(outer * inner), kBlock, 0, k.stream>>>(static_cast<const T*>(k.inputs[0]),
                                                                   static_cast<T*>(k.output), outer, n, inner, index);
  return launched("select_kernel");
}

template <bool kMax>
CudaKernelStatus pool2d(const CudaKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const Shape& ys = k.out_shape();
  const PoolGeometry g{xs[0] * xs[1], xs[2], xs[3], ys[2], ys[3], a.kernel[0], a.kernel[1],
                       a.stride[0],   a.stride[1], a.padding[0], a.padding[1]};
  const int64_t total = g.planes * g.ho * g.wo;
  if (total == 0) return {};
  const float inv = 1.f / static_cast<float>(a.kernel[0] * a.kernel[1]);
  pool2d_kernel<kMax><<<grid_for(total), kBlock, 0, k.stream>>>(k.in_f32(0), k.out_f32(), g, inv);
  return launched(kMax ? "max_pool2d_kernel" : "avg_pool2d_kernel");
}

}  // namespace

CudaKernelStatus cuda_max_pool2d(const CudaKernelArgs& k) { return pool2d<true>(k); }
CudaKernelStatus cuda_avg_pool2d(const CudaKernelArgs& k) { return pool2d<false>(k); }

CudaKernelStatus cuda_global_avg_pool(const CudaKernelArgs& k) {
  const Shape& xs = k.in_shape(0);
  const int64_t planes = xs[0] * xs[1], hw = xs[2] * xs[3];
  if (planes == 0 || hw == 0) return {};
  global_avg_pool_kernel<<<grid_for(planes, 1), row_block(hw), 0, k.stream>>>(k.in_f32(0), k.out_f32(), planes, hw);
  return launched("global_avg_pool_kernel");
}

CudaKernelStatus cuda_copy(const CudaKernelArgs& k) {
  const uint64_t bytes = k.args->output.desc.bytes();
  if (bytes == 0 || k.output == k.inputs[0]) return {};
  return cuda_call(cudaMemcpyAsync(k.output, k.inputs[0], bytes, cudaMemcpyDeviceToDevice, k.stream),
                   "cudaMemcpyAsync (device to device)");
}

CudaKernelStatus cuda_select(const CudaKernelArgs& k) {
  const Shape& s = k.in_shape(0);
  const int dim = k.attrs().dim < 0 ? k.attrs().dim + s.rank : k.attrs().dim;
  const int64_t index = k.attrs().index < 0 ? k.attrs().index + s[dim] : k.attrs().index;
  const int64_t outer = s.prod(0, dim), n = s[dim], inner = s.prod(dim + 1, s.rank);
  if (outer * inner == 0) return {};
  const uint32_t elem = dtype_size(k.args->inputs[0].desc.dtype);
  if (outer == 1) {  // one contiguous run
    const auto* src = static_cast<const uint8_t*>(k.inputs[0]) + static_cast<uint64_t>(index * inner) * elem;
    return cuda_call(cudaMemcpyAsync(k.output, src, static_cast<uint64_t>(inner) * elem, cudaMemcpyDeviceToDevice,
                                     k.stream),
                     "cudaMemcpyAsync (device to device)");
  }
  switch (elem) {
    case 1: return launch_select<uint8_t>(k, outer, n, inner, index);
    case 2: return launch_select<uint16_t>(k, outer, n, inner, index);
    case 4: return launch_select<uint32_t>(k, outer, n, inner, index);
    default: return launch_select<uint64_t>(k, outer, n, inner, index);
  }
}

}  // namespace ember::gpu::cuda
