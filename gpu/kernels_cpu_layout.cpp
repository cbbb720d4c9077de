// CPU kernels for pooling, resampling and data movement: max/avg/global pooling, resize,
// flatten/reshape, select.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "gpu/cpu_parallel.hpp"
#include "gpu/kernels_cpu.hpp"

namespace ember::gpu {

namespace {

// Sets each output to per_window(x, h, w, h0, w0): the window of (oh, ow) starts at input row h0,
// column w0 (negative in the padding; with ceil_mode a last window may reach past the input's end,
// never starting past it: model/ops.cpp's output size). Padding taps are skipped: max pooling pads
// with -inf, and average pooling's zero padding adds nothing but may count in its divisor.
template <class Fn>
void pool2d(const CpuKernelArgs& k, Fn&& per_window) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const Shape& ys = k.args->output.desc.shape;
  const int64_t planes = xs[0] * xs[1], h = xs[2], w = xs[3], ho = ys[2], wo = ys[3];
  parallel_for(planes, planes * ho * wo > 16384, [&](int64_t p) {
    const float* x = k.in_f32(0) + p * h * w;
    float* y = k.out_f32() + p * ho * wo;
    for (int64_t oh = 0; oh < ho; ++oh)
      for (int64_t ow = 0; ow < wo; ++ow)
        y[oh * wo + ow] = per_window(x, h, w, oh * a.stride[0] - a.padding[0], ow * a.stride[1] - a.padding[1]);
  });
}

// ONNX Resize along one dim: the input coordinate output index o maps to (`scale` = out / in when
// sizes were given, else the listed scale). As ONNX's reference, align_corners and
// pytorch_half_pixel take the resized length as in * scale, which is `out` unless a listed scale
// makes it fractional (a 0.6 downsample of 4 is 2.4 long, not 2): `resized`.
double resize_source(int64_t o, int64_t in, double scale, double resized, ResizeCoords coords) {
  const double x = static_cast<double>(o);
  switch (coords) {
    case ResizeCoords::pytorch_half_pixel: return resized > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case ResizeCoords::align_corners: return resized > 1 ? x * static_cast<double>(in - 1) / (resized - 1) : 0.0;
    case ResizeCoords::asymmetric: return x / scale;
    default: return (x + 0.5) / scale - 0.5;  // half_pixel
  }
}

int64_t nearest_index(double x, int64_t in, NearestRound round) {
  const double f = std::floor(x);
  double r;
  switch (round) {
    case NearestRound::floor: r = f; break;
    case NearestRound::ceil: r = std::ceil(x); break;
    case NearestRound::round_prefer_ceil: r = x - f == 0.5 ? f + 1 : std::round(x); break;
    default: r = x - f == 0.5 ? f : std::round(x); break;  // round_prefer_floor
  }
  return std::clamp<int64_t>(static_cast<int64_t>(r), 0, in - 1);
}

// Linear taps: indices i0, i1 (clamped to the input, as ONNX's edge-padded reference) and the
// weight t of i1.
struct Taps {
  int64_t i0, i1;
  float t;
};
Taps linear_taps(double x, int64_t in) {
  const double f = std::floor(x);
  const auto i = static_cast<int64_t>(f);
  return {std::clamp<int64_t>(i, 0, in - 1), std::clamp<int64_t>(i + 1, 0, in - 1), static_cast<float>(x - f)};
}

float lerp(float a, float b, float t) { return t == 0.f ? a : (1.f - t) * a + t * b; }

}  // namespace

// The last two dims resample (one for a rank-1 input); every other dim is unchanged (ops.hpp).
void cpu_resize(const CpuKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const Shape& ys = k.args->output.desc.shape;
  const int r = xs.rank;
  const int64_t h = r >= 2 ? xs[r - 2] : 1, w = xs[r - 1], ho = r >= 2 ? ys[r - 2] : 1, wo = ys[r - 1];
  if (ys.numel() == 0) return;
  if (xs.numel() == 0) {  // nothing to sample from: zeros, never a read outside the input
    std::fill(k.out_f32(), k.out_f32() + ys.numel(), 0.f);
    return;
  }
  const int64_t planes = ys.numel() / (ho * wo);
  auto scale = [&](int d) -> double {
    if (d < 0) return 1.0;
    return a.shape.rank > 0 ? static_cast<double>(ys[d]) / static_cast<double>(xs[d]) : static_cast<double>(a.scales[d]);
  };
  const double sh = scale(r - 2), sw = scale(r - 1);
  const bool sized = a.shape.rank > 0;
  const double rh = sized ? static_cast<double>(ho) : static_cast<double>(h) * sh;
  const double rw = sized ? static_cast<double>(wo) : static_cast<double>(w) * sw;
  const auto coords = static_cast<ResizeCoords>(a.coords);
  const auto round = static_cast<NearestRound>(a.nearest_round);
  const bool nearest = static_cast<ResizeMode>(a.fn) == ResizeMode::nearest;
  parallel_for(planes * ho, ys.numel() > 16384, [&](int64_t row) {
    const int64_t p = row / ho, oh = row % ho;
    const float* x = k.in_f32(0) + p * h * w;
    float* y = k.out_f32() + row * wo;
    const double xh = r >= 2 ? resize_source(oh, h, sh, rh, coords) : 0.0;
    if (nearest) {
      const float* src = x + nearest_index(xh, h, round) * w;
      for (int64_t ow = 0; ow < wo; ++ow) y[ow] = src[nearest_index(resize_source(ow, w, sw, rw, coords), w, round)];
      return;
    }
    const Taps th = linear_taps(xh, h);
    const float *r0 = x + th.i0 * w, *r1 = x + th.i1 * w;
    for (int64_t ow = 0; ow < wo; ++ow) {
      const Taps tw = linear_taps(resize_source(ow, w, sw, rw, coords), w);
      y[ow] = lerp(lerp(r0[tw.i0], r0[tw.i1], tw.t), lerp(r1[tw.i0], r1[tw.i1], tw.t), th.t);
    }
  });
}

void cpu_max_pool2d(const CpuKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const int64_t kh = a.kernel[0], kw = a.kernel[1], dh = a.dilation[0], dw = a.dilation[1];
  pool2d(k, [=](const float* x, int64_t h, int64_t w, int64_t h0, int64_t w0) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < kh; ++i) {
      const int64_t ih = h0 + i * dh;
      if (ih < 0 || ih >= h) continue;
      for (int64_t j = 0; j < kw; ++j) {
        const int64_t iw = w0 + j * dw;
        if (iw >= 0 && iw < w) m = std::max(m, x[ih * w + iw]);
      }
    }
    return m;
  });
}

// PyTorch's divisor: with count_include_pad the window clipped to the padded extent (so a ceil_mode
// window hanging past the right padding counts less), else the real input taps it covers.
void cpu_avg_pool2d(const CpuKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const int64_t kh = a.kernel[0], kw = a.kernel[1], ph = a.padding[0], pw = a.padding[1];
  const bool include_pad = a.count_include_pad;
  pool2d(k, [=](const float* x, int64_t h, int64_t w, int64_t h0, int64_t w0) {
    const int64_t h1 = std::min(h0 + kh, h + ph), w1 = std::min(w0 + kw, w + pw);
    const int64_t padded = (h1 - h0) * (w1 - w0);
    const int64_t hs = std::max<int64_t>(h0, 0), he = std::min(h1, h);
    const int64_t ws = std::max<int64_t>(w0, 0), we = std::min(w1, w);
    float s = 0.f;
    for (int64_t i = hs; i < he; ++i)
      for (int64_t j = ws; j < we; ++j) s += x[i * w + j];
    const int64_t divisor = include_pad ? padded : (he - hs) * (we - ws);
    return s / static_cast<float>(divisor);
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
