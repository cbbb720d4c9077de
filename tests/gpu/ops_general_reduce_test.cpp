// Conformance on SimDevice of the general ops that reduce or normalise (reduce with every ReduceFn,
// argmax, topk, group_norm, rms_norm), conv_transpose2d, and what the general-op contract added to
// older ops (pooling's ceil_mode, dilation and count_include_pad; log-softmax; attention's
// key-padding mask). Each runs as a one-layer model against a naive loop written here from the
// definition of numpy, ONNX or PyTorch (and PyTorch's printed output where stated). Tolerance: 1e-5
// relative to the largest output; indices exact.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/gpu/ops_general_test_util.hpp"

namespace ember::gpu {
namespace ops_general_reduce_test {

using namespace testing;

TEST(OpsGeneral, ReduceEveryFunctionOverAnyAxes) {
  TempDir dir;
  const Shape xs{2, 3, 4, 5};
  const std::vector<std::vector<int64_t>> axes_cases = {{}, {1}, {-1}, {0, 2}, {1, 2}, {0, 3}, {0, 1, 2, 3}};
  for (int f = 0; f < static_cast<int>(ReduceFn::count); ++f) {
    const auto fn = static_cast<ReduceFn>(f);
    for (const auto& axes : axes_cases) {
      for (bool keep : {true, false}) {
        SCOPED_TRACE(std::string(reduce_fn_name(fn)) + " axes " + nlohmann::json(axes).dump() + " keepdims " +
                     std::to_string(keep));
        HostTensor x = fn == ReduceFn::prod ? randf(xs, 1, 0.8f, 1.2f) : randf(xs, 1);
        LayerRun r;
        ASSERT_NO_FATAL_FAILURE(run_layer(
            r, dir, OpKind::reduce,
            attrs_of(OpKind::reduce, {{"fn", reduce_fn_name(fn)}, {"axes", axes}, {"keepdims", keep}}), {x}));
        bool reduced[4] = {axes.empty(), axes.empty(), axes.empty(), axes.empty()};
        for (int64_t a : axes) reduced[a < 0 ? a + 4 : a] = true;
        // Group the input's elements by the output element they reduce into (kept dims in order).
        std::vector<std::vector<double>> groups(static_cast<size_t>(r.out.desc.shape.numel()));
        for (int64_t i = 0; i < xs.numel(); ++i) {
          int64_t o = 0, rest = i, idx[4];
          for (int d = 3; d >= 0; --d) idx[d] = rest % xs[d], rest /= xs[d];
          for (int d = 0; d < 4; ++d)
            if (!reduced[d]) o = o * xs[d] + idx[d];
          groups[static_cast<size_t>(o)].push_back(x.as<float>()[i]);
        }
        std::vector<float> want;
        for (const auto& g : groups) {
          double s = 0, p = 1, sq = 0, l1 = 0, mx = -1e300, mn = 1e300, lse = 0;
          for (double v : g) s += v, p *= v, sq += v * v, l1 += std::abs(v), mx = std::max(mx, v), mn = std::min(mn, v);
          for (double v : g) lse += std::exp(v);
          const double n = static_cast<double>(g.size());
          const double results[] = {s, s / n, mx, mn, p, sq, l1, std::sqrt(sq), std::log(lse)};
          want.push_back(static_cast<float>(results[f]));
        }
        expect_close(r.out, want);
      }
    }
  }
}

TEST(OpsGeneral, ReduceEmptyAndNoAxes) {
  TempDir dir;
  LayerRun r;
  // An empty reduced dim (the kernel alone: a model cannot declare one): sum 0, prod 1, mean NaN
  // (numpy), log-sum-exp -inf.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::pair<const char*, float> empty[] = {{"sum", 0.f}, {"prod", 1.f}, {"mean", nan}, {"log_sum_exp", -inf}};
  for (const auto& [fn, want] : empty) {
    SCOPED_TRACE(fn);
    expect_close(run_kernel(OpKind::reduce, attrs_of(OpKind::reduce, {{"fn", fn}, {"axes", {1}}, {"keepdims", false}}),
                            {floats(Shape{2, 0}, {})}),
                 {want, want});
  }
  // noop_with_empty_axes: the input unchanged.
  HostTensor x = randf(Shape{3, 4}, 2);
  ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::reduce,
                                    attrs_of(OpKind::reduce, {{"fn", "sum"}, {"noop_with_empty_axes", true}}), {x}));
  expect_close(r.out, values<float>(x), 0);
}

TEST(OpsGeneral, ArgmaxTiesAndLastIndex) {
  TempDir dir;
  // [2, 4] rows with ties: argmax along 1 picks the first (or last) of equal maxima.
  const HostTensor x = floats(Shape{2, 4}, {1, 5, 5, 0, -1, -3, -1, -3});
  struct Case {
    nlohmann::json attrs;
    Shape shape;
    std::vector<int64_t> want;
  };
  const Case cases[] = {
      {{{"dim", 1}}, Shape{2, 1}, {1, 0}},
      {{{"dim", -1}, {"select_last_index", true}, {"keepdims", false}}, Shape{2}, {2, 2}},
      {{{"dim", 1}, {"fn", "min"}}, Shape{2, 1}, {3, 1}},
      {{{"dim", 1}, {"fn", "min"}, {"select_last_index", true}}, Shape{2, 1}, {3, 3}},
      {{{"dim", 0}, {"keepdims", false}}, Shape{4}, {0, 0, 0, 0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.attrs.dump());
    LayerRun r;
    ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::argmax, attrs_of(OpKind::argmax, c.attrs), {x}));
    EXPECT_EQ(r.out.desc.shape, c.shape);
    expect_equal(r.out, c.want);
  }
}

TEST(OpsGeneral, TopkLargestSmallestValuesIndices) {
  TempDir dir;
  // x [2, 5, 3] along dim 1, values with ties (integers in 0..3).
  const Shape xs{2, 5, 3};
  HostTensor x = randi(DType::f32, xs, 3, 0, 3);
  for (bool largest : {true, false}) {
    for (bool values_out : {true, false}) {
      SCOPED_TRACE(std::to_string(largest) + std::to_string(values_out));
      LayerRun r;
      ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::topk,
                                        attrs_of(OpKind::topk, {{"k", 3}, {"dim", -2}, {"largest", largest},
                                                                {"output", values_out ? "values" : "indices"}}),
                                        {x}));
      ASSERT_EQ(r.out.desc.shape, (Shape{2, 3, 3}));
      for (int b = 0; b < 2; ++b)
        for (int c = 0; c < 3; ++c) {
          std::vector<std::pair<float, int64_t>> col;
          for (int64_t i = 0; i < 5; ++i) col.push_back({x.as<float>()[(b * 5 + i) * 3 + c], i});
          std::stable_sort(col.begin(), col.end(), [&](auto p, auto q) { return largest ? p.first > q.first : p.first < q.first; });
          for (int i = 0; i < 3; ++i) {
            const int64_t o = (b * 3 + i) * 3 + c;
            if (values_out) EXPECT_EQ(r.out.as<float>()[o], col[static_cast<size_t>(i)].first) << o;
            else EXPECT_EQ(r.out.as<int64_t>()[o], col[static_cast<size_t>(i)].second) << o;
          }
        }
    }
  }
}

TEST(OpsGeneral, GroupNormAndRmsNorm) {
  TempDir dir;
  for (int64_t groups : {1, 2, 6}) {  // layer-norm-like, grouped, instance norm
    SCOPED_TRACE(groups);
    const Shape xs{2, 6, 3, 4};
    HostTensor x = randf(xs, 1);
    LayerRun r;
    ASSERT_NO_FATAL_FAILURE(run_layer(
        r, dir, OpKind::group_norm,
        attrs_of(OpKind::group_norm, {{"num_groups", groups}, {"num_features", 6}, {"eps", 1e-3}}), {x}));
    const int64_t block = 6 / groups * 12;
    std::vector<float> want(static_cast<size_t>(xs.numel()));
    for (int64_t g = 0; g < 2 * groups; ++g) {
      const float* p = x.as<float>() + g * block;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < block; ++i) mean += p[i] / static_cast<double>(block);
      for (int64_t i = 0; i < block; ++i) var += (p[i] - mean) * (p[i] - mean) / static_cast<double>(block);
      for (int64_t i = 0; i < block; ++i) {
        const int64_t ch = (g % groups) * (6 / groups) + i / 12;
        want[static_cast<size_t>(g * block + i)] =
            static_cast<float>((p[i] - mean) / std::sqrt(var + 1e-3) * r.weight(0)[ch] + r.weight(1)[ch]);
      }
    }
    expect_close(r.out, want);
  }
  HostTensor x = randf(Shape{3, 2, 37}, 2);
  LayerRun r;
  ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::rms_norm,
                                    attrs_of(OpKind::rms_norm, {{"normalized_shape", 37}, {"eps", 1e-6}}), {x}));
  std::vector<float> want;
  for (int64_t row = 0; row < 6; ++row) {
    double sq = 0;
    for (int i = 0; i < 37; ++i) sq += std::pow(x.as<float>()[row * 37 + i], 2) / 37;
    for (int i = 0; i < 37; ++i)
      want.push_back(static_cast<float>(x.as<float>()[row * 37 + i] / std::sqrt(sq + 1e-6) * r.weight(0)[i]));
  }
  expect_close(r.out, want);
}

TEST(OpsGeneral, ConvTranspose2dScattersLikePyTorch) {
  TempDir dir;
  struct Case {
    int64_t c, o, k, stride, pad, dil, out_pad, groups;
    bool bias;
  };
  const Case cases[] = {{3, 4, 3, 2, 1, 1, 1, 1, true},  // the usual 2x upsampling
                        {4, 6, 2, 2, 0, 1, 0, 2, false},  // grouped
                        {2, 3, 3, 1, 1, 2, 0, 1, true},  // dilated
                        {4, 4, 3, 3, 2, 1, 2, 4, true}};  // depthwise, output padding
  for (const Case& p : cases) {
    SCOPED_TRACE(nlohmann::json({p.c, p.o, p.k, p.stride, p.pad, p.dil, p.out_pad, p.groups}).dump());
    const int64_t n = 2, h = 5, w = 4;
    HostTensor x = randf(Shape{n, p.c, h, w}, 1);
    LayerRun r;
    ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::conv_transpose2d,
                                      attrs_of(OpKind::conv_transpose2d,
                                               {{"in_channels", p.c}, {"out_channels", p.o}, {"kernel_size", p.k},
                                                {"stride", p.stride}, {"padding", p.pad}, {"dilation", p.dil},
                                                {"output_padding", p.out_pad}, {"groups", p.groups}, {"bias", p.bias}}),
                                      {x}));
    const Shape& ys = r.out.desc.shape;
    const int64_t ho = ys[2], wo = ys[3], cg = p.c / p.groups, og = p.o / p.groups;
    EXPECT_EQ(ho, (h - 1) * p.stride - 2 * p.pad + p.dil * (p.k - 1) + p.out_pad + 1);
    std::vector<double> acc(static_cast<size_t>(ys.numel()));
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oc = 0; oc < p.o; ++oc)
        for (int64_t i = 0; i < ho * wo; ++i) acc[static_cast<size_t>((b * p.o + oc) * ho * wo + i)] = p.bias ? r.weight(1)[oc] : 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ic = 0; ic < p.c; ++ic)
        for (int64_t ih = 0; ih < h; ++ih)
          for (int64_t iw = 0; iw < w; ++iw)
            for (int64_t oc = 0; oc < og; ++oc)
              for (int64_t ki = 0; ki < p.k; ++ki)
                for (int64_t kj = 0; kj < p.k; ++kj) {
                  const int64_t oh = ih * p.stride - p.pad + ki * p.dil, ow = iw * p.stride - p.pad + kj * p.dil;
                  if (oh < 0 || oh >= ho || ow < 0 || ow >= wo) continue;
                  const int64_t out_c = ic / cg * og + oc;
                  acc[static_cast<size_t>(((b * p.o + out_c) * ho + oh) * wo + ow)] +=
                      x.as<float>()[((b * p.c + ic) * h + ih) * w + iw] * r.weight(0)[((ic * og + oc) * p.k + ki) * p.k + kj];
                }
    expect_close(r.out, std::vector<float>(acc.begin(), acc.end()));
  }
}

TEST(OpsGeneral, PoolingCeilModeDilationAndDivisor) {
  TempDir dir;
  // PyTorch: nn.AvgPool2d(3, 2, 1, ceil_mode=True)(torch.ones(1, 1, 4, 4)), and with
  // count_include_pad=False (every window averages ones only).
  LayerRun r;
  LayerAttrs a = attrs_of(OpKind::avg_pool2d, {{"kernel_size", 3}, {"stride", 2}, {"padding", 1}, {"ceil_mode", true}});
  ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::avg_pool2d, a, {floats(Shape{1, 1, 4, 4}, std::vector<float>(16, 1.f))}));
  expect_close(r.out, {4.f / 9, 6.f / 9, 2.f / 6, 6.f / 9, 1.f, 3.f / 6, 2.f / 6, 3.f / 6, 1.f / 4});
  a.count_include_pad = false;
  ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::avg_pool2d, a, {floats(Shape{1, 1, 4, 4}, std::vector<float>(16, 1.f))}));
  expect_close(r.out, std::vector<float>(9, 1.f));
  // Random input against PyTorch's loops: max with dilation, both pools with ceil_mode.
  for (OpKind op : {OpKind::max_pool2d, OpKind::avg_pool2d}) {
    for (bool include_pad : {true, false}) {
      SCOPED_TRACE(std::string(op_name(op)) + (include_pad ? " include_pad" : ""));
      nlohmann::json j = {{"kernel_size", 3}, {"stride", 2}, {"padding", 1}, {"ceil_mode", true}};
      if (op == OpKind::max_pool2d) j["dilation"] = include_pad ? 2 : 1;
      else j["count_include_pad"] = include_pad;
      const LayerAttrs pa = attrs_of(op, j);
      const int64_t h = 8, w = 7, d = pa.dilation[0];
      HostTensor x = randf(Shape{2, 3, h, w}, 5);
      ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, op, pa, {x}));
      const int64_t ho = r.out.desc.shape[2], wo = r.out.desc.shape[3];
      std::vector<float> want;
      for (int64_t p = 0; p < 6; ++p)
        for (int64_t i = 0; i < ho; ++i)
          for (int64_t j2 = 0; j2 < wo; ++j2) {
            const int64_t hs = i * 2 - 1, ws = j2 * 2 - 1;
            double m = -1e300, s = 0;
            int64_t real = 0;
            for (int64_t ki = 0; ki < 3; ++ki)
              for (int64_t kj = 0; kj < 3; ++kj) {
                const int64_t y = hs + ki * d, xx = ws + kj * d;
                if (y < 0 || y >= h || xx < 0 || xx >= w) continue;
                m = std::max(m, static_cast<double>(x.as<float>()[(p * h + y) * w + xx]));
                s += x.as<float>()[(p * h + y) * w + xx];
                ++real;
              }
            const int64_t padded = (std::min(hs + 3, h + 1) - hs) * (std::min(ws + 3, w + 1) - ws);
            want.push_back(static_cast<float>(op == OpKind::max_pool2d ? m : s / (include_pad ? padded : real)));
          }
      expect_close(r.out, want);
    }
  }
}

TEST(OpsGeneral, LogSoftmaxOnLastAndMiddleDims) {
  TempDir dir;
  for (int dim : {-1, 1}) {
    SCOPED_TRACE(dim);
    HostTensor x = randf(Shape{2, 5, 3}, 1, -30.f, 30.f);
    LayerRun r;
    ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::softmax, attrs_of(OpKind::softmax, {{"dim", dim}, {"log", true}}), {x}));
    const int64_t n = dim == -1 ? 3 : 5, inner = dim == -1 ? 1 : 3;
    std::vector<float> want(30);
    for (int64_t i = 0; i < 30; ++i) {
      const int64_t base = i / (n * inner) * n * inner + i % inner;
      double mx = -1e300, s = 0;
      for (int64_t q = 0; q < n; ++q) mx = std::max(mx, static_cast<double>(x.as<float>()[base + q * inner]));
      for (int64_t q = 0; q < n; ++q) s += std::exp(x.as<float>()[base + q * inner] - mx);
      want[static_cast<size_t>(i)] = static_cast<float>(x.as<float>()[i] - mx - std::log(s));
    }
    expect_close(r.out, want);
  }
}

// torch.nn.MultiheadAttention with key_padding_mask = (mask == 0); a row whose keys are all masked
// has a zero context (so its output is the out_proj bias), where PyTorch would give NaN.
TEST(OpsGeneral, AttentionKeyPaddingMask) {
  TempDir dir;
  const int64_t b = 3, s = 4, e = 8, h = 2, d = e / h;
  const std::vector<int64_t> keep = {1, 1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0};  // image 2: every key masked
  for (DType dt : {DType::u8, DType::i64, DType::f32}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (causal ? " causal" : ""));
      HostTensor mask = randi(dt, Shape{b, s}, 1, 0, 0);
      for (int64_t i = 0; i < b * s; ++i) {
        if (dt == DType::u8) mask.as<uint8_t>()[i] = static_cast<uint8_t>(keep[static_cast<size_t>(i)] * 3);
        if (dt == DType::i64) mask.as<int64_t>()[i] = keep[static_cast<size_t>(i)];
        if (dt == DType::f32) mask.as<float>()[i] = keep[static_cast<size_t>(i)] ? 1.f : -0.f;
      }
      HostTensor x = randf(Shape{b, s, e}, 2);
      LayerRun r;
      ASSERT_NO_FATAL_FAILURE(run_layer(
          r, dir, OpKind::attention,
          attrs_of(OpKind::attention, {{"embed_dim", e}, {"num_heads", h}, {"causal", causal}}), {x, mask}));
      std::vector<double> qkv(static_cast<size_t>(b * s * 3 * e)), ctx(static_cast<size_t>(b * s * e), 0.0);
      for (int64_t t = 0; t < b * s; ++t)
        for (int64_t o = 0; o < 3 * e; ++o) {
          double acc = r.weight(1)[o];
          for (int64_t q = 0; q < e; ++q) acc += x.as<float>()[t * e + q] * r.weight(0)[o * e + q];
          qkv[static_cast<size_t>(t * 3 * e + o)] = acc;
        }
      for (int64_t bb = 0; bb < b; ++bb)
        for (int64_t hh = 0; hh < h; ++hh)
          for (int64_t i = 0; i < s; ++i) {
            std::vector<double> p(static_cast<size_t>(s), 0.0);
            double mx = -1e300, sum = 0;
            auto kept = [&](int64_t j) { return (!causal || j <= i) && keep[static_cast<size_t>(bb * s + j)]; };
            for (int64_t j = 0; j < s; ++j) {
              if (!kept(j)) continue;
              double dot = 0;
              for (int64_t q = 0; q < d; ++q)
                dot += qkv[static_cast<size_t>((bb * s + i) * 3 * e + hh * d + q)] *
                       qkv[static_cast<size_t>((bb * s + j) * 3 * e + e + hh * d + q)];
              p[static_cast<size_t>(j)] = dot / std::sqrt(static_cast<double>(d));
              mx = std::max(mx, p[static_cast<size_t>(j)]);
            }
            for (int64_t j = 0; j < s; ++j)
              if (kept(j)) sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx));
            for (int64_t q = 0; q < d; ++q)
              for (int64_t j = 0; j < s; ++j)
                if (kept(j))
                  ctx[static_cast<size_t>((bb * s + i) * e + hh * d + q)] +=
                      p[static_cast<size_t>(j)] / sum * qkv[static_cast<size_t>((bb * s + j) * 3 * e + 2 * e + hh * d + q)];
          }
      std::vector<float> want(static_cast<size_t>(b * s * e));
      for (int64_t t = 0; t < b * s; ++t)
        for (int64_t o = 0; o < e; ++o) {
          double acc = r.weight(3)[o];
          for (int64_t q = 0; q < e; ++q) acc += ctx[static_cast<size_t>(t * e + q)] * r.weight(2)[o * e + q];
          want[static_cast<size_t>(t * e + o)] = static_cast<float>(acc);
        }
      expect_close(r.out, want);
    }
  }
}

}  // namespace ops_general_reduce_test
}  // namespace ember::gpu
