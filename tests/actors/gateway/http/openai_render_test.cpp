// OpenAI's answers from a generation's chunks: the model list, errors with their type and code, a
// whole completion and chat completion, and the exact event transcripts of streams (chat's role
// first, the finish on its own, usage before [DONE] when asked, an error event after the first
// token), with text that is not valid UTF-8 written with U+FFFD.
#include "actors/gateway/http/openai_render.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace ember {
namespace openai_render_test {

using nlohmann::json;

generate_chunk chunk(const std::string& text, FinishReason finish = FinishReason::none) {
  generate_chunk c;
  c.id = "x";
  c.tokens = {1};
  c.text = text;
  c.finish = finish;
  if (finish != FinishReason::none) c.usage = {5, 2};
  return c;
}

OpenAiAnswer answer(OpenAiApi api, bool include_usage = false) {
  OpenAiAnswer a;
  a.api = api;
  a.id = api == OpenAiApi::chat ? "chatcmpl-1" : "cmpl-1";
  a.model = "gpt2";
  a.created = 1700000000;
  a.include_usage = include_usage;
  return a;
}

TEST(OpenAiRender, ModelsAndErrors) {
  EXPECT_EQ(json::parse(render_openai_models({{"gpt2", 2, 17, 1024}, {"llama", 1, 0, 0}})),
            json::parse(R"({"object": "list", "data": [
                {"id": "gpt2", "object": "model", "created": 17, "owned_by": "ember", "max_model_len": 1024},
                {"id": "llama", "object": "model", "created": 0, "owned_by": "ember"}]})"));
  EXPECT_EQ(json::parse(render_openai_error(invalid_argument("'n' must be 1"), "n")),
            json::parse(R"({"error": {"message": "'n' must be 1", "type": "invalid_request_error", "param": "n",
                                      "code": "invalid_argument"}})"));
  EXPECT_EQ(json::parse(render_openai_error(not_found("unknown model 'x'")))["error"]["code"], "model_not_found");
  EXPECT_EQ(json::parse(render_openai_error(unavailable("busy")))["error"]["type"], "server_error");
  EXPECT_EQ(json::parse(render_openai_error(unauthenticated("no token")))["error"]["type"], "authentication_error");
  EXPECT_EQ(json::parse(render_openai_error(permission_denied("no")))["error"]["type"], "permission_error");
  EXPECT_EQ(json::parse(render_openai_error(413, "too big")),
            json::parse(R"({"error": {"message": "too big", "type": "invalid_request_error", "param": null,
                                      "code": null}})"));
}

TEST(OpenAiRender, AWholeCompletionAndChatCompletion) {
  OpenAiCompletion c(answer(OpenAiApi::completions));
  c.add(chunk("Hello"));
  EXPECT_FALSE(c.done());
  c.add(chunk(" world", FinishReason::length));
  c.add(chunk("ignored"));
  EXPECT_TRUE(c.done());
  EXPECT_EQ(json::parse(c.render()), json::parse(R"({"id": "cmpl-1", "object": "text_completion",
      "created": 1700000000, "model": "gpt2", "choices": [{"index": 0, "text": "Hello world", "logprobs": null,
      "finish_reason": "length"}], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}})"));
  OpenAiCompletion chat(answer(OpenAiApi::chat));
  chat.add(chunk("Hi", FinishReason::stop));
  EXPECT_EQ(json::parse(chat.render()), json::parse(R"({"id": "chatcmpl-1", "object": "chat.completion",
      "created": 1700000000, "model": "gpt2", "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"},
      "logprobs": null, "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 2,
      "total_tokens": 7}})"));
}

TEST(OpenAiRender, ACompletionStreamsTranscriptWithUsage) {
  OpenAiStream s(answer(OpenAiApi::completions, /*include_usage=*/true));
  EXPECT_EQ(s.start(), "");
  // Keys come sorted (nlohmann's objects); clients read them by name.
  const auto event = [](const std::string& choices, const std::string& usage) {
    return R"(data: {"choices":)" + choices +
           R"(,"created":1700000000,"id":"cmpl-1","model":"gpt2","object":"text_completion","usage":)" + usage +
           "}\n\n";
  };
  EXPECT_EQ(s.add(chunk("Hi")), event(R"([{"finish_reason":null,"index":0,"logprobs":null,"text":"Hi"}])", "null"));
  generate_chunk held;  // a chunk with nothing to show (text held back) writes nothing
  EXPECT_EQ(s.add(held), "");
  EXPECT_EQ(s.add(chunk("!", FinishReason::stop)),
            event(R"([{"finish_reason":null,"index":0,"logprobs":null,"text":"!"}])", "null") +
                event(R"([{"finish_reason":"stop","index":0,"logprobs":null,"text":""}])", "null") +
                event("[]", R"({"completion_tokens":2,"prompt_tokens":5,"total_tokens":7})") + "data: [DONE]\n\n");
  EXPECT_TRUE(s.ended());
  EXPECT_EQ(s.add(chunk("late")), "");
  EXPECT_EQ(s.fail(unavailable("late")), "");
}

TEST(OpenAiRender, AChatStreamStartsWithTheRoleAndAnErrorAfterTheFirstTokenIsAnEvent) {
  OpenAiStream s(answer(OpenAiApi::chat));
  EXPECT_EQ(s.start(),
            R"(data: {"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null,"index":0,)"
            R"("logprobs":null}],"created":1700000000,"id":"chatcmpl-1","model":"gpt2","object":"chat.completion.chunk"})"
            "\n\n");
  const json piece = json::parse(s.add(chunk("Hi")).substr(6));
  EXPECT_EQ(piece["choices"][0]["delta"], json::parse(R"({"content": "Hi"})"));
  generate_chunk failed = chunk(" there");
  failed.finish = FinishReason::error;
  failed.error = {ErrorCode::unavailable, "node lost"};
  const std::string out = s.add(failed);
  EXPECT_NE(out.find(R"("delta":{"content":" there"})"), std::string::npos) << out;
  EXPECT_NE(out.find(R"(data: {"error":{"code":"unavailable","message":"node lost","param":null,"type":"server_error"}})"
                     "\n\ndata: [DONE]\n\n"),
            std::string::npos)
      << out;
  EXPECT_TRUE(s.ended());
}

TEST(OpenAiRender, StreamedLogprobsCountTheirTextOffsetAcrossChunks) {
  OpenAiAnswer a = answer(OpenAiApi::completions);
  a.logprobs = true;
  OpenAiStream s(a);
  generate_chunk one = chunk("ab");
  one.logprobs = {{{1, "ab", -1}, {}}};
  generate_chunk two = chunk("c", FinishReason::stop);
  two.logprobs = {{{2, "c", -2}, {{2, "c", -2}}}};
  s.add(one);
  const std::string out = s.add(two);
  const json second = json::parse(out.substr(6, out.find("\n\n") - 6));
  EXPECT_EQ(second["choices"][0]["logprobs"], json::parse(R"({"tokens": ["c"], "token_logprobs": [-2.0],
      "top_logprobs": [{"c": -2.0}], "text_offset": [2]})"));
}

TEST(OpenAiRender, TextThatIsNotUtf8IsWrittenWithReplacementCharacters) {
  OpenAiCompletion c(answer(OpenAiApi::completions));
  c.add(chunk(std::string("a\xe2\x82") + "b", FinishReason::stop));  // a character cut short
  EXPECT_EQ(json::parse(c.render())["choices"][0]["text"], "a\xEF\xBF\xBD" "b");
}

}  // namespace openai_render_test
}  // namespace ember
