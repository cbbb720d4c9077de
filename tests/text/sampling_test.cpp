#include "text/sampling.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/must.hpp"

namespace ember::text {
namespace sampling_test {

using ember::testing::must;

// Logits whose softmax is `probs` (a log, so temperature 1 reproduces them exactly up to rounding).
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(p > 0 ? static_cast<float>(std::log(p)) : -std::numeric_limits<float>::infinity());
  return out;
}

std::vector<float> random_logits(size_t vocab, uint32_t seed, float scale = 4.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> out(vocab);
  for (float& v : out) v = normal(rng);
  return out;
}

Sampler make(SamplingParams params, size_t vocab, uint64_t fallback_seed = 7) {
  return must(Sampler::create(std::move(params), vocab, fallback_seed), "Sampler::create");
}

int32_t pick(Sampler& s, const std::vector<float>& logits, uint64_t index, const TokenCounts& counts = {}) {
  return must(s.sample(logits, counts, index), "sample").id;
}

// Draws kDraws tokens (indexes 0..kDraws-1 of one fixed seed) and returns each id's frequency. With
// fixed seeds every run gives the same counts, so a check cannot flake; the band it is checked in,
// 5 binomial standard deviations around the expected frequency, says how far a correct sampler may
// land (a 1-in-3.5-million event per check), so the test also stays true for any other fixed seed.
constexpr int kDraws = 4000;
std::vector<double> frequencies(SamplingParams params, const std::vector<float>& logits, uint64_t seed = 1234) {
  params.seed = seed;
  Sampler s = make(params, logits.size());
  std::vector<double> freq(logits.size(), 0.0);
  for (int i = 0; i < kDraws; ++i) freq[static_cast<size_t>(pick(s, logits, static_cast<uint64_t>(i)))] += 1.0 / kDraws;
  return freq;
}

void expect_distribution(const std::vector<double>& freq, const std::vector<double>& expected) {
  ASSERT_EQ(freq.size(), expected.size());
  for (size_t i = 0; i < freq.size(); ++i) {
    if (expected[i] == 0) {
      EXPECT_EQ(freq[i], 0.0) << "token " << i << " should be excluded";
      continue;
    }
    const double sigma = std::sqrt(expected[i] * (1 - expected[i]) / kDraws);
    EXPECT_NEAR(freq[i], expected[i], 5 * sigma + 1e-12) << "token " << i;
  }
}

TEST(Sampling, GreedyIsTheArgmax) {
  SamplingParams p;
  p.temperature = 0;
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const std::vector<float> logits = random_logits(1000, seed);
    const auto argmax = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    Sampler s = make(p, logits.size(), seed);
    EXPECT_EQ(pick(s, logits, 0), argmax);
    EXPECT_EQ(pick(s, logits, 99), argmax);  // neither the index nor the seed matters
  }
}

TEST(Sampling, GreedyTiesGoToTheLowestId) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s = make(p, 6);
  EXPECT_EQ(pick(s, {1, 3, 0, 3, 3, -2}, 0), 1);
  EXPECT_EQ(pick(s, {5, 5, 5, 5, 5, 5}, 0), 0);
}

TEST(Sampling, TheUniformDrawIsACounterOfSeedAndIndex) {
  std::set<double> seen;
  for (uint64_t i = 0; i < 1000; ++i) {
    const double u = sampling_uniform(42, i);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    EXPECT_EQ(u, sampling_uniform(42, i));
    seen.insert(u);
  }
  EXPECT_EQ(seen.size(), 1000u);
  EXPECT_NE(sampling_uniform(42, 0), sampling_uniform(43, 0));
  // Seeds one splitmix increment apart are not the same stream shifted by one.
  EXPECT_NE(sampling_uniform(5, 1), sampling_uniform(5 + 0x9e3779b97f4a7c15ULL, 0));
}

// A generation: each step's logits depend on the tokens so far (as a model's would), penalties on.
std::vector<int32_t> generate(Sampler& s, const std::vector<int32_t>& prompt, std::vector<int32_t> out, size_t total) {
  TokenCounts counts;
  counts.add_prompt(prompt);
  for (int32_t t : out) counts.add_generated(t);
  while (out.size() < total) {
    const uint32_t step_seed = 1 + static_cast<uint32_t>(out.empty() ? 0 : out.back()) * 31 + static_cast<uint32_t>(out.size());
    const int32_t t = pick(s, random_logits(s.vocab_size(), step_seed, 2.0f), out.size(), counts);
    counts.add_generated(t);
    out.push_back(t);
  }
  return out;
}

TEST(Sampling, TheSameSeedGivesTheSameTokensAndAContinuationMatches) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.frequency_penalty = 0.3f;
  p.presence_penalty = 0.2f;
  p.repetition_penalty = 1.1f;
  p.seed = 2024;
  const std::vector<int32_t> prompt = {3, 17, 17, 250};
  Sampler a = make(p, 500, 1);
  Sampler b = make(p, 500, 2);  // the fallback seed is ignored: the request has one
  const std::vector<int32_t> first = generate(a, prompt, {}, 48);
  EXPECT_EQ(generate(b, prompt, {}, 48), first);
  // Another replica resumes from the tokens already sent: counts rebuilt, index = tokens sent.
  for (size_t sent : {1u, 5u, 30u, 47u}) {
    Sampler resumed = make(p, 500, 99);
    EXPECT_EQ(generate(resumed, prompt, std::vector<int32_t>(first.begin(), first.begin() + sent), 48), first)
        << "resumed after " << sent;
  }
  // Another seed gives another stream.
  p.seed = 2025;
  Sampler c = make(p, 500);
  EXPECT_NE(generate(c, prompt, {}, 48), first);
}

TEST(Sampling, WithoutASeedTheCallersSeedIsUsed) {
  SamplingParams p;
  const std::vector<float> logits = random_logits(300, 3, 1.0f);
  Sampler a = make(p, 300, 11), b = make(p, 300, 11), c = make(p, 300, 12);
  EXPECT_EQ(a.seed(), 11u);
  std::vector<int32_t> ta, tb, tc;
  for (uint64_t i = 0; i < 32; ++i) {
    ta.push_back(pick(a, logits, i));
    tb.push_back(pick(b, logits, i));
    tc.push_back(pick(c, logits, i));
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

TEST(Sampling, TemperatureOneDrawsTheSoftmax) {
  const std::vector<double> probs = {0.1, 0.4, 0.05, 0.3, 0.15};
  expect_distribution(frequencies({}, logits_of(probs)), probs);
}

TEST(Sampling, TemperatureSharpensAndFlattens) {
  const std::vector<double> probs = {0.1, 0.4, 0.05, 0.3, 0.15};
  for (float t : {0.5f, 2.0f}) {
    std::vector<double> expected;
    double sum = 0;
    for (double q : probs) sum += std::pow(q, 1.0 / t);
    for (double q : probs) expected.push_back(std::pow(q, 1.0 / t) / sum);
    SamplingParams p;
    p.temperature = t;
    expect_distribution(frequencies(p, logits_of(probs)), expected);
  }
}

TEST(Sampling, TopKKeepsExactlyTheKMostLikely) {
  const std::vector<double> probs = {0.1, 0.4, 0.05, 0.3, 0.15};
  SamplingParams p;
  p.top_k = 3;  // 0.4, 0.3, 0.15 renormalised over 0.85
  expect_distribution(frequencies(p, logits_of(probs)), {0, 0.4 / 0.85, 0, 0.3 / 0.85, 0.15 / 0.85});
  p.top_k = 1;
  expect_distribution(frequencies(p, logits_of(probs)), {0, 1, 0, 0, 0});
  p.top_k = 5;  // the whole vocabulary: off
  expect_distribution(frequencies(p, logits_of(probs)), probs);
  p.top_k = 1000;
  expect_distribution(frequencies(p, logits_of(probs)), probs);
}

TEST(Sampling, TopKBreaksTiesAtTheBoundaryTowardsLowerIds) {
  SamplingParams p;
  p.top_k = 2;
  // Ids 1, 2 and 4 tie for second place: id 1 is kept, exactly two tokens.
  expect_distribution(frequencies(p, logits_of({0.4, 0.15, 0.15, 0.15, 0.15})), {0.4 / 0.55, 0.15 / 0.55, 0, 0, 0});
}

TEST(Sampling, ASmallTopKOverManyTiesKeepsTheLowestIds) {
  // 10,000 equal logits and k = 10: the streaming selection trims its buffer (4,106 entries) more
  // than once, and must end with ids 0-9, each drawn about a tenth of the time.
  const std::vector<float> logits(10000, 1.5f);
  SamplingParams p;
  p.top_k = 10;
  p.seed = 8;
  Sampler s = make(p, logits.size());
  std::vector<int> seen(10, 0);
  for (uint64_t i = 0; i < 2000; ++i) {
    const int32_t id = pick(s, logits, i);
    ASSERT_LT(id, 10);
    ++seen[static_cast<size_t>(id)];
  }
  for (int n : seen) EXPECT_NEAR(n, 200, 5 * std::sqrt(2000 * 0.1 * 0.9)) << "counts of one id";
}

TEST(Sampling, ALargeTopKCutsInsideATie) {
  // k = 1,100 > kSmallTopK: the even ids (logit 1) are the best 1,000, and of the odd ids (logit 0,
  // all tied) only the 100 lowest, 1 to 199, are kept; together 100 / (1000 e + 100) of the mass.
  std::vector<float> logits(2000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = i % 2 == 0 ? 1.0f : 0.0f;
  SamplingParams p;
  p.top_k = 1100;
  p.seed = 9;
  Sampler s = make(p, logits.size());
  int odd = 0;
  for (uint64_t i = 0; i < kDraws; ++i) {
    const int32_t id = pick(s, logits, i);
    if (id % 2 == 1) {
      ASSERT_LE(id, 199);
      ++odd;
    }
  }
  const double expected = 100 / (1000 * std::exp(1.0) + 100);
  EXPECT_NEAR(static_cast<double>(odd) / kDraws, expected, 5 * std::sqrt(expected * (1 - expected) / kDraws));
}

TEST(Sampling, TheExponentialIsWithinAFewUlps) {
  EXPECT_EQ(sampling_exp(0.0f), 1.0f);
  EXPECT_EQ(sampling_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(sampling_exp(-100.0f), 0.0f);
  double worst = 0;
  for (float z = -87.0f; z <= 0.0f; z += 0.00123f) {
    const double want = std::exp(static_cast<double>(z));
    worst = std::max(worst, std::fabs(sampling_exp(z) - want) / want);
  }
  EXPECT_LT(worst, 1.5e-7);  // about 1 ulp of a float (every float in [-87, 0] was checked once: 8.2e-8)
}

TEST(Sampling, TopPKeepsTheShortestPrefixThatReachesIt) {
  const std::vector<double> probs = {0.05, 0.5, 0.15, 0.3};
  SamplingParams p;
  p.top_p = 0.75f;  // 0.5 < 0.75 <= 0.5 + 0.3: two tokens
  expect_distribution(frequencies(p, logits_of(probs)), {0, 0.5 / 0.8, 0, 0.3 / 0.8});
  p.top_p = 0.85f;  // the 0.15 crosses it: three
  expect_distribution(frequencies(p, logits_of(probs)), {0, 0.5 / 0.95, 0.15 / 0.95, 0.3 / 0.95});
  p.top_p = 0.2f;  // the first alone already reaches it
  expect_distribution(frequencies(p, logits_of(probs)), {0, 1, 0, 0});
}

TEST(Sampling, TopPOverManyTokensRanksPastTheFirstBatch) {
  // 600 equally likely tokens and 400 at half their probability (weights 1 and 1/2, 800 in all):
  // top_p 0.599 needs 480 of the head, past the first ranked batch of 64 (the ties go to the lower
  // ids).
  std::vector<float> logits(1000, 0.0f);
  for (size_t i = 600; i < 1000; ++i) logits[i] = std::log(0.5f);
  SamplingParams p;
  p.top_p = 0.599f;  // 479.2 of 800: crossed by the 480th token
  p.seed = 5;
  Sampler s = make(p, logits.size());
  int32_t highest = 0;
  for (uint64_t i = 0; i < 3000; ++i) highest = std::max(highest, pick(s, logits, i));
  EXPECT_LT(highest, 480);
  EXPECT_GT(highest, 470);  // and the kept set is not cut short
}

TEST(Sampling, MinPKeepsTokensAtLeastThatFractionOfTheBest) {
  const std::vector<double> probs = {0.05, 0.5, 0.15, 0.3};
  SamplingParams p;
  p.min_p = 0.2f;  // floor 0.1: drops the 0.05
  expect_distribution(frequencies(p, logits_of(probs)), {0, 0.5 / 0.95, 0.15 / 0.95, 0.3 / 0.95});
  p.min_p = 0.5f;  // floor 0.25
  expect_distribution(frequencies(p, logits_of(probs)), {0, 0.5 / 0.8, 0, 0.3 / 0.8});
  p.top_k = 3;  // the same through the ranked path
  expect_distribution(frequencies(p, logits_of(probs)), {0, 0.5 / 0.8, 0, 0.3 / 0.8});
}

TEST(Sampling, TopKThenTopPOnTheRenormalisedSet) {
  const std::vector<double> probs = {0.4, 0.3, 0.2, 0.1};
  SamplingParams p;
  p.top_p = 0.5f;  // alone: 0.4 < 0.5, so two tokens
  expect_distribution(frequencies(p, logits_of(probs)), {0.4 / 0.7, 0.3 / 0.7, 0, 0});
  p.top_k = 2;  // after top-k the first is 4/7 >= 0.5: one token
  expect_distribution(frequencies(p, logits_of(probs)), {1, 0, 0, 0});
}

TEST(Sampling, MinusInfinityIsNeverDrawn) {
  const std::vector<double> probs = {0.0, 0.5, 0.0, 0.5};
  expect_distribution(frequencies({}, logits_of(probs)), probs);
  SamplingParams p;
  p.top_k = 3;
  expect_distribution(frequencies(p, logits_of(probs)), probs);
}

// With greedy and logprobs on, top_logprobs lists the whole (small) vocabulary's log-softmax of the
// processed logits: the penalties and bias read back exactly.
std::vector<float> processed(SamplingParams p, const std::vector<float>& logits, const TokenCounts& counts) {
  p.temperature = 0;
  p.logprobs = true;
  p.top_logprobs = static_cast<uint32_t>(logits.size());
  Sampler s = make(p, logits.size());
  const SampledToken t = must(s.sample(logits, counts, 0));
  std::vector<float> out(logits.size(), 0);
  for (const TokenLogprob& lp : t.top) out[static_cast<size_t>(lp.id)] = lp.logprob - t.top[0].logprob;
  return out;  // relative to the most likely token's
}

TEST(Sampling, PenaltiesAsVllmAndOpenAIDefineThem) {
  const std::vector<float> logits = {2, -1, 0.5f, 3, 1};
  TokenCounts counts;
  counts.add_prompt(std::vector<int32_t>{0});
  counts.add_generated(1);
  counts.add_generated(2);
  counts.add_generated(2);
  counts.add_generated(2);
  EXPECT_EQ(counts.generated(2), 3u);
  EXPECT_TRUE(counts.in_prompt(0));
  EXPECT_FALSE(counts.in_prompt(1));
  SamplingParams p;
  p.repetition_penalty = 2;  // seen (prompt or generated): 2 -> 1, -1 -> -2, 0.5 -> 0.25
  p.presence_penalty = 0.5f;  // generated: -0.5 once
  p.frequency_penalty = 0.25f;  // generated: -0.25 each
  const std::vector<float> expected = {1, -2 - 0.5f - 0.25f, 0.25f - 0.5f - 0.75f, 3, 1};
  const std::vector<float> got = processed(p, logits, counts);
  for (size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(got[i], expected[i] - 3, 1e-5) << "token " << i;
}

TEST(Sampling, LogitBiasIsAddedAfterThePenalties) {
  const std::vector<float> logits = {2, 0, 0};
  TokenCounts counts;
  counts.add_generated(0);
  SamplingParams p;
  p.repetition_penalty = 2;
  p.logit_bias = {{0, 2.0f}, {2, -100.0f}};
  const std::vector<float> got = processed(p, logits, counts);
  EXPECT_NEAR(got[0], 0, 1e-6);     // 2 / 2 + 2 = 3, the best (not (2 + 2) / 2 = 2)
  EXPECT_NEAR(got[1], -3, 1e-5);
  EXPECT_NEAR(got[2], -103, 1e-3);
  // A bias of -100 all but bans a token; +100 all but forces one.
  p = {};
  p.logit_bias = {{1, 100.0f}};
  Sampler s = make(p, 3);
  for (uint64_t i = 0; i < 200; ++i) EXPECT_EQ(pick(s, logits, i), 1);
}

TEST(Sampling, LogprobsOfTheFinalDistribution) {
  const std::vector<double> probs = {0.05, 0.5, 0.15, 0.3};
  SamplingParams p;
  p.top_k = 3;
  p.logprobs = true;
  p.top_logprobs = 4;
  p.seed = 1;
  Sampler s = make(p, probs.size());
  const SampledToken t = must(s.sample(logits_of(probs), {}, 0));
  ASSERT_EQ(t.top.size(), 3u);  // the token top-k removed is not an alternative
  EXPECT_EQ(t.top[0].id, 1);
  EXPECT_EQ(t.top[1].id, 3);
  EXPECT_EQ(t.top[2].id, 2);
  EXPECT_NEAR(t.top[0].logprob, std::log(0.5 / 0.95), 1e-5);
  EXPECT_NEAR(t.top[2].logprob, std::log(0.15 / 0.95), 1e-5);
  ASSERT_TRUE(t.logprob.has_value());
  EXPECT_NEAR(*t.logprob, std::log(probs[static_cast<size_t>(t.id)] / 0.95), 1e-5);

  // Without a ranking filter, at temperature 2: the alternatives in order, of softmax(l / 2).
  p = {};
  p.temperature = 2;
  p.logprobs = true;
  p.top_logprobs = 2;
  Sampler all = make(p, probs.size());
  const SampledToken u = must(all.sample(logits_of(probs), {}, 3));
  double sum = 0;
  for (double q : probs) sum += std::sqrt(q);
  ASSERT_EQ(u.top.size(), 2u);
  EXPECT_EQ(u.top[0].id, 1);
  EXPECT_EQ(u.top[1].id, 3);
  EXPECT_NEAR(u.top[0].logprob, std::log(std::sqrt(0.5) / sum), 1e-5);
  EXPECT_NEAR(*u.logprob, std::log(std::sqrt(probs[static_cast<size_t>(u.id)]) / sum), 1e-5);

  // Off: nothing computed.
  Sampler none = make({}, probs.size());
  const SampledToken v = must(none.sample(logits_of(probs), {}, 0));
  EXPECT_FALSE(v.logprob.has_value());
  EXPECT_TRUE(v.top.empty());
}

TEST(Sampling, GreedyLogprobsAreOfTheSoftmax) {
  const std::vector<double> probs = {0.05, 0.5, 0.15, 0.3};
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = true;
  p.top_logprobs = 1;
  Sampler s = make(p, probs.size());
  const SampledToken t = must(s.sample(logits_of(probs), {}, 0));
  EXPECT_EQ(t.id, 1);
  EXPECT_NEAR(*t.logprob, std::log(0.5), 1e-5);
  ASSERT_EQ(t.top.size(), 1u);
  EXPECT_EQ(t.top[0].id, 1);
}

TEST(Sampling, ALargeVocabularyKeepsToTheTopK) {
  const std::vector<float> logits = random_logits(128256, 77);
  std::vector<float> sorted = logits;
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  const float kth = sorted[49];
  SamplingParams p;
  p.top_k = 50;
  p.top_p = 0.9f;
  p.temperature = 0.7f;
  p.seed = 3;
  Sampler s = make(p, logits.size());
  for (uint64_t i = 0; i < 50; ++i) EXPECT_GE(logits[static_cast<size_t>(pick(s, logits, i))], kth);
}

void expect_refused(const Status& s, const std::string& field) {
  ASSERT_FALSE(s.ok()) << field;
  EXPECT_EQ(s.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(s.error().message().find(field), std::string::npos) << s.error().message();
}

TEST(Sampling, BadParametersAreRefusedByName) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(SamplingParams{}.validate().ok());
  SamplingParams p;
  for (float t : {-0.1f, nan, inf}) {
    p = {};
    p.temperature = t;
    expect_refused(p.validate(), "temperature");
  }
  p = {};
  p.top_k = -1;
  expect_refused(p.validate(), "top_k");
  for (float v : {0.0f, -0.5f, 1.5f, nan}) {
    p = {};
    p.top_p = v;
    expect_refused(p.validate(), "top_p");
  }
  for (float v : {-0.1f, 1.1f, nan}) {
    p = {};
    p.min_p = v;
    expect_refused(p.validate(), "min_p");
  }
  for (float v : {0.0f, -1.0f, nan, inf}) {
    p = {};
    p.repetition_penalty = v;
    expect_refused(p.validate(), "repetition_penalty");
  }
  for (float v : {2.5f, -2.5f, nan}) {
    p = {};
    p.presence_penalty = v;
    expect_refused(p.validate(), "presence_penalty");
    p = {};
    p.frequency_penalty = v;
    expect_refused(p.validate(), "frequency_penalty");
  }
  p = {};
  p.logit_bias = {{5, 100.5f}};
  expect_refused(p.validate(), "logit_bias");
  p.logit_bias = {{5, nan}};
  expect_refused(p.validate(), "logit_bias");
  p.logit_bias = {{-1, 1.0f}};
  expect_refused(p.validate(), "logit_bias");
  p.logit_bias.clear();
  for (int32_t i = 0; i <= static_cast<int32_t>(kMaxLogitBiasEntries); ++i) p.logit_bias[i] = 1;
  expect_refused(p.validate(), "logit_bias");
  p = {};
  p.logprobs = true;
  p.top_logprobs = kMaxTopLogprobs + 1;
  expect_refused(p.validate(), "top_logprobs");
  p.logprobs = false;
  p.top_logprobs = 3;
  expect_refused(p.validate(), "top_logprobs");

  // The edges themselves are allowed.
  p = {};
  p.temperature = 0;
  p.top_p = 1;
  p.min_p = 1;
  p.presence_penalty = -2;
  p.frequency_penalty = 2;
  p.logit_bias = {{0, -100.0f}};
  p.logprobs = true;
  p.top_logprobs = kMaxTopLogprobs;
  EXPECT_TRUE(p.validate().ok());
}

TEST(Sampling, CreateChecksTheVocabulary) {
  SamplingParams p;
  p.logit_bias = {{10, 1.0f}};
  auto outside = Sampler::create(p, 10, 0);
  ASSERT_FALSE(outside.ok());
  expect_refused(outside.error(), "logit_bias");
  EXPECT_TRUE(Sampler::create(p, 11, 0).ok());
  EXPECT_FALSE(Sampler::create({}, 0, 0).ok());
  SamplingParams bad;
  bad.temperature = -1;
  EXPECT_FALSE(Sampler::create(bad, 10, 0).ok());
}

TEST(Sampling, BadRowsAreErrors) {
  Sampler s = make({}, 4);
  auto wrong_size = s.sample(std::vector<float>{1, 2, 3}, {}, 0);
  ASSERT_FALSE(wrong_size.ok());
  EXPECT_EQ(wrong_size.error().code(), ErrorCode::invalid_argument);

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  auto with_nan = s.sample(std::vector<float>{1, nan, 3, 0}, {}, 0);
  ASSERT_FALSE(with_nan.ok());
  EXPECT_NE(with_nan.error().message().find("token 1"), std::string::npos) << with_nan.error().message();
  EXPECT_FALSE(s.sample(std::vector<float>{1, 0, inf, 0}, {}, 0).ok());
  EXPECT_FALSE(s.sample(std::vector<float>{-inf, -inf, -inf, -inf}, {}, 0).ok());

  SamplingParams p;
  p.presence_penalty = 1;
  Sampler penalised = make(p, 4);
  TokenCounts counts;
  counts.add_generated(4);  // not a token of this vocabulary
  auto out_of_vocab = penalised.sample(std::vector<float>{1, 2, 3, 4}, counts, 0);
  ASSERT_FALSE(out_of_vocab.ok());
  EXPECT_EQ(out_of_vocab.error().code(), ErrorCode::invalid_argument);
}

TEST(Sampling, ATinyRepetitionPenaltyStaysFinite) {
  SamplingParams p;
  p.repetition_penalty = 1e-30f;
  p.seed = 1;
  TokenCounts counts;
  counts.add_generated(0);
  Sampler s = make(p, 3);
  const std::vector<float> logits = {1e10f, 1e10f, 0};
  auto t = s.sample(logits, counts, 0);
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  EXPECT_EQ(t->id, 0);  // overflowed to the largest float, not to +inf or NaN
}

}  // namespace sampling_test
}  // namespace ember::text
