// conv2d's direct depthwise plan (gpu/kernels_cpu_depthwise.cpp) against a naive loop written here
// from PyTorch's definition of a grouped convolution, over a grid of geometries: every kernel size
// the kernel unrolls (3, 5, 7) and one it does not (1), strides 1 and 2, dilations 1 and 2,
// symmetric and different height/width pads, channel multipliers 1 and 2, batch 1 and 3, odd sizes,
// rows longer than one vector of any ISA plus its tail, images smaller than the kernel's reach, with
// and without bias; 1-d convolutions (height 1) and float16 weights. Tolerance: 1e-5 relative to
// the largest output, as tests/gpu/ops_test.cpp's Conv.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/half.hpp"
#include "tests/gpu/ops_general_test_util.hpp"

namespace ember::gpu {
namespace depthwise_test {

using testing::expect_close;
using testing::randf;
using testing::must;
using testing::run_kernel;

struct Geometry {
  int64_t c, m, h, w, kh, kw, sh, sw, ph, pw, dh, dw;
  bool bias;
  std::string name() const {
    auto n = [](int64_t v) { return std::to_string(v); };
    return "c" + n(c) + "m" + n(m) + " " + n(h) + "x" + n(w) + " k" + n(kh) + "x" + n(kw) + " s" + n(sh) + "," + n(sw) +
           " p" + n(ph) + "," + n(pw) + " d" + n(dh) + "," + n(dw) + (bias ? " bias" : "");
  }
};

LayerAttrs attrs_of(const Geometry& g) {
  LayerAttrs a;
  a.in_channels = g.c;
  a.out_channels = g.c * g.m;
  a.groups = g.c;
  a.kernel[0] = g.kh, a.kernel[1] = g.kw;
  a.stride[0] = g.sh, a.stride[1] = g.sw;
  a.padding[0] = g.ph, a.padding[1] = g.pw;
  a.dilation[0] = g.dh, a.dilation[1] = g.dw;
  a.bias = g.bias;
  return a;
}

// The output sizes PyTorch gives; <= 0 when the kernel's reach exceeds the padded image.
int64_t out_size(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d) {
  const int64_t reach = n + 2 * p - d * (k - 1) - 1;
  return reach < 0 ? 0 : reach / s + 1;
}

// y[b, oc] = bias[oc] + sum_{i, j} w[oc, 0, i, j] x[b, oc / m, ...], in double.
std::vector<float> naive(const Geometry& g, int64_t batch, const float* x, const float* w, const float* bias) {
  const int64_t o = g.c * g.m, ho = out_size(g.h, g.kh, g.sh, g.ph, g.dh), wo = out_size(g.w, g.kw, g.sw, g.pw, g.dw);
  std::vector<float> y(static_cast<size_t>(batch * o * ho * wo));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t oh = 0; oh < ho; ++oh)
        for (int64_t ow = 0; ow < wo; ++ow) {
          double s = bias ? bias[oc] : 0.0;
          for (int64_t i = 0; i < g.kh; ++i)
            for (int64_t j = 0; j < g.kw; ++j) {
              const int64_t ih = oh * g.sh - g.ph + i * g.dh, iw = ow * g.sw - g.pw + j * g.dw;
              if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
              s += static_cast<double>(x[((b * g.c + oc / g.m) * g.h + ih) * g.w + iw]) * w[(oc * g.kh + i) * g.kw + j];
            }
          y[static_cast<size_t>(((b * o + oc) * ho + oh) * wo + ow)] = static_cast<float>(s);
        }
  return y;
}

// Runs the conv2d kernel on g at batch 1 and 3 and compares with naive().
void expect_matches_naive(const Geometry& g) {
  SCOPED_TRACE(g.name());
  const LayerAttrs a = attrs_of(g);
  const int64_t o = g.c * g.m;
  for (int64_t batch : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const HostTensor x = randf(Shape{batch, g.c, g.h, g.w}, 7 + static_cast<uint64_t>(batch));
    const HostTensor w = randf(Shape{o, 1, g.kh, g.kw}, 11);
    const HostTensor bias = randf(Shape{o}, 13);
    std::vector<HostTensor> weights{w};
    if (g.bias) weights.push_back(bias);
    const HostTensor y = run_kernel(OpKind::conv2d, a, {x}, weights);
    ASSERT_NO_FATAL_FAILURE(
        expect_close(y, naive(g, batch, x.as<float>(), w.as<float>(), g.bias ? bias.as<float>() : nullptr)));
  }
}

TEST(DepthwiseConv, IsThePlanWhenEveryGroupReadsOneChannelAndNeedsNoScratch) {
  const Geometry g{6, 2, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, true};
  const LayerAttrs a = attrs_of(g);
  const TensorDesc x{DType::f32, Shape{2, 6, 9, 9}};
  EXPECT_EQ(conv_plan(a, x.shape), ConvPlan::depthwise);
  EXPECT_EQ(workspace_bytes(OpKind::conv2d, a, {&x, 1}), 0u);
  LayerAttrs grouped = a;  // two channels per group: the GEMM path
  grouped.groups = 3;
  EXPECT_EQ(conv_plan(grouped, x.shape), ConvPlan::per_image);
  LayerAttrs single = attrs_of({1, 4, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, true});  // one channel, groups 1: one GEMM
  EXPECT_EQ(conv_plan(single, Shape{1, 1, 9, 9}), ConvPlan::per_image);
}

TEST(DepthwiseConv, MatchesANaiveLoopOverAGridOfGeometries) {
  for (int64_t k : {1, 3, 5, 7})
    for (int64_t s : {1, 2})
      for (int64_t d : {1, 2})
        for (int64_t m : {1, 2})
          for (bool bias : {false, true}) {
            const int64_t half = k / 2 * d;
            // same padding; none; height and width padded differently; more than the reach
            const int64_t pads[][2] = {{half, half}, {0, 0}, {half, half + 1}, {1, 0}, {half + 2, half + 1}};
            for (const auto& p : pads)
              for (const auto& hw : {std::pair<int64_t, int64_t>{11, 13}, {5, 37}, {3, 4}}) {
                const Geometry g{3, m, hw.first, hw.second, k, k, s, s, p[0], p[1], d, d, bias};
                if (out_size(g.h, k, s, p[0], d) < 1 || out_size(g.w, k, s, p[1], d) < 1) continue;
                ASSERT_NO_FATAL_FAILURE(expect_matches_naive(g));
              }
          }
}

TEST(DepthwiseConv, MixedStridesAndDilationsPerDim) {
  ASSERT_NO_FATAL_FAILURE(expect_matches_naive({4, 1, 12, 17, 3, 5, 2, 1, 1, 2, 1, 2, true}));
  ASSERT_NO_FATAL_FAILURE(expect_matches_naive({2, 3, 9, 20, 5, 3, 1, 2, 2, 0, 2, 1, false}));
}

// Conv1d as the importer lowers it: height 1, a 1 x k kernel.
TEST(DepthwiseConv, OneDimensional) {
  for (int64_t k : {3, 5})
    for (int64_t s : {1, 2})
      ASSERT_NO_FATAL_FAILURE(expect_matches_naive({5, 1, 1, 41, 1, k, 1, s, 0, k / 2, 1, 1, true}));
}

// float16 weights: run_cpu_kernel widens them into the workspace room; the answer is the float32
// kernel's on the widened values.
TEST(DepthwiseConv, HalfPrecisionWeightsAreWidened) {
  const Geometry g{4, 1, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1, true};
  LayerAttrs a = attrs_of(g);
  a.weights = DType::f16;
  const HostTensor x = randf(Shape{2, 4, 14, 14}, 5);
  const HostTensor w32 = randf(Shape{4, 1, 3, 3}, 6), b32 = randf(Shape{4}, 8);
  auto narrow = [](const HostTensor& t, std::vector<float>& widened) {
    HostTensor h = must(HostTensor::allocate("w", {DType::f16, t.desc.shape}), "allocating a tensor");
    for (int64_t i = 0; i < t.desc.shape.numel(); ++i) {
      h.as<uint16_t>()[i] = f32_to_f16(t.as<float>()[i]);
      widened.push_back(f16_to_f32(h.as<uint16_t>()[i]));
    }
    return h;
  };
  std::vector<float> w, b;
  const HostTensor w16 = narrow(w32, w), b16 = narrow(b32, b);
  const HostTensor y = run_kernel(OpKind::conv2d, a, {x}, {w16, b16});
  ASSERT_NO_FATAL_FAILURE(expect_close(y, naive(g, 2, x.as<float>(), w.data(), b.data())));
}

}  // namespace depthwise_test
}  // namespace ember::gpu
