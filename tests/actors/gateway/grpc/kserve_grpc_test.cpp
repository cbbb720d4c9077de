// KServe v2 gRPC messages in and out (actors/gateway/grpc/kserve_grpc.hpp).
#include "actors/gateway/grpc/kserve_grpc.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "model/tensor.hpp"

namespace ember {
namespace {

using inference::ModelInferRequest;

ModelInferRequest raw_request(const std::vector<float>& values, std::vector<int64_t> shape) {
  ModelInferRequest r;
  r.set_model_name("mlp");
  auto* t = r.add_inputs();
  t->set_name("input");
  t->set_datatype("FP32");
  for (int64_t d : shape) t->add_shape(d);
  r.add_raw_input_contents(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return r;
}

std::string error_of(const ModelInferRequest& r) {
  auto d = decode_infer_request(r);
  return d.ok() ? std::string("(decoded)") : d.error().message();
}

TEST(KserveGrpc, RawContentsDecodeToTheSameBytes) {
  auto r = raw_request({1, 2, 3, 4, 5, 6}, {2, 3});
  r.set_model_version("7");
  r.set_id("abc");
  r.add_outputs()->set_name("fc3");
  auto d = decode_infer_request(r);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->request.model.name, "mlp");
  EXPECT_EQ(d->request.model.version, 7u);
  EXPECT_EQ(d->request.id, "abc");
  EXPECT_FALSE(d->typed_reply);
  ASSERT_EQ(d->request.inputs.size(), 1u);
  const auto& t = d->request.inputs[0];
  EXPECT_EQ(t.dtype, static_cast<uint8_t>(gpu::DType::f32));
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(t.data.size(), 24u);
  float third;
  std::memcpy(&third, t.data.data() + 8, 4);
  EXPECT_EQ(third, 3.0f);
  EXPECT_EQ(d->request.outputs, (std::vector<std::string>{"fc3"}));
}

TEST(KserveGrpc, TypedContentsDecodeForEveryDatatypeThatHasAField) {
  ModelInferRequest r;
  r.set_model_name("m");
  auto add = [&](const char* name, const char* dtype) {
    auto* t = r.add_inputs();
    t->set_name(name);
    t->set_datatype(dtype);
    t->add_shape(2);
    return t->mutable_contents();
  };
  add("f", "FP32")->add_fp32_contents(1.5f);
  r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(-2.0f);
  auto* i64 = add("l", "INT64");
  i64->add_int64_contents(int64_t{1} << 40);
  i64->add_int64_contents(-1);
  auto* i32 = add("i", "INT32");
  i32->add_int_contents(-7);
  i32->add_int_contents(9);
  auto* u8 = add("u", "UINT8");
  u8->add_uint_contents(0);
  u8->add_uint_contents(255);
  auto d = decode_infer_request(r);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_TRUE(d->typed_reply);
  int64_t big;
  std::memcpy(&big, d->request.inputs[1].data.data(), 8);
  EXPECT_EQ(big, int64_t{1} << 40);
  EXPECT_EQ(d->request.inputs[3].data, (std::vector<uint8_t>{0, 255}));

  u8->set_uint_contents(1, 256);
  EXPECT_NE(error_of(r).find("uint_contents[1] is 256, beyond UINT8"), std::string::npos) << error_of(r);
}

TEST(KserveGrpc, BadRequestsNameWhatIsWrong) {
  auto r = raw_request({1, 2}, {1, 2});
  r.set_model_name("");
  EXPECT_EQ(error_of(r), "model_name is empty");
  r = raw_request({1, 2}, {1, 2});
  r.set_model_version("1x");
  EXPECT_EQ(error_of(r), "model_version must be a version number, not '1x'");
  r.set_model_version("99999999999");
  EXPECT_EQ(error_of(r), "model_version must be a version number, not '99999999999'");
  r = raw_request({1, 2}, {1, 3});
  EXPECT_NE(error_of(r).find("has 8 bytes; the shape and datatype need 12"), std::string::npos) << error_of(r);
  r = raw_request({1, 2}, {1, 2});
  r.add_raw_input_contents("extra");
  EXPECT_EQ(error_of(r), "raw_input_contents has 2 entries for 1 inputs");
  r = raw_request({1, 2}, {1, 2, 1, 1, 1, 1, 1});
  EXPECT_NE(error_of(r).find("shape has 7 dimensions"), std::string::npos) << error_of(r);
  r = raw_request({1, 2}, {int64_t{1} << 30, int64_t{1} << 30});
  EXPECT_NE(error_of(r).find("more than 2^40 elements"), std::string::npos) << error_of(r);
  r = raw_request({1, 2}, {1, 2});
  r.mutable_inputs(0)->set_datatype("FP64");
  EXPECT_NE(error_of(r).find("datatype 'FP64' is not one Ember runs"), std::string::npos) << error_of(r);
  r.mutable_inputs(0)->set_datatype("FP16");
  r.clear_raw_input_contents();
  EXPECT_NE(error_of(r).find("FP16 data has no typed contents field"), std::string::npos) << error_of(r);
  r.mutable_inputs(0)->set_datatype("FP32");
  r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
  EXPECT_NE(error_of(r).find("the shape holds 2 elements but contents.fp32_contents has 1"), std::string::npos);
  r.mutable_inputs(0)->mutable_contents()->add_int_contents(1);
  EXPECT_NE(error_of(r).find("contents has data in more than one field"), std::string::npos) << error_of(r);
  r.mutable_inputs(0)->mutable_contents()->clear_fp32_contents();
  EXPECT_NE(error_of(r).find("FP32 data goes in contents.fp32_contents, not contents.int_contents"), std::string::npos)
      << error_of(r);
  r.clear_inputs();
  EXPECT_NE(error_of(r).find("inputs is empty"), std::string::npos);
}

TEST(KserveGrpc, TheReplyMirrorsTheRequestUnlessADatatypeHasNoTypedField) {
  infer_reply reply;
  reply.model = {"mlp", 3};
  reply.id = "x";
  tensor_msg out;
  out.name = "fc3";
  out.dtype = static_cast<uint8_t>(gpu::DType::f32);
  out.shape = {1, 2};
  const float v[] = {0.25f, -4.0f};
  out.data.assign(reinterpret_cast<const uint8_t*>(v), reinterpret_cast<const uint8_t*>(v) + sizeof(v));
  reply.outputs.push_back(out);

  GrpcInferRequest raw;
  inference::ModelInferResponse r1;
  ASSERT_TRUE(encode_infer_reply(reply, raw, r1).ok());
  EXPECT_EQ(r1.model_version(), "3");
  EXPECT_EQ(r1.id(), "x");
  ASSERT_EQ(r1.raw_output_contents_size(), 1);
  EXPECT_EQ(r1.raw_output_contents(0).size(), 8u);
  EXPECT_EQ(r1.outputs(0).contents().fp32_contents_size(), 0);

  GrpcInferRequest typed;
  typed.typed_reply = true;
  inference::ModelInferResponse r2;
  ASSERT_TRUE(encode_infer_reply(reply, typed, r2).ok());
  EXPECT_EQ(r2.raw_output_contents_size(), 0);
  ASSERT_EQ(r2.outputs(0).contents().fp32_contents_size(), 2);
  EXPECT_EQ(r2.outputs(0).contents().fp32_contents(1), -4.0f);

  reply.outputs.push_back(out);
  reply.outputs.back().dtype = static_cast<uint8_t>(gpu::DType::f16);
  reply.outputs.back().data.resize(4);
  inference::ModelInferResponse r3;
  ASSERT_TRUE(encode_infer_reply(reply, typed, r3).ok());
  EXPECT_EQ(r3.raw_output_contents_size(), 2) << "an FP16 output makes the whole reply raw";
  EXPECT_EQ(r3.outputs(1).datatype(), "FP16");
}

TEST(KserveGrpc, LoadParametersReadReplicasOnly) {
  google::protobuf::Map<std::string, inference::ModelRepositoryParameter> p;
  EXPECT_EQ(*decode_load_parameters(p), 0u);
  p["replicas"].set_int64_param(3);
  EXPECT_EQ(*decode_load_parameters(p), 3u);
  p["replicas"].set_int64_param(0);
  EXPECT_FALSE(decode_load_parameters(p).ok());
  p["replicas"].set_string_param("2");
  EXPECT_FALSE(decode_load_parameters(p).ok());
  p.clear();
  p["config"].set_string_param("{}");
  EXPECT_EQ(decode_load_parameters(p).error().message(), "unknown load parameter 'config' (Ember reads 'replicas')");
}

}  // namespace
}  // namespace ember
