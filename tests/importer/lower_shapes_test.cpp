// Folding and reshaping (importer/lower_shapes.cpp): shape arithmetic on a free batch turned into
// fixed Reshape targets, ops on activations turned into reshape/flatten/select/add layers, ops
// that vanish, and the refusals.
#include <gtest/gtest.h>

#include "tests/importer/onnx_builder.hpp"
#include "tests/must.hpp"

namespace ember::importer {
namespace lower_shapes_test {

using ember::testing::must;
using testing::convert;
using testing::OnnxBuilder;
using testing::set_int;
using testing::set_ints;

std::string refusal(const OnnxBuilder& b, ImportOptions o = {}) {
  auto r = convert(b, o);
  return r.ok() ? "(converted)" : r.error().message();
}

// x.view(x.size(0), -1) as torch.onnx.export writes it: Shape -> Gather(0) -> Unsqueeze -> Concat
// with a constant -1 -> Reshape.
OnnxBuilder view_batch_minus_one(int64_t opset) {
  OnnxBuilder b(opset);
  b.input("x", {"batch", 4, 2, 2}).output("y");
  b.node("Shape", {"x"}, {"shape"});
  b.int_scalar("zero", 0);
  auto& gather = b.node("Gather", {"shape", "zero"}, {"n"});
  set_int(gather, "axis", 0);
  if (opset >= 13) {
    b.int_vector("axes", {0});
    b.node("Unsqueeze", {"n", "axes"}, {"n1"});
  } else {
    auto& u = b.node("Unsqueeze", {"n"}, {"n1"});
    set_ints(u, "axes", {0});
  }
  b.int_vector("minus_one", {-1});
  auto& cat = b.node("Concat", {"n1", "minus_one"}, {"target"});
  set_int(cat, "axis", 0);
  b.node("Reshape", {"x", "target"}, {"y"}, "/view");
  return b;
}

TEST(LowerShapes, ShapeArithmeticOnAFreeBatchFoldsIntoAReshapeThatKeepsItFree) {
  for (int64_t opset : {9, 10, 11, 13, 17}) {
    const Imported m = must(convert(view_batch_minus_one(opset)), "opset " + std::to_string(opset));
    ASSERT_EQ(m.manifest.layers.size(), 1u) << opset;
    const auto& l = m.manifest.layers[0];
    EXPECT_EQ(l.op, gpu::OpKind::reshape);
    EXPECT_EQ(l.attrs.shape, (gpu::Shape{0, 16}));  // the batch copied, the rest fixed
    EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 16}));
    EXPECT_EQ(m.stats.folded, opset >= 13 ? 7u : 6u) << opset;  // Shape, constants, Gather, Unsqueeze, Concat
  }
}

TEST(LowerShapes, AReshapeThatFixesTheFreeBatchIsRefused) {
  OnnxBuilder b;
  b.input("x", {"batch", 4}).output("y");
  b.int_vector("target", {1, 4});
  b.node("Reshape", {"x", "target"}, {"y"}, "/r");
  const std::string msg = refusal(b);
  EXPECT_NE(msg.find("node '/r' (Reshape): cannot reshape [?, 4]"), std::string::npos) << msg;
}

TEST(LowerShapes, BatchDimOptionFreesADimTheGraphFixed) {
  OnnxBuilder b;
  b.input("x", {1, 3, 2, 2}).output("y");
  auto& flat = b.node("Flatten", {"x"}, {"y"});
  set_int(flat, "axis", 1);
  EXPECT_EQ(must(convert(b)).manifest.inputs[0].shape, (gpu::Shape{1, 3, 2, 2}));
  ImportOptions o;
  o.batch_dim = 0;
  const Imported m = must(convert(b, o));
  EXPECT_EQ(m.manifest.inputs[0].shape, (gpu::Shape{-1, 3, 2, 2}));
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 12}));
}

TEST(LowerShapes, InputShapeOptionFixesFreeDimsAndFreesFixedOnes) {
  // An image CNN exported with free height and width: --input-shape fixes them (and frees the batch
  // the graph fixed); a size that contradicts the graph, a wrong rank or an unknown input is refused.
  OnnxBuilder b;
  b.input("x", {1, 3, "h", "w"}).output("y");
  auto& flat = b.node("Flatten", {"x"}, {"y"});
  set_int(flat, "axis", 1);
  ImportOptions o;
  o.input_shapes["x"] = {-1, 3, 4, 6};
  const Imported m = must(convert(b, o));
  EXPECT_EQ(m.manifest.inputs[0].shape, (gpu::Shape{-1, 3, 4, 6}));
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 72}));
  o.batch_dim = 2;  // --input-shape wins for the input it names
  EXPECT_EQ(must(convert(b, o)).manifest.inputs[0].shape, (gpu::Shape{-1, 3, 4, 6}));
  o.batch_dim = -1;
  o.input_shapes["x"] = {1, 4, 4, 6};
  EXPECT_NE(refusal(b, o).find("--input-shape x: dim 1 is 3 in the graph, not 4"), std::string::npos) << refusal(b, o);
  o.input_shapes["x"] = {1, 3, 4};
  EXPECT_NE(refusal(b, o).find("3 dims given, the graph declares 4"), std::string::npos) << refusal(b, o);
  o.input_shapes = {{"z", {1}}};
  EXPECT_NE(refusal(b, o).find("--input-shape z: the graph has no input of that name"), std::string::npos);
}

TEST(LowerShapes, ArithmeticCastSliceAndConstantOfShapeFold) {
  // y = Reshape(x, Concat(Shape(x)[0:1], [H * W * C] cast through float and back)).
  OnnxBuilder b;
  b.input("x", {"batch", 3, 2, 2}).output("y");
  b.node("Shape", {"x"}, {"s"});
  b.int_vector("s0", {0});
  b.int_vector("s1", {1});
  b.int_vector("s4", {4});
  b.node("Slice", {"s", "s0", "s1"}, {"batch"});
  b.node("Slice", {"s", "s1", "s4"}, {"chw"});
  testing::set_tensor(b.node("ConstantOfShape", {"s1"}, {"one"}), "value", 1.f);  // [1.0]
  set_int(b.node("Cast", {"chw"}, {"chw_f"}), "to", onnx::TensorProto::FLOAT);
  b.node("Mul", {"chw_f", "one"}, {"chw_f1"});
  set_int(b.node("Cast", {"chw_f1"}, {"chw_i"}), "to", onnx::TensorProto::INT64);
  b.int_vector("zero", {0});
  b.node("Gather", {"chw_i", "zero"}, {"c"});
  b.node("Gather", {"chw_i", "s1"}, {"h"});
  b.node("Mul", {"c", "h"}, {"ch"});
  b.int_vector("two", {2});
  b.node("Mul", {"ch", "two"}, {"chw_n"});
  auto& cat = b.node("Concat", {"batch", "chw_n"}, {"target"});
  set_int(cat, "axis", 0);
  b.node("Reshape", {"x", "target"}, {"y"});
  const Imported m = must(convert(b));
  ASSERT_EQ(m.manifest.layers.size(), 1u);
  EXPECT_EQ(m.manifest.layers[0].attrs.shape, (gpu::Shape{0, 12}));
}

TEST(LowerShapes, ArithmeticOnAFreeDimIsFollowedAndOneDerivedDimIsInferred) {
  // Reshape to [batch * 2, -1]: the first dim is the batch times two, which Ember infers as -1.
  OnnxBuilder b;
  b.input("x", {"batch", 4}).output("y");
  b.node("Shape", {"x"}, {"s"});
  b.int_vector("zero", {0});
  b.node("Gather", {"s", "zero"}, {"n"});
  b.int_vector("two", {2});
  b.node("Mul", {"n", "two"}, {"n2"});
  b.int_vector("minus_one", {-1});
  auto& cat = b.node("Concat", {"n2", "minus_one"}, {"target"});
  set_int(cat, "axis", 0);
  b.node("Reshape", {"x", "target"}, {"y"}, "/r");
  const Imported m = must(convert(b));
  EXPECT_EQ(m.manifest.layers[0].attrs.shape, (gpu::Shape{-1, 2}));
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 2}));
}

TEST(LowerShapes, AReshapeWhereTwoFreeDimsMoveTakesThemFromAValueThatHasThem) {
  // [batch, seq, 4] -> [seq, batch, 4], the target gathered from Shape: neither free dim stays in
  // place, and 0 and -1 can say one at most; like_dims takes both from x itself.
  OnnxBuilder b;
  b.input("x", {"batch", "seq", 4}).output("y");
  b.node("Shape", {"x"}, {"s"});
  b.int_vector("order", {1, 0, 2});
  b.node("Gather", {"s", "order"}, {"target"});
  b.node("Reshape", {"x", "target"}, {"y"}, "/r");
  const Imported m = must(convert(b));
  ASSERT_EQ(m.manifest.layers.size(), 1u);
  const gpu::LayerSpec& r = m.manifest.layers[0];
  EXPECT_EQ(r.op, gpu::OpKind::reshape);
  EXPECT_EQ(r.inputs, (std::vector<std::string>{"x", "x"}));
  EXPECT_EQ(r.attrs.like_dims[0], 1);
  EXPECT_EQ(r.attrs.like_dims[1], 0);
  EXPECT_EQ(r.attrs.like_dims[2], -1);
  EXPECT_EQ(r.attrs.shape[2], 4);
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, -1, 4}));
}

TEST(LowerShapes, UnsqueezeSqueezeAndFlattenOfActivationsAreReshapes) {
  OnnxBuilder b;
  b.input("x", {"batch", 6}).output("y");
  b.int_vector("axes", {1, 3});
  b.node("Unsqueeze", {"x", "axes"}, {"u"}, "/u");        // [B, 1, 6, 1]
  b.int_vector("sq", {3});
  b.node("Squeeze", {"u", "sq"}, {"s"}, "/s");             // [B, 1, 6]
  auto& f = b.node("Flatten", {"s"}, {"y"}, "/f");         // [B, 6]
  set_int(f, "axis", 1);
  const Imported m = must(convert(b));
  ASSERT_EQ(m.manifest.layers.size(), 3u);
  EXPECT_EQ(m.manifest.layers[0].attrs.shape, (gpu::Shape{0, 1, 6, 1}));
  EXPECT_EQ(m.manifest.layers[1].attrs.shape, (gpu::Shape{0, 1, 6}));
  EXPECT_EQ(m.manifest.layers[2].op, gpu::OpKind::flatten);
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 6}));
}

TEST(LowerShapes, SqueezeWithoutAxesOfAFreeDimIsRefused) {
  OnnxBuilder b;
  b.input("x", {"batch", 1, 6}).output("y");
  b.node("Squeeze", {"x"}, {"y"}, "/s");
  EXPECT_NE(refusal(b).find("Squeeze without axes of a value with free dims"), std::string::npos) << refusal(b);
}

TEST(LowerShapes, GatherOfOneIndexFromAnActivationIsASelect) {
  OnnxBuilder b;
  b.input("x", {"batch", 5, 8}).output("y");
  b.int_scalar("i", 0);
  auto& g = b.node("Gather", {"x", "i"}, {"y"}, "/cls");
  set_int(g, "axis", 1);
  const Imported m = must(convert(b));
  ASSERT_EQ(m.manifest.layers.size(), 1u);
  EXPECT_EQ(m.manifest.layers[0].op, gpu::OpKind::select);
  EXPECT_EQ(m.manifest.layers[0].attrs.dim, 1);
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 8}));
}

TEST(LowerShapes, IdentityAndInferenceDropoutVanish) {
  OnnxBuilder b(12);
  b.input("x", {"batch", 4}).output("y");
  b.node("Relu", {"x"}, {"r"}, "/relu");
  b.node("Identity", {"r"}, {"i"});
  b.node("Dropout", {"i"}, {"y"});
  const Imported m = must(convert(b));
  ASSERT_EQ(m.manifest.layers.size(), 1u);
  EXPECT_EQ(m.manifest.layers[0].name, "y");  // the relu, named as the graph output it became
  EXPECT_EQ(m.stats.removed, 2u);

  auto* dropout = b.model.mutable_graph()->mutable_node(2);
  dropout->add_output("mask");
  b.output("mask");
  EXPECT_NE(refusal(b).find("the mask (output 1) is read by the graph"), std::string::npos) << refusal(b);
}

// Dropout-7 and -10 (opsets 9 to 11) carry ratio as an attribute; at inference they vanish alike.
TEST(LowerShapes, DropoutWithARatioAttributeVanishesBeforeOpset12) {
  for (int64_t opset : {9, 10, 11}) {
    OnnxBuilder b(opset);
    b.input("x", {"batch", 4}).output("y");
    b.node("Relu", {"x"}, {"r"}, "/relu");
    testing::set_float(b.node("Dropout", {"r"}, {"y", ""}), "ratio", 0.3f);
    const Imported m = must(convert(b));
    ASSERT_EQ(m.manifest.layers.size(), 1u) << opset;
    EXPECT_EQ(m.stats.removed, 1u);
  }
}

TEST(LowerShapes, AddOfTwoActivationsOfOneShapeIsAResidualAndAnythingElseABinaryLayer) {
  OnnxBuilder b;
  b.input("x", {"batch", 4}).output("y");
  b.node("Relu", {"x"}, {"r"});
  b.node("Add", {"x", "r"}, {"y"}, "/add");
  const Imported m = must(convert(b));
  EXPECT_EQ(m.manifest.layers.back().op, gpu::OpKind::add);

  // An activation and a constant: the constant is a `constant` layer, the sum a broadcasting binary.
  OnnxBuilder c;
  c.input("x", {"batch", 4}).output("y");
  c.ramp("bias", {4});
  c.node("Add", {"x", "bias"}, {"y"}, "/layer1/Add");
  const Imported mc = must(convert(c));
  ASSERT_EQ(mc.manifest.layers.size(), 2u);
  EXPECT_EQ(mc.manifest.layers[0].op, gpu::OpKind::constant);
  EXPECT_EQ(mc.manifest.layers[0].name, "bias.constant");
  EXPECT_EQ(mc.manifest.layers[1].op, gpu::OpKind::binary);
  EXPECT_EQ(mc.manifest.layers[1].inputs, (std::vector<std::string>{"x", "bias.constant"}));
  EXPECT_EQ(mc.weights[0].tensor, "bias.constant.value");

  OnnxBuilder d;
  d.input("x", {"batch", 4}).output("y");
  d.node("Mul", {"x", "x"}, {"y"}, "/layer1/Mul");
  const Imported md = must(convert(d));
  EXPECT_EQ(md.manifest.layers[0].op, gpu::OpKind::binary);
  EXPECT_EQ(md.manifest.layers[0].attrs.fn, static_cast<uint8_t>(gpu::BinaryFn::mul));
}

TEST(LowerShapes, TransposeFoldsOnConstantsAndIsALayerOnActivations) {
  OnnxBuilder b;
  b.input("x", {2, 3}).output("y");
  b.weight("w", {3, 2}, {1, 2, 3, 4, 5, 6});
  b.node("Transpose", {"w"}, {"wt"});  // [2, 3]
  b.node("Transpose", {"wt"}, {"w2"});  // [3, 2] again: the MatMul's weight
  b.node("MatMul", {"x", "w2"}, {"y"});
  const Imported m = must(convert(b));
  EXPECT_EQ(*m.weights[0].values, (std::vector<float>{1, 3, 5, 2, 4, 6}));
  EXPECT_EQ(m.stats.folded, 2u);

  OnnxBuilder c;
  c.input("x", {2, 3}).output("y");
  c.node("Transpose", {"x"}, {"y"}, "/t");
  const Imported mc = must(convert(c));
  EXPECT_EQ(mc.manifest.layers[0].op, gpu::OpKind::transpose);
  EXPECT_EQ(mc.manifest.outputs[0].shape, (gpu::Shape{3, 2}));
}

}  // namespace lower_shapes_test
}  // namespace ember::importer
