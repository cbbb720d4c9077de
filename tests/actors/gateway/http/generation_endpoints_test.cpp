// The text generation routes of a real HttpFrontend on loopback, in front of a scripted
// GenerationService (tests/actors/gateway/scripted_generation.hpp), driven over HTTP with
// cpp-httplib's client: every endpoint, whole and streamed; usage and finish reasons; each kind of
// bad input (400 in OpenAI's shape, naming the field, nothing generated); refusals before the first
// token as HTTP errors and failures after it as error events; a client that disconnects mid-stream
// (the service sees the cancel); no chunk within the timeout; credentials and unknown paths under
// /v1/; and no routes without a service.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "actors/gateway/gateway_client.hpp"
#include "actors/gateway/gateway_instruments.hpp"
#include "actors/gateway/http/http_frontend.hpp"
#include "tests/actors/actor_test_util.hpp"
#include "tests/actors/gateway/scripted_generation.hpp"

namespace ember {
namespace generation_endpoints_test {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::GenerationScript;
using testing::ScriptedGeneration;
using testing::script_of;

/// The payloads of a server-sent event stream ("data: X\n\n" each), in order.
std::vector<std::string> events(const std::string& body) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an unterminated event: " << body.substr(at);
    if (end == std::string::npos) break;
    const std::string event = body.substr(at, end - at);
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    out.push_back(event.substr(6));
    at = end + 2;
  }
  return out;
}

class GenerationEndpointsTest : public ::testing::Test {
 protected:
  void start(bool with_service = true, uint64_t timeout_us = 60'000'000, std::vector<ApiToken> tokens = {}) {
    GatewayConfig config;
    config.http = {"127.0.0.1", 0};
    config.http_threads = 4;
    config.max_body_bytes = 4u << 20;
    config.request_timeout_us = timeout_us;
    service_ = std::make_shared<ScriptedGeneration>([this](const generate_request& r) { return script(r); });
    auto f = HttpFrontend::start(std::make_shared<GatewayClient>(*sys_, config, gateway_actor{}, view_, &instruments_,
                                                                 std::vector<LocalNode>{}, std::move(tokens)),
                                 &instruments_, nullptr, with_service ? service_ : nullptr);
    ASSERT_TRUE(f.ok()) << f.error().message();
    frontend_ = std::move(*f);
  }
  void TearDown() override {
    if (service_) service_->release();
    if (frontend_) frontend_->stop();
  }

  /// The scripted answer: unknown models refused as the gateway would, otherwise `script_`.
  GenerationScript script(const generate_request& r) {
    if (r.model.name != "gpt2") {
      GenerationScript s;
      s.refuse = not_found("unknown model '" + r.model.name + "'");
      return s;
    }
    return script_;
  }

  httplib::Result post(const std::string& path, const std::string& body, const httplib::Headers& headers = {}) {
    httplib::Client c("127.0.0.1", frontend_->port());
    c.set_read_timeout(10, 0);
    return c.Post(path.c_str(), headers, body, "application/json");
  }
  httplib::Result get(const std::string& path, const httplib::Headers& headers = {}) {
    httplib::Client c("127.0.0.1", frontend_->port());
    c.set_read_timeout(10, 0);
    return c.Get(path.c_str(), headers);
  }
  std::string metrics() { return metrics::render(instruments_.registry().snapshot()); }

  std::unique_ptr<caf::actor_system> sys_ = testing::make_system();
  std::shared_ptr<RoutingView> view_ = std::make_shared<RoutingView>();
  GatewayInstruments instruments_;
  std::shared_ptr<ScriptedGeneration> service_;
  std::unique_ptr<HttpFrontend> frontend_;
  GenerationScript script_ = script_of({"Hello", ",", " world"}, FinishReason::stop, 4);
};

/// OpenAI's error body of `r`: its status, and the error object.
json openai_error(const httplib::Result& r, int status) {
  EXPECT_TRUE(r) << "no answer";
  if (!r) return json::object();
  EXPECT_EQ(r->status, status) << r->body;
  auto j = json::parse(r->body, nullptr, false);
  EXPECT_TRUE(j.is_object() && j.contains("error") && j["error"].is_object()) << r->body;
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return json::object();
  for (const char* key : {"message", "type", "param", "code"}) EXPECT_TRUE(j["error"].contains(key)) << r->body;
  return j["error"];
}

TEST_F(GenerationEndpointsTest, ModelsListsTheGenerativeModels) {
  start();
  auto r = get("/v1/models");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "gpt2");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["created"], 1700000000);
  EXPECT_EQ(j["data"][0]["owned_by"], "ember");
  EXPECT_EQ(j["data"][0]["max_model_len"], 1024);
  service_->models_error = unavailable("the gateway has not received the routing table from the manager yet");
  const json e = openai_error(get("/v1/models"), 503);
  EXPECT_EQ(e["type"], "server_error");
}

TEST_F(GenerationEndpointsTest, ACompletionIsAnsweredWholeWithItsFinishReasonAndUsage) {
  start();
  auto r = post("/v1/completions", R"({"model": "gpt2", "prompt": "Say hi", "max_tokens": 5, "temperature": 0,
                                       "stop": ["\n"], "seed": 7, "user": "someone"})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "gpt2");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u) << j["id"];
  EXPECT_GT(j["created"].get<uint64_t>(), 1700000000u);
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["text"], "Hello, world");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["usage"], json::parse(R"({"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7})"));
  const auto seen = service_->requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].id, j["id"]);
  EXPECT_EQ(seen[0].model, (model_key{"gpt2", 1}));  // the highest version the service lists
  EXPECT_EQ(seen[0].kind, PromptKind::text);
  EXPECT_EQ(seen[0].prompt, "Say hi");
  EXPECT_EQ(seen[0].max_tokens, 5u);
  EXPECT_EQ(seen[0].sampling.temperature, 0.0f);
  EXPECT_TRUE(seen[0].sampling.has_seed);
  EXPECT_EQ(seen[0].stop, std::vector<std::string>{"\n"});
  EXPECT_FALSE(seen[0].stream);
}

TEST_F(GenerationEndpointsTest, AChatCompletionIsAnsweredWholeAndALengthFinishIsReported) {
  script_ = script_of({"Hi", " there"}, FinishReason::length, 9);
  start();
  auto r = post("/v1/chat/completions", R"({"model": "gpt2", "max_completion_tokens": 2,
      "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hello"}]}]})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u) << j["id"];
  EXPECT_EQ(j["choices"][0]["message"], json::parse(R"({"role": "assistant", "content": "Hi there"})"));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["total_tokens"], 11);
  const auto seen = service_->requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].kind, PromptKind::chat);
  ASSERT_EQ(seen[0].messages.size(), 2u);
  EXPECT_EQ(seen[0].messages[1].role, "user");
  EXPECT_EQ(seen[0].messages[1].content, "Hello");
  EXPECT_EQ(seen[0].max_tokens, 2u);
}

TEST_F(GenerationEndpointsTest, ACompletionStreamsAnEventPerChunkTheFinishTheUsageAndDone) {
  start();
  auto r = post("/v1/completions",
                R"({"model": "gpt2", "prompt": [1, 2, 3], "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const auto e = events(r->body);
  ASSERT_EQ(e.size(), 6u) << r->body;  // three pieces, the finish, the usage, [DONE]
  std::string text;
  for (size_t i = 0; i < 3; ++i) {
    const json c = json::parse(e[i]);
    EXPECT_EQ(c["object"], "text_completion");
    EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
    EXPECT_TRUE(c.contains("usage") && c["usage"].is_null());
    text += c["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "Hello, world");
  const json finish = json::parse(e[3]);
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(finish["choices"][0]["text"], "");
  const json usage = json::parse(e[4]);
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 3);
  EXPECT_EQ(e[5], "[DONE]");
  const auto seen = service_->requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].kind, PromptKind::tokens);
  EXPECT_EQ(seen[0].prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_TRUE(seen[0].stream && seen[0].include_usage);
}

TEST_F(GenerationEndpointsTest, AChatStreamStartsWithTheRoleAndEndsWithTheFinishAndDone) {
  start();
  auto r = post("/v1/chat/completions",
                R"({"model": "gpt2", "stream": true, "messages": [{"role": "user", "content": "Hi"}]})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto e = events(r->body);
  ASSERT_EQ(e.size(), 6u) << r->body;  // role, three pieces, the finish, [DONE]
  const json role = json::parse(e[0]);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"], json::parse(R"({"role": "assistant", "content": ""})"));
  EXPECT_FALSE(role.contains("usage"));
  std::string text;
  for (size_t i = 1; i < 4; ++i) text += json::parse(e[i])["choices"][0]["delta"]["content"].get<std::string>();
  EXPECT_EQ(text, "Hello, world");
  const json finish = json::parse(e[4]);
  EXPECT_EQ(finish["choices"][0]["delta"], json::object());
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(e[5], "[DONE]");
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(json::parse(e[i])["id"], role["id"]);
}

TEST_F(GenerationEndpointsTest, LogProbabilitiesComeInEachApisShape) {
  script_ = script_of({"Hi"});
  script_.chunks[0].logprobs = {{{100, "Hi", -0.5f}, {{100, "Hi", -0.5f}, {7, "Yo", -1.5f}}}};
  start();
  auto r = post("/v1/completions", R"({"model": "gpt2", "prompt": "x", "logprobs": 2})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["logprobs"],
            json::parse(R"({"tokens": ["Hi"], "token_logprobs": [-0.5], "top_logprobs": [{"Hi": -0.5, "Yo": -1.5}],
                            "text_offset": [0]})"));
  r = post("/v1/chat/completions",
           R"({"model": "gpt2", "logprobs": true, "top_logprobs": 2, "messages": [{"role": "user", "content": "x"}]})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["logprobs"],
            json::parse(R"({"content": [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105],
                            "top_logprobs": [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105]},
                                             {"token": "Yo", "logprob": -1.5, "bytes": [89, 111]}]}]})"));
  const auto seen = service_->requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[0].logprobs && seen[1].logprobs);
  EXPECT_EQ(seen[0].top_logprobs, 2u);
  EXPECT_EQ(seen[1].top_logprobs, 2u);
}

TEST_F(GenerationEndpointsTest, BadBodiesAre400InOpenAisShapeNamingTheFieldAndGenerateNothing) {
  start();
  struct Case {
    std::string path, body, param, message;
  };
  const std::string c = "/v1/completions", chat = "/v1/chat/completions";
  const std::vector<Case> cases = {
      {c, "", "", "the request body is empty; /v1/completions takes a JSON object with 'model' and 'prompt'"},
      {c, "{", "", ""},
      {c, R"({"model": "gpt2", "prompt": "x", "max_token": 5, "temprature": 1})", "max_token",
       "unknown fields 'max_token', 'temprature': /v1/completions takes "},
      {c, R"({"model": "gpt2", "prompt": "x", "n": 2})", "n",
       "'n' must be 1: this server generates one choice per request, not 2"},
      {c, R"({"model": "gpt2", "prompt": "x", "max_tokens": -5})", "max_tokens", "'max_tokens' must be at least 1, not -5"},
      {c, R"({"model": "gpt2", "prompt": "x", "temperature": "hot"})", "temperature",
       "'temperature' must be a number, not a string"},
      {c, R"({"model": "gpt2", "prompt": "x", "stop": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})",
       "stop", "'stop' holds 17 strings; at most 16"},
      {c, R"({"model": "gpt2", "prompt": ")" + std::string(kMaxPromptBytes + 1, 'a') + R"("})", "prompt",
       "'prompt' is 1048577 bytes; at most 1048576 (1 MiB)"},
      {c, R"({"model": "gpt2", "prompt": ["a", "b"]})", "prompt", "'prompt' holds 2 prompts; this server takes one prompt per request"},
      {c, R"({"model": "gpt2"})", "prompt", "'prompt' is required"},
      {c, R"({"prompt": "x"})", "model", "'model' is required"},
      {c, R"({"model": "gpt2", "prompt": "x", "echo": true})", "echo", "'echo' is not supported by this server (only false is accepted)"},
      {c, R"({"model": "gpt2", "prompt": "x", "stream_options": {"include_usage": true}})", "stream_options",
       "'stream_options' is only allowed when 'stream' is true"},
      {chat, R"({"model": "gpt2"})", "messages", "'messages' is required"},
      {chat, R"({"model": "gpt2", "messages": []})", "messages", "'messages' must hold at least one message"},
      {chat, R"({"model": "gpt2", "messages": [{"role": "tool", "content": "x"}]})", "messages",
       "messages[0].role must be system, developer, user or assistant, not 'tool'"},
      {chat, R"({"model": "gpt2", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})",
       "messages", "messages[0].content[0] has type 'image_url'; this server takes text only"},
      {chat, R"({"model": "gpt2", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})",
       "tools", "'tools' is not supported by this server (only [] is accepted)"},
      {chat, R"({"model": "gpt2", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 3})", "top_logprobs",
       "'top_logprobs' needs 'logprobs' to be true"},
  };
  for (const auto& k : cases) {
    const json e = openai_error(post(k.path, k.body), 400);
    EXPECT_EQ(e["type"], "invalid_request_error") << k.body.substr(0, 200);
    EXPECT_EQ(e["param"], k.param.empty() ? json(nullptr) : json(k.param)) << k.body.substr(0, 200);
    EXPECT_EQ(e["message"].get<std::string>().rfind(k.message, 0), 0u) << e["message"];
  }
  EXPECT_TRUE(service_->requests().empty()) << "a bad body reached the service";
}

TEST_F(GenerationEndpointsTest, RefusalsBeforeTheFirstTokenAreHttpErrorsStreamingOrNot) {
  start();
  for (const char* stream : {"false", "true"}) {
    const json e = openai_error(
        post("/v1/completions", std::string(R"({"model": "gpt3", "prompt": "x", "stream": )") + stream + "}"), 404);
    EXPECT_EQ(e["message"], "unknown model 'gpt3'");
    EXPECT_EQ(e["code"], "model_not_found");
    EXPECT_EQ(e["type"], "invalid_request_error");
  }
  script_.refuse = unavailable("no replica of gpt2 came up in time");
  for (const char* stream : {"false", "true"}) {
    auto r = post("/v1/chat/completions", std::string(R"({"model": "gpt2", "messages": [{"role": "user", "content": "x"}],
                                                          "stream": )") + stream + "}");
    const json e = openai_error(r, 503);
    EXPECT_EQ(r->get_header_value("Retry-After"), "1");
    EXPECT_EQ(e["type"], "server_error");
    EXPECT_EQ(e["code"], "unavailable");
  }
  script_.refuse.reset();
  script_.chunks = {generate_chunk{}};
  script_.chunks[0].finish = FinishReason::error;
  script_.chunks[0].error = {ErrorCode::invalid_argument, "the prompt is 2000 tokens; gpt2's context is 1024"};
  const json e = openai_error(post("/v1/completions", R"({"model": "gpt2", "prompt": "x", "stream": true})"), 400);
  EXPECT_EQ(e["message"], "the prompt is 2000 tokens; gpt2's context is 1024");
}

TEST_F(GenerationEndpointsTest, AFailureAfterTheFirstTokenIsAnErrorEventThenDoneOrAnErrorWhenWhole) {
  script_ = script_of({"Hello", " world"});
  script_.chunks[1].finish = FinishReason::error;
  script_.chunks[1].error = {ErrorCode::unavailable, "the node serving gpt2 was lost and no replica could continue"};
  start();
  auto r = post("/v1/completions", R"({"model": "gpt2", "prompt": "x", "stream": true})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto e = events(r->body);
  ASSERT_EQ(e.size(), 4u) << r->body;  // Hello, " world", the error, [DONE]
  EXPECT_EQ(json::parse(e[1])["choices"][0]["text"], " world");
  const json error = json::parse(e[2]);
  EXPECT_EQ(error["error"]["message"], "the node serving gpt2 was lost and no replica could continue");
  EXPECT_EQ(error["error"]["code"], "unavailable");
  EXPECT_EQ(e[3], "[DONE]");
  const json whole = openai_error(post("/v1/completions", R"({"model": "gpt2", "prompt": "x"})"), 503);
  EXPECT_EQ(whole["message"], "the node serving gpt2 was lost and no replica could continue");
}

TEST_F(GenerationEndpointsTest, AClientThatDisconnectsMidStreamCancelsItsGeneration) {
  script_ = script_of({"Hello", " world"});
  script_.hold_before = 1;  // the second chunk waits until the test releases it, or a cancel
  start();
  httplib::Client c("127.0.0.1", frontend_->port());
  c.set_read_timeout(10, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.set_header("Content-Type", "application/json");
  req.body = R"({"model": "gpt2", "stream": true, "messages": [{"role": "user", "content": "Hi"}]})";
  std::string got;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    got.append(data, n);
    return got.find("Hello") == std::string::npos;  // the first token arrived: hang up
  };
  auto r = c.send(req);
  EXPECT_FALSE(r) << "the client was to hang up";
  EXPECT_NE(got.find("\"role\":\"assistant\""), std::string::npos) << got;
  const auto seen = service_->requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(service_->wait_cancelled(seen[0].id)) << "the service never saw the cancel";
  EXPECT_TRUE(service_->wait_finished());
  EXPECT_NE(metrics().find(R"(ember_generation_cancels_total{reason="client_gone"} 1)"), std::string::npos)
      << metrics();
}

TEST_F(GenerationEndpointsTest, StoppingTheFrontEndEndsAStreamAtOnceAndCancelsItsGeneration) {
  script_ = script_of({"Hello", " world"});
  script_.hold_before = 1;
  start();
  std::promise<void> first;
  std::thread client([&, port = frontend_->port()] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(10, 0);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.set_header("Content-Type", "application/json");
    req.body = R"({"model": "gpt2", "prompt": "x", "stream": true})";
    bool told = false;
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      if (!std::exchange(told, true)) first.set_value();
      return true;
    };
    c.send(req);
    if (!told) first.set_value();
  });
  first.get_future().wait();
  const auto since = std::chrono::steady_clock::now();
  frontend_->stop();  // the stream's thread lets go within a wait slice, not at the hold's end
  EXPECT_LT(std::chrono::steady_clock::now() - since, 5s);
  client.join();
  const auto seen = service_->requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(service_->wait_cancelled(seen[0].id));
  EXPECT_NE(metrics().find(R"(ember_generation_cancels_total{reason="server_stopping"} 1)"), std::string::npos)
      << metrics();
}

TEST_F(GenerationEndpointsTest, NoChunkWithinTheTimeoutIs504BeforeTheFirstTokenAndAnErrorEventAfterIt) {
  start(/*with_service=*/true, /*timeout_us=*/300'000);
  script_.hold_before = 0;
  const json e = openai_error(post("/v1/completions", R"({"model": "gpt2", "prompt": "x"})"), 504);
  EXPECT_EQ(e["message"], "no answer from the model within gateway.request_timeout (300 ms)");
  script_.hold_before = 1;
  auto r = post("/v1/completions", R"({"model": "gpt2", "prompt": "x", "stream": true})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const auto ev = events(r->body);
  ASSERT_EQ(ev.size(), 3u) << r->body;
  EXPECT_EQ(json::parse(ev[1])["error"]["code"], "deadline_exceeded");
  EXPECT_EQ(ev[2], "[DONE]");
  for (const auto& req : service_->requests()) EXPECT_TRUE(service_->wait_cancelled(req.id)) << req.id;
  EXPECT_NE(metrics().find(R"(ember_generation_cancels_total{reason="timeout"} 2)"), std::string::npos) << metrics();
}

TEST_F(GenerationEndpointsTest, KServeGenerateAnswersTextOutputWithTheVersionAndTheClientsId) {
  start();
  for (const std::string path : {"/v2/models/gpt2/generate", "/v2/models/gpt2/versions/1/generate"}) {
    auto r = post(path, R"({"id": "q1", "text_input": "Say hi", "parameters": {"max_tokens": 3, "temperature": 0}})");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body), json::parse(R"({"id": "q1", "model_name": "gpt2", "model_version": "1",
        "text_output": "Hello, world", "finish_reason": "stop", "usage": {"prompt_tokens": 4, "completion_tokens": 3}})"));
  }
  const auto seen = service_->requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].id.rfind("gen-", 0), 0u);
  EXPECT_EQ(seen[0].model, (model_key{"gpt2", 1}));
  EXPECT_EQ(seen[0].prompt, "Say hi");
  EXPECT_EQ(seen[0].max_tokens, 3u);
}

TEST_F(GenerationEndpointsTest, KServeGenerateStreamSendsAnEventPerChunkTheLastDone) {
  start();
  auto r = post("/v2/models/gpt2/generate_stream", R"({"text_input": "Say hi"})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const auto e = events(r->body);
  ASSERT_EQ(e.size(), 3u) << r->body;
  EXPECT_EQ(json::parse(e[0]), json::parse(R"({"model_name": "gpt2", "model_version": "1", "text_output": "Hello",
                                                "done": false})"));
  const json last = json::parse(e[2]);
  EXPECT_EQ(last["text_output"], " world");
  EXPECT_EQ(last["done"], true);
  EXPECT_EQ(last["finish_reason"], "stop");
  EXPECT_EQ(service_->requests().at(0).max_tokens, 20u);  // the spec's default
}

TEST_F(GenerationEndpointsTest, KServeGenerateRefusesBadBodiesAndUnknownModelsInItsOwnShape) {
  start();
  auto r = post("/v2/models/gpt2/generate", R"({"text_input": "x", "parameters": {"max_token": 3}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"].get<std::string>().rfind("unknown parameter 'max_token': /generate takes ", 0),
            0u)
      << r->body;
  r = post("/v2/models/gpt2/generate", R"({"parameters": {}})");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"], "'text_input' is required");
  r = post("/v2/models/gpt2/generate", R"({"text_input": "x", "parameters": {"stream": true}})");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"], "'stream' must be false on /generate (or left out; use /generate_stream)");
  EXPECT_TRUE(service_->requests().empty());
  r = post("/v2/models/gpt9/generate_stream", R"({"text_input": "x"})");
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"], "unknown model 'gpt9'");
}

TEST_F(GenerationEndpointsTest, UnderV1CredentialsAndUnknownPathsAreRefusedInOpenAisShape) {
  start(true, 60'000'000, {{"s3cret"}});
  json e = openai_error(post("/v1/completions", R"({"model": "gpt2", "prompt": "x"})"), 401);
  EXPECT_EQ(e["type"], "authentication_error");
  e = openai_error(get("/v1/models", {{"Authorization", "Bearer wrong"}}), 403);
  EXPECT_EQ(e["type"], "permission_error");
  const httplib::Headers good = {{"Authorization", "Bearer s3cret"}};
  auto r = post("/v1/completions", R"({"model": "gpt2", "prompt": "x"})", good);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  e = openai_error(get("/v1/embeddings", good), 404);
  EXPECT_EQ(e["message"], "no such endpoint: GET /v1/embeddings");
}

// A token scoped to gpt2 with one call at a time: a body naming another model is 403 in OpenAI's
// shape; a stream holds the token's one slot until its last event, so a second call meanwhile is 429
// (rate_limit_error, Retry-After) and one after the stream ended passes.
TEST_F(GenerationEndpointsTest, AStreamHoldsItsTokensSlotUntilItEndsAndAScopeNamesTheModel) {
  script_ = script_of({"Hello", " world"});
  script_.hold_before = 1;
  start(true, 60'000'000, {*parse_api_token("tenant infer=gpt2 concurrent=1", "t")});
  const httplib::Headers who = {{"Authorization", "Bearer tenant"}};
  json e = openai_error(post("/v1/completions", R"({"model": "gpt9", "prompt": "x"})", who), 403);
  EXPECT_EQ(e["type"], "permission_error");
  EXPECT_EQ(e["param"], "model");
  EXPECT_NE(e["message"].get<std::string>().find("may not use model 'gpt9'"), std::string::npos) << e;
  EXPECT_TRUE(service_->requests().empty());
  std::promise<void> first;
  std::string got;
  std::thread client([&, port = frontend_->port()] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(10, 0);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.headers = who;
    req.set_header("Content-Type", "application/json");
    req.body = R"({"model": "gpt2", "prompt": "x", "stream": true})";
    bool told = false;
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      got.append(data, n);
      if (!std::exchange(told, true)) first.set_value();
      return true;
    };
    c.send(req);
    if (!told) first.set_value();
  });
  first.get_future().wait();  // the stream's first event came: its call holds the slot
  auto busy = post("/v2/models/gpt2/generate", R"({"text_input": "x"})", who);
  e = openai_error(post("/v1/completions", R"({"model": "gpt2", "prompt": "x"})", who), 429);
  EXPECT_EQ(e["type"], "rate_limit_error");
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, 429);
  EXPECT_EQ(busy->get_header_value("Retry-After"), "1");
  EXPECT_NE(json::parse(busy->body)["error"].get<std::string>().find("concurrent= limit"), std::string::npos);
  service_->release();
  client.join();
  EXPECT_NE(got.find("[DONE]"), std::string::npos) << got;
  // The slot comes back when the server lets go of the finished stream, just after its last bytes.
  const std::string freed = R"(ember_api_calls_in_flight{token="t"} 0)";
  for (int i = 0; i < 500 && metrics().find(freed) == std::string::npos; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_NE(metrics().find(freed), std::string::npos) << metrics();
  auto after = post("/v1/completions", R"({"model": "gpt2", "prompt": "x"})", who);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200) << after->body;
  EXPECT_NE(metrics().find(R"(ember_api_calls_total{token="t",outcome="concurrency_limited"} 2)"), std::string::npos)
      << metrics();
}

TEST_F(GenerationEndpointsTest, WithoutAServiceTheGenerationRoutesDoNotExist) {
  start(/*with_service=*/false);
  EXPECT_EQ(get("/v1/models")->status, 404);
  EXPECT_EQ(post("/v1/completions", R"({"model": "gpt2", "prompt": "x"})")->status, 404);
  EXPECT_EQ(post("/v2/models/gpt2/generate", R"({"text_input": "x"})")->status, 404);
  EXPECT_TRUE(service_->requests().empty());
}

}  // namespace generation_endpoints_test
}  // namespace ember
