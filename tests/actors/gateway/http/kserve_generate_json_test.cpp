// KServe v2's generate extension: bodies into generate_requests (the spec's default max_tokens, the
// shared parameters, stream per endpoint, the client's id) with each refusal, and the answers: the
// whole one, one event per chunk with done on the last, and an error event.
#include "actors/gateway/http/kserve_generate_json.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace ember {
namespace kserve_generate_json_test {

using nlohmann::json;

TEST(KServeGenerateJson, ABodyBecomesATextRequestForThePathsModel) {
  std::string client_id;
  auto r = parse_kserve_generate(R"({"id": "q", "text_input": "Hi", "parameters": {"max_tokens": 4, "top_k": 5,
                                     "stop": ["."], "stream": false}})",
                                 {"gpt2", 2}, "gen-1", /*stream=*/false, &client_id);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(client_id, "q");
  EXPECT_EQ(r->id, "gen-1");
  EXPECT_EQ(r->model, (model_key{"gpt2", 2}));
  EXPECT_EQ(r->kind, PromptKind::text);
  EXPECT_EQ(r->prompt, "Hi");
  EXPECT_EQ(r->max_tokens, 4u);
  EXPECT_EQ(r->sampling.top_k, 5);
  EXPECT_EQ(r->stop, std::vector<std::string>{"."});
  EXPECT_FALSE(r->stream);
  r = parse_kserve_generate(R"({"text_input": "Hi"})", {"gpt2", 0}, "gen-2", /*stream=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->max_tokens, kKServeDefaultMaxTokens);
  EXPECT_TRUE(r->stream);
}

TEST(KServeGenerateJson, EachRefusalSaysWhy) {
  const std::vector<std::tuple<std::string, bool, std::string>> cases = {
      {"", false, "the request body is empty; /generate takes a JSON object with 'text_input'"},
      {"[]", false, "the request body must be a JSON object"},
      {R"({"text_input": "x", "inputs": []})", false, "unknown field 'inputs': /generate takes text_input, parameters, id"},
      {R"({"parameters": {}})", true, "'text_input' is required"},
      {R"({"text_input": 1})", false, "'text_input' must be a string, not an integer"},
      {R"({"text_input": "x", "id": 1})", false, "'id' must be a string, not an integer"},
      {R"({"text_input": "x", "parameters": []})", false, "'parameters' must be an object, not a list"},
      {R"({"text_input": "x", "parameters": {"beams": 2, "nucleus": 1}})", true,
       "unknown parameters 'beams', 'nucleus': /generate_stream takes max_tokens, "},
      {R"({"text_input": "x", "parameters": {"stream": true}})", false,
       "'stream' must be false on /generate (or left out; use /generate_stream)"},
      {R"({"text_input": "x", "parameters": {"stream": false}})", true,
       "'stream' must be true on /generate_stream (or left out; use /generate)"},
      {R"({"text_input": "x", "parameters": {"temperature": 9}})", false, "'temperature' must be in [0, 2], not 9"},
      {R"({"text_input": "x", "parameters": {"max_tokens": -1}})", false, "'max_tokens' must be at least 1, not -1"},
  };
  for (const auto& [body, stream, message] : cases) {
    auto r = parse_kserve_generate(body, {"gpt2", 0}, "gen-1", stream);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().code(), ErrorCode::invalid_argument);
    EXPECT_EQ(r.error().message().rfind(message, 0), 0u) << body << ": " << r.error().message();
  }
}

TEST(KServeGenerateJson, TheWholeAnswerAndTheStreamsEvents) {
  generate_chunk a;
  a.text = "Hel";
  generate_chunk b;
  b.text = "lo";
  b.finish = FinishReason::length;
  b.usage = {3, 2};
  KServeGenerateCompletion whole({"gpt2", "1", "q"});
  whole.add(a);
  whole.add(b);
  EXPECT_TRUE(whole.done());
  EXPECT_EQ(json::parse(whole.render()), json::parse(R"({"id": "q", "model_name": "gpt2", "model_version": "1",
      "text_output": "Hello", "finish_reason": "length", "usage": {"prompt_tokens": 3, "completion_tokens": 2}})"));
  KServeGenerateStream stream({"gpt2", "1", ""});
  EXPECT_EQ(stream.add(a), R"(data: {"done":false,"model_name":"gpt2","model_version":"1","text_output":"Hel"})"
                           "\n\n");
  EXPECT_EQ(stream.add(b), R"(data: {"done":true,"finish_reason":"length","model_name":"gpt2","model_version":"1",)"
                           R"("text_output":"lo","usage":{"completion_tokens":2,"prompt_tokens":3}})"
                           "\n\n");
  EXPECT_TRUE(stream.ended());
  EXPECT_EQ(stream.add(a), "");
  KServeGenerateStream failing({"gpt2", "1", ""});
  generate_chunk lost;
  lost.text = "x";
  lost.finish = FinishReason::error;
  lost.error = {ErrorCode::unavailable, "node lost"};
  EXPECT_EQ(failing.add(lost), R"(data: {"done":false,"model_name":"gpt2","model_version":"1","text_output":"x"})"
                               "\n\n"
                               R"(data: {"error":"node lost"})"
                               "\n\n");
  EXPECT_TRUE(failing.ended());
}

}  // namespace kserve_generate_json_test
}  // namespace ember
