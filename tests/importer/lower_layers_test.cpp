// The ONNX ops that become Ember layers (importer/lower_layers.cpp): what each maps to, with which
// attributes and weights, and what each refuses.
#include <gtest/gtest.h>

#include "model/manifest.hpp"
#include "tests/importer/onnx_builder.hpp"
#include "tests/must.hpp"

namespace ember::importer {
namespace lower_layers_test {

using ember::testing::must;
using testing::convert;
using testing::OnnxBuilder;
using testing::set_float;
using testing::set_int;
using testing::set_ints;
using testing::set_string;

std::vector<std::string> ops(const Imported& m) {
  std::vector<std::string> out;
  for (const auto& l : m.manifest.layers) out.emplace_back(gpu::op_name(l.op));
  return out;
}

const ImportedWeight& weight(const Imported& m, const std::string& tensor) {
  for (const auto& w : m.weights)
    if (w.tensor == tensor) return w;
  throw std::runtime_error("no tensor " + tensor);
}

// The message of a conversion that must fail.
std::string refusal(const OnnxBuilder& b) {
  auto r = convert(b);
  if (r.ok()) return "(converted)";
  return r.error().message();
}

// A ResNet stem and head as torch.onnx.export writes them (batch free). MaxPool has ceil_mode
// from opset 10 on.
OnnxBuilder resnet_like(int64_t opset = 13) {
  OnnxBuilder b(opset);
  b.input("input", {"batch", 3, 8, 8}).output("logits");
  b.ramp("conv.w", {4, 3, 3, 3}, 0.01f);
  b.ramp("conv.b", {4});
  auto& conv = b.node("Conv", {"input", "conv.w", "conv.b"}, {"c"}, "/conv1/Conv");
  set_ints(conv, "kernel_shape", {3, 3});
  set_ints(conv, "pads", {1, 1, 1, 1});
  set_ints(conv, "strides", {2, 2});
  set_ints(conv, "dilations", {1, 1});
  set_int(conv, "group", 1);
  for (const char* s : {"bn.scale", "bn.bias", "bn.mean", "bn.var"}) b.ramp(s, {4});
  auto& bn = b.node("BatchNormalization", {"c", "bn.scale", "bn.bias", "bn.mean", "bn.var"}, {"n"}, "/bn1/BN");
  set_float(bn, "epsilon", 1e-3f);
  set_float(bn, "momentum", 0.9f);
  b.node("Relu", {"n"}, {"r"}, "/relu/Relu");
  auto& pool = b.node("MaxPool", {"r"}, {"p"}, "/maxpool/MaxPool");
  set_ints(pool, "kernel_shape", {3, 3});
  set_ints(pool, "pads", {1, 1, 1, 1});
  set_ints(pool, "strides", {2, 2});
  if (opset >= 10) set_int(pool, "ceil_mode", 0);
  b.node("GlobalAveragePool", {"p"}, {"g"}, "/avgpool/GlobalAveragePool");
  auto& flat = b.node("Flatten", {"g"}, {"f"}, "/Flatten");
  set_int(flat, "axis", 1);
  b.ramp("fc.weight", {10, 4});
  b.ramp("fc.bias", {10});
  auto& gemm = b.node("Gemm", {"f", "fc.weight", "fc.bias"}, {"logits"}, "/fc/Gemm");
  set_float(gemm, "alpha", 1.f);
  set_float(gemm, "beta", 1.f);
  set_int(gemm, "transB", 1);
  return b;
}

TEST(LowerLayers, AResNetStemAndHeadMapOntoTheOpTable) {
  const Imported m = must(convert(resnet_like()));
  EXPECT_EQ(ops(m), (std::vector<std::string>{"conv2d", "batch_norm", "relu", "max_pool2d", "global_avg_pool",
                                              "flatten", "linear"}));
  const auto& layers = m.manifest.layers;
  EXPECT_EQ(layers[0].name, "/conv1/Conv");
  EXPECT_EQ(layers[0].attrs.in_channels, 3);
  EXPECT_EQ(layers[0].attrs.out_channels, 4);
  EXPECT_EQ(layers[0].attrs.stride[0], 2);
  EXPECT_EQ(layers[0].attrs.padding[1], 1);
  EXPECT_TRUE(layers[0].attrs.bias);
  EXPECT_FLOAT_EQ(layers[1].attrs.eps, 1e-3f);
  EXPECT_EQ(layers[3].attrs.kernel[0], 3);
  // The last layer takes the graph output's name, so a request's answer is named as in ONNX.
  EXPECT_EQ(layers.back().name, "logits");
  ASSERT_EQ(m.manifest.inputs.size(), 1u);
  EXPECT_EQ(m.manifest.inputs[0].shape, (gpu::Shape{-1, 3, 8, 8}));
  ASSERT_EQ(m.manifest.outputs.size(), 1u);
  EXPECT_EQ(m.manifest.outputs[0].name, "logits");
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 10}));
  // Weights in layer order, each layer's roles in weight_specs order, named <layer>.<role>.
  std::vector<std::string> names;
  for (const auto& w : m.weights) names.push_back(w.tensor);
  EXPECT_EQ(names, (std::vector<std::string>{"/conv1/Conv.weight", "/conv1/Conv.bias", "/bn1/BN.weight", "/bn1/BN.bias",
                                             "/bn1/BN.running_mean", "/bn1/BN.running_var", "logits.weight",
                                             "logits.bias"}));
  EXPECT_FLOAT_EQ((*weight(m, "logits.weight").values)[1], 0.2f);  // Gemm with transB: as stored
  EXPECT_EQ(m.stats.parameters, 4u * 27 + 4 + 16 + 40 + 10);
}

// Conv-1, BatchNormalization-9, MaxPool-8/10, Flatten-9 and Gemm-9 (opsets 9 and 10) mean what
// their opset-11+ versions do for these attributes: the same layers.
TEST(LowerLayers, AResNetStemAndHeadAtOpsets9And10MapAsAtLaterOpsets) {
  const Imported want = must(convert(resnet_like()));
  for (int64_t opset : {9, 10}) {
    const Imported m = must(convert(resnet_like(opset)));
    EXPECT_EQ(ops(m), ops(want)) << opset;
    gpu::Manifest got = m.manifest, same = want.manifest;
    got.description = same.description = "";  // names the opset
    EXPECT_EQ(gpu::manifest_to_json(got), gpu::manifest_to_json(same)) << opset;
    EXPECT_EQ(m.stats.opset, opset);
  }
}

TEST(LowerLayers, GemmWithoutTransBIsTransposedAndAlphaBetaAreFoldedIn) {
  OnnxBuilder b;
  b.input("x", {"n", 2}).output("y");
  b.weight("B", {2, 3}, {1, 2, 3, 4, 5, 6});  // [K, N]
  b.weight("C", {1, 3}, {1, 1, 1});
  auto& gemm = b.node("Gemm", {"x", "B", "C"}, {"y"});
  set_float(gemm, "alpha", 2.f);
  set_float(gemm, "beta", 0.5f);
  const Imported m = must(convert(b));
  ASSERT_EQ(ops(m), std::vector<std::string>{"linear"});
  EXPECT_EQ(m.manifest.layers[0].attrs.in_features, 2);
  EXPECT_EQ(m.manifest.layers[0].attrs.out_features, 3);
  EXPECT_EQ(*weight(m, "y.weight").values, (std::vector<float>{2, 8, 4, 10, 6, 12}));  // 2 * B^T
  EXPECT_EQ(*weight(m, "y.bias").values, (std::vector<float>{0.5f, 0.5f, 0.5f}));
}

TEST(LowerLayers, GemmGeneralCasesAreLayersAndMisfitsAreRefused) {
  // C that varies per row: linear without bias, then a broadcasting add.
  OnnxBuilder rows;
  rows.input("x", {4, 2}).output("y");
  rows.ramp("B", {3, 2});
  rows.ramp("C", {4, 3});
  set_int(rows.node("Gemm", {"x", "B", "C"}, {"y"}, "/fc/Gemm"), "transB", 1);
  EXPECT_EQ(ops(must(convert(rows))), (std::vector<std::string>{"linear", "constant", "binary"}));

  // transA transposes the activation first; B an activation makes a matmul, alpha a product.
  OnnxBuilder t;
  t.input("x", {2, 4}).input("z", {2, 3}).output("y");
  auto& g = t.node("Gemm", {"x", "z"}, {"y"}, "/g");
  set_int(g, "transA", 1);
  set_float(g, "alpha", 0.5f);
  const Imported m = must(convert(t));
  EXPECT_EQ(ops(m), (std::vector<std::string>{"transpose", "matmul", "constant", "binary"}));
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{4, 3}));

  OnnxBuilder b;
  b.input("x", {"n", 2}).output("y");
  b.ramp("B", {3, 2});
  b.ramp("C", {4, 3});
  auto& gemm = b.node("Gemm", {"x", "B", "C"}, {"y"}, "/fc/Gemm");
  set_int(gemm, "transB", 1);
  // [n, 3] + C [4, 3]: the rows do not fit a free n.
  EXPECT_NE(refusal(b).find("node '/fc/Gemm' (Gemm): shapes [2, 3] and [4, 3] do not broadcast"), std::string::npos)
      << refusal(b);
}

TEST(LowerLayers, MatMulByAConstantIsALinearWithTheWeightTransposed) {
  OnnxBuilder b;
  b.input("x", {"batch", 5, 2}).output("y");
  b.weight("W", {2, 3}, {1, 2, 3, 4, 5, 6});
  b.node("MatMul", {"x", "W"}, {"y"}, "/l/MatMul");
  const Imported m = must(convert(b));
  ASSERT_EQ(ops(m), std::vector<std::string>{"linear"});
  EXPECT_FALSE(m.manifest.layers[0].attrs.bias);
  EXPECT_EQ(*weight(m, "y.weight").values, (std::vector<float>{1, 4, 2, 5, 3, 6}));  // W^T, [N, K]
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 5, 3}));
}

TEST(LowerLayers, MatMulOfTwoActivationsIsAMatmulLayer) {
  OnnxBuilder b;
  b.input("x", {"batch", 3, 2}).input("z", {"batch", 2, 4}).output("y");
  b.node("MatMul", {"x", "z"}, {"y"}, "/attn/MatMul");
  const Imported m = must(convert(b));
  EXPECT_EQ(ops(m), std::vector<std::string>{"matmul"});
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 3, 4}));
  // Inner dims that differ are refused with the reason.
  OnnxBuilder bad;
  bad.input("x", {2, 3}).input("z", {2, 3}).output("y");
  bad.node("MatMul", {"x", "z"}, {"y"}, "/mm");
  EXPECT_NE(refusal(bad).find("node '/mm' (MatMul): cannot multiply [2, 3] by [2, 3]"), std::string::npos) << refusal(bad);
}

TEST(LowerLayers, ConvAsymmetricPadsAreAPadLayerAndOneDConvIsReshapedToTwoD) {
  OnnxBuilder b = resnet_like();
  auto* conv = b.model.mutable_graph()->mutable_node(0);
  conv->mutable_attribute(1)->set_ints(2, 2);  // pads [1, 1, 2, 1]
  const Imported m = must(convert(b));
  EXPECT_EQ(ops(m)[0], "pad");
  EXPECT_EQ(m.manifest.layers[0].attrs.num_pads, 8);
  EXPECT_EQ(m.manifest.layers[0].attrs.pads[6], 1);  // height's end: 2, of which conv2d pads 1
  EXPECT_EQ(m.manifest.layers[1].attrs.padding[0], 1);

  OnnxBuilder one_d;
  one_d.input("x", {"n", 3, 8}).output("y");
  one_d.ramp("w", {4, 3, 3});
  auto& c1 = one_d.node("Conv", {"x", "w"}, {"y"}, "/c");
  set_ints(c1, "pads", {1, 1});
  set_ints(c1, "strides", {2});
  const Imported m1 = must(convert(one_d));
  EXPECT_EQ(ops(m1), (std::vector<std::string>{"reshape", "conv2d", "reshape"}));
  EXPECT_EQ(m1.manifest.layers[1].attrs.kernel[0], 1);
  EXPECT_EQ(m1.manifest.layers[1].attrs.kernel[1], 3);
  EXPECT_EQ(m1.manifest.layers[1].attrs.stride[1], 2);
  EXPECT_EQ(weight(m1, "/c.conv2d.weight").shape, (gpu::Shape{4, 3, 1, 3}));
  EXPECT_EQ(m1.manifest.outputs[0].shape, (gpu::Shape{-1, 4, 4}));

  OnnxBuilder three_d;
  three_d.input("x", {1, 3, 4, 4, 4}).output("y");
  three_d.ramp("w", {4, 3, 1, 1, 1});
  three_d.node("Conv", {"x", "w"}, {"y"}, "/c3");
  EXPECT_NE(refusal(three_d).find("node '/c3' (Conv): not supported yet: convolution over a rank-5 input"),
            std::string::npos)
      << refusal(three_d);
}

TEST(LowerLayers, ConvSamePaddingIsComputedAndGroupsAreKept) {
  OnnxBuilder b;
  b.input("x", {1, 4, 9, 9}).output("y");
  b.ramp("w", {8, 2, 3, 3}, 0.01f);
  auto& conv = b.node("Conv", {"x", "w"}, {"y"});
  set_string(conv, "auto_pad", "SAME_UPPER");
  set_int(conv, "group", 2);
  const Imported m = must(convert(b));
  const auto& a = m.manifest.layers[0].attrs;
  EXPECT_EQ(a.groups, 2);
  EXPECT_EQ(a.padding[0], 1);
  EXPECT_FALSE(a.bias);
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{1, 8, 9, 9}));
}

TEST(LowerLayers, PoolingKeepsCeilModeAndCountIncludePadAndRefusesWhatDiffers) {
  auto pool = [](const char* op, std::initializer_list<int64_t> pads, int64_t ceil, int64_t count_pad) {
    OnnxBuilder b;
    b.input("x", {1, 2, 6, 6}).output("y");
    auto& n = b.node(op, {"x"}, {"y"}, "/pool");
    set_ints(n, "kernel_shape", {3, 3});
    set_ints(n, "strides", {2, 2});
    set_ints(n, "pads", pads);
    set_int(n, "ceil_mode", ceil);
    if (count_pad >= 0) set_int(n, "count_include_pad", count_pad);
    return b;
  };
  // AveragePool with padding: count_include_pad as ONNX says (ONNX's default 0).
  const Imported counted = must(convert(pool("AveragePool", {1, 1, 1, 1}, 0, 1)));
  EXPECT_EQ(ops(counted), std::vector<std::string>{"avg_pool2d"});
  EXPECT_TRUE(counted.manifest.layers[0].attrs.count_include_pad);
  EXPECT_FALSE(must(convert(pool("AveragePool", {1, 1, 1, 1}, 0, 0))).manifest.layers[0].attrs.count_include_pad);
  // Padding Ember's pools do not take (asymmetric): a pad layer, unless the padding must not count.
  EXPECT_EQ(ops(must(convert(pool("MaxPool", {0, 0, 1, 1}, 0, -1)))), (std::vector<std::string>{"pad", "max_pool2d"}));
  EXPECT_NE(refusal(pool("AveragePool", {0, 0, 1, 1}, 0, 0)).find("count_include_pad 0 with pads [0, 0, 1, 1]"),
            std::string::npos);
  // ceil_mode: (6 + 2 - 3) / 2 rounds up to 3 windows, 4 rows, as ONNX and PyTorch agree.
  const Imported ceil = must(convert(pool("MaxPool", {1, 1, 1, 1}, 1, -1)));
  EXPECT_TRUE(ceil.manifest.layers[0].attrs.ceil_mode);
  EXPECT_EQ(ceil.manifest.outputs[0].shape, (gpu::Shape{1, 2, 4, 4}));
  // A last window that would start in the padding: PyTorch drops it, ONNX's formula keeps it.
  OnnxBuilder drop = pool("MaxPool", {1, 1, 1, 1}, 1, -1);
  auto* strides = drop.model.mutable_graph()->mutable_node(0)->mutable_attribute(1);
  strides->set_ints(0, 2);
  strides->set_ints(1, 2);
  auto* k = drop.model.mutable_graph()->mutable_node(0)->mutable_attribute(0);
  k->set_ints(0, 2);
  k->set_ints(1, 2);
  auto* shape = drop.model.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->mutable_dim(2)->set_dim_value(5);  // windows at -1, 1, 3 and 5, which starts in the padding
  shape->mutable_dim(3)->set_dim_value(5);
  EXPECT_NE(refusal(drop).find("ceil_mode where ONNX's output size (4) differs from PyTorch's"), std::string::npos)
      << refusal(drop);
  // Without padding on 7x7, (7 - 3) / 2 is whole: ceil_mode changes nothing and is accepted.
  OnnxBuilder exact = pool("MaxPool", {0, 0, 0, 0}, 1, -1);
  exact.model.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(2)->set_dim_value(7);
  exact.model.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(3)->set_dim_value(7);
  const Imported m = must(convert(exact));
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{1, 2, 3, 3}));
}

TEST(LowerLayers, SoftmaxFollowsTheOpsetsAxisRule) {
  auto softmax = [](int64_t opset, int64_t axis) {
    OnnxBuilder b(opset);
    b.input("x", {"n", 4, 5}).output("y");
    auto& n = b.node("Softmax", {"x"}, {"y"}, "/softmax");
    if (axis != 99) set_int(n, "axis", axis);
    return b;
  };
  EXPECT_EQ(must(convert(softmax(13, 1))).manifest.layers[0].attrs.dim, 1);
  EXPECT_EQ(must(convert(softmax(13, 99))).manifest.layers[0].attrs.dim, 2);  // default -1
  EXPECT_EQ(must(convert(softmax(11, -1))).manifest.layers[0].attrs.dim, 2);
  // Before opset 13, axis 1 (the default) normalises dims 1 and 2 together.
  EXPECT_NE(refusal(softmax(11, 99)).find("Softmax over dims 1.. together"), std::string::npos);
}

TEST(LowerLayers, LayerNormalizationWithoutBiasGetsZeros) {
  OnnxBuilder b(17);
  b.input("x", {"batch", "seq", 4}).output("y");
  b.ramp("scale", {4});
  auto& ln = b.node("LayerNormalization", {"x", "scale"}, {"y"}, "/ln");
  set_float(ln, "epsilon", 1e-6f);
  set_int(ln, "axis", -1);
  const Imported m = must(convert(b));
  ASSERT_EQ(ops(m), std::vector<std::string>{"layer_norm"});
  EXPECT_EQ(m.manifest.layers[0].attrs.num_features, 4);
  EXPECT_FLOAT_EQ(m.manifest.layers[0].attrs.eps, 1e-6f);
  EXPECT_EQ(*weight(m, "y.bias").values, std::vector<float>(4, 0.f));
  EXPECT_EQ(m.manifest.inputs[0].shape, (gpu::Shape{-1, -1, 4}));

  ln.mutable_attribute(1)->set_i(1);  // axis 1 of [batch, seq, 4]
  EXPECT_NE(refusal(b).find("normalising over dims 1.. together"), std::string::npos) << refusal(b);
}

TEST(LowerLayers, BatchNormalizationInTrainingModeIsRefused) {
  OnnxBuilder b(15);
  b.input("x", {1, 2, 3, 3}).output("y");
  for (const char* s : {"s", "b", "m", "v"}) b.ramp(s, {2});
  auto& bn = b.node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y"}, "/bn");
  set_int(bn, "training_mode", 1);
  EXPECT_NE(refusal(b).find("node '/bn' (BatchNormalization): not supported: training_mode 1"), std::string::npos)
      << refusal(b);
}

TEST(LowerLayers, AnAttributeTheImporterDoesNotReadIsRefused) {
  OnnxBuilder b;
  b.input("x", {2}).output("y");
  auto& relu = b.node("Relu", {"x"}, {"y"}, "/relu");
  set_int(relu, "alpha_of_some_newer_opset", 1);
  EXPECT_NE(refusal(b).find("node '/relu' (Relu): attribute 'alpha_of_some_newer_opset' is not understood"),
            std::string::npos)
      << refusal(b);
}

TEST(LowerLayers, WeightsComputedAtServeTimeAreRefused) {
  OnnxBuilder b;
  b.input("x", {1, 3, 4, 4}).input("w", {2, 3, 1, 1}).output("y");
  b.node("Conv", {"x", "w"}, {"y"}, "/conv");
  EXPECT_NE(refusal(b).find("input 1 (W, 'w') is computed at serve time"), std::string::npos) << refusal(b);
}

TEST(LowerLayers, InstanceNormalizationIsAGroupNormWithAGroupPerChannel) {
  OnnxBuilder b;
  b.input("x", {"batch", 3, 4, 4}).output("y");
  b.ramp("s", {3});
  b.ramp("b", {3});
  set_float(b.node("InstanceNormalization", {"x", "s", "b"}, {"y"}, "/in"), "epsilon", 1e-3f);
  const Imported m = must(convert(b));
  ASSERT_EQ(ops(m), std::vector<std::string>{"group_norm"});
  EXPECT_EQ(m.manifest.layers[0].attrs.num_groups, 3);
  EXPECT_EQ(m.manifest.layers[0].attrs.num_features, 3);
  EXPECT_FLOAT_EQ(m.manifest.layers[0].attrs.eps, 1e-3f);
}

}  // namespace lower_layers_test
}  // namespace ember::importer
