// Reductions, ArgMax/ArgMin, TopK and Softmax/LogSoftmax (importer/lower_reduce.cpp).
#include <gtest/gtest.h>

#include "tests/importer/onnx_builder.hpp"
#include "tests/must.hpp"

namespace ember::importer {
namespace lower_reduce_test {

using ember::testing::must;
using testing::convert;
using testing::OnnxBuilder;
using testing::set_int;
using testing::set_ints;

std::string refusal(const OnnxBuilder& b) {
  auto r = convert(b);
  return r.ok() ? "(converted)" : r.error().message();
}

TEST(LowerReduce, ReductionsTakeTheirAxesFromTheAttributeOrTheInput) {
  OnnxBuilder mean(13);
  mean.input("x", {"batch", 3, 4, 4}).output("y");
  auto& n = mean.node("ReduceMean", {"x"}, {"y"}, "/mean");
  set_ints(n, "axes", {-1, -2});
  const Imported m = must(convert(mean));
  const auto& a = m.manifest.layers[0].attrs;
  EXPECT_EQ(a.fn, static_cast<uint8_t>(gpu::ReduceFn::mean));
  EXPECT_EQ(a.num_axes, 2);
  EXPECT_EQ(a.axes[0], 3);
  EXPECT_TRUE(a.keepdims);
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 3, 1, 1}));

  OnnxBuilder sum(13);  // from opset 13 ReduceSum's axes are an input
  sum.input("x", {"batch", 3, 4}).output("y");
  sum.int_vector("axes", {1});
  set_int(sum.node("ReduceSum", {"x", "axes"}, {"y"}, "/sum"), "keepdims", 0);
  EXPECT_EQ(must(convert(sum)).manifest.outputs[0].shape, (gpu::Shape{-1, 4}));

  OnnxBuilder all(11);
  all.input("x", {2, 3}).output("y");
  all.node("ReduceLogSumExp", {"x"}, {"y"});
  EXPECT_EQ(must(convert(all)).manifest.outputs[0].shape, (gpu::Shape{1, 1}));

  OnnxBuilder computed(13);
  computed.input("x", {2, 3}).input("axes", {1}, onnx::TensorProto::INT64).output("y");
  computed.node("ReduceSum", {"x", "axes"}, {"y"}, "/sum");
  EXPECT_NE(refusal(computed).find("node '/sum' (ReduceSum): not supported yet: input 1 (axes, 'axes') is computed"),
            std::string::npos);
}

TEST(LowerReduce, ArgMaxAndTopKGiveInt64IndicesAndTopKOneLayerPerOutput) {
  OnnxBuilder b;
  b.input("x", {"batch", 10}).output("best").output("values").output("indices");
  auto& am = b.node("ArgMin", {"x"}, {"best"}, "/argmin");
  set_int(am, "axis", 1);
  set_int(am, "keepdims", 0);
  b.int_vector("k", {3});
  b.node("TopK", {"x", "k"}, {"values", "indices"}, "/topk");
  const Imported m = must(convert(b));
  ASSERT_EQ(m.manifest.layers.size(), 3u);
  EXPECT_EQ(m.manifest.layers[0].attrs.fn, 1);  // min
  EXPECT_EQ(m.manifest.outputs[0].dtype, gpu::DType::i64);
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1}));
  EXPECT_TRUE(m.manifest.layers[1].attrs.values_output);
  EXPECT_FALSE(m.manifest.layers[2].attrs.values_output);
  EXPECT_EQ(m.manifest.outputs[1].shape, (gpu::Shape{-1, 3}));
  EXPECT_EQ(m.manifest.outputs[2].dtype, gpu::DType::i64);

  OnnxBuilder k;
  k.input("x", {2, 10}).input("k", {1}, onnx::TensorProto::INT64).output("v");
  k.node("TopK", {"x", "k"}, {"v"}, "/topk");
  EXPECT_NE(refusal(k).find("node '/topk' (TopK): not supported yet: input 1 (K, 'k') is computed at serve time"),
            std::string::npos);
}

// TopK-1 (before opset 10) takes k as an attribute; TopK-10 as input K. Both return the largest,
// sorted; largest and sorted arrive with TopK-11 and are refused by name before it.
TEST(LowerReduce, TopKBeforeOpset11IsTheLargestKWithKAnAttributeBefore10) {
  OnnxBuilder nine(9);
  nine.input("x", {"batch", 10}).output("values").output("indices");
  set_int(nine.node("TopK", {"x"}, {"values", "indices"}, "/topk"), "k", 4);
  const Imported m9 = must(convert(nine));
  ASSERT_EQ(m9.manifest.layers.size(), 2u);
  EXPECT_EQ(m9.manifest.layers[0].attrs.k, 4);
  EXPECT_TRUE(m9.manifest.layers[0].attrs.largest);
  EXPECT_EQ(m9.manifest.layers[0].attrs.dim, 1);
  EXPECT_EQ(m9.manifest.outputs[0].shape, (gpu::Shape{-1, 4}));
  EXPECT_EQ(m9.manifest.outputs[1].dtype, gpu::DType::i64);

  OnnxBuilder ten(10);
  ten.input("x", {"batch", 10}).output("values");
  ten.int_vector("k", {3});
  ten.node("TopK", {"x", "k"}, {"values"}, "/topk");
  const Imported m10 = must(convert(ten));
  EXPECT_EQ(m10.manifest.layers[0].attrs.k, 3);
  EXPECT_TRUE(m10.manifest.layers[0].attrs.largest);

  set_int(ten.model.mutable_graph()->mutable_node(1)[0], "largest", 0);
  EXPECT_NE(refusal(ten).find("node '/topk' (TopK): attribute 'largest' is not part of TopK before opset 11 (the model "
                              "declares opset 10)"),
            std::string::npos)
      << refusal(ten);
  OnnxBuilder no_k(9);
  no_k.input("x", {2, 10}).output("values");
  no_k.node("TopK", {"x"}, {"values"}, "/topk");
  EXPECT_NE(refusal(no_k).find("node '/topk' (TopK): attribute 'k' is required before opset 10"), std::string::npos)
      << refusal(no_k);
  OnnxBuilder input_k(9);
  input_k.input("x", {2, 10}).output("values");
  input_k.int_vector("k", {3});
  set_int(input_k.node("TopK", {"x", "k"}, {"values"}, "/topk"), "k", 3);
  EXPECT_NE(refusal(input_k).find("TopK takes 1 input before opset 10"), std::string::npos) << refusal(input_k);

  // ArgMax's select_last_index arrives with opset 12.
  OnnxBuilder last(11);
  last.input("x", {2, 10}).output("i");
  set_int(last.node("ArgMax", {"x"}, {"i"}, "/argmax"), "select_last_index", 1);
  EXPECT_NE(refusal(last).find("attribute 'select_last_index' is not part of ArgMax before opset 12"), std::string::npos)
      << refusal(last);
}

TEST(LowerReduce, LogSoftmaxAndOldSoftmaxOverTrailingOnes) {
  OnnxBuilder b(13);
  b.input("x", {"batch", 5}).output("y");
  b.node("LogSoftmax", {"x"}, {"y"});
  const Imported m = must(convert(b));
  EXPECT_TRUE(m.manifest.layers[0].attrs.log);
  EXPECT_EQ(m.manifest.layers[0].attrs.dim, 1);

  // Opset 11, axis 1 of [n, 5, 1, 1]: the dims after the axis are 1, so per-dim softmax is the same.
  OnnxBuilder old(11);
  old.input("x", {"batch", 5, 1, 1}).output("y");
  old.node("Softmax", {"x"}, {"y"});
  EXPECT_EQ(must(convert(old)).manifest.layers[0].attrs.dim, 1);
}

}  // namespace lower_reduce_test
}  // namespace ember::importer
