// The window ops (importer/lower_conv.cpp) beyond what lower_layers_test covers: ConvTranspose,
// 1-d and dilated pools, pools padded past what Ember's take, pools before opset 10, and the global
// pools.
#include <gtest/gtest.h>

#include "tests/importer/onnx_builder.hpp"
#include "tests/must.hpp"

namespace ember::importer {
namespace lower_conv_test {

using ember::testing::must;
using testing::convert;
using testing::OnnxBuilder;
using testing::set_int;
using testing::set_ints;

std::vector<std::string> ops(const Imported& m) {
  std::vector<std::string> out;
  for (const auto& l : m.manifest.layers) out.emplace_back(gpu::op_name(l.op));
  return out;
}

std::string refusal(const OnnxBuilder& b) {
  auto r = convert(b);
  return r.ok() ? "(converted)" : r.error().message();
}

TEST(LowerConv, ConvTransposeKeepsItsGeometryAndCropsAsymmetricPads) {
  OnnxBuilder b;
  b.input("x", {"batch", 4, 5, 5}).output("y");
  b.ramp("w", {4, 3, 3, 3}, 0.01f);  // [in, out / groups, kh, kw]
  b.ramp("b", {3});
  auto& n = b.node("ConvTranspose", {"x", "w", "b"}, {"y"}, "/up");
  set_ints(n, "strides", {2, 2});
  set_ints(n, "pads", {1, 1, 1, 1});
  set_ints(n, "output_padding", {1, 1});
  const Imported m = must(convert(b));
  ASSERT_EQ(ops(m), std::vector<std::string>{"conv_transpose2d"});
  const auto& a = m.manifest.layers[0].attrs;
  EXPECT_EQ(a.in_channels, 4);
  EXPECT_EQ(a.out_channels, 3);
  EXPECT_EQ(a.output_padding[0], 1);
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 3, 10, 10}));  // (5 - 1) * 2 - 2 + 3 + 1

  n.mutable_attribute(1)->set_ints(2, 2);  // pads [1, 1, 2, 1]: one more row cropped at the end
  const Imported crop = must(convert(b));
  EXPECT_EQ(ops(crop), (std::vector<std::string>{"conv_transpose2d", "slice"}));
  EXPECT_EQ(crop.manifest.outputs[0].shape, (gpu::Shape{-1, 3, 9, 10}));

  set_ints(n, "output_shape", {10, 10});
  EXPECT_NE(refusal(b).find("node '/up' (ConvTranspose): not supported yet: output_shape"), std::string::npos);
}

TEST(LowerConv, OneDimensionalAndDilatedPoolsAndPaddingPastHalfTheKernel) {
  OnnxBuilder one_d;
  one_d.input("x", {"batch", 2, 9}).output("y");
  auto& p = one_d.node("MaxPool", {"x"}, {"y"}, "/pool");
  set_ints(p, "kernel_shape", {3});
  set_ints(p, "strides", {2});
  set_ints(p, "dilations", {2});
  const Imported m = must(convert(one_d));
  EXPECT_EQ(ops(m), (std::vector<std::string>{"reshape", "max_pool2d", "reshape"}));
  EXPECT_EQ(m.manifest.layers[1].attrs.dilation[1], 2);
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 2, 3}));  // (9 - 5) / 2 + 1

  // Pads of 2 around a kernel of 3: more than Ember's pools take, so a pad layer of the lowest float.
  OnnxBuilder wide;
  wide.input("x", {1, 1, 4, 4}).output("y");
  auto& w = wide.node("MaxPool", {"x"}, {"y"}, "/pool");
  set_ints(w, "kernel_shape", {3, 3});
  set_ints(w, "pads", {2, 2, 2, 2});
  const Imported mw = must(convert(wide));
  EXPECT_EQ(ops(mw), (std::vector<std::string>{"pad", "max_pool2d"}));
  EXPECT_LT(mw.manifest.layers[0].attrs.alpha, -1e38f);
  EXPECT_EQ(mw.manifest.outputs[0].shape, (gpu::Shape{1, 1, 6, 6}));
}

// MaxPool-8 and AveragePool-7 (opset 9) have no ceil_mode, and MaxPool-8 no dilations: pools
// without them import as they do at later opsets, and either attribute is refused by name.
TEST(LowerConv, PoolsBeforeOpset10HaveNoCeilModeOrDilations) {
  auto pool = [](const char* op, int64_t opset) {
    OnnxBuilder b(opset);
    b.input("x", {"batch", 2, 6, 6}).output("y");
    auto& n = b.node(op, {"x"}, {"y"}, "/pool");
    set_ints(n, "kernel_shape", {3, 3});
    set_ints(n, "strides", {2, 2});
    set_ints(n, "pads", {1, 1, 1, 1});
    return b;
  };
  const Imported avg = must(convert(pool("AveragePool", 9)));
  EXPECT_EQ(ops(avg), std::vector<std::string>{"avg_pool2d"});
  EXPECT_FALSE(avg.manifest.layers[0].attrs.ceil_mode);
  EXPECT_FALSE(avg.manifest.layers[0].attrs.count_include_pad);
  EXPECT_EQ(avg.manifest.outputs[0].shape, (gpu::Shape{-1, 2, 3, 3}));
  EXPECT_EQ(ops(must(convert(pool("MaxPool", 9)))), std::vector<std::string>{"max_pool2d"});

  for (const char* op : {"AveragePool", "MaxPool"}) {
    OnnxBuilder ceil = pool(op, 9);
    set_int(ceil.model.mutable_graph()->mutable_node(0)[0], "ceil_mode", 1);
    EXPECT_NE(refusal(ceil).find("node '/pool' (" + std::string(op) + "): attribute 'ceil_mode' is not part of " + op +
                                 " before opset 10 (the model declares opset 9)"),
              std::string::npos)
        << refusal(ceil);
    OnnxBuilder ten = pool(op, 10);  // from opset 10 it is read
    set_int(ten.model.mutable_graph()->mutable_node(0)[0], "ceil_mode", 1);
    EXPECT_TRUE(must(convert(ten)).manifest.layers[0].attrs.ceil_mode) << op;
  }
  OnnxBuilder dilated = pool("MaxPool", 9);
  set_ints(dilated.model.mutable_graph()->mutable_node(0)[0], "dilations", {2, 2});
  EXPECT_NE(refusal(dilated).find("attribute 'dilations' is not part of MaxPool before opset 10"), std::string::npos)
      << refusal(dilated);
}

TEST(LowerConv, GlobalPoolsOfOtherRanksAreReductions) {
  OnnxBuilder b;
  b.input("x", {"batch", 3, 7}).output("avg").output("max");
  b.node("GlobalAveragePool", {"x"}, {"avg"});
  b.node("GlobalMaxPool", {"x"}, {"max"});
  const Imported m = must(convert(b));
  EXPECT_EQ(ops(m), (std::vector<std::string>{"reduce", "reduce"}));
  EXPECT_EQ(m.manifest.layers[1].attrs.fn, static_cast<uint8_t>(gpu::ReduceFn::max));
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 3, 1}));
}

}  // namespace lower_conv_test
}  // namespace ember::importer
