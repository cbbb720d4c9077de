// autoscaler_bench: what one tick of the autoscaling policy costs for many models (issue 13 asks
// for 10,000). Not a test: it prints figures. Each tick gives every model a fresh synthetic load (a
// rate drawn around a per-model base, the ongoing and queued requests that rate implies) and asks
// placement::decide for its decision, keeping each model's ScalerState between ticks, as the
// manager's loop will, and applying each decision at once. Loads are drawn before the timed part;
// the figure is decide() and that bookkeeping, per policy and per tick: median and worst tick, and
// nanoseconds per model.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "placement/autoscaler.hpp"

using namespace ember;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  CLI::App app{"Cost of one autoscaling tick over many models"};
  uint32_t models = 10000, ticks = 200;
  app.add_option("--models", models, "Models decided per tick")->check(CLI::Range(1u, 10'000'000u));
  app.add_option("--ticks", ticks, "Ticks timed per policy")->check(CLI::Range(1u, 100'000u));
  CLI11_PARSE(app, argc, argv);

  std::mt19937_64 rng(1);
  std::vector<double> base(models);
  for (double& b : base) b = std::exponential_distribution<double>(1.0 / 20)(rng);  // mean 20 req/s
  std::vector<std::vector<placement::ModelLoad>> loads(ticks, std::vector<placement::ModelLoad>(models));
  for (uint32_t t = 0; t < ticks; ++t) {
    for (uint32_t m = 0; m < models; ++m) {
      placement::ModelLoad& l = loads[t][m];
      l.arrival_rate = std::max(0.0, base[m] * std::normal_distribution<double>(1, 0.3)(rng));
      l.service_time_us = 20'000;
      l.cold_start_us = 300'000;
      l.ongoing = static_cast<uint32_t>(l.arrival_rate * 0.03);
      l.queued = l.ongoing / 3;
    }
  }

  std::printf("%u models, %u ticks per policy; decide() per model (loads drawn beforehand)\n", models, ticks);
  std::printf("%-20s %12s %12s %14s\n", "policy", "median ms", "worst ms", "ns per model");
  for (ScalingPolicy policy : {ScalingPolicy::ongoing_requests, ScalingPolicy::arrival_rate,
                               ScalingPolicy::queue_latency, ScalingPolicy::requests_per_minute}) {
    AutoscaleConfig config;
    config.policy = policy;
    std::vector<placement::ScalerState> states(models);
    std::vector<uint32_t> ready(models, 1);  // each decision takes effect at once
    std::vector<double> tick_ms;
    uint64_t changes = 0;
    for (uint32_t t = 0; t < ticks; ++t) {
      const int64_t now_us = static_cast<int64_t>(t) * 1'000'000;
      const auto start = Clock::now();
      for (uint32_t m = 0; m < models; ++m) {
        placement::ModelLoad& load = loads[t][m];
        load.ready = ready[m];
        const placement::ScaleDecision d = placement::decide(config, load, states[m], now_us);
        if (d.action == placement::ScaleAction::up) ready[m] += d.count;
        if (d.action == placement::ScaleAction::down) ready[m] -= d.count;
        changes += d.action != placement::ScaleAction::keep;
      }
      tick_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    std::sort(tick_ms.begin(), tick_ms.end());
    const double median = tick_ms[tick_ms.size() / 2];
    std::printf("%-20s %12.3f %12.3f %14.1f   (%llu changes decided)\n", std::string(to_string(policy)).c_str(),
                median, tick_ms.back(), median * 1e6 / models, static_cast<unsigned long long>(changes));
  }
  return 0;
}
