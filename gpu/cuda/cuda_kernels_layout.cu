// CUDA kernels for pooling, resampling and layout: max/avg/global pooling, resize (ONNX Resize,
// nearest and linear), flatten/reshape, select. Mirrors kernels_cpu_layout.cpp.
#include "gpu/cuda/cuda_kernels.hpp"

namespace ember::gpu::cuda {

namespace {

struct PoolGeometry {
  int64_t planes, h, w, ho, wo;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  bool count_include_pad;
};

// One thread per output element (PyTorch's pooling). Max pooling takes the largest of the window's
// taps (dilated) that fall inside the image, as std::max from the first; padding never wins.
// Average pooling sums the taps inside the image and divides by the window clipped to the padded
// extent [-pad, in + pad) (count_include_pad; only ceil_mode's last window is ever clipped there)
// or by the number of taps inside the image.
template <bool kMax>
__global__ void pool2d_kernel(const float* x, float* y, PoolGeometry g) {
  EMBER_GRID_LOOP(idx, g.planes * g.ho * g.wo) {
    int64_t t = idx;
    const int64_t ow = t % g.wo; t /= g.wo;
    const int64_t oh = t % g.ho;
    const int64_t p = t / g.ho;
    const float* plane = x + p * g.h * g.w;
    const int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    if constexpr (kMax) {
      float m = -INFINITY;
      bool first = true;
      for (int64_t i = 0; i < g.kh; ++i) {
        const int64_t ih = h0 + i * g.dh;
        if (ih < 0 || ih >= g.h) continue;
        for (int64_t j = 0; j < g.kw; ++j) {
          const int64_t iw = w0 + j * g.dw;
          if (iw < 0 || iw >= g.w) continue;
          const float v = plane[ih * g.w + iw];
          m = first || m < v ? v : m;  // std::max(m, v), as the CPU kernel
          first = false;
        }
      }
      y[idx] = m;
    } else {
      const int64_t he = min(h0 + g.kh, g.h + g.ph), we = min(w0 + g.kw, g.w + g.pw);
      const int64_t padded = (he - h0) * (we - w0);
      const int64_t hs = max(h0, int64_t{0}), ws = max(w0, int64_t{0});
      const int64_t hc = min(he, g.h), wc = min(we, g.w);
      float s = 0.f;
      for (int64_t i = hs; i < hc; ++i)
        for (int64_t j = ws; j < wc; ++j) s += plane[i * g.w + j];
      const int64_t divisor = g.count_include_pad ? padded : (hc - hs) * (wc - ws);
      y[idx] = s / static_cast<float>(divisor);
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
  const PoolGeometry g{xs[0] * xs[1], xs[2],       xs[3],         ys[2],         ys[3],
                       a.kernel[0],   a.kernel[1], a.stride[0],   a.stride[1],   a.padding[0],
                       a.padding[1],  kMax ? a.dilation[0] : 1, kMax ? a.dilation[1] : 1, a.count_include_pad};
  const int64_t total = g.planes * g.ho * g.wo;
  if (total == 0) return {};
  pool2d_kernel<kMax><<<grid_for(total), kBlock, 0, k.stream>>>(k.in_f32(0), k.out_f32(), g);
  return launched(kMax ? "max_pool2d_kernel" : "avg_pool2d_kernel");
}

// One resized axis: output coordinate o maps to input coordinate (o + offset) * ratio - offset
// (half_pixel; pytorch_half_pixel, except that a length-1 output maps to 0), o * ratio
// (align_corners, ratio (in - 1) / (resized - 1), 0 for a resized length of 1 or less, resized being
// in * scale, or out when sizes were given; asymmetric, ratio 1/scale).
// ratio is 1/scale, scale being out / in when sizes were given, else the attribute (ONNX Resize);
// float32 arithmetic, as ONNX Runtime.
struct ResizeAxis {
  int64_t in, out;
  float ratio, offset;
};

struct ResizeGeometry {
  int64_t planes;
  ResizeAxis h, w;
  uint8_t mode, round;  // a ResizeMode, a NearestRound
};

ResizeAxis resize_axis(const LayerAttrs& a, int64_t in, int64_t out, int dim) {
  const float scale = a.shape.rank > 0 ? static_cast<float>(out) / static_cast<float>(in) : a.scales[dim];
  // As the CPU kernel and ONNX's reference: align_corners and pytorch_half_pixel take the resized
  // length as in * scale (out when sizes were given), fractional for some listed scales.
  const float resized = a.shape.rank > 0 ? static_cast<float>(out) : static_cast<float>(in) * scale;
  switch (static_cast<ResizeCoords>(a.coords)) {
    case ResizeCoords::align_corners:
      return {in, out, resized > 1.f ? static_cast<float>(in - 1) / (resized - 1.f) : 0.f, 0.f};
    case ResizeCoords::asymmetric: return {in, out, 1.f / scale, 0.f};
    case ResizeCoords::pytorch_half_pixel:
      return {in, out, resized > 1.f ? 1.f / scale : 0.f, resized > 1.f ? 0.5f : 0.f};
    default: return {in, out, 1.f / scale, 0.5f};
  }
}

__device__ inline float source_coord(const ResizeAxis& a, int64_t o) {
  return (static_cast<float>(o) + a.offset) * a.ratio - a.offset;
}

// Nearest: the rounded coordinate (round_prefer_floor / _ceil break .5 ties down / up), clamped.
__device__ inline int64_t nearest_index(const ResizeAxis& a, int64_t o, uint8_t round) {
  const float x = source_coord(a, o);
  float r;
  switch (static_cast<NearestRound>(round)) {
    case NearestRound::floor: r = floorf(x); break;
    case NearestRound::ceil: r = ceilf(x); break;
    case NearestRound::round_prefer_ceil: r = x == floorf(x) + 0.5f ? ceilf(x) : roundf(x); break;
    default: r = x == floorf(x) + 0.5f ? floorf(x) : roundf(x); break;
  }
  const int64_t i = static_cast<int64_t>(r);
  return i < 0 ? 0 : (i >= a.in ? a.in - 1 : i);
}

// Linear: the coordinate clamped to [0, in - 1] (ONNX's edge padding), its two neighbours and the
// weight of the upper one.
__device__ inline void linear_taps(const ResizeAxis& a, int64_t o, int64_t& lo, int64_t& hi, float& frac) {
  float x = source_coord(a, o);
  x = x < 0.f ? 0.f : (x > static_cast<float>(a.in - 1) ? static_cast<float>(a.in - 1) : x);
  lo = static_cast<int64_t>(x);
  hi = lo + 1 < a.in ? lo + 1 : lo;
  frac = x - static_cast<float>(lo);
}

__global__ void resize_kernel(const float* x, float* y, ResizeGeometry g) {
  EMBER_GRID_LOOP(idx, g.planes * g.h.out * g.w.out) {
    const int64_t ow = idx % g.w.out, oh = (idx / g.w.out) % g.h.out, p = idx / (g.w.out * g.h.out);
    const float* plane = x + p * g.h.in * g.w.in;
    if (g.mode == static_cast<uint8_t>(ResizeMode::nearest)) {
      y[idx] = plane[nearest_index(g.h, oh, g.round) * g.w.in + nearest_index(g.w, ow, g.round)];
      continue;
    }
    int64_t h0, h1, w0, w1;
    float fh, fw;
    linear_taps(g.h, oh, h0, h1, fh);
    linear_taps(g.w, ow, w0, w1, fw);
    const float top = plane[h0 * g.w.in + w0] * (1.f - fw) + plane[h0 * g.w.in + w1] * fw;
    const float bottom = plane[h1 * g.w.in + w0] * (1.f - fw) + plane[h1 * g.w.in + w1] * fw;
    y[idx] = top * (1.f - fh) + bottom * fh;
  }
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

// The last two dims resample (a rank-1 input: its one dim, as [1, w]); the others only count planes.
CudaKernelStatus cuda_resize(const CudaKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const Shape& ys = k.out_shape();
  const int r = xs.rank;
  const int64_t total = ys.numel();
  if (total == 0 || xs.numel() == 0) return {};
  ResizeGeometry g{};
  g.planes = r >= 2 ? xs.prod(0, r - 2) : 1;
  g.h = r >= 2 ? resize_axis(a, xs[r - 2], ys[r - 2], r - 2) : ResizeAxis{1, 1, 0.f, 0.f};
  g.w = resize_axis(a, xs[r - 1], ys[r - 1], r - 1);
  g.mode = a.fn, g.round = a.nearest_round;
  resize_kernel<<<grid_for(total), kBlock, 0, k.stream>>>(k.in_f32(0), k.out_f32(), g);
  return launched("resize_kernel");
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
