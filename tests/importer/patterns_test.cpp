// Fused patterns (importer/patterns.cpp): GELU in its erf and tanh spellings and MatMul + bias Add,
// found in the node orders and operand orders exporters write, and left alone when an inner value
// is read by anything else.
#include <algorithm>

#include <gtest/gtest.h>

#include "tests/importer/onnx_builder.hpp"
#include "tests/must.hpp"

namespace ember::importer {
namespace patterns_test {

using ember::testing::must;
using testing::convert;
using testing::OnnxBuilder;

std::vector<std::string> ops(const Imported& m) {
  std::vector<std::string> out;
  for (const auto& l : m.manifest.layers) out.emplace_back(gpu::op_name(l.op));
  return out;
}

enum class Grouping { x_times_sum_then_half, half_x_times_sum, x_times_half_sum };

// 0.5 * x * (1 + erf(x / sqrt 2)) after a Relu (so x is an activation), grouped as told.
OnnxBuilder gelu_erf(Grouping grouping, bool divide = true) {
  OnnxBuilder b;
  b.input("in", {"batch", 8}).output("y");
  b.node("Relu", {"in"}, {"x"});
  if (divide) {
    b.scalar("sqrt2", 1.4142135f);
    b.node("Div", {"x", "sqrt2"}, {"u"});
  } else {
    b.scalar("rsqrt2", 0.70710678f);
    b.node("Mul", {"rsqrt2", "x"}, {"u"});
  }
  b.node("Erf", {"u"}, {"e"});
  b.scalar("one", 1.f);
  b.node("Add", {"e", "one"}, {"a"});
  b.scalar("half", 0.5f);
  switch (grouping) {
    case Grouping::x_times_sum_then_half:  // torch.onnx.export of F.gelu
      b.node("Mul", {"x", "a"}, {"m"});
      b.node("Mul", {"m", "half"}, {"y"}, "/gelu/Mul_1");
      break;
    case Grouping::half_x_times_sum:
      b.node("Mul", {"half", "x"}, {"h"});
      b.node("Mul", {"h", "a"}, {"y"}, "/gelu/Mul_1");
      break;
    case Grouping::x_times_half_sum:
      b.node("Mul", {"a", "half"}, {"m"});
      b.node("Mul", {"x", "m"}, {"y"}, "/gelu/Mul_1");
      break;
  }
  return b;
}

TEST(Patterns, ErfGeluIsOneLayerInEveryGrouping) {
  for (auto g : {Grouping::x_times_sum_then_half, Grouping::half_x_times_sum, Grouping::x_times_half_sum}) {
    for (bool divide : {true, false}) {
      const Imported m = must(convert(gelu_erf(g, divide)));
      EXPECT_EQ(ops(m), (std::vector<std::string>{"relu", "gelu"})) << static_cast<int>(g) << divide;
      EXPECT_FALSE(m.manifest.layers[1].attrs.tanh_approximation);
      EXPECT_EQ(m.manifest.layers[1].name, "y");
    }
  }
}

TEST(Patterns, AnInnerValueReadElsewhereStopsTheFusion) {
  OnnxBuilder b = gelu_erf(Grouping::x_times_sum_then_half);
  b.output("e");  // the erf is now an output too
  // Not fused: each node is a layer of its own (the general ops).
  const Imported m = must(convert(b));
  EXPECT_EQ(ops(m), (std::vector<std::string>{"relu", "constant", "binary", "unary", "constant", "binary", "binary",
                                              "constant", "binary"}));
  EXPECT_EQ(m.stats.fused, 0u);
}

TEST(Patterns, NodesWithoutTheInputsTheirOpTakesAreNotMatched) {
  // A fuzzer's find: an Erf without an input, inside what is otherwise a GELU.
  OnnxBuilder b = gelu_erf(Grouping::x_times_sum_then_half);
  b.model.mutable_graph()->mutable_node(3)->clear_input();
  auto r = convert(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("(Erf): input 0 is missing"), std::string::npos) << r.error().message();
}

TEST(Patterns, AWrongConstantIsNotAGelu) {
  OnnxBuilder b = gelu_erf(Grouping::x_times_sum_then_half);
  b.model.mutable_graph()->mutable_node(1)->mutable_attribute(0)->mutable_t()->set_float_data(0, 1.5f);
  const Imported m = must(convert(b));  // the nodes one by one, no gelu
  const auto names = ops(m);
  EXPECT_EQ(std::count(names.begin(), names.end(), "gelu"), 0);
  EXPECT_EQ(m.stats.fused, 0u);
}

// torch.onnx.export of F.gelu(x, approximate="tanh"): x * x * x, 0.044715, sqrt(2/pi).
TEST(Patterns, TanhGeluIsOneLayer) {
  for (bool pow : {false, true}) {
    OnnxBuilder b;
    b.input("in", {"batch", "seq", 8}).output("y");
    b.node("Relu", {"in"}, {"x"});
    if (pow) {
      b.scalar("three", 3.f);
      b.node("Pow", {"x", "three"}, {"x3"});
    } else {
      b.node("Mul", {"x", "x"}, {"x2"});
      b.node("Mul", {"x", "x2"}, {"x3"});
    }
    b.scalar("c", 0.044715f);
    b.node("Mul", {"c", "x3"}, {"t"});
    b.node("Add", {"x", "t"}, {"s"});
    b.scalar("k", 0.7978845608f);
    b.node("Mul", {"k", "s"}, {"ks"});
    b.node("Tanh", {"ks"}, {"th"});
    b.scalar("one", 1.f);
    b.node("Add", {"one", "th"}, {"a"});
    b.node("Mul", {"x", "a"}, {"m"});
    b.scalar("half", 0.5f);
    b.node("Mul", {"half", "m"}, {"y"});
    const Imported m = must(convert(b));
    EXPECT_EQ(ops(m), (std::vector<std::string>{"relu", "gelu"})) << pow;
    EXPECT_TRUE(m.manifest.layers[1].attrs.tanh_approximation);
    EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, -1, 8}));
  }
}

TEST(Patterns, TanhAloneStaysATanhLayer) {
  OnnxBuilder b;
  b.input("x", {4}).output("y");
  b.node("Tanh", {"x"}, {"y"});
  EXPECT_EQ(ops(must(convert(b))), std::vector<std::string>{"tanh"});
}

TEST(Patterns, MatMulThenBiasAddIsOneLinearInEitherOperandOrder) {
  for (bool bias_first : {true, false}) {
    OnnxBuilder b;
    b.input("x", {"batch", "seq", 2}).output("y");
    b.weight("W", {2, 3}, {1, 2, 3, 4, 5, 6});
    b.weight("bias", {1, 3}, {7, 8, 9});
    b.node("MatMul", {"x", "W"}, {"mm"}, "/l/MatMul");
    if (bias_first) b.node("Add", {"bias", "mm"}, {"y"}, "/l/Add");
    else b.node("Add", {"mm", "bias"}, {"y"}, "/l/Add");
    const Imported m = must(convert(b));
    ASSERT_EQ(ops(m), std::vector<std::string>{"linear"});
    EXPECT_TRUE(m.manifest.layers[0].attrs.bias);
    ASSERT_EQ(m.weights.size(), 2u);
    EXPECT_EQ(*m.weights[0].values, (std::vector<float>{1, 4, 2, 5, 3, 6}));  // W^T, [N, K]
    EXPECT_EQ(*m.weights[1].values, (std::vector<float>{7, 8, 9}));
    EXPECT_EQ(m.stats.fused, 2u);
  }
}

TEST(Patterns, ABiasThatVariesAlongRowsIsNotFused) {
  OnnxBuilder b;
  b.input("x", {"batch", 2, 2}).output("y");
  b.ramp("W", {2, 3});
  b.ramp("bias", {2, 3});
  b.node("MatMul", {"x", "W"}, {"mm"});
  b.node("Add", {"mm", "bias"}, {"y"}, "/l/Add");
  // A linear without bias, then the bias added by a broadcasting binary layer.
  const Imported m = must(convert(b));
  EXPECT_EQ(ops(m), (std::vector<std::string>{"linear", "constant", "binary"}));
  EXPECT_FALSE(m.manifest.layers[0].attrs.bias);
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 2, 3}));
}

// nn.AvgPool2d(3, stride=1, padding=1) as torch.onnx.export writes it: Pad of zeros, AveragePool.
OnnxBuilder pad_then_pool(std::vector<int64_t> pads, float fill) {
  OnnxBuilder b;
  b.input("x", {"batch", 2, 5, 5}).output("y");
  b.int_vector("pads", pads);
  b.scalar("fill", fill);
  testing::set_string(b.node("Pad", {"x", "pads", "fill"}, {"p"}, "/pool/Pad"), "mode", "constant");
  auto& pool = b.node("AveragePool", {"p"}, {"y"}, "/pool/AveragePool");
  testing::set_ints(pool, "kernel_shape", {3, 3});
  testing::set_ints(pool, "strides", {1, 1});
  testing::set_ints(pool, "pads", {0, 0, 0, 0});
  return b;
}

TEST(Patterns, PadOfZerosThenAveragePoolIsOnePaddedAvgPool) {
  const Imported m = must(convert(pad_then_pool({0, 0, 1, 1, 0, 0, 1, 1}, 0.f)));
  ASSERT_EQ(ops(m), std::vector<std::string>{"avg_pool2d"});
  EXPECT_EQ(m.manifest.layers[0].attrs.padding[0], 1);
  EXPECT_EQ(m.manifest.layers[0].attrs.padding[1], 1);
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 2, 5, 5}));
  // Not zeros, or not the same on both sides: the Pad stands alone, a pad layer.
  for (auto b : {pad_then_pool({0, 0, 1, 1, 0, 0, 1, 1}, 1.f), pad_then_pool({0, 0, 1, 0, 0, 0, 1, 1}, 0.f)}) {
    const Imported p = must(convert(b));
    EXPECT_EQ(ops(p), (std::vector<std::string>{"pad", "avg_pool2d"}));
  }
}

// Pad-2 (before opset 11) holds pads and the fill as attributes: the same fusion.
TEST(Patterns, PadBeforeOpset11OfZerosThenAveragePoolIsOnePaddedAvgPool) {
  auto old = [](float fill) {
    OnnxBuilder b(10);
    b.input("x", {"batch", 2, 5, 5}).output("y");
    auto& pad = b.node("Pad", {"x"}, {"p"}, "/pool/Pad");
    testing::set_ints(pad, "pads", {0, 0, 1, 1, 0, 0, 1, 1});
    testing::set_float(pad, "value", fill);
    auto& pool = b.node("AveragePool", {"p"}, {"y"}, "/pool/AveragePool");
    testing::set_ints(pool, "kernel_shape", {3, 3});
    return b;
  };
  const Imported m = must(convert(old(0.f)));
  ASSERT_EQ(ops(m), std::vector<std::string>{"avg_pool2d"});
  EXPECT_EQ(m.manifest.layers[0].attrs.padding[0], 1);
  EXPECT_TRUE(m.manifest.layers[0].attrs.count_include_pad);
  EXPECT_EQ(m.stats.fused, 2u);
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 2, 5, 5}));
  EXPECT_EQ(ops(must(convert(old(1.f)))), (std::vector<std::string>{"pad", "avg_pool2d"}));
}

}  // namespace patterns_test
}  // namespace ember::importer
