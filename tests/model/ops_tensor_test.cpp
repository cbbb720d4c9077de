// model/ops_tensor.cpp: the general ops' attributes survive model.json (parse -> write -> parse),
// and shape inference gives numpy's and ONNX's shapes and refuses what the kernels cannot run.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/ops.hpp"

namespace ember::gpu {
namespace ops_tensor_test {

using nlohmann::json;

LayerAttrs parsed(OpKind op, const json& j) {
  LayerAttrs a;
  auto s = parse_attrs(op, j, a, "test");
  EXPECT_TRUE(s.ok()) << op_name(op) << ": " << s.error().message();
  return a;
}

TEST(OpsTensor, AttributesRoundTripThroughModelJson) {
  const std::pair<OpKind, json> cases[] = {
      {OpKind::unary, {{"fn", "clip"}, {"alpha", -1.5}, {"beta", 6}}},
      {OpKind::unary, {{"fn", "hard_swish"}}},
      {OpKind::binary, {{"fn", "greater_equal"}}},
      {OpKind::where, json::object()},
      {OpKind::constant, {{"dtype", "int64"}, {"shape", {2, 3}}}},
      {OpKind::matmul, json::object()},
      {OpKind::transpose, {{"perm", {0, 2, 1}}}},
      {OpKind::concat, {{"dim", -1}}},
      {OpKind::slice, {{"axes", {0, -1}}, {"starts", {1, -1}}, {"ends", {INT64_MAX, -100}}, {"steps", {2, -1}}}},
      {OpKind::gather, {{"dim", 1}}},
      {OpKind::expand, {{"shape", {1, 3, 4}}, {"like_dims", {0, -1, -1}}}},
      {OpKind::pad, {{"pads", {0, 1, -1, 2}}, {"mode", "reflect"}, {"value", 0.5}}},
      {OpKind::resize, {{"mode", "linear"}, {"scales", {1, 1, 2, 2}}, {"coordinate_transformation_mode", "align_corners"}}},
      {OpKind::resize, {{"mode", "nearest"}, {"sizes", {1, 3, 8, 8}}, {"nearest_mode", "floor"}}},
      {OpKind::conv_transpose2d,
       {{"in_channels", 4}, {"out_channels", 6}, {"kernel_size", {3, 2}}, {"stride", 2}, {"padding", 1},
        {"output_padding", 1}, {"groups", 2}, {"bias", false}}},
      {OpKind::group_norm, {{"num_groups", 2}, {"num_features", 6}, {"eps", 1e-3}}},
      {OpKind::rms_norm, {{"normalized_shape", 16}}},
      {OpKind::reduce, {{"fn", "log_sum_exp"}, {"axes", {1, -1}}, {"keepdims", false}}},
      {OpKind::cast, {{"to", "bfloat16"}}},
      {OpKind::argmax, {{"dim", -1}, {"keepdims", false}, {"select_last_index", true}, {"fn", "min"}}},
      {OpKind::topk, {{"k", 3}, {"dim", 1}, {"largest", false}, {"output", "indices"}}},
  };
  for (const auto& [op, j] : cases) {
    SCOPED_TRACE(std::string(op_name(op)) + " " + j.dump());
    json once, twice;
    attrs_to_json(op, parsed(op, j), once);
    attrs_to_json(op, parsed(op, once), twice);
    EXPECT_EQ(once, twice);
    for (const auto& [key, value] : j.items()) EXPECT_TRUE(once.contains(key)) << key;
  }
}

TensorDesc f32(Shape s) { return {DType::f32, s}; }

Result<TensorDesc> infer(OpKind op, const json& j, std::vector<TensorDesc> in) {
  return infer_output(op, parsed(op, j), in);
}

TEST(OpsTensor, InferredShapes) {
  struct Case {
    OpKind op;
    json attrs;
    std::vector<TensorDesc> in;
    TensorDesc want;
  };
  const Case cases[] = {
      {OpKind::binary, {{"fn", "add"}}, {f32({2, 1, 5}), f32({3, 1})}, f32({2, 3, 5})},
      {OpKind::binary, {{"fn", "less"}}, {{DType::i64, Shape{}}, {DType::i64, Shape{4}}}, {DType::u8, Shape{4}}},
      {OpKind::binary, {{"fn", "mul"}}, {f32({2, 0, 3}), f32({1, 3})}, f32({2, 0, 3})},
      {OpKind::where, json::object(), {{DType::u8, Shape{3, 1}}, {DType::i64, Shape{4}}, {DType::i64, Shape{}}},
       {DType::i64, Shape{3, 4}}},
      {OpKind::matmul, json::object(), {f32({2, 1, 3, 4}), f32({5, 4, 2})}, f32({2, 5, 3, 2})},
      {OpKind::matmul, json::object(), {f32({4}), f32({4})}, f32({})},
      {OpKind::matmul, json::object(), {f32({2, 3, 4}), f32({4})}, f32({2, 3})},
      {OpKind::slice, {{"axes", {0, 1}}, {"starts", {1, -1}}, {"ends", {INT64_MAX, -7}}, {"steps", {2, -2}}},
       {f32({5, 6})}, f32({2, 3})},
      {OpKind::gather, {{"dim", 1}}, {f32({2, 5, 3}), {DType::i32, Shape{4, 2}}}, f32({2, 4, 2, 3})},
      {OpKind::gather, {{"dim", 0}}, {f32({5, 3}), {DType::i64, Shape{}}}, f32({3})},
      {OpKind::expand, {{"shape", {2, 1, 4}}}, {f32({3, 1})}, f32({2, 3, 4})},
      {OpKind::pad, {{"pads", {1, -1, 0, 2}}}, {f32({3, 4})}, f32({4, 5})},
      {OpKind::resize, {{"scales", {1, 1, 0.6, 0.6}}}, {f32({1, 1, 2, 4})}, f32({1, 1, 1, 2})},
      {OpKind::reduce, {{"fn", "sum"}, {"axes", {0, -1}}, {"keepdims", false}}, {f32({2, 3, 4})}, f32({3})},
      {OpKind::reduce, {{"fn", "mean"}}, {f32({2, 3})}, f32({1, 1})},
      {OpKind::argmax, {{"dim", 1}, {"keepdims", false}}, {f32({2, 3, 4})}, {DType::i64, Shape{2, 4}}},
      {OpKind::topk, {{"k", 2}, {"output", "indices"}}, {f32({2, 5})}, {DType::i64, Shape{2, 2}}},
      {OpKind::cast, {{"to", "float16"}}, {{DType::i64, Shape{3}}}, {DType::f16, Shape{3}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(op_name(c.op)) + " " + c.attrs.dump());
    auto out = infer(c.op, c.attrs, c.in);
    ASSERT_TRUE(out.ok()) << out.error().message();
    EXPECT_EQ(out->dtype, c.want.dtype);
    EXPECT_EQ(out->shape, c.want.shape) << out->shape.to_string();
  }
}

// A layer built by code (an importer) rather than parsed from model.json: shape inference itself
// refuses a perm that is not a permutation (the ONNX fuzzer's Transpose with perm [0, 91]).
TEST(OpsTensor, ATransposeWhosePermIsNotAPermutationIsRefusedWhereverItWasBuilt) {
  for (const std::vector<int64_t>& perm : {std::vector<int64_t>{0, 91}, {1, 1}, {-1, 0}}) {
    LayerAttrs a;
    a.num_axes = 2;
    for (size_t i = 0; i < perm.size(); ++i) a.axes[i] = perm[i];
    const TensorDesc in[] = {f32({2, 3})};
    auto out = infer_output(OpKind::transpose, a, in);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(out.error().message().find("perm is not a permutation of 0..1"), std::string::npos)
        << out.error().message();
  }
}

TEST(OpsTensor, RefusesWhatKernelsCannotRun) {
  struct Case {
    OpKind op;
    json attrs;
    std::vector<TensorDesc> in;
  };
  const Case cases[] = {
      {OpKind::binary, {{"fn", "add"}}, {f32({2, 3}), f32({4})}},                             // no broadcast
      {OpKind::binary, {{"fn", "add"}}, {f32({2}), {DType::i64, Shape{2}}}},                  // dtypes differ
      {OpKind::binary, {{"fn", "and"}}, {f32({2}), f32({2})}},                                // logic on floats
      {OpKind::where, json::object(), {f32({2}), f32({2}), f32({2})}},                        // float condition
      {OpKind::matmul, json::object(), {f32({2, 3}), f32({4, 5})}},                           // inner dims
      {OpKind::transpose, {{"perm", {1, 0}}}, {f32({2, 3, 4})}},                              // perm length
      {OpKind::concat, {{"dim", 0}}, {f32({2, 3}), f32({2, 4})}},                             // other dims differ
      {OpKind::pad, {{"pads", {3, 0}}, {"mode", "reflect"}}, {f32({3})}},                     // reflect past the edge
      {OpKind::pad, {{"pads", {-2, -2}}}, {f32({3})}},                                        // cropped below 0
      {OpKind::resize, {{"scales", {1, 2, 2, 2}}}, {f32({1, 1, 2, 2})}},                      // a leading dim changes
      {OpKind::reduce, {{"fn", "max"}, {"axes", {1}}}, {f32({2, 0})}},                        // max of nothing
      {OpKind::topk, {{"k", 6}}, {f32({2, 5})}},                                              // k past the dim
      {OpKind::argmax, {{"dim", 2}}, {f32({2, 5})}},                                          // no such dim
      {OpKind::gather, {{"dim", 0}}, {f32({4}), f32({2})}},                                   // float indices
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(op_name(c.op)) + " " + c.attrs.dump());
    auto out = infer(c.op, c.attrs, c.in);
    EXPECT_FALSE(out.ok());
    if (!out.ok()) {
      EXPECT_EQ(out.error().code(), ErrorCode::invalid_argument) << out.error().message();
    }
  }
}

TEST(OpsTensor, WorkspaceOfConvTransposeAndTopk) {
  // conv_transpose2d: one image's columns [out/groups * kh * kw, h * w]; topk: an int64 per element.
  const std::vector<TensorDesc> x = {f32({2, 4, 5, 6})};
  const LayerAttrs ct = parsed(OpKind::conv_transpose2d,
                               {{"in_channels", 4}, {"out_channels", 6}, {"kernel_size", 3}, {"groups", 2}});
  EXPECT_EQ(workspace_bytes(OpKind::conv_transpose2d, ct, x), uint64_t{3 * 9 * 30 * 4});
  EXPECT_EQ(workspace_bytes(OpKind::topk, parsed(OpKind::topk, {{"k", 2}}), x), uint64_t{2 * 4 * 5 * 6 * 8});
}

}  // namespace ops_tensor_test
}  // namespace ember::gpu
