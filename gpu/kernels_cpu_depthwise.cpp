// conv2d's direct depthwise plan (ops.hpp's ConvPlan::depthwise): every group reads one input
// channel, so output channel oc of image b is one plane computed from one input plane,
//   y[b, oc, oh, ow] = bias[oc] + sum_{i, j} W[oc, 0, i, j] x[b, oc / m, oh*sh - ph + i*dh, ow*sw - pw + j*dw]
// (m = O / C, the channel multiplier), terms outside the image skipped (zero padding). 1-d
// convolutions arrive here as 2-d ones of height 1.
//
// Why not the GEMM path: there a depthwise 3x3 is `groups` products of m rows by 9, and OpenBLAS's
// per-call overhead outweighed the 9 multiply-adds per output (mobilenet_v3_small spent most of its
// conv time there). Here each output plane is one task: its interior (every tap inside the image)
// runs without bounds checks, vectorised across a row of outputs (one register accumulator per
// output, the taps unrolled for the common 3x3, 5x5 and 7x7 at stride 1 and 2 without dilation);
// the border outputs (at most a few rows and columns) are summed with checks. The summation order
// differs from the GEMM's, within float rounding. Compiled once per ISA (EMBER_SIMD_CLONES): the
// build's default target is baseline x86-64 (SSE2), which would leave AVX2 and AVX-512 unused.
#include <algorithm>
#include <cstdint>

#include "gpu/cpu_parallel.hpp"
#include "gpu/cpu_vector_math.hpp"
#include "gpu/kernels_cpu.hpp"

namespace ember::gpu {

namespace {

// One layer's geometry, shared by all its planes.
struct Geometry {
  int64_t h, w, ho, wo;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t oh0, oh1, ow0, ow1;  // the interior: outputs [oh0, oh1) x [ow0, ow1) read no padding
};

// [lo, hi) of the outputs along one dim whose whole window o*s - p + [0, (k-1)*d] lies in [0, n);
// empty (lo == hi) when the window never fits.
void interior(int64_t n, int64_t out, int64_t k, int64_t s, int64_t p, int64_t d, int64_t& lo, int64_t& hi) {
  lo = std::min(out, (p + s - 1) / s);
  const int64_t last = n - 1 + p - (k - 1) * d;  // the largest o*s whose window ends inside
  hi = last < 0 ? 0 : std::min(out, last / s + 1);
  hi = std::max(hi, lo);
}

// One output with bounds checks (the border).
inline float checked(const float* x, const float* wt, float bias, const Geometry& g, int64_t oh, int64_t ow) {
  float acc = bias;
  for (int64_t i = 0; i < g.kh; ++i) {
    const int64_t ih = oh * g.sh - g.ph + i * g.dh;
    if (ih < 0 || ih >= g.h) continue;
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t iw = ow * g.sw - g.pw + j * g.dw;
      if (iw >= 0 && iw < g.w) acc += wt[i * g.kw + j] * x[ih * g.w + iw];
    }
  }
  return acc;
}

// Interior outputs [ow0, ow1) of row oh, no checks. K > 0: a KxK kernel at stride S, dilation 1,
// the taps unrolled and held in registers; K == 0: any geometry, from g at run time.
template <int K, int S>
[[gnu::always_inline]] inline void interior_row(const float* x, const float* wt, float bias, const Geometry& g,
                                                int64_t oh, float* y) {
  const int64_t base = (oh * g.sh - g.ph) * g.w - g.pw;  // x's index of output (oh, 0)'s first tap
  if constexpr (K > 0) {
    float tap[K * K];
    for (int t = 0; t < K * K; ++t) tap[t] = wt[t];
    const int64_t w = g.w;
#pragma omp simd
    for (int64_t ow = g.ow0; ow < g.ow1; ++ow) {
      const float* at = x + (base + ow * S);  // inside the plane: ow >= ow0
      float acc = bias;
      for (int i = 0; i < K; ++i)
        for (int j = 0; j < K; ++j) acc += tap[i * K + j] * at[i * w + j];
      y[ow] = acc;
    }
  } else {
    // Tap by tap over the row: each pass is a multiply-add of a contiguous (stride 1) or strided
    // input run into the outputs, which stay in L1.
    for (int64_t ow = g.ow0; ow < g.ow1; ++ow) y[ow] = bias;
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const float v = wt[i * g.kw + j];
        const int64_t at = base + i * g.dh * g.w + j * g.dw, s = g.sw;
#pragma omp simd
        for (int64_t ow = g.ow0; ow < g.ow1; ++ow) y[ow] += v * x[at + ow * s];
      }
  }
}

template <int K, int S>
[[gnu::always_inline]] inline void plane(const float* x, const float* wt, float bias, const Geometry& g, float* y) {
  for (int64_t oh = 0; oh < g.ho; ++oh) {
    float* row = y + oh * g.wo;
    if (oh < g.oh0 || oh >= g.oh1) {
      for (int64_t ow = 0; ow < g.wo; ++ow) row[ow] = checked(x, wt, bias, g, oh, ow);
      continue;
    }
    for (int64_t ow = 0; ow < g.ow0; ++ow) row[ow] = checked(x, wt, bias, g, oh, ow);
    interior_row<K, S>(x, wt, bias, g, oh, row);
    for (int64_t ow = g.ow1; ow < g.wo; ++ow) row[ow] = checked(x, wt, bias, g, oh, ow);
  }
}

// One output plane y [ho, wo] from its input plane x [h, w] and its kh*kw weights.
EMBER_SIMD_CLONES void depthwise_plane(const float* x, const float* wt, float bias, const Geometry& g, float* y) {
  const bool square = g.kh == g.kw && g.sh == g.sw && g.dh == 1 && g.dw == 1;
  const int64_t key = square && (g.sh == 1 || g.sh == 2) ? g.kh * 10 + g.sh : 0;
  switch (key) {
    case 31: return plane<3, 1>(x, wt, bias, g, y);
    case 32: return plane<3, 2>(x, wt, bias, g, y);
    case 51: return plane<5, 1>(x, wt, bias, g, y);
    case 52: return plane<5, 2>(x, wt, bias, g, y);
    case 71: return plane<7, 1>(x, wt, bias, g, y);
    case 72: return plane<7, 2>(x, wt, bias, g, y);
    default: return plane<0, 0>(x, wt, bias, g, y);
  }
}

}  // namespace

void cpu_conv2d_depthwise(const CpuKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const Shape& ys = k.args->output.desc.shape;
  const int64_t batch = xs[0], c = xs[1], o = ys[1];
  const int64_t m = o / c;  // output channels per input channel
  Geometry g{};
  g.h = xs[2], g.w = xs[3], g.ho = ys[2], g.wo = ys[3];
  g.kh = a.kernel[0], g.kw = a.kernel[1], g.sh = a.stride[0], g.sw = a.stride[1];
  g.ph = a.padding[0], g.pw = a.padding[1], g.dh = a.dilation[0], g.dw = a.dilation[1];
  interior(g.h, g.ho, g.kh, g.sh, g.ph, g.dh, g.oh0, g.oh1);
  interior(g.w, g.wo, g.kw, g.sw, g.pw, g.dw, g.ow0, g.ow1);
  const int64_t plane_in = g.h * g.w, plane_out = g.ho * g.wo, taps = g.kh * g.kw;
  const float* x = k.in_f32(0);
  const float* wt = k.w_f32(0);
  const float* bias = k.w_f32(1);
  float* y = k.out_f32();
  parallel_for(batch * o, batch * o * plane_out * taps > 32768, [&](int64_t bo) {
    const int64_t b = bo / o, oc = bo % o;
    depthwise_plane(x + (b * c + oc / m) * plane_in, wt + oc * taps, bias ? bias[oc] : 0.f, g, y + bo * plane_out);
  });
}

}  // namespace ember::gpu
