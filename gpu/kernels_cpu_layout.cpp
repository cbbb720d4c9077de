// CPU kernels for pooling and data movement: max/avg/global pooling, flatten/reshape, select.
#include <algorithm>
#include <cstring>

#include "gpu/cpu_parallel.hpp"
#include "gpu/kernels_cpu.hpp"

namespace ember::gpu {

namespace {

// Sets each output to per_window(x, h_begin, h_end, w_begin, w_end, width): the window of (oh, ow)
// clipped to the image. Padding taps are thus skipped: max pooling pads with -inf, and average
// pooling's zero padding adds nothing (its divisor still counts the padding, as PyTorch's default).
template <class Fn>
void pool2d(const CpuKernelArgs& k, Fn&& per_window) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const Shape& ys = k.args->output.desc.shape;
  const int64_t planes = xs[0] * xs[1], h = xs[2], w = xs[3], ho = ys[2], wo = ys[3];
  parallel_for(planes, planes * ho * wo > 16384, [&](int64_t p) {
    const float* x = k.in_f32(0) + p * h * w;
    float* y = k.out_f32() + p * ho * wo;
    for (int64_t oh = 0; oh < ho; ++oh) {
      const int64_t h0 = oh * a.stride[0] - a.padding[0];
      const int64_t hs = std::max<int64_t>(h0, 0), he = std::min<int64_t>(h0 + a.kernel[0], h);
      for (int64_t ow = 0; ow < wo; ++ow) {
        const int64_t w0 = ow * a.stride[1] - a.padding[1];
        const int64_t ws = std::max<int64_t>(w0, 0), we = std::min<int64_t>(w0 + a.kernel[1], w);
        y[oh * wo + ow] = per_window(x, hs, he, ws, we, w);
      }
    }
  });
}

}  // namespace

void cpu_max_pool2d(const CpuKernelArgs& k) {
  pool2d(k, [](const float* x, int64_t hs, int64_t he, int64_t ws, int64_t we, int64_t w) {
    float m = x[hs * w + ws];
    for (int64_t i = hs; i < he; ++i)
      for (int64_t j = ws; j < we; ++j) m = std::max(m, x[i * w + j]);
    return m;
  });
}

void cpu_avg_pool2d(const CpuKernelArgs& k) {
  const float inv = 1.f / static_cast<float>(k.attrs().kernel[0] * k.attrs().kernel[1]);
  pool2d(k, [inv](const float* x, int64_t hs, int64_t he, int64_t ws, int64_t we, int64_t w) {
    float s = 0.f;
    for (int64_t i = hs; i < he; ++i)
      for (int64_t j = ws; j < we; ++j) s += x[i * w + j];
    return s * inv;
  });
}

void cpu_global_avg_pool(const CpuKernelArgs& k) {
  const Shape& xs = k.in_shape(0);
  const int64_t planes = xs[0] * xs[1], hw = xs[2] * xs[3];
  parallel_for(planes, planes * hw > 65536, [&](int64_t p) {
    const float* x = k.in_f32(0) + p * hw;
    float s = 0.f;
    for (int64_t i = 0; i < hw; ++i) s += x[i];
    k.out_f32()[p] = s / static_cast<float>(hw);
  });
}

void cpu_copy(const CpuKernelArgs& k) {
  std::memcpy(k.output, k.inputs[0], k.args->output.desc.bytes());
}

void cpu_select(const CpuKernelArgs& k) {
  const Shape& s = k.in_shape(0);
  const int dim = k.attrs().dim < 0 ? k.attrs().dim + s.rank : k.attrs().dim;
  const int64_t index = k.attrs().index < 0 ? k.attrs().index + s[dim] : k.attrs().index;
  const uint64_t elem = dtype_size(k.args->inputs[0].desc.dtype);
  const int64_t outer = s.prod(0, dim), n = s[dim];
  const uint64_t inner_bytes = static_cast<uint64_t>(s.prod(dim + 1, s.rank)) * elem;
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(k.output + o * inner_bytes, k.inputs[0] + (o * n + index) * inner_bytes, inner_bytes);
  }
}

}  // namespace ember::gpu
