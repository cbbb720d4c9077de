// OpenAI's completions and chat bodies into generate_requests: every documented shape of a prompt
// and of a message, the defaults (max_tokens 16 for completions), OpenAI's and vLLM's fields, the
// documented fields this server does not implement (accepted at their no-op values), and each
// refusal naming its field.
#include "actors/gateway/http/openai_json.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace openai_json_test {

generate_request completion(const std::string& body) {
  std::string param;
  auto r = parse_openai_completion(body, "cmpl-1", &param);
  EXPECT_TRUE(r.ok()) << body << ": " << (r.ok() ? "" : r.error().message());
  return r.ok() ? *r : generate_request{};
}

generate_request chat(const std::string& body) {
  auto r = parse_openai_chat(body, "chatcmpl-1");
  EXPECT_TRUE(r.ok()) << body << ": " << (r.ok() ? "" : r.error().message());
  return r.ok() ? *r : generate_request{};
}

TEST(OpenAiJson, APromptIsTextOneTextTokenIdsOrOneListOfTokenIds) {
  generate_request r = completion(R"({"model": "gpt2", "prompt": "Hello"})");
  EXPECT_EQ(r.id, "cmpl-1");
  EXPECT_EQ(r.model, (model_key{"gpt2", 0}));
  EXPECT_EQ(r.kind, PromptKind::text);
  EXPECT_EQ(r.prompt, "Hello");
  EXPECT_EQ(r.max_tokens, kOpenAiCompletionsDefaultMaxTokens);
  EXPECT_FALSE(r.stream || r.logprobs || r.include_usage);
  EXPECT_EQ(completion(R"({"model": "gpt2", "prompt": ["Hi"]})").prompt, "Hi");
  r = completion(R"({"model": "gpt2", "prompt": [15496, 11]})");
  EXPECT_EQ(r.kind, PromptKind::tokens);
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{15496, 11}));
  EXPECT_EQ(completion(R"({"model": "gpt2", "prompt": [[7]]})").prompt_tokens, std::vector<int32_t>{7});
  EXPECT_EQ(completion(R"({"model": "gpt2", "prompt": ""})").prompt, "");
}

TEST(OpenAiJson, EveryFieldAClientSendsIsRead) {
  const generate_request r = completion(R"({"model": "gpt2", "prompt": "x", "max_tokens": 9, "temperature": 0.7,
      "top_p": 0.9, "n": 1, "stream": true, "stream_options": {"include_usage": true}, "logprobs": 3, "stop": "\n",
      "seed": 1, "presence_penalty": 0.1, "frequency_penalty": 0.2, "logit_bias": {"5": 1}, "user": "u",
      "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.2, "ignore_eos": true, "stop_token_ids": [50256],
      "echo": false, "suffix": null, "best_of": 1})");
  EXPECT_EQ(r.max_tokens, 9u);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.7f);
  EXPECT_TRUE(r.stream && r.include_usage && r.logprobs && r.ignore_eos);
  EXPECT_EQ(r.top_logprobs, 3u);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.sampling.top_k, 20);
  EXPECT_EQ(r.stop_token_ids, std::vector<int32_t>{50256});
  EXPECT_EQ(r.sampling.logit_bias.size(), 1u);
  // What OpenAI's clients send for unset fields: null everywhere.
  const generate_request n = completion(R"({"model": "gpt2", "prompt": "x", "max_tokens": null, "n": null,
      "stream": null, "stream_options": null, "logprobs": null, "user": null, "temperature": null})");
  EXPECT_EQ(n.max_tokens, kOpenAiCompletionsDefaultMaxTokens);
  EXPECT_FALSE(n.logprobs);
}

TEST(OpenAiJson, ChatMessagesTakeTextOrTextPartsAndAnAssistantMayHaveNoContent) {
  const generate_request r = chat(R"({"model": "llama", "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "name": "ann", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null, "tool_calls": []},
      {"role": "developer", "content": "d"}],
      "max_completion_tokens": 12, "logprobs": true, "top_logprobs": 4,
      "tools": [], "tool_choice": "none", "response_format": {"type": "text"}, "parallel_tool_calls": false,
      "store": false, "metadata": {"k": "v"}, "modalities": ["text"], "service_tier": "auto"})");
  EXPECT_EQ(r.kind, PromptKind::chat);
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[1].content, "a\nb");
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.max_tokens, 12u);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 4u);
  EXPECT_EQ(chat(R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})").max_tokens, 0u);  // the context
  EXPECT_EQ(chat(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 5,
                     "max_completion_tokens": 5})")
                .max_tokens,
            5u);
}

TEST(OpenAiJson, EachRefusalNamesItsField) {
  struct Case {
    bool is_chat;
    std::string body, param, message;
  };
  const std::string m = R"("messages": [{"role": "user", "content": "x"}])";
  const std::vector<Case> cases = {
      {false, "  ", "", "the request body is empty; /v1/completions takes a JSON object with 'model' and 'prompt'"},
      {true, "", "", "the request body is empty; /v1/chat/completions takes a JSON object with 'model' and 'messages'"},
      {false, "[1]", "", "the request body must be a JSON object"},
      {false, R"({"model": 5, "prompt": "x"})", "model", "'model' must be a string, not an integer"},
      {false, R"({"model": "m", "prompt": "x", "best_of": 3})", "best_of",
       "'best_of' is not supported by this server (only 1 is accepted)"},
      {false, R"({"model": "m", "prompt": "x", "suffix": "!"})", "suffix",
       "'suffix' is not supported by this server (only \"\" is accepted)"},
      {false, R"({"model": "m", "prompt": "x", "logprobs": 21})", "logprobs", "'logprobs' must be at most 20, not 21"},
      {false, R"({"model": "m", "prompt": "x", "logprobs": true})", "logprobs",
       "'logprobs' must be an integer, not a boolean"},
      {false, R"({"model": "m", "prompt": "x", "stream": "yes"})", "stream", "'stream' must be true or false, not a string"},
      {false, R"({"model": "m", "prompt": "x", "stream": true, "stream_options": {"include_usage": true, "x": 1}})",
       "stream_options", "'stream_options' has an unknown field 'x': it takes include_usage"},
      {false, R"({"model": "m", "prompt": "x", "max_completion_tokens": 5})", "max_completion_tokens",
       "unknown field 'max_completion_tokens': /v1/completions takes "},
      {false, R"({"model": "m", "prompt": 5})", "prompt",
       "'prompt' must be a string, a list of one string, or a list of token ids, not an integer"},
      {false, R"({"model": "m", "prompt": []})", "prompt",
       "'prompt' must be a string, a list of one string, or a list of token ids, not a list"},
      {false, R"({"model": "m", "prompt": [[1], [2]]})", "prompt",
       "'prompt' holds 2 prompts; this server takes one prompt per request"},
      {false, R"({"model": "m", "prompt": [1, -1]})", "prompt", "'prompt' holds a negative token id, -1"},
      {false, R"({"model": "m", "prompt": "x", "top_p": 0})", "top_p", "'top_p' must be in (0, 1], not 0"},
      {true, R"({"model": "m", "messages": "hi"})", "messages", "'messages' must be a list of messages, not a string"},
      {true, R"({"model": "m", "messages": [{"content": "x"}]})", "messages", "messages[0].role is missing"},
      {true, R"({"model": "m", "messages": [{"role": "user"}]})", "messages", "messages[0].content is missing"},
      {true, R"({"model": "m", "messages": [{"role": "user", "content": "x", "weight": 1}]})", "messages",
       "messages[0] has an unknown field 'weight': a message takes role, content and name"},
      {true, R"({"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"id": "1"}]}]})", "messages",
       "messages[0].tool_calls is not supported by this server"},
      {true, R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "text"}]}]})", "messages",
       "messages[0].content[0] must have a 'text' string"},
      {true, R"({"model": "m", )" + m + R"(, "max_tokens": 4, "max_completion_tokens": 5})", "max_completion_tokens",
       "'max_tokens' and 'max_completion_tokens' differ (4 and 5); give one"},
      {true, R"({"model": "m", )" + m + R"(, "logprobs": 1})", "logprobs", "'logprobs' must be true or false, not an integer"},
      {true, R"({"model": "m", )" + m + R"(, "response_format": {"type": "json_object"}})", "response_format",
       "'response_format' is not supported by this server (only {\"type\":\"text\"} is accepted)"},
      {true, R"({"model": "m", )" + m + R"(, "audio": {"voice": "x"}})", "audio", "'audio' is not supported by this server"},
      {true, R"({"model": "m", )" + m + R"(, "prompt": "x"})", "prompt", "unknown field 'prompt': /v1/chat/completions takes "},
  };
  for (const auto& c : cases) {
    std::string param = "unset";
    auto r = c.is_chat ? parse_openai_chat(c.body, "id", &param) : parse_openai_completion(c.body, "id", &param);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.error().code(), ErrorCode::invalid_argument);
    EXPECT_EQ(r.error().message().rfind(c.message, 0), 0u) << c.body << ": " << r.error().message();
    EXPECT_EQ(param, c.param) << c.body;
  }
}

TEST(OpenAiJson, AManyMessagesChatIsRefusedByItsCountBeforeItsMessagesAreRead) {
  std::string body = R"({"model": "m", "messages": [)";
  for (size_t i = 0; i <= kMaxChatMessages; ++i) body += std::string(i ? "," : "") + "5";  // not even messages
  body += "]}";
  auto r = parse_openai_chat(body, "id");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "'messages' holds 4097 messages; at most 4096");
}

}  // namespace openai_json_test
}  // namespace ember
