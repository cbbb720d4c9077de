#include "text/stop_conditions.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/must.hpp"

namespace ember::text {
namespace stop_conditions_test {

using ember::testing::must;

const std::vector<int32_t> kEos = {50256};
constexpr size_t kVocab = 50257;

StopConditions make(const StopParams& p, uint64_t prompt = 10, uint64_t window = 1024) {
  return must(StopConditions::create(p, kEos, kVocab, prompt, window), "StopConditions::create");
}

void expect_refused(const Result<StopConditions>& r, const std::string& words) {
  ASSERT_FALSE(r.ok()) << words;
  EXPECT_EQ(r.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(r.error().message().find(words), std::string::npos) << r.error().message();
}

TEST(StopConditions, EosStopsWithoutItsText) {
  const StopConditions c = make({});
  const StopConditions::Decision d = c.check(50256, 3);
  EXPECT_EQ(d.reason, FinishReason::stop);
  EXPECT_FALSE(d.send_token);
  EXPECT_EQ(c.check(11, 3).reason, FinishReason::none);
  EXPECT_TRUE(c.check(11, 3).send_token);
}

TEST(StopConditions, IgnoreEosKeepsTheRequestsOwnStopTokens) {
  StopParams p;
  p.ignore_eos = true;
  p.stop_token_ids = {13, 198};
  const StopConditions c = make(p);
  EXPECT_EQ(c.check(50256, 1).reason, FinishReason::none);
  EXPECT_TRUE(c.check(50256, 1).send_token);
  EXPECT_EQ(c.check(198, 1).reason, FinishReason::stop);
  EXPECT_TRUE(c.is_stop_token(13));
  EXPECT_FALSE(c.is_stop_token(50256));
}

TEST(StopConditions, MaxTokensEndsWithLengthAndItsTokenSent) {
  StopParams p;
  p.max_tokens = 4;
  const StopConditions c = make(p);
  EXPECT_EQ(c.max_new_tokens(), 4u);
  for (uint64_t n = 1; n < 4; ++n) EXPECT_EQ(c.check(7, n).reason, FinishReason::none);
  const StopConditions::Decision d = c.check(7, 4);
  EXPECT_EQ(d.reason, FinishReason::length);
  EXPECT_TRUE(d.send_token);
  // A stop token as the last allowed token is a stop, as the model chose it.
  EXPECT_EQ(c.check(50256, 4).reason, FinishReason::stop);
}

TEST(StopConditions, WithoutMaxTokensTheContextWindowIsTheLimit) {
  const StopConditions c = make({}, 1000, 1024);
  EXPECT_EQ(c.max_new_tokens(), 24u);
  EXPECT_EQ(c.check(7, 23).reason, FinishReason::none);
  EXPECT_EQ(c.check(7, 24).reason, FinishReason::length);
  StopParams p;
  p.max_tokens = 24;  // exactly the room left
  EXPECT_EQ(make(p, 1000, 1024).max_new_tokens(), 24u);
}

TEST(StopConditions, FinishReasonsAsTheApisSpellThem) {
  EXPECT_EQ(to_string(FinishReason::stop), "stop");
  EXPECT_EQ(to_string(FinishReason::length), "length");
  EXPECT_EQ(to_string(FinishReason::none), "");
}

TEST(StopConditions, BadRequestsAreRefused) {
  StopParams p;
  p.max_tokens = 0;
  expect_refused(StopConditions::create(p, kEos, kVocab, 10, 1024), "max_tokens must be at least 1, got 0");
  p.max_tokens = -5;
  expect_refused(StopConditions::create(p, kEos, kVocab, 10, 1024), "max_tokens must be at least 1, got -5");
  p.max_tokens = 1015;
  expect_refused(StopConditions::create(p, kEos, kVocab, 10, 1024),
                 "maximum context length is 1024 tokens; the request asks for 1025 (10 in the prompt, 1015 for the completion)");
  expect_refused(StopConditions::create({}, kEos, kVocab, 1024, 1024), "the prompt is 1024 tokens");
  expect_refused(StopConditions::create({}, kEos, kVocab, 5000, 1024), "the prompt is 5000 tokens");

  p = {};
  p.stop_token_ids = {5, static_cast<int64_t>(kVocab)};
  expect_refused(StopConditions::create(p, kEos, kVocab, 10, 1024), "stop_token_ids: 50257 is outside the vocabulary");
  p.stop_token_ids = {-1};
  expect_refused(StopConditions::create(p, kEos, kVocab, 10, 1024), "stop_token_ids: -1");
  p.stop_token_ids.assign(kMaxStopTokenIds + 1, 3);
  expect_refused(StopConditions::create(p, kEos, kVocab, 10, 1024), "at most 64");
  p.stop_token_ids.assign(kMaxStopTokenIds, 3);
  EXPECT_TRUE(StopConditions::create(p, kEos, kVocab, 10, 1024).ok());
}

}  // namespace stop_conditions_test
}  // namespace ember::text
