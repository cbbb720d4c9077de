// sampling_bench: what one text::Sampler::sample costs on a row of a large vocabulary (Llama 3's
// 128,256 by default), per sampling configuration. Not a test: it prints figures. Rows are drawn
// beforehand (normal logits, standard deviation 3, about a language model's spread) and cycled, so
// the figure is the sampler's alone: least, median and 99th percentile microseconds per token (on
// a shared machine the least is the closest to the sampler's own cost).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "text/sampling.hpp"

using namespace ember;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  CLI::App app{"Cost of sampling one token from a row of logits"};
  uint32_t vocab = 128256, iterations = 2000;
  app.add_option("--vocab", vocab, "Vocabulary size")->check(CLI::Range(2u, 4'000'000u));
  app.add_option("--iterations", iterations, "Tokens sampled per configuration")->check(CLI::Range(1u, 1'000'000u));
  CLI11_PARSE(app, argc, argv);

  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<std::vector<float>> rows(8, std::vector<float>(vocab));
  for (auto& row : rows)
    for (float& v : row) v = normal(rng);
  text::TokenCounts counts;  // 512 generated tokens, for the penalties
  for (int i = 0; i < 512; ++i) counts.add_generated(static_cast<int32_t>(rng() % vocab));

  struct Config {
    std::string name;
    text::SamplingParams params;
  };
  std::vector<Config> configs;
  auto add = [&](std::string name, auto&& set) {
    text::SamplingParams p;
    p.seed = 1;
    set(p);
    configs.push_back({std::move(name), p});
  };
  add("greedy", [](text::SamplingParams& p) { p.temperature = 0; });
  add("temperature 0.8", [](text::SamplingParams& p) { p.temperature = 0.8f; });
  add("top_k 50", [](text::SamplingParams& p) { p.top_k = 50; });
  add("top_p 0.9", [](text::SamplingParams& p) { p.top_p = 0.9f; });
  add("top_k 50 top_p 0.95", [](text::SamplingParams& p) { p.top_k = 50, p.top_p = 0.95f; });
  add("min_p 0.05", [](text::SamplingParams& p) { p.min_p = 0.05f; });
  add("top_p 0.9 + penalties", [](text::SamplingParams& p) {
    p.top_p = 0.9f, p.presence_penalty = 0.5f, p.frequency_penalty = 0.5f, p.repetition_penalty = 1.1f;
  });
  add("top_p 0.9 + logprobs 5", [](text::SamplingParams& p) { p.top_p = 0.9f, p.logprobs = true, p.top_logprobs = 5; });
  add("temp 0.8 + logprobs 5", [](text::SamplingParams& p) { p.temperature = 0.8f, p.logprobs = true, p.top_logprobs = 5; });

  std::printf("vocabulary %u, %u tokens per configuration\n", vocab, iterations);
  std::printf("%-26s %10s %10s %10s\n", "configuration", "min us", "median us", "p99 us");
  for (const Config& c : configs) {
    auto sampler = text::Sampler::create(c.params, vocab, 0);
    if (!sampler.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.name.c_str(), sampler.error().to_string().c_str());
      return 1;
    }
    std::vector<double> us;
    uint64_t checksum = 0;
    for (uint32_t i = 0; i < iterations; ++i) {
      const auto start = Clock::now();
      auto t = sampler->sample(rows[i % rows.size()], counts, i);
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      if (!t.ok()) {
        std::fprintf(stderr, "%s: %s\n", c.name.c_str(), t.error().to_string().c_str());
        return 1;
      }
      checksum += static_cast<uint64_t>(t->id);
    }
    std::sort(us.begin(), us.end());
    std::printf("%-26s %10.1f %10.1f %10.1f   (checksum %llu)\n", c.name.c_str(), us[0], us[us.size() / 2],
                us[us.size() * 99 / 100],
                static_cast<unsigned long long>(checksum));
  }
  return 0;
}
