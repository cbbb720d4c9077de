// grpc_generate: a ModelInferRequest in Triton's LLM convention decoded into a generate_request
// (typed and raw contents, sampling_parameters with vLLM's string values, typed request
// parameters, every kind of bad input refused naming what is wrong), and the responses a stream of
// chunks makes (per chunk or folded, the final flag and usage, errors).
#include "actors/gateway/grpc/grpc_generate.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ember {
namespace grpc_generate_test {

using Request = inference::ModelInferRequest;

void add_bytes(Request& r, const std::string& name, const std::string& value) {
  auto* t = r.add_inputs();
  t->set_name(name);
  t->set_datatype("BYTES");
  t->add_shape(1);
  t->mutable_contents()->add_bytes_contents(value);
}
void add_bool(Request& r, const std::string& name, bool value) {
  auto* t = r.add_inputs();
  t->set_name(name);
  t->set_datatype("BOOL");
  t->add_shape(1);
  t->mutable_contents()->add_bool_contents(value);
}

Request prompt(const std::string& text) {
  Request r;
  r.set_model_name("gpt2");
  r.set_id("client-7");
  add_bytes(r, "text_input", text);
  return r;
}

std::string error_of(const Request& r) {
  auto d = decode_generate_request(r, "gen-1");
  EXPECT_FALSE(d.ok());
  if (d.ok()) return {};
  EXPECT_EQ(d.error().code(), ErrorCode::invalid_argument);
  return d.error().message();
}

/// The text of a response's text_output (raw BYTES: a 4-byte length, then the bytes).
std::string text_of(const inference::ModelStreamInferResponse& r) {
  const auto& raw = r.infer_response().raw_output_contents(0);
  EXPECT_GE(raw.size(), 4u);
  return raw.substr(4);
}
bool final_of(const inference::ModelStreamInferResponse& r) {
  return r.infer_response().parameters().at("triton_final_response").bool_param();
}

TEST(GrpcGenerate, DecodesTypedInputs) {
  Request r = prompt("Once upon");
  add_bool(r, "stream", true);
  add_bytes(r, "sampling_parameters", R"({"temperature": "0.5", "top_k": 40, "seed": "7", "stop": ["\n"]})");
  auto* m = r.add_inputs();
  m->set_name("max_tokens");
  m->set_datatype("INT32");
  m->add_shape(1);
  m->mutable_contents()->add_int_contents(32);
  (*r.mutable_parameters())["top_p"].set_double_param(0.9);
  (*r.mutable_parameters())["triton_enable_empty_final_response"].set_bool_param(true);
  auto d = decode_generate_request(r, "gen-1");
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->request.id, "gen-1");
  EXPECT_EQ(d->request.model.name, "gpt2");
  EXPECT_EQ(d->request.model.version, 0u);
  EXPECT_EQ(d->request.prompt, "Once upon");
  EXPECT_EQ(d->request.kind, PromptKind::text);
  EXPECT_EQ(d->request.max_tokens, 32u);
  EXPECT_FLOAT_EQ(d->request.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(d->request.sampling.top_p, 0.9f);
  EXPECT_EQ(d->request.sampling.top_k, 40);
  EXPECT_TRUE(d->request.sampling.has_seed);
  EXPECT_EQ(d->request.sampling.seed, 7u);
  EXPECT_EQ(d->request.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(d->stream);
  EXPECT_TRUE(d->request.stream);
  EXPECT_EQ(d->client_id, "client-7");
}

TEST(GrpcGenerate, DecodesRawInputsAsTritonClientsSendThem) {
  Request r;
  r.set_model_name("gpt2");
  r.set_model_version("2");
  for (auto [name, type] : {std::pair{"text_input", "BYTES"}, {"stream", "BOOL"}, {"max_tokens", "INT32"}}) {
    auto* t = r.add_inputs();
    t->set_name(name);
    t->set_datatype(type);
    t->add_shape(1);
    t->add_shape(1);
  }
  r.add_raw_input_contents(std::string("\x02\x00\x00\x00Hi", 6));
  r.add_raw_input_contents(std::string("\x01", 1));
  r.add_raw_input_contents(std::string("\x05\x00\x00\x00", 4));
  auto d = decode_generate_request(r, "gen-1");
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->request.prompt, "Hi");
  EXPECT_TRUE(d->stream);
  EXPECT_EQ(d->request.max_tokens, 5u);
  EXPECT_EQ(d->request.model.version, 2u);
}

TEST(GrpcGenerate, DefaultsFollowTritonsVllmBackend) {
  auto d = decode_generate_request(prompt("Hi"), "gen-1");
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->request.max_tokens, kTritonDefaultMaxTokens);
  EXPECT_FALSE(d->stream);
  EXPECT_FALSE(d->exclude_input);
}

TEST(GrpcGenerate, RefusesBadInputNamingIt) {
  Request none;
  none.set_model_name("gpt2");
  EXPECT_NE(error_of(none).find("'text_input' is required"), std::string::npos);
  Request no_model = prompt("Hi");
  no_model.clear_model_name();
  EXPECT_EQ(error_of(no_model), "model_name is empty");
  Request unknown = prompt("Hi");
  add_bytes(unknown, "bad_words", "x");
  EXPECT_NE(error_of(unknown).find("'bad_words'"), std::string::npos);
  Request twice = prompt("Hi");
  add_bytes(twice, "text_input", "again");
  EXPECT_EQ(error_of(twice), "'text_input' is given twice");
  Request wrong_type = prompt("Hi");
  add_bytes(wrong_type, "stream", "yes");
  EXPECT_EQ(error_of(wrong_type), "'stream' must be BOOL, not BYTES");
  Request two = prompt("Hi");
  two.mutable_inputs(0)->mutable_shape()->Set(0, 2);
  EXPECT_NE(error_of(two).find("'text_input' must hold one element"), std::string::npos);
  Request not_json = prompt("Hi");
  add_bytes(not_json, "sampling_parameters", "[1]");
  EXPECT_EQ(error_of(not_json), "'sampling_parameters' must be a JSON object");
  Request unknown_param = prompt("Hi");
  add_bytes(unknown_param, "sampling_parameters", R"({"best_of": 2})");
  EXPECT_NE(error_of(unknown_param).find("'best_of'"), std::string::npos);
  Request out_of_range = prompt("Hi");
  (*out_of_range.mutable_parameters())["temperature"].set_double_param(3);
  EXPECT_NE(error_of(out_of_range).find("'temperature'"), std::string::npos);
  Request zero = prompt("Hi");
  auto* m = zero.add_inputs();
  m->set_name("max_tokens");
  m->set_datatype("INT32");
  m->add_shape(1);
  m->mutable_contents()->add_int_contents(0);
  EXPECT_NE(error_of(zero).find("'max_tokens' must be in [1,"), std::string::npos);
  Request output = prompt("Hi");
  output.add_outputs()->set_name("logits");
  EXPECT_EQ(error_of(output), "only the output 'text_output' exists, not 'logits'");
  Request raw = prompt("Hi");
  raw.add_raw_input_contents("xx");
  raw.add_raw_input_contents("yy");
  EXPECT_EQ(error_of(raw), "raw_input_contents has 2 entries for 1 inputs");
  Request short_raw = prompt("Hi");
  short_raw.mutable_inputs(0)->clear_contents();
  short_raw.add_raw_input_contents(std::string("\x09\x00\x00\x00Hi", 6));
  EXPECT_NE(error_of(short_raw).find("'text_input' raw contents hold 2 bytes after a length of 9"), std::string::npos);
}

generate_chunk chunk(const std::string& text, FinishReason finish = FinishReason::none) {
  generate_chunk c;
  c.text = text;
  c.tokens = {1};
  c.finish = finish;
  if (finish != FinishReason::none) c.usage = {3, 2};
  return c;
}

TEST(GrpcGenerate, StreamedAnswerIsAResponsePerChunkTheLastFinal) {
  Request r = prompt("Hi");
  add_bool(r, "stream", true);
  auto d = decode_generate_request(r, "gen-1");
  ASSERT_TRUE(d.ok());
  GrpcGenerateAnswer a(*d, "1");
  auto first = a.add(chunk("Hello"));
  ASSERT_TRUE(first);
  EXPECT_EQ(text_of(*first), "Hello");
  EXPECT_FALSE(final_of(*first));
  EXPECT_EQ(first->infer_response().id(), "client-7");
  EXPECT_EQ(first->infer_response().model_name(), "gpt2");
  EXPECT_EQ(first->infer_response().model_version(), "1");
  EXPECT_EQ(first->infer_response().outputs(0).name(), "text_output");
  EXPECT_EQ(first->infer_response().outputs(0).datatype(), "BYTES");
  EXPECT_FALSE(a.add(chunk("")));  // nothing new to say
  auto last = a.add(chunk(" world", FinishReason::length));
  ASSERT_TRUE(last);
  EXPECT_EQ(text_of(*last), " world");
  EXPECT_TRUE(final_of(*last));
  const auto& p = last->infer_response().parameters();
  EXPECT_EQ(p.at("finish_reason").string_param(), "length");
  EXPECT_EQ(p.at("prompt_tokens").int64_param(), 3);
  EXPECT_EQ(p.at("completion_tokens").int64_param(), 2);
  EXPECT_TRUE(a.ended());
  EXPECT_FALSE(a.add(chunk("late")));
  EXPECT_FALSE(a.fail(internal_error("late")));
}

TEST(GrpcGenerate, WholeAnswerIsOneResponseWithThePromptUnlessExcluded) {
  auto d = decode_generate_request(prompt("Hi"), "gen-1");
  ASSERT_TRUE(d.ok());
  GrpcGenerateAnswer a(*d, "");
  EXPECT_FALSE(a.add(chunk(" there")));
  auto last = a.add(chunk("!", FinishReason::stop));
  ASSERT_TRUE(last);
  EXPECT_EQ(text_of(*last), "Hi there!");
  EXPECT_TRUE(final_of(*last));

  Request r = prompt("Hi");
  add_bool(r, "exclude_input_in_output", true);
  auto e = decode_generate_request(r, "gen-2");
  ASSERT_TRUE(e.ok());
  GrpcGenerateAnswer b(*e, "");
  auto only = b.add(chunk(" there", FinishReason::stop));
  ASSERT_TRUE(only);
  EXPECT_EQ(text_of(*only), " there");
}

TEST(GrpcGenerate, ErrorsAreFinalErrorResponses) {
  Request r = prompt("Hi");
  add_bool(r, "stream", true);
  auto d = decode_generate_request(r, "gen-1");
  ASSERT_TRUE(d.ok());
  GrpcGenerateAnswer a(*d, "1");
  ASSERT_TRUE(a.add(chunk("Hello")));
  generate_chunk failed;
  failed.finish = FinishReason::error;
  failed.error = {ErrorCode::unavailable, "the node was lost"};
  auto e = a.add(failed);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->error_message(), "the node was lost");
  EXPECT_EQ(e->infer_response().id(), "client-7");
  EXPECT_TRUE(final_of(*e));
  EXPECT_TRUE(a.ended());

  const auto refused = generate_error_response(prompt("Hi"), invalid_argument("bad"));
  EXPECT_EQ(refused.error_message(), "bad");
  EXPECT_EQ(refused.infer_response().model_name(), "gpt2");
  EXPECT_TRUE(final_of(refused));
}

}  // namespace grpc_generate_test
}  // namespace ember
