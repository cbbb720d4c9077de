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

}  // namespace lower_tensor_test
}  // namespace ember::importer
