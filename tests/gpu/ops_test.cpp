// Op conformance on SimDevice: every op runs as a one-layer model and is compared with a naive,
// obviously-correct loop written here from PyTorch's definition of the op. (The PyTorch models
// themselves are compared in tests/reference/.) Tolerance: 1e-5 relative to the largest output.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "gpu/executor.hpp"
#include "model/model_builder.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::gpu {
namespace ops_test {

using testing::TempDir;

struct OneLayer {
  std::shared_ptr<const Model> model;
  std::vector<HostTensor> inputs;
  HostTensor output;
  // Weight `i` of the layer (kernel order) as floats.
  const float* weight(int i) const {
    const TensorInfo* t = model->layer_weights(0)[static_cast<size_t>(i)];
    return t ? reinterpret_cast<const float*>(model->data() + t->data.offset) : nullptr;
  }
};

// Builds a model of one layer over inputs of the given descs, runs it, fills `r` with everything.
// Every step is asserted: call it as ASSERT_NO_FATAL_FAILURE(run_one(...)) so a failed build or run
// stops the test before anything reads `r`.
void run_one(OneLayer& r, const TempDir& dir, OpKind op, const LayerAttrs& attrs, const std::vector<TensorDesc>& in,
             int64_t vocab = 10) {
  ModelBuilder b("op", 5);
  std::vector<std::string> names;
  for (size_t i = 0; i < in.size(); ++i) names.push_back(b.input("x" + std::to_string(i), in[i].dtype, in[i].shape));
  b.add("y", op, attrs, names);
  std::vector<TensorDesc> descs(in.begin(), in.end());
  auto out = infer_output(op, attrs, descs);
  ASSERT_TRUE(out.ok()) << out.error().message();
  b.output("y", out->dtype, out->shape);
  const std::string path = dir / ("op" + std::to_string(static_cast<int>(op)));
  ASSERT_TRUE(b.write(path).ok());
  auto m = Model::load(path);
  ASSERT_TRUE(m.ok()) << m.error().message();
  r = OneLayer{*m, {}, {}};
  for (size_t i = 0; i < in.size(); ++i) {
    r.inputs.push_back(testing::random_tensor("x" + std::to_string(i), in[i], 100 + i, -2.f, 2.f, vocab));
  }
  auto d = testing::sim_device();
  auto ex = LayerExecutor::create(*d, r.model, {0, 1});
  ASSERT_TRUE(ex.ok()) << ex.error().message();
  auto y = (*ex)->run_host(r.inputs);
  ASSERT_TRUE(y.ok()) << y.error().message();
  ASSERT_FALSE(y->empty());
  r.output = (*y)[0];
}

void expect_close(const HostTensor& got, const std::vector<float>& want, double tol = 1e-5) {
  ASSERT_EQ(static_cast<size_t>(got.desc.shape.numel()), want.size());
  double diff = 0, scale = 1e-12;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(got.as<float>()[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::abs(want[i])));
  }
  EXPECT_LE(diff / scale, tol) << "max abs diff " << diff << " scale " << scale;
}

TEST(Ops, Linear) {
  TempDir dir;
  LayerAttrs a;
  a.in_features = 7;
  a.out_features = 5;
  OneLayer r;
  ASSERT_NO_FATAL_FAILURE(run_one(r, dir, OpKind::linear, a, {{DType::f32, Shape{2, 3, 7}}}));
  std::vector<float> want(30);
  for (int row = 0; row < 6; ++row)
    for (int o = 0; o < 5; ++o) {
      float s = r.weight(1)[o];
      for (int k = 0; k < 7; ++k) s += r.inputs[0].as<float>()[row * 7 + k] * r.weight(0)[o * 7 + k];
      want[static_cast<size_t>(row * 5 + o)] = s;
    }
  expect_close(r.output, want);
}

struct ConvCase {
  int64_t c, o, h, w, k, stride, pad, dil, groups;
  bool bias;
};

class Conv : public ::testing::TestWithParam<ConvCase> {};

// Batch 1 and 3 take different kernel plans (pointwise / per image vs batched columns).
TEST_P(Conv, MatchesDirectConvolution) {
  for (int64_t n : {1, 3}) {
    SCOPED_TRACE(n);
    const ConvCase p = GetParam();
    TempDir dir;
    LayerAttrs a;
    a.in_channels = p.c;
    a.out_channels = p.o;
    a.kernel[0] = a.kernel[1] = p.k;
    a.stride[0] = a.stride[1] = p.stride;
    a.padding[0] = a.padding[1] = p.pad;
    a.dilation[0] = a.dilation[1] = p.dil;
    a.groups = p.groups;
    a.bias = p.bias;
    OneLayer r;
    ASSERT_NO_FATAL_FAILURE(run_one(r, dir, OpKind::conv2d, a, {{DType::f32, Shape{n, p.c, p.h, p.w}}}));
    const Shape& ys = r.output.desc.shape;
    const int64_t ho = ys[2], wo = ys[3], cg = p.c / p.groups, og = p.o / p.groups;
    std::vector<float> want(static_cast<size_t>(ys.numel()));
    const float* x = r.inputs[0].as<float>();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oc = 0; oc < p.o; ++oc)
        for (int64_t i = 0; i < ho; ++i)
          for (int64_t j = 0; j < wo; ++j) {
            double s = p.bias ? r.weight(1)[oc] : 0.0;
            const int64_t g = oc / og;
            for (int64_t ic = 0; ic < cg; ++ic)
              for (int64_t ki = 0; ki < p.k; ++ki)
                for (int64_t kj = 0; kj < p.k; ++kj) {
                  const int64_t y = i * p.stride - p.pad + ki * p.dil, xx = j * p.stride - p.pad + kj * p.dil;
                  if (y < 0 || y >= p.h || xx < 0 || xx >= p.w) continue;
                  s += x[((b * p.c + g * cg + ic) * p.h + y) * p.w + xx] *
                       r.weight(0)[((oc * cg + ic) * p.k + ki) * p.k + kj];
                }
            want[static_cast<size_t>(((b * p.o + oc) * ho + i) * wo + j)] = static_cast<float>(s);
          }
    expect_close(r.output, want);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv,
                         ::testing::Values(ConvCase{3, 8, 9, 9, 3, 1, 1, 1, 1, true},     // same padding
                                           ConvCase{4, 6, 10, 7, 3, 2, 1, 1, 2, false},   // strided, grouped
                                           ConvCase{5, 4, 8, 8, 1, 1, 0, 1, 1, true},     // pointwise (no im2col)
                                           ConvCase{2, 4, 11, 11, 3, 1, 2, 2, 1, true},   // dilated
                                           ConvCase{6, 6, 7, 7, 3, 1, 1, 1, 6, true},     // depthwise
                                           ConvCase{3, 4, 12, 12, 7, 2, 3, 1, 1, false},  // ResNet stem
                                           ConvCase{8, 4, 6, 6, 1, 2, 0, 1, 1, false}),   // strided 1x1
                         [](const auto& info) {
                           const ConvCase& c = info.param;
                           return "c" + std::to_string(c.c) + "o" + std::to_string(c.o) + "k" + std::to_string(c.k) +
                                  "s" + std::to_string(c.stride) + "p" + std::to_string(c.pad) + "d" +
                                  std::to_string(c.dil) + "g" + std::to_string(c.groups);
                         });

TEST(Ops, BatchNorm) {
  TempDir dir;
  LayerAttrs a;
  a.num_features = 3;
  a.eps = 1e-3f;
  OneLayer r;
  ASSERT_NO_FATAL_FAILURE(run_one(r, dir, OpKind::batch_norm, a, {{DType::f32, Shape{2, 3, 4, 5}}}));
  std::vector<float> want(120);
  for (int i = 0; i < 120; ++i) {
    const int c = (i / 20) % 3;
    want[static_cast<size_t>(i)] =
        (r.inputs[0].as<float>()[i] - r.weight(2)[c]) / std::sqrt(r.weight(3)[c] + 1e-3f) * r.weight(0)[c] +
        r.weight(1)[c];
  }
  expect_close(r.output, want);
}

TEST(Ops, Activations) {
  TempDir dir;
  const TensorDesc d{DType::f32, Shape{3, 1000}};
  LayerAttrs exact, approx;
  approx.tanh_approximation = true;
  struct Case {
    OpKind op;
    LayerAttrs attrs;
    std::function<double(double)> f;
  };
  const double pi = std::acos(-1.0);
  const Case cases[] = {
      {OpKind::relu, {}, [](double x) { return std::max(0.0, x); }},
      {OpKind::tanh, {}, [](double x) { return std::tanh(x); }},
      {OpKind::gelu, exact, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {OpKind::gelu, approx,
       [pi](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / pi) * (x + 0.044715 * x * x * x))); }},
  };
  for (const auto& c : cases) {
    OneLayer r;
    ASSERT_NO_FATAL_FAILURE(run_one(r, dir, c.op, c.attrs, {d}));
    std::vector<float> want(3000);
    for (int i = 0; i < 3000; ++i) want[static_cast<size_t>(i)] = static_cast<float>(c.f(r.inputs[0].as<float>()[i]));
    SCOPED_TRACE(std::string(op_name(c.op)));
    expect_close(r.output, want);
  }
}

TEST(Ops, LayerNorm) {
  TempDir dir;
  LayerAttrs a;
  a.num_features = 37;
  a.eps = 1e-12f;
  OneLayer r;
  ASSERT_NO_FATAL_FAILURE(run_one(r, dir, OpKind::layer_norm, a, {{DType::f32, Shape{2, 3, 37}}}));
  std::vector<float> want(222);
  for (int row = 0; row < 6; ++row) {
    const float* x = r.inputs[0].as<float>() + row * 37;
    double mean = 0, var = 0;
    for (int i = 0; i < 37; ++i) mean += x[i];
    mean /= 37;
    for (int i = 0; i < 37; ++i) var += (x[i] - mean) * (x[i] - mean);
    var /= 37;
    for (int i = 0; i < 37; ++i)
      want[static_cast<size_t>(row * 37 + i)] =
          static_cast<float>((x[i] - mean) / std::sqrt(var + 1e-12) * r.weight(0)[i] + r.weight(1)[i]);
  }
  expect_close(r.output, want);
}

TEST(Ops, SoftmaxOnLastAndMiddleDims) {
  TempDir dir;
  for (int dim : {-1, 1}) {
    LayerAttrs a;
    a.dim = dim;
    OneLayer r;
    ASSERT_NO_FATAL_FAILURE(run_one(r, dir, OpKind::softmax, a, {{DType::f32, Shape{2, 5, 3}}}));
    std::vector<float> want(30);
    const float* x = r.inputs[0].as<float>();
    for (int b = 0; b < 2; ++b) {
      if (dim == -1) {
        for (int i = 0; i < 5; ++i) {
          double s = 0;
          for (int j = 0; j < 3; ++j) s += std::exp(x[(b * 5 + i) * 3 + j]);
          for (int j = 0; j < 3; ++j)
            want[static_cast<size_t>((b * 5 + i) * 3 + j)] = static_cast<float>(std::exp(x[(b * 5 + i) * 3 + j]) / s);
        }
      } else {
        for (int j = 0; j < 3; ++j) {
          double s = 0;
          for (int i = 0; i < 5; ++i) s += std::exp(x[(b * 5 + i) * 3 + j]);
          for (int i = 0; i < 5; ++i)
            want[static_cast<size_t>((b * 5 + i) * 3 + j)] = static_cast<float>(std::exp(x[(b * 5 + i) * 3 + j]) / s);
        }
      }
    }
    SCOPED_TRACE(dim);
    expect_close(r.output, want);
  }
}

TEST(Ops, AttentionWithAndWithoutCausalMask) {
  TempDir dir;
  for (bool causal : {false, true}) {
    const int64_t b = 2, s = 5, e = 8, h = 2, d = e / h;
    LayerAttrs a;
    a.embed_dim = e;
    a.num_heads = h;
    a.causal = causal;
    OneLayer r;
    ASSERT_NO_FATAL_FAILURE(run_one(r, dir, OpKind::attention, a, {{DType::f32, Shape{b, s, e}}}));
    const float* x = r.inputs[0].as<float>();
    std::vector<double> qkv(static_cast<size_t>(b * s * 3 * e)), ctx(static_cast<size_t>(b * s * e));
    for (int64_t t = 0; t < b * s; ++t)
      for (int64_t o = 0; o < 3 * e; ++o) {
        double acc = r.weight(1)[o];
        for (int64_t k = 0; k < e; ++k) acc += x[t * e + k] * r.weight(0)[o * e + k];
        qkv[static_cast<size_t>(t * 3 * e + o)] = acc;
      }
    for (int64_t bb = 0; bb < b; ++bb)
      for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t i = 0; i < s; ++i) {
          std::vector<double> p(static_cast<size_t>(s), 0.0);
          double mx = -1e300, sum = 0;
          const int64_t valid = causal ? i + 1 : s;
          for (int64_t j = 0; j < valid; ++j) {
            double dot = 0;
            for (int64_t k = 0; k < d; ++k)
              dot += qkv[static_cast<size_t>((bb * s + i) * 3 * e + hh * d + k)] *
                     qkv[static_cast<size_t>((bb * s + j) * 3 * e + e + hh * d + k)];
            p[static_cast<size_t>(j)] = dot / std::sqrt(static_cast<double>(d));
            mx = std::max(mx, p[static_cast<size_t>(j)]);
          }
          for (int64_t j = 0; j < valid; ++j)
            sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx));
          for (int64_t k = 0; k < d; ++k) {
            double acc = 0;
            for (int64_t j = 0; j < valid; ++j)
              acc +=
                  p[static_cast<size_t>(j)] / sum * qkv[static_cast<size_t>((bb * s + j) * 3 * e + 2 * e + hh * d + k)];
            ctx[static_cast<size_t>((bb * s + i) * e + hh * d + k)] = acc;
          }
        }
    std::vector<float> want(static_cast<size_t>(b * s * e));
    for (int64_t t = 0; t < b * s; ++t)
      for (int64_t o = 0; o < e; ++o) {
        double acc = r.weight(3)[o];
        for (int64_t k = 0; k < e; ++k) acc += ctx[static_cast<size_t>(t * e + k)] * r.weight(2)[o * e + k];
        want[static_cast<size_t>(t * e + o)] = static_cast<float>(acc);
      }
    SCOPED_TRACE(causal);
    expect_close(r.output, want);
  }
}

TEST(Ops, EmbeddingByIdAndByPosition) {
  TempDir dir;
  for (bool positional : {false, true}) {
    for (DType dt : {DType::i64, DType::i32}) {
      LayerAttrs a;
      a.num_embeddings = 10;
      a.embedding_dim = 6;
      a.positional = positional;
      OneLayer r;
      ASSERT_NO_FATAL_FAILURE(run_one(r, dir, OpKind::embedding, a, {{dt, Shape{3, 4}}}, 10));
      std::vector<float> want(72);
      for (int i = 0; i < 12; ++i) {
        const int64_t id =
            positional ? i % 4 : (dt == DType::i64 ? r.inputs[0].as<int64_t>()[i] : r.inputs[0].as<int32_t>()[i]);
        for (int k = 0; k < 6; ++k) want[static_cast<size_t>(i * 6 + k)] = r.weight(0)[id * 6 + k];
      }
      expect_close(r.output, want, 0);
    }
  }
}

TEST(Ops, Add) {
  TempDir dir;
  OneLayer r;
  ASSERT_NO_FATAL_FAILURE(run_one(r, dir, OpKind::add, {}, {{DType::f32, Shape{4, 33}}, {DType::f32, Shape{4, 33}}}));
  std::vector<float> want(132);
  for (int i = 0; i < 132; ++i) want[static_cast<size_t>(i)] = r.inputs[0].as<float>()[i] + r.inputs[1].as<float>()[i];
  expect_close(r.output, want, 0);
}

TEST(Ops, Pooling) {
  TempDir dir;
  for (OpKind op : {OpKind::max_pool2d, OpKind::avg_pool2d}) {
    LayerAttrs a;
    a.kernel[0] = a.kernel[1] = 3;
    a.stride[0] = a.stride[1] = 2;
    a.padding[0] = a.padding[1] = 1;
    OneLayer r;
    ASSERT_NO_FATAL_FAILURE(run_one(r, dir, op, a, {{DType::f32, Shape{2, 3, 9, 8}}}));
    const Shape& ys = r.output.desc.shape;
    ASSERT_EQ(ys, (Shape{2, 3, 5, 4}));
    std::vector<float> want(static_cast<size_t>(ys.numel()));
    const float* x = r.inputs[0].as<float>();
    for (int64_t p = 0; p < 6; ++p)
      for (int64_t i = 0; i < 5; ++i)
        for (int64_t j = 0; j < 4; ++j) {
          double m = -1e300, s = 0;
          for (int64_t ki = 0; ki < 3; ++ki)
            for (int64_t kj = 0; kj < 3; ++kj) {
              const int64_t y = i * 2 - 1 + ki, xx = j * 2 - 1 + kj;
              if (y < 0 || y >= 9 || xx < 0 || xx >= 8) continue;
              m = std::max(m, static_cast<double>(x[(p * 9 + y) * 8 + xx]));
              s += x[(p * 9 + y) * 8 + xx];
            }
          want[static_cast<size_t>((p * 5 + i) * 4 + j)] = static_cast<float>(op == OpKind::max_pool2d ? m : s / 9);
        }
    SCOPED_TRACE(std::string(op_name(op)));
    expect_close(r.output, want);
  }
  OneLayer g;
  ASSERT_NO_FATAL_FAILURE(run_one(g, dir, OpKind::global_avg_pool, {}, {{DType::f32, Shape{2, 3, 4, 5}}}));
  std::vector<float> want(6);
  for (int p = 0; p < 6; ++p) {
    double s = 0;
    for (int i = 0; i < 20; ++i) s += g.inputs[0].as<float>()[p * 20 + i];
    want[static_cast<size_t>(p)] = static_cast<float>(s / 20);
  }
  EXPECT_EQ(g.output.desc.shape, (Shape{2, 3, 1, 1}));
  expect_close(g.output, want);
}

TEST(Ops, FlattenReshapeSelect) {
  TempDir dir;
  const TensorDesc d{DType::f32, Shape{2, 3, 4}};
  LayerAttrs flat;
  flat.start_dim = 1;
  OneLayer f;
  ASSERT_NO_FATAL_FAILURE(run_one(f, dir, OpKind::flatten, flat, {d}));
  EXPECT_EQ(f.output.desc.shape, (Shape{2, 12}));
  EXPECT_TRUE(std::memcmp(f.output.data(), f.inputs[0].data(), 96) == 0);

  LayerAttrs re;
  re.shape = Shape{0, -1, 2};
  OneLayer r;
  ASSERT_NO_FATAL_FAILURE(run_one(r, dir, OpKind::reshape, re, {d}));
  EXPECT_EQ(r.output.desc.shape, (Shape{2, 6, 2}));
  EXPECT_TRUE(std::memcmp(r.output.data(), r.inputs[0].data(), 96) == 0);

  LayerAttrs sel;
  sel.dim = 1;
  sel.index = -1;
  OneLayer s;
  ASSERT_NO_FATAL_FAILURE(run_one(s, dir, OpKind::select, sel, {d}));
  EXPECT_EQ(s.output.desc.shape, (Shape{2, 4}));
  std::vector<float> want(8);
  for (int b = 0; b < 2; ++b)
    for (int k = 0; k < 4; ++k) want[static_cast<size_t>(b * 4 + k)] = s.inputs[0].as<float>()[(b * 3 + 2) * 4 + k];
  expect_close(s.output, want, 0);
}

TEST(Ops, EveryOpHasAConformanceCase) {
  // Keep this list in step with the TESTs above when an op is added. The general ops' cases are in
  // ops_general_test.cpp, ops_general_shape_test.cpp and ops_general_reduce_test.cpp, kv_attention's
  // in kernels_cpu_kv_attention_test.cpp.
  const OpKind covered[] = {OpKind::linear,     OpKind::conv2d,
                            OpKind::batch_norm, OpKind::relu,
                            OpKind::gelu,       OpKind::tanh,
                            OpKind::layer_norm, OpKind::softmax,
                            OpKind::attention,  OpKind::embedding,
                            OpKind::add,        OpKind::max_pool2d,
                            OpKind::avg_pool2d, OpKind::global_avg_pool,
                            OpKind::flatten,    OpKind::reshape,
                            OpKind::select,     OpKind::unary,
                            OpKind::binary,     OpKind::where,
                            OpKind::constant,   OpKind::matmul,
                            OpKind::transpose,  OpKind::concat,
                            OpKind::slice,      OpKind::gather,
                            OpKind::expand,     OpKind::pad,
                            OpKind::resize,     OpKind::conv_transpose2d,
                            OpKind::group_norm, OpKind::rms_norm,
                            OpKind::reduce,     OpKind::cast,
                            OpKind::argmax,     OpKind::topk,
                            OpKind::kv_attention};
  EXPECT_EQ(std::size(covered), static_cast<size_t>(OpKind::count));
}

}  // namespace ops_test
}  // namespace ember::gpu
