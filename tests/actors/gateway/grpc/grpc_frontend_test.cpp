// The gRPC front end's ModelStreamInfer on loopback, in front of a scripted GenerationService
// (tests/actors/gateway/scripted_generation.hpp), driven by a real grpc++ client: tokens arrive as
// responses, the last flagged final; a whole answer in one response; a refusal before the first
// response and a failure after it as error responses (the stream then takes the next request);
// bad input refused before anything is generated; a client that cancels the call cancels the
// generation; a client that does not read is cut off; no service: UNIMPLEMENTED.
#include "actors/gateway/grpc/grpc_frontend.hpp"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "actors/gateway/gateway_client.hpp"
#include "actors/gateway/gateway_instruments.hpp"
#include "actors/gateway/grpc/grpc_service.grpc.pb.h"
#include "tests/actors/actor_test_util.hpp"
#include "tests/actors/gateway/scripted_generation.hpp"

namespace ember {
namespace grpc_frontend_test {

using namespace std::chrono_literals;
using testing::GenerationScript;
using testing::ScriptedGeneration;
using testing::script_of;
using Response = inference::ModelStreamInferResponse;

inference::ModelInferRequest request(const std::string& model, const std::string& text, bool stream) {
  inference::ModelInferRequest r;
  r.set_model_name(model);
  r.set_id("client-1");
  auto* t = r.add_inputs();
  t->set_name("text_input");
  t->set_datatype("BYTES");
  t->add_shape(1);
  t->mutable_contents()->add_bytes_contents(text);
  auto* s = r.add_inputs();
  s->set_name("stream");
  s->set_datatype("BOOL");
  s->add_shape(1);
  s->mutable_contents()->add_bool_contents(stream);
  return r;
}

std::string text_of(const Response& r) {
  if (r.infer_response().raw_output_contents_size() != 1) return "<no output>";
  return r.infer_response().raw_output_contents(0).substr(4);
}
bool final_of(const Response& r) {
  auto it = r.infer_response().parameters().find("triton_final_response");
  return it != r.infer_response().parameters().end() && it->second.bool_param();
}

class GrpcFrontendTest : public ::testing::Test {
 protected:
  void start(bool with_service = true, size_t max_queued = 4096, uint64_t timeout_us = 60'000'000,
             std::vector<ApiToken> tokens = {}) {
    GatewayConfig config;
    config.grpc = HostPort{"127.0.0.1", 0};
    config.grpc_threads = 8;
    config.max_body_bytes = 4u << 20;
    config.request_timeout_us = timeout_us;
    service_ = std::make_shared<ScriptedGeneration>([this](const generate_request& r) { return script(r); });
    auto f = GrpcFrontend::start(std::make_shared<GatewayClient>(*sys_, config, gateway_actor{}, view_, &instruments_,
                                                                 std::vector<LocalNode>{}, std::move(tokens)),
                                 nullptr, with_service ? service_ : nullptr, max_queued);
    ASSERT_TRUE(f.ok()) << f.error().message();
    frontend_ = std::move(*f);
    stub_ = inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(frontend_->port()), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (service_) service_->release();
    if (frontend_) frontend_->stop();
  }

  GenerationScript script(const generate_request& r) {
    if (on_request_) on_request_(r);
    if (r.model.name != "gpt2") {
      GenerationScript s;
      s.refuse = not_found("unknown model '" + r.model.name + "'");
      return s;
    }
    return script_;
  }

  /// Sends `requests` on one call, then reads every response until the server ends it.
  std::vector<Response> exchange(const std::vector<inference::ModelInferRequest>& requests,
                                 grpc::Status* status = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    if (!bearer_.empty()) ctx.AddMetadata("authorization", "Bearer " + bearer_);
    auto call = stub_->ModelStreamInfer(&ctx);
    for (const auto& r : requests) {
      if (!call->Write(r)) break;  // the server ended the call (the responses and status say why)
    }
    call->WritesDone();
    std::vector<Response> out;
    Response r;
    while (call->Read(&r)) out.push_back(r);
    const grpc::Status s = call->Finish();
    if (status) *status = s;
    else EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }

  std::string metrics() { return metrics::render(instruments_.registry().snapshot()); }

  std::unique_ptr<caf::actor_system> sys_ = testing::make_system();
  std::shared_ptr<RoutingView> view_ = std::make_shared<RoutingView>();
  GatewayInstruments instruments_;
  std::shared_ptr<ScriptedGeneration> service_;
  std::unique_ptr<GrpcFrontend> frontend_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  GenerationScript script_ = script_of({"Hello", ",", " world"}, FinishReason::stop, 4);
  /// Called with each request as the service gets it (on the front end's thread).
  std::function<void(const generate_request&)> on_request_;
  /// The bearer token exchange() sends (none when empty).
  std::string bearer_;
};

TEST_F(GrpcFrontendTest, TokensArriveAsResponsesTheLastFinal) {
  start();
  const auto out = exchange({request("gpt2", "Say hi", true)});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(text_of(out[0]), "Hello");
  EXPECT_EQ(text_of(out[1]), ",");
  EXPECT_EQ(text_of(out[2]), " world");
  EXPECT_FALSE(final_of(out[0]));
  EXPECT_FALSE(final_of(out[1]));
  EXPECT_TRUE(final_of(out[2]));
  for (const auto& r : out) {
    EXPECT_TRUE(r.error_message().empty());
    EXPECT_EQ(r.infer_response().id(), "client-1");
    EXPECT_EQ(r.infer_response().model_name(), "gpt2");
    EXPECT_EQ(r.infer_response().model_version(), "1");  // the highest the service lists
  }
  EXPECT_EQ(out[2].infer_response().parameters().at("finish_reason").string_param(), "stop");
  EXPECT_EQ(out[2].infer_response().parameters().at("completion_tokens").int64_param(), 3);
  const auto requests = service_->requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].prompt, "Say hi");
  EXPECT_EQ(requests[0].model.version, 1u);
  EXPECT_EQ(requests[0].id.rfind("gen-", 0), 0u);
}

TEST_F(GrpcFrontendTest, WholeAnswerIsOneFinalResponse) {
  start();
  const auto out = exchange({request("gpt2", "Say hi: ", false)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(text_of(out[0]), "Say hi: Hello, world");  // vLLM's default: the prompt, then the output
  EXPECT_TRUE(final_of(out[0]));
}

TEST_F(GrpcFrontendTest, RefusalIsAnErrorResponseAndTheStreamGoesOn) {
  start();
  const auto out = exchange({request("nope", "Hi", true), request("gpt2", "Hi", true)});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].error_message(), "unknown model 'nope'");
  EXPECT_TRUE(final_of(out[0]));
  EXPECT_EQ(out[0].infer_response().model_name(), "nope");
  EXPECT_EQ(text_of(out[1]), "Hello");
  EXPECT_TRUE(final_of(out[3]));
}

TEST_F(GrpcFrontendTest, BadInputIsAnErrorResponseAndNothingIsGenerated) {
  start();
  auto bad = request("gpt2", "Hi", true);
  (*bad.mutable_parameters())["temperature"].set_double_param(5);
  const auto out = exchange({bad});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(out[0].error_message().find("'temperature'"), std::string::npos) << out[0].error_message();
  EXPECT_TRUE(final_of(out[0]));
  EXPECT_TRUE(service_->requests().empty());
}

TEST_F(GrpcFrontendTest, FailureAfterTheFirstResponseIsAnErrorResponse) {
  script_ = script_of({"Hello", "x"});
  script_.chunks[1].text.clear();
  script_.chunks[1].finish = FinishReason::error;
  script_.chunks[1].error = {ErrorCode::unavailable, "the node was lost"};
  start();
  const auto out = exchange({request("gpt2", "Hi", true)});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(text_of(out[0]), "Hello");
  EXPECT_TRUE(out[0].error_message().empty());
  EXPECT_EQ(out[1].error_message(), "the node was lost");
  EXPECT_TRUE(final_of(out[1]));
}

TEST_F(GrpcFrontendTest, NoChunkWithinTheTimeoutEndsTheRequestAndCancelsIt) {
  script_.hold_before = 1;
  start(true, 4096, 200'000);
  const auto out = exchange({request("gpt2", "Hi", true)});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(text_of(out[0]), "Hello");
  EXPECT_NE(out[1].error_message().find("gateway.request_timeout"), std::string::npos) << out[1].error_message();
  const auto requests = service_->requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_TRUE(service_->wait_cancelled(requests[0].id));
  EXPECT_NE(metrics().find(R"(ember_generation_cancels_total{reason="timeout"} 1)"), std::string::npos);
}

TEST_F(GrpcFrontendTest, ClientCancelCancelsTheGeneration) {
  script_.hold_before = 1;
  start();
  grpc::ClientContext ctx;
  auto call = stub_->ModelStreamInfer(&ctx);
  ASSERT_TRUE(call->Write(request("gpt2", "Hi", true)));
  Response first;
  ASSERT_TRUE(call->Read(&first));
  EXPECT_EQ(text_of(first), "Hello");
  ctx.TryCancel();
  const auto requests = service_->requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_TRUE(service_->wait_cancelled(requests[0].id));
  EXPECT_NE(metrics().find(R"(ember_generation_cancels_total{reason="client_gone"} 1)"), std::string::npos);
  EXPECT_EQ(call->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(GrpcFrontendTest, AClientThatDoesNotReadIsCutOff) {
  // 16 MiB of answer against a queue of 8 chunks: the writes stall on flow control, the queue
  // overflows, and the call is cut off without the client reading anything.
  script_ = script_of(std::vector<std::string>(4000, std::string(4096, 'x')));
  std::promise<std::string> generating;
  on_request_ = [&](const generate_request& r) { generating.set_value(r.id); };
  start(true, 8);
  grpc::ClientContext ctx;
  auto call = stub_->ModelStreamInfer(&ctx);
  ASSERT_TRUE(call->Write(request("gpt2", "Hi", true)));
  call->WritesDone();
  auto id = generating.get_future();
  ASSERT_EQ(id.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(service_->wait_cancelled(id.get()));
  EXPECT_NE(metrics().find(R"(ember_generation_cancels_total{reason="slow_client"} 1)"), std::string::npos)
      << metrics();
  EXPECT_TRUE(service_->wait_finished());
  Response r;
  size_t read = 0;
  while (call->Read(&r)) ++read;
  EXPECT_LT(read, 4000u);
  EXPECT_FALSE(call->Finish().ok());
}

TEST_F(GrpcFrontendTest, WithoutAServiceModelStreamInferIsUnimplemented) {
  start(false);
  grpc::Status status;
  const auto out = exchange({request("gpt2", "Hi", true)}, &status);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

// gateway.api_tokens_file over gRPC: a stream is one call, admitted once, and each of its requests
// asks the token's scope for its model (an error response for another model, and the stream goes
// on); past the token's rate a call is RESOURCE_EXHAUSTED with trailing metadata retry-after.
TEST_F(GrpcFrontendTest, ATokensScopeHoldsPerRequestAndItsRateIsResourceExhausted) {
  start(true, 4096, 60'000'000, {*parse_api_token("tenant infer=gpt2 rate=0.01 burst=2", "t")});
  grpc::Status status;
  auto none = exchange({request("gpt2", "x", false)}, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  bearer_ = "tenant";
  const auto out = exchange({request("gpt9", "x", false), request("gpt2", "Say hi", false)});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NE(out[0].error_message().find("may not use model 'gpt9'"), std::string::npos) << out[0].error_message();
  EXPECT_TRUE(out[1].error_message().empty()) << out[1].error_message();
  ASSERT_EQ(service_->requests().size(), 1u);  // gpt9's never reached the service
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer tenant");
    inference::ServerMetadataResponse meta;
    EXPECT_TRUE(stub_->ServerMetadata(&ctx, {}, &meta).ok());
  }
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer tenant");
  inference::ModelMetadataRequest in;
  in.set_name("gpt2");
  inference::ModelMetadataResponse meta;
  const grpc::Status over = stub_->ModelMetadata(&ctx, in, &meta);
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(over.error_message().find("over its rate"), std::string::npos) << over.error_message();
  auto retry = ctx.GetServerTrailingMetadata().find("retry-after");
  ASSERT_NE(retry, ctx.GetServerTrailingMetadata().end());
  const int64_t seconds = std::stoll(std::string(retry->second.data(), retry->second.size()));
  EXPECT_GT(seconds, 90);
  EXPECT_LE(seconds, 100);
  EXPECT_NE(metrics().find(R"(ember_api_calls_total{token="t",outcome="permission_denied"} 1)"), std::string::npos)
      << metrics();
  EXPECT_NE(metrics().find(R"(ember_api_calls_total{token="t",outcome="rate_limited"} 1)"), std::string::npos)
      << metrics();
}

}  // namespace grpc_frontend_test
}  // namespace ember
