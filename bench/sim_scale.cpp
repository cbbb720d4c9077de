// How fast the simulator runs (issue 36's scale line; not a timed test): SimCluster, with the live
// manager's placement and autoscaling classes, on spine-leaf clusters of growing size, replaying
// the same kind of workload, and the wall time, events and events per second of each run.
//
//   sim_scale --profile DIR/profile.json [--hosts 2,200,2000] [--gpus-per-host 8] [--minutes 60]
//             [--rate 57] [--seed 1]
//
// Models: six, at Flashpoint's sizes (Table 3.1: 499 MB to 11,408 MB), each with the layer times of
// the profile given (measured by `ember model profile`); the sizes decide the transfers. Requests:
// Poisson arrivals at --rate per second over --minutes, each to one of the six models at random
// (seeded). The autoscaler runs with the `autoscale:` section's defaults; chains and partitioned cold
// starts are not simulated yet (docs/design/simulator.md). One line per cluster size.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "model/model_profile.hpp"
#include "sim/sim_cluster.hpp"

using namespace ember;

int main(int argc, char** argv) {
  CLI::App app{"How fast the simulator runs on growing clusters"};
  std::string profile_path, hosts_list = "2,200,2000";
  uint32_t gpus_per_host = 8;
  double minutes = 60, rate = 57;
  uint64_t seed = 1;
  app.add_option("--profile", profile_path, "a model's profile.json (its layer times are every model's)")->required();
  app.add_option("--hosts", hosts_list, "cluster sizes in hosts, comma-separated");
  app.add_option("--gpus-per-host", gpus_per_host)->check(CLI::Range(1u, 64u));
  app.add_option("--minutes", minutes, "simulated minutes of requests")->check(CLI::Range(0.1, 1440.0));
  app.add_option("--rate", rate, "requests per second")->check(CLI::Range(0.01, 100000.0));
  app.add_option("--seed", seed);
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);  // the manager's classes log every placement

  std::ifstream in(profile_path);
  std::stringstream text;
  text << in.rdbuf();
  auto profile = gpu::parse_profile(text.str(), profile_path);
  if (!profile.ok()) {
    std::fprintf(stderr, "sim_scale: %s\n", profile.error().message().c_str());
    return 2;
  }
  const std::vector<uint64_t> sizes = {499'000'000, 890'000'000, 1'626'000'000, 3'135'000'000, 6'282'000'000,
                                       11'408'000'000};
  auto models = [&]() -> Result<std::vector<sim::ModelCosts>> {
    std::vector<sim::ModelCosts> out;
    for (size_t i = 0; i < sizes.size(); ++i) {
      gpu::ModelProfile p = *profile;
      p.model = "m" + std::to_string(i);
      p.weights_bytes = sizes[i];
      EMBER_ASSIGN_OR_RETURN(auto c, sim::ModelCosts::from_profile(p));
      out.push_back(std::move(c));
    }
    return out;
  };
  sim::RequestTrace trace;
  for (size_t i = 0; i < sizes.size(); ++i) trace.models.push_back("m" + std::to_string(i));
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::uniform_int_distribution<uint32_t> pick(0, static_cast<uint32_t>(sizes.size() - 1));
  for (double t = gap(rng); t < minutes * 60; t += gap(rng)) {
    trace.requests.push_back({static_cast<uint64_t>(t * 1e6), pick(rng)});
  }
  std::printf("profile %s (%zu layers, %.1f ms at batch 1); %zu requests over %.0f min (%.1f/s), seed %llu\n\n",
              profile->model.c_str(), profile->layers.size(), (*models())[0].exec_us(1) / 1e3, trace.requests.size(),
              minutes, rate, static_cast<unsigned long long>(seed));
  std::printf("| GPUs | hosts | requests | events | wall s | events/s | simulated s | cold starts | mean e2e ms | lost |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  std::stringstream list(hosts_list);
  for (std::string item; std::getline(list, item, ',');) {
    sim::TopologySpec spec = sim::TopologySpec::flashpoint();
    spec.hosts = static_cast<uint32_t>(std::stoul(item));
    spec.gpus_per_host = gpus_per_host;
    sim::SimOptions options;
    options.autoscaler.enabled = true;
    auto costs = models();
    if (!costs.ok()) {
      std::fprintf(stderr, "sim_scale: %s\n", costs.error().message().c_str());
      return 2;
    }
    auto cluster = sim::SimCluster::create(spec, std::move(*costs), options);
    if (!cluster.ok()) {
      std::fprintf(stderr, "sim_scale: %s\n", cluster.error().message().c_str());
      return 2;
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto r = (*cluster)->run(trace);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r.ok()) {
      std::fprintf(stderr, "sim_scale: %s\n", r.error().message().c_str());
      return 2;
    }
    double e2e = 0;
    uint64_t lost = 0, answered = 0;
    for (const auto& q : r->requests) {
      if (q.lost) {
        ++lost;
        continue;
      }
      e2e += static_cast<double>(q.end_us - q.arrival_us);
      ++answered;
    }
    std::printf("| %u | %u | %zu | %llu | %.2f | %.0f | %.0f | %zu | %.1f | %llu |\n", spec.hosts * gpus_per_host,
                spec.hosts, r->requests.size(), static_cast<unsigned long long>(r->events), wall,
                static_cast<double>(r->events) / wall, r->end_us / 1e6, r->cold_starts.size(),
                answered ? e2e / answered / 1e3 : 0.0, static_cast<unsigned long long>(lost));
    std::fflush(stdout);
  }
  return 0;
}
