// ONNX ops that move elements (importer/lower_tensor.cpp) on activations: Concat (with constant
// operands, and as a tree past kMaxLayerInputs), Split, Slice, Gather, Expand with a free dim taken
// from another value, Pad and Resize, and what each refuses.
#include <algorithm>
#include <cctype>

#include <gtest/gtest.h>

#include "model/manifest.hpp"
#include "tests/importer/onnx_builder.hpp"
#include "tests/must.hpp"

namespace ember::importer {
namespace lower_tensor_test {

using ember::testing::must;
using testing::convert;
using testing::OnnxBuilder;
using testing::set_int;
using testing::set_ints;
using testing::set_string;

std::vector<std::string> ops(const Imported& m) {
  std::vector<std::string> out;
  for (const auto& l : m.manifest.layers) out.emplace_back(gpu::op_name(l.op));
  return out;
}

std::string refusal(const OnnxBuilder& b) {
  auto r = convert(b);
  return r.ok() ? "(converted)" : r.error().message();
}

TEST(LowerTensor, ConcatOfActivationsTakesConstantsAsLayers) {
  OnnxBuilder b;
  b.input("x", {"batch", 2, 3}).output("y");
  b.ramp("token", {1, 1, 3});
  b.node("Relu", {"x"}, {"r"});
  set_int(b.node("Concat", {"x", "r"}, {"c"}, "/cat"), "axis", 1);
  b.node("Concat", {"c", "c"}, {"y"}, "/cat2").add_attribute()->CopyFrom(b.model.graph().node(1).attribute(0));
  const Imported m = must(convert(b));
  EXPECT_EQ(ops(m), (std::vector<std::string>{"relu", "concat", "concat"}));
  EXPECT_EQ(m.manifest.layers[1].attrs.dim, 1);
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 8, 3}));

  // A constant operand must fit every dim but the axis: [1, 1, 3] against [batch, 2, 3] along 1.
  OnnxBuilder k;
  k.input("x", {1, 2, 3}).output("y");
  k.ramp("token", {1, 1, 3});
  set_int(k.node("Concat", {"token", "x"}, {"y"}, "/cat"), "axis", 1);
  const Imported mk = must(convert(k));
  EXPECT_EQ(ops(mk), (std::vector<std::string>{"constant", "concat"}));
  EXPECT_EQ(mk.manifest.outputs[0].shape, (gpu::Shape{1, 3, 3}));
}

TEST(LowerTensor, ConcatOfMoreInputsThanALayerTakesIsATree) {
  OnnxBuilder b;
  b.input("x", {"batch", 1}).output("y");
  std::vector<std::string> parts(70, "x");
  set_int(b.node("Concat", parts, {"y"}, "/dense"), "axis", 1);
  const Imported m = must(convert(b));
  EXPECT_EQ(ops(m), (std::vector<std::string>{"concat", "concat", "concat"}));
  EXPECT_EQ(m.manifest.layers[0].inputs.size(), 64u);
  EXPECT_EQ(m.manifest.layers[1].inputs.size(), 6u);
  EXPECT_EQ(m.manifest.layers[2].name, "y");
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 70}));
}

TEST(LowerTensor, SplitIsOneSliceARead) {
  for (int64_t opset : {11, 13}) {
    OnnxBuilder b(opset);
    b.input("x", {"batch", 5}).output("a").output("b");
    auto& n = opset >= 13 ? (b.ints("split", {2}, {2, 3}), b.node("Split", {"x", "split"}, {"a", "b"}, "/split"))
                          : b.node("Split", {"x"}, {"a", "b"}, "/split");
    set_int(n, "axis", 1);
    if (opset < 13) set_ints(n, "split", {2, 3});
    const Imported m = must(convert(b));
    ASSERT_EQ(ops(m), (std::vector<std::string>{"slice", "slice"})) << opset;
    EXPECT_EQ(m.manifest.layers[1].attrs.starts[0], 2);
    EXPECT_EQ(m.manifest.layers[1].attrs.ends[0], 5);
    EXPECT_EQ(m.manifest.outputs[1].shape, (gpu::Shape{-1, 3}));
  }
  OnnxBuilder uneven;
  uneven.input("x", {2, 5}).output("a").output("b");
  set_int(uneven.node("Split", {"x"}, {"a", "b"}, "/s"), "axis", 1);
  EXPECT_NE(refusal(uneven).find("node '/s' (Split): dim 5 does not split into 2 equal parts"), std::string::npos);
  OnnxBuilder free;
  free.input("x", {"batch", 4}).output("a").output("b");
  free.node("Split", {"x"}, {"a", "b"}, "/s");
  EXPECT_NE(refusal(free).find("Split along a dim that depends on the model's free dims"), std::string::npos);
}

TEST(LowerTensor, SliceOfAnActivationKeepsItsBoundsAndFreeDims) {
  OnnxBuilder b;
  b.input("x", {"batch", "seq", 8}).output("y");
  b.int_vector("starts", {1, -1});
  b.int_vector("ends", {INT64_MAX, INT64_MIN});
  b.int_vector("axes", {1, 2});
  b.int_vector("steps", {1, -2});
  b.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"}, "/slice");
  const Imported m = must(convert(b));
  ASSERT_EQ(ops(m), std::vector<std::string>{"slice"});
  EXPECT_EQ(m.manifest.layers[0].attrs.steps[1], -2);
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, -1, 4}));  // seq - 1 stays free; 7, 5, 3, 1
}

// Slice-1, before opset 10: starts, ends and axes are attributes, and there are no steps. The
// bounds mean what they mean from opset 10 on; on a shape they fold.
TEST(LowerTensor, SliceBeforeOpset10TakesItsBoundsAsAttributes) {
  OnnxBuilder b(9);
  b.input("x", {"batch", "seq", 8}).output("y").output("n");
  auto& n = b.node("Slice", {"x"}, {"y"}, "/slice");
  set_ints(n, "starts", {1, -3});
  set_ints(n, "ends", {INT64_MAX, -1});
  set_ints(n, "axes", {1, 2});
  b.node("Shape", {"y"}, {"shape"});
  auto& dims = b.node("Slice", {"shape"}, {"lead"}, "/dims");  // [batch, seq - 1]: folded
  set_ints(dims, "starts", {0});
  set_ints(dims, "ends", {2});
  b.int_vector("rest", {1, 2});
  set_int(b.node("Concat", {"lead", "rest"}, {"target"}), "axis", 0);
  b.node("Relu", {"y"}, {"r"});
  b.node("Reshape", {"r", "target"}, {"n"}, "/view");
  const Imported m = must(convert(b));
  ASSERT_EQ(ops(m), (std::vector<std::string>{"slice", "relu", "reshape"}));
  const auto& a = m.manifest.layers[0].attrs;
  EXPECT_EQ(a.num_axes, 2);
  EXPECT_EQ(a.starts[1], -3);
  EXPECT_EQ(a.ends[1], -1);
  EXPECT_EQ(a.steps[1], 1);
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, -1, 2}));
  EXPECT_EQ(m.manifest.outputs[1].shape, (gpu::Shape{-1, -1, 1, 2}));

  OnnxBuilder no_axes(9);  // axes omitted: 0, 1, ...
  no_axes.input("x", {4, 6}).output("y");
  auto& s = no_axes.node("Slice", {"x"}, {"y"});
  set_ints(s, "starts", {1, 2});
  set_ints(s, "ends", {3, 6});
  EXPECT_EQ(must(convert(no_axes)).manifest.outputs[0].shape, (gpu::Shape{2, 4}));

  OnnxBuilder inputs(9);  // the opset-10 form in an opset-9 model
  inputs.input("x", {4, 6}).output("y");
  inputs.int_vector("starts", {1});
  inputs.int_vector("ends", {3});
  inputs.node("Slice", {"x", "starts", "ends"}, {"y"}, "/slice");
  EXPECT_NE(refusal(inputs).find("node '/slice' (Slice): attributes 'starts' and 'ends' are required before opset 10"),
            std::string::npos)
      << refusal(inputs);
  set_ints(inputs.model.mutable_graph()->mutable_node(2)[0], "starts", {1});
  set_ints(inputs.model.mutable_graph()->mutable_node(2)[0], "ends", {3});
  EXPECT_NE(refusal(inputs).find("Slice takes 1 input before opset 10 (the model declares opset 9), this node 3"),
            std::string::npos)
      << refusal(inputs);
}

TEST(LowerTensor, GatherWithIndicesThatAreNotOneFixedIndexIsAGatherLayer) {
  // An embedding: a constant table, ids from the request.
  OnnxBuilder b;
  b.input("ids", {"batch", 3}, onnx::TensorProto::INT64).output("y");
  b.ramp("table", {10, 4});
  b.node("Gather", {"table", "ids"}, {"y"}, "/embed");
  const Imported m = must(convert(b));
  EXPECT_EQ(ops(m), (std::vector<std::string>{"constant", "gather"}));
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 3, 4}));

  // Constant indices into an activation: an int64 constant layer.
  OnnxBuilder c;
  c.input("x", {"batch", 6}).output("y");
  c.ints("idx", {2}, {5, -1});
  set_int(c.node("Gather", {"x", "idx"}, {"y"}, "/pick"), "axis", 1);
  const Imported mc = must(convert(c));
  EXPECT_EQ(ops(mc), (std::vector<std::string>{"constant", "gather"}));
  EXPECT_EQ(mc.weights[0].dtype, gpu::DType::i64);
  EXPECT_EQ(mc.weights[0].raw->size(), 16u);
  EXPECT_EQ(mc.manifest.layers[1].attrs.dim, 1);
}

// class_token.expand(x.shape[0], -1, -1) as torch.onnx.export writes it (ViT): the batch is free,
// so the expand takes it from the input.
TEST(LowerTensor, ExpandToAFreeDimTakesItFromAValueThatHasIt) {
  OnnxBuilder b;
  b.input("x", {"batch", 3, 4}).output("y");
  b.ramp("token", {1, 1, 4});
  b.node("Shape", {"x"}, {"shape"});
  b.int_vector("zero", {0});
  b.node("Gather", {"shape", "zero"}, {"n"});
  b.int_vector("rest", {1, 4});
  set_int(b.node("Concat", {"n", "rest"}, {"target"}), "axis", 0);
  b.node("Expand", {"token", "target"}, {"cls"}, "/expand");
  set_int(b.node("Concat", {"cls", "x"}, {"y"}, "/cat"), "axis", 1);
  const Imported m = must(convert(b));
  EXPECT_EQ(ops(m), (std::vector<std::string>{"constant", "expand", "concat"}));
  const auto& e = m.manifest.layers[1];
  EXPECT_EQ(e.inputs, (std::vector<std::string>{"token.constant", "x"}));
  EXPECT_EQ(e.attrs.like_dims[0], 0);
  EXPECT_EQ(e.attrs.like_dims[1], -1);
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 4, 4}));
  std::string json = gpu::manifest_to_json(m.manifest);
  json.erase(std::remove_if(json.begin(), json.end(), [](char ch) { return std::isspace(static_cast<unsigned char>(ch)); }),
             json.end());
  EXPECT_NE(json.find("\"like_dims\":[0,-1,-1]"), std::string::npos) << json;
}

TEST(LowerTensor, PadTakesItsModesAndRefusesWrap) {
  auto pad = [](const std::string& mode) {
    OnnxBuilder b;
    b.input("x", {"batch", 2, 4, 4}).output("y");
    b.int_vector("pads", {0, 0, 1, 2, 0, 0, 1, 0});
    set_string(b.node("Pad", {"x", "pads"}, {"y"}, "/pad"), "mode", mode);
    return b;
  };
  const Imported m = must(convert(pad("reflect")));
  ASSERT_EQ(ops(m), std::vector<std::string>{"pad"});
  EXPECT_EQ(m.manifest.layers[0].attrs.fn, static_cast<uint8_t>(gpu::PadMode::reflect));
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 2, 6, 6}));
  EXPECT_EQ(must(convert(pad("edge"))).manifest.layers[0].attrs.fn, static_cast<uint8_t>(gpu::PadMode::edge));
  EXPECT_NE(refusal(pad("wrap")).find("node '/pad' (Pad): not supported: mode 'wrap'"), std::string::npos);
}

// Pad-2, before opset 11: pads and the fill value are attributes.
TEST(LowerTensor, PadBeforeOpset11TakesPadsAndValueAsAttributes) {
  OnnxBuilder b(10);
  b.input("x", {"batch", 2, 4, 4}).output("y");
  auto& n = b.node("Pad", {"x"}, {"y"}, "/pad");
  set_ints(n, "pads", {0, 0, 1, 2, 0, 0, 1, 0});
  testing::set_float(n, "value", -1.5f);
  const Imported m = must(convert(b));
  ASSERT_EQ(ops(m), std::vector<std::string>{"pad"});
  EXPECT_EQ(m.manifest.layers[0].attrs.fn, static_cast<uint8_t>(gpu::PadMode::constant));
  EXPECT_FLOAT_EQ(m.manifest.layers[0].attrs.alpha, -1.5f);
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 2, 6, 6}));

  OnnxBuilder edge(9);
  edge.input("x", {1, 2, 4, 4}).output("y");
  auto& e = edge.node("Pad", {"x"}, {"y"}, "/pad");
  set_ints(e, "pads", {0, 0, 1, 1, 0, 0, 1, 1});
  set_string(e, "mode", "edge");
  EXPECT_EQ(must(convert(edge)).manifest.layers[0].attrs.fn, static_cast<uint8_t>(gpu::PadMode::edge));

  OnnxBuilder inputs(10);  // the opset-11 form in an opset-10 model
  inputs.input("x", {1, 2, 4, 4}).output("y");
  inputs.int_vector("pads", {0, 0, 1, 1, 0, 0, 1, 1});
  inputs.node("Pad", {"x", "pads"}, {"y"}, "/pad");
  EXPECT_NE(refusal(inputs).find("node '/pad' (Pad): attribute 'pads' is required before opset 11"), std::string::npos)
      << refusal(inputs);
}

OnnxBuilder resize(const std::string& mode, const std::string& coords) {
  OnnxBuilder b;
  b.input("x", {"batch", 2, 4, 4}).output("y");
  b.weight("scales", {4}, {1.f, 1.f, 2.f, 1.5f});
  auto& n = b.node("Resize", {"x", "", "scales"}, {"y"}, "/up");
  set_string(n, "mode", mode);
  set_string(n, "coordinate_transformation_mode", coords);
  set_string(n, "nearest_mode", "floor");
  return b;
}

TEST(LowerTensor, ResizeTakesScalesOrSizesAndRefusesWhatEmberLacks) {
  const Imported m = must(convert(resize("nearest", "asymmetric")));
  ASSERT_EQ(ops(m), std::vector<std::string>{"resize"});
  EXPECT_EQ(m.manifest.layers[0].attrs.coords, static_cast<uint8_t>(gpu::ResizeCoords::asymmetric));
  EXPECT_EQ(m.manifest.layers[0].attrs.nearest_round, static_cast<uint8_t>(gpu::NearestRound::floor));
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 2, 8, 6}));
  EXPECT_EQ(must(convert(resize("linear", "align_corners"))).manifest.layers[0].attrs.fn,
            static_cast<uint8_t>(gpu::ResizeMode::linear));
  EXPECT_NE(refusal(resize("cubic", "half_pixel")).find("node '/up' (Resize): not supported: mode 'cubic'"),
            std::string::npos);
  EXPECT_NE(refusal(resize("linear", "tf_crop_and_resize")).find("coordinate_transformation_mode 'tf_crop_and_resize'"),
            std::string::npos);

  // F.interpolate(size=(6, 6)): sizes concatenated from the input's shape keep the batch free.
  OnnxBuilder s;
  s.input("x", {"batch", 2, 4, 4}).output("y");
  s.node("Shape", {"x"}, {"shape"});
  s.int_vector("start", {0});
  s.int_vector("end", {2});
  s.node("Slice", {"shape", "start", "end"}, {"nc"});
  s.int_vector("hw", {6, 6});
  set_int(s.node("Concat", {"nc", "hw"}, {"sizes"}), "axis", 0);
  set_string(s.node("Resize", {"x", "", "", "sizes"}, {"y"}, "/up"), "mode", "linear");
  const Imported ms = must(convert(s));
  EXPECT_EQ(ms.manifest.layers[0].attrs.shape, (gpu::Shape{0, 0, 6, 6}));
  EXPECT_EQ(ms.manifest.outputs[0].shape, (gpu::Shape{-1, 2, 6, 6}));
}

// Resize-10 and Upsample: X and scales, asymmetric coordinates, and nearest rounding down where a
// dim grows and up where it shrinks (ONNX's test_resize_downsample_nearest: [1, 2, 3, 4] at 0.6
// is [1, 3]). Growing one dim and shrinking the other is refused, as are Resize-11's attributes.
OnnxBuilder old_resize(const std::string& op, int64_t opset, std::vector<float> scales, const std::string& mode = "nearest") {
  OnnxBuilder b(opset);
  b.input("x", {"batch", 2, 4, 4}).output("y");
  b.weight("scales", {4}, scales);
  set_string(b.node(op, {"x", "scales"}, {"y"}, "/up"), "mode", mode);
  return b;
}

TEST(LowerTensor, ResizeBeforeOpset11AndUpsampleRoundNearestByTheirScales) {
  for (const auto& [op, opset] : std::vector<std::pair<std::string, int64_t>>{{"Resize", 10}, {"Upsample", 9}, {"Upsample", 13}}) {
    const Imported up = must(convert(old_resize(op, opset, {1.f, 1.f, 2.f, 1.f})), op);
    ASSERT_EQ(ops(up), std::vector<std::string>{"resize"}) << op << opset;
    const auto& a = up.manifest.layers[0].attrs;
    EXPECT_EQ(a.coords, static_cast<uint8_t>(gpu::ResizeCoords::asymmetric));
    EXPECT_EQ(a.nearest_round, static_cast<uint8_t>(gpu::NearestRound::floor)) << op << opset;
    EXPECT_EQ(up.manifest.outputs[0].shape, (gpu::Shape{-1, 2, 8, 4}));
    const Imported down = must(convert(old_resize(op, opset, {1.f, 1.f, 0.6f, 1.f})), op);
    EXPECT_EQ(down.manifest.layers[0].attrs.nearest_round, static_cast<uint8_t>(gpu::NearestRound::ceil)) << op << opset;
    EXPECT_EQ(down.manifest.outputs[0].shape, (gpu::Shape{-1, 2, 2, 4}));
    EXPECT_NE(refusal(old_resize(op, opset, {1.f, 1.f, 2.f, 0.5f})).find("node '/up' (" + op + "): not supported: nearest scales"),
              std::string::npos)
        << refusal(old_resize(op, opset, {1.f, 1.f, 2.f, 0.5f}));
    // Linear interpolation has no rounding: both ways at once is fine.
    const Imported linear = must(convert(old_resize(op, opset, {1.f, 1.f, 2.f, 0.5f}, "linear")));
    EXPECT_EQ(linear.manifest.layers[0].attrs.fn, static_cast<uint8_t>(gpu::ResizeMode::linear));
    EXPECT_EQ(linear.manifest.layers[0].attrs.coords, static_cast<uint8_t>(gpu::ResizeCoords::asymmetric));
    EXPECT_EQ(linear.manifest.outputs[0].shape, (gpu::Shape{-1, 2, 8, 2}));
  }
  OnnxBuilder modes = old_resize("Resize", 10, {1.f, 1.f, 2.f, 2.f});
  set_string(modes.model.mutable_graph()->mutable_node(0)[0], "coordinate_transformation_mode", "half_pixel");
  EXPECT_NE(refusal(modes).find("node '/up' (Resize): attribute 'coordinate_transformation_mode' is not part of Resize "
                                "before opset 11 (the model declares opset 10)"),
            std::string::npos)
      << refusal(modes);
  OnnxBuilder roi(10);  // Resize-11's inputs in an opset-10 model
  roi.input("x", {1, 2, 4, 4}).output("y");
  roi.weight("roi", {0}, {});
  roi.weight("scales", {4}, {1.f, 1.f, 2.f, 2.f});
  roi.node("Resize", {"x", "roi", "scales"}, {"y"}, "/up");
  EXPECT_NE(refusal(roi).find("Resize before opset 11 takes X and scales, this node 3 inputs"), std::string::npos)
      << refusal(roi);
}

}  // namespace lower_tensor_test
}  // namespace ember::importer
