// density_bench: how many functions (models) one node with 4 devices serves within their SLOs, with
// late binding (Torpor's scheduler and eviction, or the random / LRU ablations) and with the
// baseline that pins each model to one device and refuses what does not fit (binding.mode pinned).
//
// Each function gets Poisson arrivals at a rate drawn uniformly from [rate-min, rate-max] per minute
// (times --time-scale, which compresses a trial: every rate is multiplied, so the load is that many
// times higher than the same trial run for that many times longer). SLO: a function meets it when at
// least --percentile of its requests were answered right within its deadline (--slo-factor x its
// warm latency, declared in its model.json); an error or a wrong answer counts as a miss. A row
// passes when at least 95% of the N functions meet theirs; the summary gives, per variant, the largest
// N of the ladder that passed. Every answer is compared with the model's reference output for that
// input: wrong answers are counted and must be 0 (exit status 3 otherwise).
//
// Defaults, and why: 160 MiB devices (a 128 MiB model pool each) against 13-36 MiB models, so the
// pinned baseline holds about 18 functions; deadline 4x the warm latency the node serves, one per
// model family (Torpor's own deadlines were 80 ms for every CV model, ResNet-152 at about 20 ms
// warm); real rates; no device-to-device links unless --nvlink (then Torpor's worker topology).
// Devices compute with a dilation of 3 (devices.compute_dilation: each kernel keeps its device
// busy for 3x its host CPU time, so the four emulated devices of this 2-core host do not slow each
// other down as no four GPUs do), and PCIe runs at --pcie / dilation (4 GB/s / 3), so copy and compute keep the ratio
// they have at 4 GB/s undilated: the wide model's weights cross in about 1.3x its warm latency, as ResNet-152's do on
// Torpor's PCIe 3 V100s. Each trial reports the CPU the process used and the host's steal time.
//
// The node runs in this process (real actors, executors and dilated SimDevices); requests go
// straight to its router, so the figures are the node's, not HTTP's. Not a test: it prints figures.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "actors/actor_system.hpp"
#include "actors/atoms.hpp"
#include "actors/cluster/model_repository.hpp"
#include "actors/errors.hpp"
#include "actors/metrics_messages.hpp"
#include "actors/process/node_process.hpp"
#include "actors/tensor_codec.hpp"
#include "base/units.hpp"
#include "bench/density_models.hpp"
#include "bench/in_process.hpp"

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string models = "bench-models/density";
  uint32_t devices = 4;
  std::string memory = "160MiB";
  std::string pcie = "4GB/s";
  std::string nvlink = "0";
  double seconds = 60;
  double dilation = 3;
  double time_scale = 1;
  double rate_min = 5, rate_max = 30;
  double slo_factor = 4, percentile = 0.98;
  std::vector<uint32_t> ladder = {8, 16, 24, 32, 48, 64, 80, 96};
  /// Where the pinned baseline is tried instead (empty: the ladder): finer steps near what it holds.
  std::vector<uint32_t> pinned_ladder;
  std::vector<std::string> variants = {"pinned", "torpor", "random", "lru"};
  uint32_t threads = 1;
  uint64_t seed = 7;
  bool verbose = false;
  /// sim: dilated SimDevices; cuda: the node's devices are GPUs 0..devices-1, each limited to
  /// --memory (EMBER_CUDA_MEMORY), with their own links and speed (--pcie, --nvlink and
  /// --dilation do not apply).
  std::string device = "sim";
  /// Widths of the functions' weights: fp32, fp16, bf16 (each its own folder, --models + "-fp16"),
  /// interleaved at every N like the variants.
  std::vector<std::string> dtypes = {"fp32"};
};

struct FunctionStats {
  uint64_t sent = 0, on_time = 0, errors = 0, wrong = 0;
  std::vector<uint64_t> latencies;
  /// The first few late answers: where their time went (--verbose prints them).
  std::vector<std::string> late;
};

struct Trial {
  uint64_t runs = 0, host_swaps = 0, peer_swaps = 0, evictions = 0;
  uint32_t n = 0, loaded = 0, meeting = 0;
  uint64_t requests = 0, errors = 0, wrong = 0, misses = 0;
  double p50_ms = 0, p99_ms = 0;
  double cpu_cores = 0;  // CPU the process used while requests ran, in cores
  double steal = 0;      // share of the host's CPU time its hypervisor stole meanwhile
  std::map<std::string, uint64_t> load_errors;
};

// What the host did during a trial: this process's CPU time and /proc/stat's steal and total ticks.
struct HostUsage {
  Clock::time_point at = Clock::now();
  double process_cpu_s = 0;
  uint64_t steal_ticks = 0, total_ticks = 0;

  static HostUsage now() {
    HostUsage u;
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    u.process_cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                      static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    std::ifstream stat("/proc/stat");
    std::string line, cpu;
    if (std::getline(stat, line)) {
      std::istringstream in(line);
      in >> cpu;
      uint64_t v = 0;
      for (int field = 0; field < 8 && in >> v; ++field) {  // user nice system idle iowait irq softirq steal
        u.total_ticks += v;
        if (field == 7) u.steal_ticks = v;
      }
    }
    return u;
  }
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
      const DensityFunction* f = &(*fns)[a.function];  // captured by pointer: no copy per request
      infer_request req;
      req.model = {f->name, 1};
      req.id = std::to_string(st->next);
      req.inputs = encode_tensors(f->inputs[a.input]);
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
                if (!out.ok() || !same_outputs(*out, f->reference[a.input])) {
                  s.wrong++;
                } else if (us <= f->deadline_us) {
                  s.on_time++;
                } else if (s.late.size() < 3) {
                  // On the device: the executor's queue and its run (swap-in included); the rest
                  // waited in the router's queue or in messages.
                  const uint64_t device_us = reply.queue_us + reply.compute_us;
                  char note[128];
                  std::snprintf(note, sizeof(note), "%.1f ms (%.1f on %s: %.1f queued, %.1f run; %.1f before)",
                                us / 1e3, device_us / 1e3, reply.device.c_str(), reply.queue_us / 1e3,
                                reply.compute_us / 1e3, (us - std::min(us, device_us)) / 1e3);
                  s.late.emplace_back(note);
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

Result<std::unique_ptr<NodeProcess>> start_node(caf::actor_system& sys, const Options& o, const std::string& variant,
                                                uint64_t memory) {
  NodeConfig nc;
  nc.name = "density";
  nc.repository = o.models;
  nc.cache_bytes = 8ull << 30;
  DevicesConfig dc;
  dc.count = o.devices;
  if (o.device == "cuda") {
    // The plugin takes its memory size from the environment (its ABI has no config argument).
    ::setenv("EMBER_CUDA_MEMORY", std::to_string(memory).c_str(), 1);
    dc.kind = DeviceKind::cuda;
  } else {
    dc.kind = DeviceKind::sim;
  }
  dc.sim.memory_bytes = memory;
  dc.sim.populate = memory <= (1ull << 30);  // trials: no first-touch page faults in swaps
  EMBER_ASSIGN_OR_RETURN(dc.sim.pcie_bytes_per_s, parse_bandwidth(o.pcie));
  dc.sim.compute_threads = o.threads;
  dc.sim.compute_dilation = o.dilation;
  dc.sim.pcie_bytes_per_s /= std::max(o.dilation, 1.0);
  for (uint32_t d = 0; d < o.devices && o.device != "cuda"; ++d) dc.pcie_switch.push_back(d / 2);
  EMBER_ASSIGN_OR_RETURN(const double nvlink, parse_bandwidth(o.nvlink));
  if (nvlink > 0 && o.device != "cuda") {
    // Torpor's worker (its prototype's matrix): every pair linked, by one NVLink (1) or two (2).
    static constexpr int kLinks[4][4] = {{0, 1, 1, 2}, {1, 0, 2, 1}, {1, 2, 0, 2}, {2, 1, 2, 0}};
    if (o.devices != 4) return invalid_argument("--nvlink models Torpor's 4-device worker: use --devices 4");
    dc.link_bytes_per_s.assign(4, std::vector<double>(4, 0.0));
    for (int a = 0; a < 4; ++a) {
      for (int b = 0; b < 4; ++b) dc.link_bytes_per_s[a][b] = kLinks[a][b] * nvlink / std::max(o.dilation, 1.0);
    }
  }
  // The binding: section of each variant (the words of --variants). Torpor's variants run one request
  // per device at a time, as its Algorithm 1 does; `streams` is Ember's default (runs beside).
  static const std::map<std::string, BindingConfig> kVariants = {
      {"pinned", {.mode = BindingMode::pinned, .streams = 1}},
      {"torpor", {.streams = 1}},
      {"random", {.scheduler = SwapScheduler::random, .streams = 1}},
      {"lru", {.eviction = EvictionRule::lru, .streams = 1}},
      {"streams", {}},
  };
  auto known = kVariants.find(variant);
  if (known == kVariants.end()) {
    return invalid_argument("unknown variant '" + variant + "' (pinned, torpor, random, lru, streams)");
  }
  BindingConfig bc = known->second;
  bc.workspace_bytes = 32ull << 20;
  return NodeProcess::start(sys, nc, dc, TransferConfig{}, bc);
}

/// Loads the first n functions; false for those the node refused (counted in errors by code).
Result<std::vector<bool>> load_all(caf::actor_system& sys, const Options& o, NodeProcess& node,
                                   const std::vector<DensityFunction>& fns, uint32_t n,
                                   std::map<std::string, uint64_t>& errors) {
  std::vector<bool> loaded(n, false);
  caf::scoped_actor self{sys};
  for (uint32_t i = 0; i < n; ++i) {
    auto entries = scan_repository_model(o.models, fns[i].name);
    if (entries.empty()) return not_found("model " + fns[i].name + " is not in " + o.models);
    const auto& e = entries.front();
    load_replica req{e.key, e.manifest_json, blob_key_of(e.key), e.weights_bytes, {}};
    self->request(node.router(), std::chrono::minutes(2), std::move(req))
        .receive([&](replica_info&) { loaded[i] = true; },
                 [&](caf::error& err) { errors[std::string(to_string(from_caf(err).code()))]++; });
  }
  return loaded;
}

/// The warm latency of each family as the node serves it, which the deadlines are relative to: the
/// median of 21 sequential requests on each of the first three functions of a family (on a pinned
/// node large enough for them), then the median of those. The functions of a family share their
/// architecture and differ only in their weights, so they share one deadline, as Torpor's functions
/// of one model do (80 ms for every CV model); measuring each function alone would hand some of them
/// a tighter deadline than others by measurement noise alone.
Status calibrate(const Options& o, std::vector<DensityFunction>& fns) {
  constexpr size_t kPerFamily = 3;
  std::map<std::string, std::vector<size_t>> measured;  // family -> the functions measured
  for (size_t i = 0; i < fns.size(); ++i) {
    if (measured[fns[i].family].size() < kPerFamily) measured[fns[i].family].push_back(i);
  }
  std::vector<DensityFunction> probe;
  for (const auto& [family, idx] : measured) {
    for (size_t i : idx) probe.push_back(fns[i]);
  }
  caf::actor_system sys{in_process_system_config()};
  EMBER_ASSIGN_OR_RETURN(auto node, start_node(sys, o, "pinned", 4ull << 30));
  std::map<std::string, uint64_t> errors;
  EMBER_ASSIGN_OR_RETURN(auto loaded, load_all(sys, o, *node, probe, static_cast<uint32_t>(probe.size()), errors));
  caf::scoped_actor self{sys};
  std::map<std::string, std::vector<uint64_t>> warm;  // family -> median of each function measured
  for (size_t i = 0; i < probe.size(); ++i) {
    if (!loaded[i]) return internal_error("calibration could not load " + probe[i].name);
    std::vector<uint64_t> us;
    for (int r = 0; r < 21; ++r) {
      infer_request req;
      req.model = {probe[i].name, 1};
      req.inputs = encode_tensors(probe[i].inputs[static_cast<size_t>(r) % probe[i].inputs.size()]);
      const auto t0 = Clock::now();
      Status st = Status::OK();
      self->request(node->router(), std::chrono::seconds(30), std::move(req))
          .receive([](infer_reply&) {}, [&](caf::error& e) { st = from_caf(e); });
      EMBER_RETURN_IF_ERROR(st);
      us.push_back(
          static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count()));
    }
    std::sort(us.begin(), us.end());
    warm[probe[i].family].push_back(us[us.size() / 2]);
  }
  for (auto& f : fns) {
    auto& w = warm[f.family];
    std::sort(w.begin(), w.end());
    EMBER_RETURN_IF_ERROR(set_deadline(o.models, f, w[w.size() / 2], o.slo_factor));
  }
  return Status::OK();
}

Result<Trial> run_trial(const Options& o, const std::string& variant, const std::vector<DensityFunction>& all,
                        uint32_t n) {
  caf::actor_system sys{in_process_system_config()};
  EMBER_ASSIGN_OR_RETURN(const uint64_t memory, parse_bytes(o.memory));
  EMBER_ASSIGN_OR_RETURN(auto node, start_node(sys, o, variant, memory));
  Trial t;
  t.n = n;
  std::vector<DensityFunction> fns(all.begin(), all.begin() + n);
  EMBER_ASSIGN_OR_RETURN(auto loaded, load_all(sys, o, *node, fns, n, t.load_errors));
  for (bool l : loaded) t.loaded += l;
  {
    // One request per function before the clock starts (first-touch of device pages, plans).
    caf::scoped_actor self{sys};
    for (uint32_t i = 0; i < n; ++i) {
      if (!loaded[i]) continue;
      infer_request req;
      req.model = {fns[i].name, 1};
      req.inputs = encode_tensors(fns[i].inputs[0]);
      self->request(node->router(), std::chrono::seconds(30), std::move(req))
          .receive([](infer_reply&) {}, [](caf::error&) {});
    }
  }
  std::mt19937_64 rng(o.seed + n);
  const auto plan = arrivals(o, n, rng);
  std::vector<FunctionStats> stats(n);
  const HostUsage before = HostUsage::now();
  {
    caf::scoped_actor self{sys};
    auto driver = sys.spawn(drive, node->router(), &fns, &plan, &stats, caf::actor{self});
    self->receive([](bool) {}, caf::after(std::chrono::seconds(static_cast<int64_t>(o.seconds) + 120)) >> [] {});
    self->send_exit(driver, caf::exit_reason::user_shutdown);
  }
  const HostUsage after = HostUsage::now();
  t.cpu_cores = (after.process_cpu_s - before.process_cpu_s) /
                std::max(1e-9, std::chrono::duration<double>(after.at - before.at).count());
  t.steal = after.total_ticks > before.total_ticks ? static_cast<double>(after.steal_ticks - before.steal_ticks) /
                                                         static_cast<double>(after.total_ticks - before.total_ticks)
                                                   : 0;
  {
    // The node's own counts of how requests were bound (late binding only).
    caf::scoped_actor self{sys};
    self->request(node->router(), std::chrono::seconds(10), metrics_atom_v)
        .receive(
            [&](metrics_snapshot& m) {
              for (const auto& f : m.families) {
                for (const auto& series : f.series) {
                  const auto v = static_cast<uint64_t>(series.value);
                  if (f.name == "ember_swap_evictions_total") t.evictions = v;
                  if (f.name != "ember_swap_dispatches_total" || series.label_values.empty()) continue;
                  const auto& kind = series.label_values[0];
                  (kind == "run" ? t.runs : kind == "host" ? t.host_swaps : t.peer_swaps) = v;
                }
              }
            },
            [](caf::error&) {});
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
    t.misses += s.sent - s.on_time - s.errors - s.wrong;
    if (o.verbose && !met) {
      std::string late;
      for (const auto& note : s.late) late += (late.empty() ? "; late: " : ", ") + note;
      std::printf("#   %s: %lu sent, %lu on time (deadline %.2f ms), %lu errors, slowest %.2f ms%s\n",
                  fns[i].name.c_str(), static_cast<unsigned long>(s.sent), static_cast<unsigned long>(s.on_time),
                  static_cast<double>(fns[i].deadline_us) / 1e3, static_cast<unsigned long>(s.errors),
                  pct(s.latencies, 1.0), late.c_str());
    }
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
  app.add_option("--pcie", o.pcie,
                 "Host->device bandwidth per device at dilation 1 (two devices share a switch); the devices "
                 "run at this / --dilation");
  app.add_option("--nvlink", o.nvlink,
                 "Bandwidth of one NVLink at dilation 1 (0: none); devices linked as on Torpor's worker, each "
                 "pair by one or two links, run at this / --dilation");
  app.add_option("--dilation", o.dilation,
                 "devices.compute_dilation: each kernel keeps its device busy for this many times its CPU "
                 "time (0: wall time, PCIe at --pcie)");
  app.add_option("--seconds", o.seconds, "Length of each trial");
  app.add_option("--time-scale", o.time_scale, "Arrival rates are multiplied by this");
  app.add_option("--rate-min", o.rate_min, "Lowest rate, requests per minute");
  app.add_option("--rate-max", o.rate_max, "Highest rate, requests per minute");
  app.add_option("--slo-factor", o.slo_factor, "Deadline = this x warm latency");
  app.add_option("--ladder", o.ladder, "Function counts tried, ascending (every variant at each)")->delimiter(',');
  app.add_option("--pinned-ladder", o.pinned_ladder,
                 "Function counts the pinned baseline is tried at instead of --ladder (it stops at the first "
                 "that refuses a function and fails)")
      ->delimiter(',');
  app.add_option("--variants", o.variants, "pinned, torpor, random, lru, streams (Ember's default: runs beside)")
      ->delimiter(',');
  app.add_option("--threads", o.threads, "Compute threads per device");
  app.add_flag("--verbose", o.verbose, "Print each function that missed its SLO");
  app.add_option("--device", o.device,
                 "sim (dilated simulated devices) or cuda (GPUs 0..devices-1, each limited to --memory)")
      ->check(CLI::IsMember({"sim", "cuda"}));
  app.add_option("--dtype", o.dtypes,
                 "Widths of the functions' weights, side by side at every N: fp32, fp16, bf16 (half the bytes "
                 "per model; written under --models plus -fp16 / -bf16)")
      ->delimiter(',')
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  CLI11_PARSE(app, argc, argv);
  SimDeviceConfig dc;
  dc.compute_threads = o.threads;
  for (const auto& [flag, text] : {std::pair{"--pcie", o.pcie}, std::pair{"--nvlink", o.nvlink}}) {
    if (auto rate = parse_bandwidth(text); !rate.ok()) {
      std::fprintf(stderr, "density_bench: %s: %s\n", flag, rate.error().message().c_str());
      return 1;
    }
  }
  if (o.pinned_ladder.empty()) o.pinned_ladder = o.ladder;
  std::set<uint32_t> all_n(o.ladder.begin(), o.ladder.end());
  all_n.insert(o.pinned_ladder.begin(), o.pinned_ladder.end());
  if (all_n.empty() || *all_n.begin() == 0) {
    std::fprintf(stderr, "density_bench: the ladders need function counts above 0\n");
    return 1;
  }
  // One set of functions per width, each in its own folder and calibrated on its own warm latency.
  struct Width {
    std::string name;
    Options o;
    std::vector<DensityFunction> fns;
  };
  std::vector<Width> widths;
  for (const auto& name : o.dtypes) {
    Width w{name, o, {}};
    if (name != "fp32") w.o.models += "-" + name;
    const gpu::DType dtype = name == "fp16" ? gpu::DType::f16 : name == "bf16" ? gpu::DType::bf16 : gpu::DType::f32;
    auto fns = make_density_functions(w.o.models, *all_n.rbegin(), dc, 4, dtype);
    if (!fns.ok()) {
      std::fprintf(stderr, "density_bench: %s\n", fns.error().message().c_str());
      return 1;
    }
    w.fns = std::move(*fns);
    if (Status s = calibrate(w.o, w.fns); !s.ok()) {
      std::fprintf(stderr, "density_bench: %s calibration: %s\n", name.c_str(), s.error().message().c_str());
      return 1;
    }
    widths.push_back(std::move(w));
  }
  const double pcie = *parse_bandwidth(o.pcie) / std::max(o.dilation, 1.0);
  if (o.device == "cuda") {
    std::printf("# %u CUDA device(s), each limited to %s; their own links and compute\n", o.devices, o.memory.c_str());
  } else {
    std::printf(
        "# %u devices x %s, compute dilation %.1f (each device computes like 1/%.1f of a host core), "
        "PCIe %.2f GB/s (%s / %.1f; two devices per switch)\n",
        o.devices, o.memory.c_str(), o.dilation, std::max(o.dilation, 1.0), pcie / 1e9, o.pcie.c_str(),
        std::max(o.dilation, 1.0));
  }
  if (*parse_bandwidth(o.nvlink) > 0 && o.device != "cuda") {
    std::printf("# NVLink %s per link / %.1f, pairs linked by one or two links as on Torpor's worker\n",
                o.nvlink.c_str(), std::max(o.dilation, 1.0));
  }
  std::printf("# %.0f s trials, rates %.0f-%.0f/min x %.1f, deadline %.1fx warm at p%.0f\n", o.seconds, o.rate_min,
              o.rate_max, o.time_scale, o.slo_factor, o.percentile * 100);
  for (const auto& w : widths) {
    for (const char* family : {"wide", "deep", "conv"}) {
      for (const auto& f : w.fns) {
        if (f.family != family) continue;
        std::printf("# %-4s %-5s %s weights, warm %.2f ms, deadline %.2f ms\n", w.name.c_str(), family,
                    format_bytes(f.weights_bytes).c_str(), static_cast<double>(f.warm_us) / 1e3,
                    static_cast<double>(f.deadline_us) / 1e3);
        break;
      }
    }
  }
  std::printf("%-8s %-5s %5s %7s %9s %9s %7s %7s %7s %8s %8s %6s %5s %6s\n", "variant", "dtype", "N", "loaded",
              "requests", "meet_slo", "pct", "late", "errors", "p50_ms", "p99_ms", "wrong", "cpu", "steal");
  std::map<std::string, uint32_t> best;
  uint64_t wrong_total = 0;
  // Variants and widths interleaved at each N, so that they share the host's conditions (this
  // shared 2-core machine's speed drifts over minutes). Pinned stops once it refuses functions and
  // fails: more only adds refusals. Keys are "variant dtype".
  std::map<std::string, uint32_t> pinned_refused;
  const std::set<uint32_t> late_n(o.ladder.begin(), o.ladder.end()),
      pinned_n(o.pinned_ladder.begin(), o.pinned_ladder.end());
  for (uint32_t n : all_n) {
    for (const auto& w : widths) {
      for (const auto& v : o.variants) {
        const std::string key = v + " " + w.name;
        if (v == "pinned" && (pinned_refused.count(key) || !pinned_n.count(n))) continue;
        if (v != "pinned" && !late_n.count(n)) continue;
        auto t = run_trial(w.o, v, w.fns, n);
        if (!t.ok()) {
          std::fprintf(stderr, "%s N=%u: %s\n", v.c_str(), n, t.error().message().c_str());
          return 1;
        }
        const double share = static_cast<double>(t->meeting) / n;
        wrong_total += t->wrong;
        std::printf("%-8s %-5s %5u %7u %9lu %9u %6.1f%% %7lu %7lu %8.2f %8.2f %6lu %5.2f %5.1f%%\n", v.c_str(),
                    w.name.c_str(), n, t->loaded, static_cast<unsigned long>(t->requests), t->meeting, share * 100,
                    static_cast<unsigned long>(t->misses), static_cast<unsigned long>(t->errors), t->p50_ms, t->p99_ms,
                    static_cast<unsigned long>(t->wrong), t->cpu_cores, t->steal * 100);
        if (v != "pinned") {
          std::printf("#   bound: %lu resident, %lu from host, %lu from a peer; %lu evictions\n",
                      static_cast<unsigned long>(t->runs), static_cast<unsigned long>(t->host_swaps),
                      static_cast<unsigned long>(t->peer_swaps), static_cast<unsigned long>(t->evictions));
        } else if (t->loaded < n && share < 0.95) {
          pinned_refused[key] = n;
        }
        std::fflush(stdout);
        if (share >= 0.95) best[key] = std::max(best[key], n);
      }
    }
  }
  std::printf("\n# largest N with >= 95%% of functions meeting their SLO:");
  for (const auto& w : widths) {
    for (const auto& v : o.variants) std::printf(" %s %s %u;", v.c_str(), w.name.c_str(), best[v + " " + w.name]);
  }
  for (const auto& w : widths) {
    const uint32_t pinned = best["pinned " + w.name], torpor = best["torpor " + w.name];
    if (pinned > 0 && torpor > 0)
      std::printf("\n# %s: torpor / pinned = %.2fx", w.name.c_str(), static_cast<double>(torpor) / pinned);
    const uint32_t torpor32 = best["torpor fp32"];
    if (w.name != "fp32" && torpor32 > 0 && torpor > 0) {
      std::printf("\n# torpor %s / torpor fp32 = %.2fx", w.name.c_str(), static_cast<double>(torpor) / torpor32);
    }
  }
  std::printf("\n# wrong answers in all trials: %lu\n", static_cast<unsigned long>(wrong_total));
  return wrong_total == 0 ? 0 : 3;
}
