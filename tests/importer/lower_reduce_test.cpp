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
