// The generation conversation's messages: a request and a chunk cross a process (CAF's binary
// serializer, as between nodes) unchanged, the words of the enums, and check_generate_request's
// bounds, each refusal naming the field as OpenAI does.
#include "actors/generation_messages.hpp"

#include <gtest/gtest.h>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace ember {
namespace generation_messages_test {

template <class T>
T round_trip(T x) {
  std::vector<char> buf;
  caf::binary_serializer sink(nullptr, buf);
  EXPECT_FALSE(sink(x));
  T back;
  caf::binary_deserializer source(nullptr, buf);
  EXPECT_FALSE(source(back));
  return back;
}

generate_request valid() {
  generate_request r;
  r.id = "cmpl-1";
  r.model = {"gpt2", 0};
  r.prompt = "Hello";
  return r;
}

/// The refusal of `r`: its message and field.
std::pair<std::string, std::string> refusal(const generate_request& r) {
  std::string field = "unset";
  const Status s = check_generate_request(r, &field);
  EXPECT_FALSE(s.ok());
  if (s.ok()) return {"", field};
  EXPECT_EQ(s.error().code(), ErrorCode::invalid_argument);
  return {s.error().message(), field};
}

TEST(GenerationMessages, ARequestCrossesAProcessUnchanged) {
  generate_request r = valid();
  r.model = {"llama", 3};
  r.kind = PromptKind::chat;
  r.messages = {{"system", "Be brief."}, {"user", "Hi"}};
  r.prompt_tokens = {1, 2, 3};
  r.sampling.temperature = 0.5f;
  r.sampling.top_p = 0.9f;
  r.sampling.top_k = 40;
  r.sampling.min_p = 0.05f;
  r.sampling.has_seed = true;
  r.sampling.seed = 0xfeedfacecafebeefull;
  r.sampling.presence_penalty = 0.5f;
  r.sampling.frequency_penalty = -0.5f;
  r.sampling.repetition_penalty = 1.1f;
  r.sampling.logit_bias = {{50256, -100}, {7, 2.5f}};
  r.max_tokens = 64;
  r.stop = {"\n\n", "END"};
  r.stop_token_ids = {50256};
  r.ignore_eos = true;
  r.logprobs = true;
  r.top_logprobs = 3;
  r.stream = true;
  r.include_usage = true;
  r.resume_tokens = {9, 8};
  const generate_request b = round_trip(r);
  EXPECT_EQ(b.id, r.id);
  EXPECT_EQ(b.model, r.model);
  EXPECT_EQ(b.kind, PromptKind::chat);
  ASSERT_EQ(b.messages.size(), 2u);
  EXPECT_EQ(b.messages[1].role, "user");
  EXPECT_EQ(b.messages[1].content, "Hi");
  EXPECT_EQ(b.prompt_tokens, r.prompt_tokens);
  EXPECT_EQ(b.sampling.temperature, 0.5f);
  EXPECT_EQ(b.sampling.top_p, 0.9f);
  EXPECT_EQ(b.sampling.top_k, 40);
  EXPECT_EQ(b.sampling.min_p, 0.05f);
  EXPECT_TRUE(b.sampling.has_seed);
  EXPECT_EQ(b.sampling.seed, 0xfeedfacecafebeefull);
  EXPECT_EQ(b.sampling.presence_penalty, 0.5f);
  EXPECT_EQ(b.sampling.frequency_penalty, -0.5f);
  EXPECT_EQ(b.sampling.repetition_penalty, 1.1f);
  ASSERT_EQ(b.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(b.sampling.logit_bias[0].token, 50256);
  EXPECT_EQ(b.sampling.logit_bias[1].bias, 2.5f);
  EXPECT_EQ(b.max_tokens, 64u);
  EXPECT_EQ(b.stop, r.stop);
  EXPECT_EQ(b.stop_token_ids, r.stop_token_ids);
  EXPECT_TRUE(b.ignore_eos && b.logprobs && b.stream && b.include_usage);
  EXPECT_EQ(b.top_logprobs, 3u);
  EXPECT_EQ(b.resume_tokens, r.resume_tokens);
}

TEST(GenerationMessages, AChunkCrossesAProcessUnchanged) {
  generate_chunk c;
  c.id = "cmpl-1";
  c.tokens = {15496, 995};
  c.text = "Hello world";
  c.logprobs = {{{15496, "Hello", -0.25f}, {{15496, "Hello", -0.25f}, {17250, "Hi", -1.5f}}},
                {{995, " world", -0.5f}, {}}};
  c.finish = FinishReason::error;
  c.usage = {5, 2};
  c.error = {ErrorCode::unavailable, "node lost"};
  const generate_chunk b = round_trip(c);
  EXPECT_EQ(b.id, c.id);
  EXPECT_EQ(b.tokens, c.tokens);
  EXPECT_EQ(b.text, c.text);
  ASSERT_EQ(b.logprobs.size(), 2u);
  EXPECT_EQ(b.logprobs[0].chosen.text, "Hello");
  ASSERT_EQ(b.logprobs[0].top.size(), 2u);
  EXPECT_EQ(b.logprobs[0].top[1].token, 17250);
  EXPECT_EQ(b.logprobs[0].top[1].logprob, -1.5f);
  EXPECT_EQ(b.finish, FinishReason::error);
  EXPECT_TRUE(b.is_final());
  EXPECT_EQ(b.usage.prompt_tokens, 5u);
  EXPECT_EQ(b.usage.completion_tokens, 2u);
  EXPECT_EQ(b.error.code, ErrorCode::unavailable);
  EXPECT_EQ(b.error.message, "node lost");
}

TEST(GenerationMessages, FinishReasonsAndPromptKindsHaveOpenAisWords) {
  EXPECT_EQ(to_string(FinishReason::none), "");
  EXPECT_EQ(to_string(FinishReason::stop), "stop");
  EXPECT_EQ(to_string(FinishReason::length), "length");
  EXPECT_EQ(to_string(FinishReason::error), "error");
  EXPECT_EQ(to_string(PromptKind::text), "text");
  EXPECT_EQ(to_string(PromptKind::chat), "chat");
  EXPECT_EQ(to_string(PromptKind::tokens), "tokens");
  EXPECT_FALSE(generate_chunk{}.is_final());
}

TEST(GenerationMessages, AValidRequestPassesAtEveryBound) {
  EXPECT_TRUE(check_generate_request(valid()).ok());
  generate_request r = valid();
  r.prompt = std::string(kMaxPromptBytes, 'a');
  r.sampling.temperature = 2;
  r.sampling.top_p = 1;
  r.sampling.min_p = 1;
  r.sampling.presence_penalty = -2;
  r.sampling.frequency_penalty = 2;
  r.sampling.repetition_penalty = 2;
  for (int32_t t = 0; t < static_cast<int32_t>(kMaxLogitBias); ++t) r.sampling.logit_bias.push_back({t, -100});
  r.max_tokens = kMaxGenerateTokens;
  r.stop.assign(kMaxStopStrings, std::string(kMaxStopStringBytes, 'x'));
  r.stop_token_ids.assign(kMaxStopTokenIds, 0);
  r.logprobs = true;
  r.top_logprobs = kMaxTopLogprobs;
  const Status s = check_generate_request(r);
  EXPECT_TRUE(s.ok()) << s.error().message();
  r = valid();
  r.kind = PromptKind::tokens;
  r.prompt_tokens.assign(kMaxPromptTokens, 1);
  EXPECT_TRUE(check_generate_request(r).ok());
  r = valid();
  r.kind = PromptKind::chat;
  r.messages = {{"system", "s"}, {"developer", "d"}, {"user", "u"}, {"assistant", "a"}};
  EXPECT_TRUE(check_generate_request(r).ok());
}

TEST(GenerationMessages, EachBoundIsRefusedNamingTheField) {
  struct Case {
    std::function<void(generate_request&)> change;
    std::string message;
    std::string field;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<Case> cases = {
      {[](auto& r) { r.id.clear(); }, "the generation request has no id", ""},
      {[](auto& r) { r.model.name.clear(); }, "'model' must name a model", "model"},
      {[](auto& r) { r.prompt.assign(kMaxPromptBytes + 1, 'a'); }, "'prompt' is 1048577 bytes; at most 1048576 (1 MiB)",
       "prompt"},
      {[](auto& r) { r.kind = PromptKind::tokens; }, "'prompt' holds no token ids", "prompt"},
      {[](auto& r) { r.kind = PromptKind::tokens; r.prompt_tokens = {1, -2}; },
       "'prompt' holds a negative token id, -2", "prompt"},
      {[](auto& r) { r.kind = PromptKind::tokens; r.prompt_tokens.assign(kMaxPromptTokens + 1, 1); },
       "'prompt' holds 262145 token ids; at most 262144", "prompt"},
      {[](auto& r) { r.kind = PromptKind::chat; }, "'messages' must hold at least one message", "messages"},
      {[](auto& r) { r.kind = PromptKind::chat; r.messages = {{"user", "a"}, {"tool", "b"}}; },
       "messages[1].role must be system, developer, user or assistant, not 'tool'", "messages"},
      {[](auto& r) { r.kind = PromptKind::chat; r.messages.assign(kMaxChatMessages + 1, {"user", "a"}); },
       "'messages' holds 4097 messages; at most 4096", "messages"},
      {[](auto& r) { r.kind = PromptKind::chat; r.messages.assign(2, {"user", std::string(kMaxPromptBytes / 2 + 1, 'a')}); },
       "the messages' content is 1048578 bytes; at most 1048576 (1 MiB)", "messages"},
      {[](auto& r) { r.sampling.temperature = 3; }, "'temperature' must be in [0, 2], not 3", "temperature"},
      {[](auto& r) { r.sampling.temperature = -0.5f; }, "'temperature' must be in [0, 2], not -0.5", "temperature"},
      {[nan](auto& r) { r.sampling.temperature = nan; }, "'temperature' must be in [0, 2], not nan", "temperature"},
      {[](auto& r) { r.sampling.top_p = 0; }, "'top_p' must be in (0, 1], not 0", "top_p"},
      {[](auto& r) { r.sampling.top_p = 1.5f; }, "'top_p' must be in (0, 1], not 1.5", "top_p"},
      {[](auto& r) { r.sampling.top_k = -2; }, "'top_k' must be -1 or 0 (off) or positive, not -2", "top_k"},
      {[](auto& r) { r.sampling.min_p = 1.25f; }, "'min_p' must be in [0, 1], not 1.25", "min_p"},
      {[](auto& r) { r.sampling.presence_penalty = -2.5f; }, "'presence_penalty' must be in [-2, 2], not -2.5",
       "presence_penalty"},
      {[](auto& r) { r.sampling.frequency_penalty = 2.5f; }, "'frequency_penalty' must be in [-2, 2], not 2.5",
       "frequency_penalty"},
      {[](auto& r) { r.sampling.repetition_penalty = 0; }, "'repetition_penalty' must be in (0, 2], not 0",
       "repetition_penalty"},
      {[](auto& r) { r.sampling.logit_bias.assign(kMaxLogitBias + 1, {1, 1}); },
       "'logit_bias' holds 301 entries; at most 300", "logit_bias"},
      {[](auto& r) { r.sampling.logit_bias = {{3, 1}, {3, 2}}; }, "'logit_bias' names token 3 twice", "logit_bias"},
      {[](auto& r) { r.sampling.logit_bias = {{-1, 1}}; }, "'logit_bias' names a negative token id, -1", "logit_bias"},
      {[](auto& r) { r.sampling.logit_bias = {{5, 101}}; }, "'logit_bias' values must be in [-100, 100], not 101 (token 5)",
       "logit_bias"},
      {[](auto& r) { r.max_tokens = kMaxGenerateTokens + 1; }, "'max_tokens' must be at most 1048576, not 1048577",
       "max_tokens"},
      {[](auto& r) { r.stop.assign(kMaxStopStrings + 1, "x"); }, "'stop' holds 17 strings; at most 16", "stop"},
      {[](auto& r) { r.stop = {"a", ""}; }, "'stop' holds an empty string", "stop"},
      {[](auto& r) { r.stop = {std::string(kMaxStopStringBytes + 1, 'x')}; },
       "'stop' holds a string of 257 bytes; at most 256", "stop"},
      {[](auto& r) { r.stop_token_ids.assign(kMaxStopTokenIds + 1, 0); },
       "'stop_token_ids' holds 65 token ids; at most 64", "stop_token_ids"},
      {[](auto& r) { r.stop_token_ids = {-7}; }, "'stop_token_ids' holds a negative token id, -7", "stop_token_ids"},
      {[](auto& r) { r.logprobs = true; r.top_logprobs = kMaxTopLogprobs + 1; },
       "'top_logprobs' must be at most 20, not 21", "top_logprobs"},
      {[](auto& r) { r.top_logprobs = 2; }, "'top_logprobs' needs 'logprobs' to be true", "top_logprobs"},
      {[](auto& r) { r.resume_tokens = {4, -1}; }, "'resume_tokens' holds a negative token id, -1", "resume_tokens"},
  };
  for (const auto& c : cases) {
    generate_request r = valid();
    c.change(r);
    const auto [message, field] = refusal(r);
    EXPECT_EQ(message, c.message);
    EXPECT_EQ(field, c.field) << c.message;
  }
}

}  // namespace generation_messages_test
}  // namespace ember
