// density_bench: how many functions (models) one node with 4 devices serves within their SLOs, with
// late binding (Torpor's scheduler and eviction, or the random / LRU ablations) and with the
// baseline that pins each model to one device and refuses what does not fit (binding.mode pinned).
//
// Each function gets Poisson arrivals at a rate drawn uniformly from [rate-min, rate-max] per minute
// (times --time-scale, which compresses a trial: every rate is multiplied, so the load is that many
// times higher than the same trial run for that many times longer). SLO: a function meets it when at
// least --percentile of its requests were answered right within its deadline (--slo-factor x its
// warm latency, declared in its model.json); an error or a wrong answer counts as a miss. A row
// passes when at least 95% of the N functions meet theirs. Every answer is compared with the model's
// reference output for that input: wrong answers are counted and must be 0.
//
// The node runs in this process (real actors, executors and SimDevices paced at --pcie); requests go
// straight to its router, so the figures are the node's, not HTTP's. Not a test: it prints figures.
#include <CLI/CLI.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>

#include "actors/actor_system.hpp"
#include "actors/atoms.hpp"
#include "actors/errors.hpp"
#include "actors/model_repository.hpp"
#include "actors/processes.hpp"
#include "actors/tensor_codec.hpp"
#include "bench/density_models.hpp"
#include "config/units.hpp"

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string models = "bench-models/density";
  uint32_t devices = 4;
  std::string memory = "160MiB";
  std::string pcie = "16GB/s";
  double seconds = 30;
  double time_scale = 4;
  double rate_min = 5, rate_max = 30;
  double slo_factor = 2, percentile = 0.98;
  std::vector<uint32_t> ladder = {8, 16, 32, 48, 64, 80, 96, 112, 128};
  std::vector<std::string> variants = {"pinned", "torpor", "random", "lru"};
  uint32_t threads = 1;
  uint64_t seed = 7;
};

struct FunctionStats {
  uint64_t sent = 0, on_time = 0, errors = 0, wrong = 0;
  std::vector<uint64_t> latencies;
};

struct Trial {
  uint32_t n = 0, loaded = 0, meeting = 0;
  uint64_t requests = 0, errors = 0, wrong = 0;
  double p50_ms = 0, p99_ms = 0;
  std::map<std::string, uint64_t> load_errors;
};

double pct(std::vector<uint64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))]) / 1e3;
}

struct Arrival {
  double at_s;
  uint32_t function;
  uint32_t input;
};

std::vector<Arrival> arrivals(const Options& o, uint32_t n, std::mt19937_64& rng) {
  std::vector<Arrival> out;
  std::uniform_real_distribution<double> rate(o.rate_min, o.rate_max);
  for (uint32_t f = 0; f < n; ++f) {
    std::exponential_distribution<double> gap(rate(rng) * o.time_scale / 60.0);
    for (double t = gap(rng); t < o.seconds; t += gap(rng)) out.push_back({t, f, static_cast<uint32_t>(rng() % 4)});
  }
  std::sort(out.begin(), out.end(), [](const Arrival& a, const Arrival& b) { return a.at_s < b.at_s; });
  return out;
}

// Sends every arrival at its time and records each answer; answers `done` when all are in.
void drive(caf::event_based_actor* self, node_router_actor router, const std::vector<DensityFunction>* fns,
           const std::vector<Arrival>* plan, std::vector<FunctionStats>* stats, caf::actor done) {
  struct State {
    size_t next = 0, answered = 0;
    Clock::time_point start = Clock::now();
  };
  auto st = std::make_shared<State>();
  auto send_due = std::make_shared<std::function<void()>>();
  *send_due = [=] {
    const double now = std::chrono::duration<double>(Clock::now() - st->start).count();
    for (; st->next < plan->size() && (*plan)[st->next].at_s <= now; ++st->next) {
      const Arrival a = (*plan)[st->next];
      const DensityFunction& f = (*fns)[a.function];
      infer_request req;
      req.model = {f.name, 1};
      req.id = std::to_string(st->next);
      req.inputs = encode_tensors(f.inputs[a.input]);
      const auto sent = Clock::now();
      (*stats)[a.function].sent++;
      self->request(router, std::chrono::seconds(60), std::move(req))
          .then(
              [=](infer_reply& reply) {
                auto& s = (*stats)[a.function];
                const auto us = static_cast<uint64_t>(
                    std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - sent).count());
                s.latencies.push_back(us);
                auto out = decode_tensors(std::move(reply.outputs));
                if (!out.ok() || !same_outputs(*out, f.reference[a.input])) {
                  s.wrong++;
                } else if (us <= f.deadline_us) {
                  s.on_time++;
                }
                if (++st->answered == plan->size()) self->send(done, true);
              },
              [=](caf::error&) {
                (*stats)[a.function].errors++;
                if (++st->answered == plan->size()) self->send(done, true);
              });
    }
    if (st->next < plan->size()) self->delayed_send(self, std::chrono::microseconds(500), tick_atom_v);
  };
  self->become([=](tick_atom) { (*send_due)(); });
  if (plan->empty()) self->send(done, true);
  (*send_due)();
}

Result<Trial> run_trial(const Options& o, const std::string& variant, const std::vector<DensityFunction>& all,
                        uint32_t n) {
  caf::actor_system_config cfg;
  ActorSystemOptions ao;
  ao.network = false;
  configure_actor_system(cfg, ao);
  caf::actor_system sys{cfg};
  NodeConfig nc;
  nc.name = "density";
  nc.repository = o.models;
  nc.cache_bytes = 8ull << 30;
  DevicesConfig dc;
  dc.kind = DeviceKind::sim;
  dc.count = o.devices;
  EMBER_ASSIGN_OR_RETURN(dc.sim.memory_bytes, parse_bytes(o.memory));
  EMBER_ASSIGN_OR_RETURN(dc.sim.pcie_bytes_per_s, parse_bandwidth(o.pcie));
  dc.sim.compute_threads = o.threads;
  for (uint32_t d = 0; d < o.devices; ++d) dc.pcie_switch.push_back(d / 2);
  BindingConfig bc;
  bc.mode = variant == "pinned" ? "pinned" : "late";
  bc.scheduler = variant == "random" ? "random" : "torpor";
  bc.eviction = variant == "lru" ? "lru" : "torpor";
  bc.workspace_bytes = 32ull << 20;
  EMBER_ASSIGN_OR_RETURN(auto node, NodeProcess::start(sys, nc, dc, TransferConfig{}, bc));
  Trial t;
  t.n = n;
  std::vector<DensityFunction> fns(all.begin(), all.begin() + n);
  std::vector<bool> loaded(n, false);
  {
    caf::scoped_actor self{sys};
    for (uint32_t i = 0; i < n; ++i) {
      auto entries = scan_repository_model(o.models, fns[i].name);
      if (entries.empty()) return not_found("model " + fns[i].name + " is not in " + o.models);
      const auto& e = entries.front();
      load_replica req{e.key, e.manifest_json, blob_key_of(e.key), e.weights_bytes, {}};
      self->request(node->router(), std::chrono::minutes(2), std::move(req))
          .receive([&](replica_info&) { loaded[i] = true; },
                   [&](caf::error& err) { t.load_errors[std::string(to_string(from_caf(err).code()))]++; });
    }
  }
  for (bool l : loaded) t.loaded += l;
  std::mt19937_64 rng(o.seed + n);
  const auto plan = arrivals(o, n, rng);
  std::vector<FunctionStats> stats(n);
  {
    caf::scoped_actor self{sys};
    auto driver = sys.spawn(drive, node->router(), &fns, &plan, &stats, caf::actor{self});
    self->receive([](bool) {}, caf::after(std::chrono::seconds(static_cast<int64_t>(o.seconds) + 120)) >> [] {});
    self->send_exit(driver, caf::exit_reason::user_shutdown);
  }
  std::vector<uint64_t> latencies;
  for (uint32_t i = 0; i < n; ++i) {
    const auto& s = stats[i];
    t.requests += s.sent;
    t.errors += s.errors;
    t.wrong += s.wrong;
    latencies.insert(latencies.end(), s.latencies.begin(), s.latencies.end());
    const bool met = s.sent > 0 && static_cast<double>(s.on_time) >= o.percentile * static_cast<double>(s.sent);
    t.meeting += met;
  }
  t.p50_ms = pct(latencies, 0.5);
  t.p99_ms = pct(latencies, 0.99);
  return t;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  using namespace ember;
  using namespace ember::bench;
  Options o;
  CLI::App app{"Density: functions served within their SLO on one 4-device node, Ember vs pinned baseline"};
  app.add_option("--models", o.models, "Where the functions' models are written (reused between runs)");
  app.add_option("--devices", o.devices, "Devices of the node");
  app.add_option("--memory", o.memory, "Memory per simulated device");
  app.add_option("--pcie", o.pcie, "Host->device bandwidth per device (two devices share a switch)");
  app.add_option("--seconds", o.seconds, "Length of each trial");
  app.add_option("--time-scale", o.time_scale, "Arrival rates are multiplied by this");
  app.add_option("--rate-min", o.rate_min, "Lowest rate, requests per minute");
  app.add_option("--rate-max", o.rate_max, "Highest rate, requests per minute");
  app.add_option("--slo-factor", o.slo_factor, "Deadline = this x warm latency");
  app.add_option("--ladder", o.ladder, "Function counts tried, ascending")->delimiter(',');
  app.add_option("--variants", o.variants, "pinned, torpor, random, lru")->delimiter(',');
  app.add_option("--threads", o.threads, "Compute threads per device");
  CLI11_PARSE(app, argc, argv);
  SimDeviceConfig dc;
  dc.compute_threads = o.threads;
  auto fns = make_density_functions(o.models, o.ladder.back(), dc, o.slo_factor, 4);
  if (!fns.ok()) {
    std::fprintf(stderr, "density_bench: %s\n", fns.error().message().c_str());
    return 1;
  }
  std::printf("# %u devices x %s, PCIe %s (two devices per switch), %.0f s trials, rates %.0f-%.0f/min x %.1f\n",
              o.devices, o.memory.c_str(), o.pcie.c_str(), o.seconds, o.rate_min, o.rate_max, o.time_scale);
  for (const char* family : {"wide", "deep", "conv"}) {
    for (const auto& f : *fns) {
      if (f.family != family) continue;
      std::printf("# %-5s %s weights, warm %.2f ms, deadline %.2f ms\n", family, format_bytes(f.weights_bytes).c_str(),
                  static_cast<double>(f.warm_us) / 1e3, static_cast<double>(f.deadline_us) / 1e3);
      break;
    }
  }
  std::printf("%-8s %5s %7s %9s %9s %7s %7s %8s %8s %6s\n", "variant", "N", "loaded", "requests", "meet_slo",
              "pct", "errors", "p50_ms", "p99_ms", "wrong");
  std::map<std::string, uint32_t> best;
  uint64_t wrong_total = 0;
  for (const auto& v : o.variants) {
    for (uint32_t n : o.ladder) {
      auto t = run_trial(o, v, *fns, n);
      if (!t.ok()) {
        std::fprintf(stderr, "%s N=%u: %s\n", v.c_str(), n, t.error().message().c_str());
        return 1;
      }
      const double share = static_cast<double>(t->meeting) / n;
      wrong_total += t->wrong;
      std::printf("%-8s %5u %7u %9lu %9u %6.1f%% %7lu %8.2f %8.2f %6lu\n", v.c_str(), n, t->loaded,
                  static_cast<unsigned long>(t->requests), t->meeting, share * 100,
                  static_cast<unsigned long>(t->errors), t->p50_ms, t->p99_ms, static_cast<unsigned long>(t->wrong));
      std::fflush(stdout);
      if (share < 0.95) break;
      best[v] = n;
    }
  }
  std::printf("\n# largest N with >= 95%% of functions meeting their SLO:");
  for (const auto& v : o.variants) std::printf(" %s %u", v.c_str(), best[v]);
  if (best["pinned"] > 0 && best.count("torpor")) {
    std::printf("\n# torpor / pinned = %.2fx", static_cast<double>(best["torpor"]) / best["pinned"]);
  }
  std::printf("\n# wrong answers in all trials: %lu\n", static_cast<unsigned long>(wrong_total));
  return wrong_total == 0 ? 0 : 3;
}
