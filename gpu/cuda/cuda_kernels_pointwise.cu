// CUDA kernels that work element by element or row by row: activations, residual add, and the
// normalisations (batch norm, layer norm, group norm, RMS norm, softmax and log-softmax). Mirrors kernels_cpu_pointwise.cpp, formula for
// formula; libm calls are CUDA's accurate expf/erff/tanhf (the build does not use --use_fast_math).
#include "gpu/cuda/cuda_kernels.hpp"

namespace ember::gpu::cuda {

namespace {

struct Relu {
  __device__ float operator()(float v) const { return v > 0.f ? v : 0.f; }
};

struct GeluErf {
  __device__ float operator()(float v) const { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }
};

struct GeluTanh {
  __device__ float operator()(float v) const {
    constexpr float kAlpha = 0.79788456080286536f;  // sqrt(2 / pi)
    return 0.5f * v * (1.f + tanhf(kAlpha * (v + 0.044715f * v * v * v)));
  }
};

struct Tanh {
  __device__ float operator()(float v) const { return tanhf(v); }
};

template <class Op>
__global__ void map_kernel(const float* x, float* y, int64_t n, Op op) {
  EMBER_GRID_LOOP(i, n) y[i] = op(x[i]);
}

template <class Op>
CudaKernelStatus map(const CudaKernelArgs& k, Op op) {
  const int64_t n = k.in_shape(0).numel();
  if (n == 0) return {};
  map_kernel<<<grid_for(n), kBlock, 0, k.stream>>>(k.in_f32(0), k.out_f32(), n, op);
  return launched("map_kernel");
}

__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n) {
  EMBER_GRID_LOOP(i, n) y[i] = a[i] + b[i];
}

// Inference batch norm over dim 1; `inner` is the product of the dims after it.
__global__ void batch_norm_kernel(const float* x, float* y, int64_t n, int64_t channels, int64_t inner,
                                  const float* w, const float* bias, const float* mean, const float* var, float eps) {
  EMBER_GRID_LOOP(i, n) {
    const int64_t c = (i / inner) % channels;
    const float scale = w[c] / sqrtf(var[c] + eps);
    const float shift = bias[c] - mean[c] * scale;
    y[i] = x[i] * scale + shift;
  }
}

// One block per row (grid-stride over rows): mean, then the mean of squared deviations, as the CPU.
__global__ void layer_norm_kernel(const float* x, float* y, int64_t rows, int64_t n, const float* w,
                                  const float* bias, float eps) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    float sum = 0.f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += xr[i];
    const float mean = block_sum(sum, scratch) / static_cast<float>(n);
    float sq = 0.f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sq += (xr[i] - mean) * (xr[i] - mean);
    const float rstd = 1.f / sqrtf(block_sum(sq, scratch) / static_cast<float>(n) + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = (xr[i] - mean) * rstd * w[i] + bias[i];
  }
}

// Whether key j of the mask's batch entry `b` is kept: nonzero, a float's sign bit ignored.
__device__ inline bool key_kept(const KeyMask& mask, int64_t b, int64_t n, int64_t j) {
  const int64_t at = b * n + j;
  switch (mask.elem_size) {
    case 1: return static_cast<const uint8_t*>(mask.data)[at] != 0;
    case 2: return (static_cast<const uint16_t*>(mask.data)[at] & (mask.floating ? 0x7fffu : 0xffffu)) != 0;
    case 4: return (static_cast<const uint32_t*>(mask.data)[at] & (mask.floating ? 0x7fffffffu : 0xffffffffu)) != 0;
    default: return static_cast<const uint64_t*>(mask.data)[at] != 0;
  }
}

// softmax_row of kernels_cpu, one block per row. Each thread reads and writes only its own
// indices, so y may alias x. Entries past the causal limit or of masked keys are 0; with none
// left the row is all 0. log: log-softmax, x - max - log(sum exp(x - max)).
__global__ void softmax_rows_kernel(const float* x, float* y, int64_t rows, int64_t n, int64_t causal_period,
                                    KeyMask mask, bool log) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const int64_t valid = causal_period > 0 ? r % causal_period + 1 : n;
    const int64_t batch = mask.first_batch + (r / mask.rows_per_slice) * mask.batch_step;
    auto kept = [&](int64_t i) { return i < valid && (!mask.data || key_kept(mask, batch, n, i)); };
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < valid; i += blockDim.x)
      if (kept(i)) m = fmaxf(m, xr[i]);
    m = block_max(m, scratch);
    if (log) {
      float sum = 0.f;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += expf(xr[i] - m);
      const float shift = m + logf(block_sum(sum, scratch));
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] - shift;
      continue;
    }
    if (m == -INFINITY && mask.data) {  // every key masked (an unmasked row of -inf stays NaN, as on the CPU)
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = 0.f;
      continue;
    }
    float sum = 0.f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const float ex = kept(i) ? expf(xr[i] - m) : 0.f;
      yr[i] = ex;
      sum += ex;
    }
    const float inv = 1.f / block_sum(sum, scratch);
    for (int64_t i = threadIdx.x; i < valid; i += blockDim.x) yr[i] *= inv;
  }
}

// One block per row of n: mean of squares, then x / sqrt(mean + eps) * w[i] (rms_norm; w per
// element of the row) or, for group_norm, mean and variance over the row (one (image, group): its
// channels' planes, contiguous) and the affine of each element's channel c = i / plane.
__global__ void rms_norm_kernel(const float* x, float* y, int64_t rows, int64_t n, const float* w, float eps) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    float sq = 0.f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sq += xr[i] * xr[i];
    const float rstd = 1.f / sqrtf(block_sum(sq, scratch) / static_cast<float>(n) + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * rstd * w[i];
  }
}

__global__ void group_norm_kernel(const float* x, float* y, int64_t rows, int64_t n, int64_t groups, int64_t plane,
                                  const float* w, const float* bias, float eps) {
  __shared__ float scratch[32];
  const int64_t channels_per_group = n / plane;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    float sum = 0.f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += xr[i];
    const float mean = block_sum(sum, scratch) / static_cast<float>(n);
    float sq = 0.f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sq += (xr[i] - mean) * (xr[i] - mean);
    const float rstd = 1.f / sqrtf(block_sum(sq, scratch) / static_cast<float>(n) + eps);
    const int64_t c0 = (r % groups) * channels_per_group;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const int64_t c = c0 + i / plane;
      yr[i] = (xr[i] - mean) * rstd * w[c] + bias[c];
    }
  }
}

// Softmax along a middle dim: one thread per (outer, inner) column, walking the dim with stride
// `inner` (consecutive threads read consecutive addresses).
__global__ void softmax_strided_kernel(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  EMBER_GRID_LOOP(col, outer * inner) {
    const int64_t base = (col / inner) * n * inner + col % inner;
    const float* xc = x + base;
    float* yc = y + base;
    float m = xc[0];
    for (int64_t i = 1; i < n; ++i) m = fmaxf(m, xc[i * inner]);
    float sum = 0.f;
    if (log) {
      for (int64_t i = 0; i < n; ++i) sum += expf(xc[i * inner] - m);
      const float shift = m + logf(sum);
      for (int64_t i = 0; i < n; ++i) yc[i * inner] = xc[i * inner] - shift;
      continue;
    }
    for (int64_t i = 0; i < n; ++i) sum += (yc[i * inner] = expf(xc[i * inner] - m));
    for (int64_t i = 0; i < n; ++i) yc[i * inner] /= sum;
  }
}

}  // namespace

CudaKernelStatus softmax_rows(const float* x, float* y, int64_t rows, int64_t n, int64_t causal_period,
                              cudaStream_t stream, const KeyMask& mask, bool log) {
  if (rows == 0 || n == 0) return {};
  const int block = row_block(n);
  softmax_rows_kernel<<<grid_for(rows, 1), block, 0, stream>>>(x, y, rows, n, causal_period, mask, log);
  return launched("softmax_rows_kernel");
}

CudaKernelStatus cuda_relu(const CudaKernelArgs& k) { return map(k, Relu{}); }

CudaKernelStatus cuda_gelu(const CudaKernelArgs& k) {
  return k.attrs().tanh_approximation ? map(k, GeluTanh{}) : map(k, GeluErf{});
}

CudaKernelStatus cuda_tanh(const CudaKernelArgs& k) { return map(k, Tanh{}); }

CudaKernelStatus cuda_add(const CudaKernelArgs& k) {
  const int64_t n = k.in_shape(0).numel();
  if (n == 0) return {};
  add_kernel<<<grid_for(n), kBlock, 0, k.stream>>>(k.in_f32(0), k.in_f32(1), k.out_f32(), n);
  return launched("add_kernel");
}

CudaKernelStatus cuda_batch_norm(const CudaKernelArgs& k) {
  const Shape& s = k.in_shape(0);
  const int64_t n = s.numel();
  if (n == 0) return {};
  batch_norm_kernel<<<grid_for(n), kBlock, 0, k.stream>>>(k.in_f32(0), k.out_f32(), n, s[1], s.prod(2, s.rank),
                                                          k.w_f32(0), k.w_f32(1), k.w_f32(2), k.w_f32(3),
                                                          k.attrs().eps);
  return launched("batch_norm_kernel");
}

CudaKernelStatus cuda_layer_norm(const CudaKernelArgs& k) {
  const int64_t n = k.attrs().num_features;
  const int64_t rows = k.in_shape(0).numel() / n;
  if (rows == 0) return {};
  layer_norm_kernel<<<grid_for(rows, 1), row_block(n), 0, k.stream>>>(k.in_f32(0), k.out_f32(), rows, n, k.w_f32(0),
                                                                       k.w_f32(1), k.attrs().eps);
  return launched("layer_norm_kernel");
}

CudaKernelStatus cuda_softmax(const CudaKernelArgs& k) {
  const Shape& s = k.in_shape(0);
  const int dim = k.attrs().dim < 0 ? k.attrs().dim + s.rank : k.attrs().dim;
  const int64_t outer = s.prod(0, dim), n = s[dim], inner = s.prod(dim + 1, s.rank);
  const bool log = k.attrs().log;
  if (inner == 1) return softmax_rows(k.in_f32(0), k.out_f32(), outer, n, 0, k.stream, {}, log);
  if (outer * n * inner == 0) return {};
  softmax_strided_kernel<<<grid_for(outer * inner), kBlock, 0, k.stream>>>(k.in_f32(0), k.out_f32(), outer, n,
                                                                           inner, log);
  return launched("softmax_strided_kernel");
}

CudaKernelStatus cuda_rms_norm(const CudaKernelArgs& k) {
  const int64_t n = k.attrs().num_features;
  const int64_t rows = k.in_shape(0).numel() / n;
  if (rows == 0) return {};
  rms_norm_kernel<<<grid_for(rows, 1), row_block(n), 0, k.stream>>>(k.in_f32(0), k.out_f32(), rows, n, k.w_f32(0),
                                                                     k.attrs().eps);
  return launched("rms_norm_kernel");
}

// nn.GroupNorm: x [N, C, ...] viewed as N * groups rows of C / groups channels' planes.
CudaKernelStatus cuda_group_norm(const CudaKernelArgs& k) {
  const Shape& s = k.in_shape(0);
  const int64_t groups = k.attrs().num_groups, plane = s.prod(2, s.rank);
  const int64_t rows = s[0] * groups, n = s[1] / groups * plane;
  if (rows == 0 || n == 0) return {};
  group_norm_kernel<<<grid_for(rows, 1), row_block(n), 0, k.stream>>>(k.in_f32(0), k.out_f32(), rows, n, groups, plane,
                                                                       k.w_f32(0), k.w_f32(1), k.attrs().eps);
  return launched("group_norm_kernel");
}

}  // namespace ember::gpu::cuda
