// Elementwise ONNX ops (importer/lower_elementwise.cpp): the unary functions and their parameters,
// broadcasting binary ops and comparisons, Min/Max chains, Where, Cast, folding on constants, and
// the refusals.
#include <gtest/gtest.h>

#include "model/manifest.hpp"
#include "tests/importer/onnx_builder.hpp"
#include "tests/must.hpp"

namespace ember::importer {
namespace lower_elementwise_test {

using ember::testing::must;
using testing::convert;
using testing::OnnxBuilder;
using testing::set_float;
using testing::set_int;

std::vector<std::string> ops(const Imported& m) {
  std::vector<std::string> out;
  for (const auto& l : m.manifest.layers) out.emplace_back(gpu::op_name(l.op));
  return out;
}

std::string refusal(const OnnxBuilder& b) {
  auto r = convert(b);
  return r.ok() ? "(converted)" : r.error().message();
}

// x -> op -> y, x float [batch, 4].
OnnxBuilder one(const std::string& op, int64_t opset = 13) {
  OnnxBuilder b(opset);
  b.input("x", {"batch", 4}).output("y");
  b.node(op, {"x"}, {"y"}, "/" + op);
  return b;
}

TEST(LowerElementwise, EachUnaryOpIsAUnaryLayerOfItsFunction) {
  const std::pair<const char*, const char*> kOps[] = {
      {"Sigmoid", "sigmoid"}, {"HardSigmoid", "hard_sigmoid"}, {"HardSwish", "hard_swish"}, {"Exp", "exp"},
      {"Log", "log"},         {"Sqrt", "sqrt"},                 {"Reciprocal", "reciprocal"}, {"Erf", "erf"},
      {"Neg", "neg"},         {"Abs", "abs"},                   {"LeakyRelu", "leaky_relu"}, {"Elu", "elu"},
      {"Celu", "celu"},       {"Selu", "selu"},                 {"Softplus", "softplus"},   {"Softsign", "softsign"},
      {"Sin", "sin"},         {"Cos", "cos"},                   {"Floor", "floor"},         {"Ceil", "ceil"},
      {"Round", "round"},     {"Sign", "sign"}};
  for (const auto& [onnx, fn] : kOps) {
    const Imported m = must(convert(one(onnx)), onnx);
    ASSERT_EQ(ops(m), std::vector<std::string>{"unary"}) << onnx;
    EXPECT_EQ(gpu::unary_fn_name(static_cast<gpu::UnaryFn>(m.manifest.layers[0].attrs.fn)), fn);
    EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 4}));
  }
}

TEST(LowerElementwise, UnaryParametersComeFromTheAttributesOrOnnxsDefaults) {
  OnnxBuilder hs = one("HardSigmoid");
  set_float(hs.model.mutable_graph()->mutable_node(0)[0], "alpha", 0.25f);
  Imported m = must(convert(hs));
  EXPECT_FLOAT_EQ(m.manifest.layers[0].attrs.alpha, 0.25f);
  EXPECT_FLOAT_EQ(m.manifest.layers[0].attrs.beta, 0.5f);  // ONNX's default
  const std::string json = gpu::manifest_to_json(m.manifest);
  EXPECT_NE(json.find("\"fn\": \"hard_sigmoid\""), std::string::npos) << json;

  OnnxBuilder selu = one("Selu");
  set_float(selu.model.mutable_graph()->mutable_node(0)[0], "gamma", 2.f);
  m = must(convert(selu));
  EXPECT_FLOAT_EQ(m.manifest.layers[0].attrs.beta, 2.f);  // gamma is unary's beta

  OnnxBuilder swish = one("HardSwish");
  m = must(convert(swish));
  EXPECT_FLOAT_EQ(m.manifest.layers[0].attrs.alpha, 1.f / 6.f);

  OnnxBuilder odd = one("Elu");
  set_int(odd.model.mutable_graph()->mutable_node(0)[0], "beta", 1);
  EXPECT_NE(refusal(odd).find("node '/Elu' (Elu): attribute 'beta' is not understood"), std::string::npos) << refusal(odd);
}

TEST(LowerElementwise, ClipTakesConstantBoundsAndRefusesComputedOnes) {
  OnnxBuilder b;
  b.input("x", {"batch", 4}).output("y");
  b.scalar("lo", 0.f);
  b.scalar("hi", 6.f);
  b.node("Clip", {"x", "lo", "hi"}, {"y"}, "/relu6");
  const Imported m = must(convert(b));
  ASSERT_EQ(ops(m), std::vector<std::string>{"unary"});
  EXPECT_FLOAT_EQ(m.manifest.layers[0].attrs.alpha, 0.f);
  EXPECT_FLOAT_EQ(m.manifest.layers[0].attrs.beta, 6.f);

  OnnxBuilder only_max;  // min omitted: the lowest float
  only_max.input("x", {2}).output("y");
  only_max.scalar("hi", 1.f);
  only_max.node("Clip", {"x", "", "hi"}, {"y"});
  EXPECT_LT(must(convert(only_max)).manifest.layers[0].attrs.alpha, -1e38f);

  OnnxBuilder computed;
  computed.input("x", {2}).input("lo", {}).output("y");
  computed.node("Clip", {"x", "lo"}, {"y"}, "/clip");
  EXPECT_NE(refusal(computed).find("node '/clip' (Clip): not supported yet: input 1 (min, 'lo') is computed at serve time"),
            std::string::npos)
      << refusal(computed);
}

// Clip-6, before opset 11: the bounds are attributes (ONNX's defaults the float range), and a
// bound given as an input is refused by name.
TEST(LowerElementwise, ClipBeforeOpset11TakesItsBoundsAsAttributes) {
  for (int64_t opset : {9, 10}) {
    OnnxBuilder b = one("Clip", opset);
    auto& n = b.model.mutable_graph()->mutable_node(0)[0];
    set_float(n, "min", 0.f);
    set_float(n, "max", 6.f);
    const Imported m = must(convert(b));
    ASSERT_EQ(ops(m), std::vector<std::string>{"unary"}) << opset;
    EXPECT_EQ(m.manifest.layers[0].attrs.fn, static_cast<uint8_t>(gpu::UnaryFn::clip));
    EXPECT_FLOAT_EQ(m.manifest.layers[0].attrs.alpha, 0.f);
    EXPECT_FLOAT_EQ(m.manifest.layers[0].attrs.beta, 6.f);
  }
  OnnxBuilder only_min = one("Clip", 9);
  set_float(only_min.model.mutable_graph()->mutable_node(0)[0], "min", -1.f);
  const Imported m = must(convert(only_min));
  EXPECT_FLOAT_EQ(m.manifest.layers[0].attrs.alpha, -1.f);
  EXPECT_GT(m.manifest.layers[0].attrs.beta, 1e38f);

  OnnxBuilder folded(9);  // on a constant it folds
  folded.input("x", {2}).output("y");
  folded.scalar("k", 9.f);
  set_float(folded.node("Clip", {"k"}, {"c"}), "max", 6.f);
  folded.node("Add", {"x", "c"}, {"y"});
  const Imported mf = must(convert(folded));
  EXPECT_EQ(ops(mf), (std::vector<std::string>{"constant", "binary"}));
  ASSERT_EQ(mf.weights.size(), 1u);
  EXPECT_EQ(*mf.weights[0].values, std::vector<float>{6.f});

  OnnxBuilder inputs(10);
  inputs.input("x", {2}).output("y");
  inputs.scalar("lo", 0.f);
  inputs.scalar("hi", 6.f);
  inputs.node("Clip", {"x", "lo", "hi"}, {"y"}, "/clip");
  EXPECT_NE(refusal(inputs).find("node '/clip' (Clip): Clip takes 1 input before opset 11 (the model declares opset "
                                 "10), this node 3"),
            std::string::npos)
      << refusal(inputs);
  // From opset 11 the attributes are gone: one there is not understood.
  OnnxBuilder attrs = one("Clip", 11);
  set_float(attrs.model.mutable_graph()->mutable_node(0)[0], "max", 6.f);
  EXPECT_NE(refusal(attrs).find("attribute 'max' is not understood"), std::string::npos) << refusal(attrs);
}

TEST(LowerElementwise, BinaryOpsBroadcastAndComparisonsGiveBool) {
  OnnxBuilder b;
  b.input("x", {"batch", 3, 4}).input("z", {4}).output("y").output("less");
  b.node("Pow", {"x", "z"}, {"y"}, "/pow");
  b.ramp("limit", {3, 1});
  b.node("Less", {"x", "limit"}, {"less"}, "/less");
  const Imported m = must(convert(b));
  EXPECT_EQ(ops(m), (std::vector<std::string>{"binary", "constant", "binary"}));
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 3, 4}));
  EXPECT_EQ(m.manifest.outputs[1].dtype, gpu::DType::u8);
  EXPECT_EQ(m.manifest.layers[2].attrs.fn, static_cast<uint8_t>(gpu::BinaryFn::less));
  EXPECT_EQ(m.manifest.layers[1].attrs.shape, (gpu::Shape{3, 1}));

  OnnxBuilder bad;
  bad.input("x", {2, 3}).input("z", {2, 4}).output("y");
  bad.node("Sub", {"x", "z"}, {"y"}, "/sub");
  EXPECT_NE(refusal(bad).find("node '/sub' (Sub): shapes [2, 3] and [2, 4] do not broadcast"), std::string::npos)
      << refusal(bad);

  OnnxBuilder ints;
  ints.input("x", {2}, onnx::TensorProto::INT64).output("y");
  ints.ints("k", {1}, {3});
  ints.node("Mul", {"x", "k"}, {"y"}, "/mul");
  EXPECT_NE(refusal(ints).find("not supported: mul of int64 and int64 (Ember's arithmetic is float32)"), std::string::npos)
      << refusal(ints);
}

TEST(LowerElementwise, MinAndMaxOfSeveralInputsAreAChainAndModNeedsFmod) {
  OnnxBuilder b;
  b.input("a", {2}).input("b", {2}).input("c", {2}).output("y");
  b.node("Max", {"a", "b", "c"}, {"y"}, "/max");
  const Imported m = must(convert(b));
  EXPECT_EQ(ops(m), (std::vector<std::string>{"binary", "binary"}));
  EXPECT_EQ(m.manifest.layers[1].inputs[0], m.manifest.layers[0].name);
  EXPECT_EQ(m.manifest.layers[1].name, "y");

  OnnxBuilder mod;
  mod.input("a", {2}).input("b", {2}).output("y");
  auto& n = mod.node("Mod", {"a", "b"}, {"y"}, "/mod");
  EXPECT_NE(refusal(mod).find("node '/mod' (Mod): not supported yet: Mod with fmod 0"), std::string::npos);
  set_int(n, "fmod", 1);
  EXPECT_EQ(must(convert(mod)).manifest.layers[0].attrs.fn, static_cast<uint8_t>(gpu::BinaryFn::mod));
}

TEST(LowerElementwise, WhereReadsABoolConditionAndConstantsBecomeLayers) {
  OnnxBuilder b;
  b.input("x", {"batch", 4}).output("y");
  b.scalar("zero", 0.f);
  b.node("Greater", {"x", "zero"}, {"pos"});
  b.node("Where", {"pos", "x", "zero"}, {"y"}, "/where");
  const Imported m = must(convert(b));
  EXPECT_EQ(ops(m), (std::vector<std::string>{"constant", "binary", "where"}));
  // One constant layer serves both readers of `zero`.
  EXPECT_EQ(m.manifest.layers[2].inputs[2], m.manifest.layers[0].name);
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 4}));

  OnnxBuilder f;
  f.input("c", {4}).input("x", {4}).output("y");
  f.node("Where", {"c", "x", "x"}, {"y"}, "/w");
  EXPECT_NE(refusal(f).find("node '/w' (Where): the condition is float32, expected bool (uint8)"), std::string::npos);
}

TEST(LowerElementwise, OpsOnConstantsFold) {
  OnnxBuilder b;
  b.input("x", {2}).output("y");
  b.weight("w", {2}, {0.f, 1.f});
  b.node("Sigmoid", {"w"}, {"s"});
  b.node("Max", {"s", "w"}, {"t"});
  b.node("Mul", {"x", "t"}, {"y"});
  const Imported m = must(convert(b));
  EXPECT_EQ(ops(m), (std::vector<std::string>{"constant", "binary"}));
  EXPECT_EQ(m.stats.folded, 2u);
  EXPECT_FLOAT_EQ((*m.weights[0].values)[0], 0.5f);
  EXPECT_FLOAT_EQ((*m.weights[0].values)[1], 1.f);
}

// x.view(...).expand(batch, -1) as torch.onnx.export writes it: the -1s replaced through Equal and
// Where on the shape, all folded with the batch kept free.
TEST(LowerElementwise, EqualAndWhereOnShapesFoldInBothLanes) {
  OnnxBuilder b;
  b.input("x", {"batch", 4}).output("y");
  b.int_vector("wanted", {-1, 2, 2});
  b.int_vector("minus_one", {-1});
  b.node("Equal", {"wanted", "minus_one"}, {"keep"});  // [1, 0, 0]
  b.node("Shape", {"x"}, {"shape"});
  b.int_vector("start", {0});
  b.int_vector("end", {1});
  b.node("Slice", {"shape", "start", "end"}, {"n"});
  b.int_vector("two_two", {2, 2});
  set_int(b.node("Concat", {"n", "two_two"}, {"actual"}), "axis", 0);  // [batch, 2, 2]
  b.node("Where", {"keep", "actual", "wanted"}, {"target"});           // [batch, 2, 2]
  b.node("Reshape", {"x", "target"}, {"y"});
  const Imported m = must(convert(b));
  EXPECT_EQ(ops(m), std::vector<std::string>{"reshape"});
  EXPECT_EQ(m.manifest.outputs[0].shape, (gpu::Shape{-1, 2, 2}));
}

TEST(LowerElementwise, CastMapsOntoEmbersDtypesAndRefusesOthers) {
  auto cast = [](int32_t to) {
    OnnxBuilder b;
    b.input("x", {"batch", 4}).output("y");
    set_int(b.node("Cast", {"x"}, {"y"}, "/cast"), "to", to);
    return b;
  };
  EXPECT_EQ(must(convert(cast(onnx::TensorProto::FLOAT16))).manifest.layers[0].attrs.to, gpu::DType::f16);
  EXPECT_EQ(must(convert(cast(onnx::TensorProto::BFLOAT16))).manifest.outputs[0].dtype, gpu::DType::bf16);
  EXPECT_EQ(must(convert(cast(onnx::TensorProto::INT32))).manifest.outputs[0].dtype, gpu::DType::i32);
  EXPECT_EQ(must(convert(cast(onnx::TensorProto::UINT8))).manifest.outputs[0].dtype, gpu::DType::u8);
  // To bool: nonzero is true (a cast to uint8 would truncate 0.5 to 0).
  const Imported to_bool = must(convert(cast(onnx::TensorProto::BOOL)));
  EXPECT_EQ(ops(to_bool), (std::vector<std::string>{"constant", "binary", "unary"}));
  EXPECT_EQ(to_bool.manifest.outputs[0].dtype, gpu::DType::u8);
  EXPECT_NE(refusal(cast(onnx::TensorProto::DOUBLE)).find("node '/cast' (Cast): not supported: a cast of an activation to "),
            std::string::npos)
      << refusal(cast(onnx::TensorProto::DOUBLE));
  EXPECT_NE(refusal(cast(onnx::TensorProto::INT8)).find("Ember's dtypes are float32, float16"), std::string::npos);
}

}  // namespace lower_elementwise_test
}  // namespace ember::importer
