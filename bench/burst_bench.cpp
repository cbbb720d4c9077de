// burst_bench: a bursty load on one node of simulated devices, served with three ways of scaling
// side by side in one run (AsyFunc's comparison, issue 19). Not a test: it prints figures.
//
//   free           late binding as it is: any idle device takes a full copy when requests wait
//   mls            model-level scaling only (binding.bodies model_level): copies follow the rate of
//                  the last scaling period against their capacity at the SLO (α 0.8, β 0.6),
//                  with the router's fixed dynamic batching (a full batch or the queue delay)
//   asyfunc        model-level scaling, Shadows in bursts (binding.shadows) and adaptive batching
//   asyfunc-fixed  the same with the fixed dynamic batching
//
// The model is a reference architecture (tiny by default, so that this 2-core host computes it at
// a useful rate), with dynamic batching up to 8 rows. It is profiled first on a simulated device
// like the node's (batches 1, 2, 4, 8): its SLO is --slo-factor times the Body's time at batch 8
// (the paper's t_SLO is the Body's latency at its largest batch), and the profile goes to the node
// with the model, as the repository ships it. The load is a burst train with the shape of AsyFunc's
// Twitter trace: Poisson arrivals at the median rate (--load times one Body's capacity at the
// SLO), and for --burst seconds of every --cycle the median times --peak (4.68, the trace's
// peak/median). Every answer is compared with the model's output for that input on a device
// alone (relative 1e-4): a wrong answer is counted and fails the run (exit 3).
//
// Per variant: requests, SLO violations (late or failed), device memory held by the model (its
// copies' weights and Shadows, summed over devices; mean and peak of --sample-ms samples of the
// node's ember_device_memory_in_use_bytes), host memory (the node's cache), rows served per
// device-second held (the paper's processing efficiency: throughput per unit of provisioned
// capacity), the time from each burst's start to the first sample with more memory held (new
// capacity: a copy or a Shadow), the Shadows started and their own start time, and wrong answers.
//
// Devices compute with --dilation (each kernel holds its device for that many times its host CPU
// time, so that the simulated devices of this 2-core host do not slow each other down as GPUs do
// not), and PCIe runs at --pcie / dilation.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "actors/actor_system.hpp"
#include "actors/atoms.hpp"
#include "actors/cluster/model_repository.hpp"
#include "actors/errors.hpp"
#include "actors/metrics_messages.hpp"
#include "actors/process/node_process.hpp"
#include "actors/tensor_codec.hpp"
#include "base/units.hpp"
#include "bench/in_process.hpp"
#include "bench/tensor_compare.hpp"
#include "gpu/profiler.hpp"
#include "gpu/shadow_split.hpp"
#include "gpu/sim_device.hpp"
#include "model/architectures.hpp"
#include "model/model_profile.hpp"
#include "model/sample_inputs.hpp"
#include "placement/shadow_profile.hpp"
#include "transport/checksum.hpp"

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct Options {
  std::string arch = "resnet50";
  bool full = false;
  uint32_t devices = 4;
  double dilation = 4;
  std::string pcie = "12GB/s";
  double seconds = 30;
  double cycle = 10;
  double burst = 3;
  double peak = 4.68;
  double load = 0.5;
  double slo_factor = 2;
  int sample_ms = 20;
  double period_ms = 1000;
  double window_ms = 100;
  std::string variants = "free,mls,asyfunc,asyfunc-fixed";
  std::string work = "/tmp/ember-burst-bench";
  std::string memory_csv;
  uint64_t seed = 1;
  int64_t seq_len = 16;
  std::string log_level = "warn";
};

template <class T>
T must(Result<T> r, const std::string& what) {
  if (!r.ok()) throw std::runtime_error(what + ": " + r.error().message());
  return std::move(*r);
}
void must(Status s, const std::string& what) {
  if (!s.ok()) throw std::runtime_error(what + ": " + s.error().message());
}

SimDeviceConfig sim_config(const Options& o) {
  SimDeviceConfig c;
  c.memory_bytes = 1ull << 30;
  c.compute_threads = 1;
  c.compute_dilation = o.dilation;
  c.pcie_bytes_per_s = must(parse_bandwidth(o.pcie), "--pcie") / std::max(o.dilation, 1.0);
  return c;
}

/// The model under test, written to the work directory with its profile and SLO.
struct Subject {
  std::string name;
  std::string dir;  // <work>/repo/<name>/1
  std::string profile_json;
  placement::ShadowProfile shadow;
  uint64_t deadline_us = 0;
  double body_rps = 0;  // one Body alone within the SLO (Eq. 1)
  uint64_t weights_bytes = 0;
  std::vector<std::vector<gpu::HostTensor>> inputs, reference;
};

Subject prepare(const Options& o) {
  Subject s;
  s.name = o.arch + (o.full ? "" : "-tiny");
  const fs::path repo = fs::path(o.work) / "repo";
  s.dir = (repo / s.name / "1").string();
  fs::remove_all(repo);
  auto builder = must(gpu::build_architecture(o.arch, {!o.full, o.seed, {}}), "building " + o.arch);
  builder.serving().dynamic_batching = true;
  builder.serving().max_batch = 8;
  must(builder.write(s.dir), "writing the model");
  auto model = must(gpu::Model::load(s.dir), "loading the model");
  auto device = must(gpu::SimDevice::create(sim_config(o), 0), "a device to profile on");
  auto hash = [](const uint8_t* data, uint64_t bytes) { return transport::to_hex(transport::Sha256::of(data, bytes)); };
  const auto profile = must(gpu::measure_profile(model, *device, {1, 2, 4, 8}, o.seq_len, hash), "profiling");
  s.shadow = placement::shadow_profile(*model, profile);
  s.deadline_us = static_cast<uint64_t>(o.slo_factor * placement::body_us(s.shadow, 8));
  s.body_rps = placement::body_capacity(s.shadow, static_cast<double>(s.deadline_us), 8).rows_per_s;
  s.profile_json = gpu::profile_to_json(profile);
  must(gpu::write_profile(s.dir, profile), "writing profile.json");
  // The fixed batching: a full batch, or a quarter of the SLO after the oldest arrived.
  builder.serving().slo_deadline_us = s.deadline_us;
  builder.serving().preferred_batch = 8;
  builder.serving().max_queue_delay_us = s.deadline_us / 4;
  must(builder.write(s.dir, /*manifest_only=*/true), "writing model.json");
  s.weights_bytes = model->data_bytes();
  auto body = must(gpu::LayerExecutor::create(*device, model, {0, model->num_layers()}), "a reference executor");
  for (uint64_t k = 0; k < 4; ++k) {
    s.inputs.push_back(must(gpu::sample_model_inputs(*model, 1, o.seq_len, 100 + k), "inputs"));
    s.reference.push_back(must(body->run_host(s.inputs.back()), "the reference answer"));
  }
  return s;
}

struct Arrival {
  double at_s;
  uint32_t input;
  bool burst;
};

std::vector<Arrival> arrivals(const Options& o, const Subject& s) {
  std::mt19937_64 rng(o.seed);
  std::vector<Arrival> out;
  const double median = o.load * s.body_rps;
  double t = 0;
  for (;;) {
    const double in_cycle = std::fmod(t, o.cycle);
    const bool burst = in_cycle >= o.cycle - o.burst;
    std::exponential_distribution<double> gap(burst ? median * o.peak : median);
    t += gap(rng);
    if (t >= o.seconds) break;
    out.push_back({t, static_cast<uint32_t>(rng() % 4), std::fmod(t, o.cycle) >= o.cycle - o.burst});
  }
  return out;
}

struct Sample {
  double at_s = 0;
  uint64_t weights = 0, shadows = 0, host = 0;
  uint32_t held = 0;  // devices holding a copy or a Shadow
  double shadows_started = 0;
};

struct Result_ {
  std::string variant;
  size_t sent = 0, late = 0, failed = 0, wrong = 0, burst_sent = 0, burst_late = 0;
  std::vector<uint64_t> latencies;
  std::vector<Sample> samples;
  double shadows_started = 0, shadow_start_s = 0, splits = 0, shadow_rows = 0, mean_batch = 0;
  std::vector<double> time_to_capacity_ms;
};

double family_value(const metrics_snapshot& m, const std::string& name,
                    const std::map<std::string, std::string>& labels = {}, bool sum = false) {
  double total = 0;
  for (const auto& f : m.families) {
    if (f.name != name) continue;
    for (const auto& s : f.series) {
      bool match = true;
      for (const auto& [k, v] : labels) {
        auto at = std::find(f.label_names.begin(), f.label_names.end(), k);
        if (at == f.label_names.end() || s.label_values[at - f.label_names.begin()] != v) match = false;
      }
      if (match) total += sum ? s.sum : (f.type == metrics::MetricType::histogram ? s.count : s.value);
    }
  }
  return total;
}

Sample sample_of(const metrics_snapshot& m, double at_s) {
  Sample s;
  s.at_s = at_s;
  std::map<std::string, uint64_t> per_device;
  for (const auto& f : m.families) {
    if (f.name != "ember_device_memory_in_use_bytes") continue;
    const auto dev = std::find(f.label_names.begin(), f.label_names.end(), "device") - f.label_names.begin();
    const auto use = std::find(f.label_names.begin(), f.label_names.end(), "use") - f.label_names.begin();
    for (const auto& series : f.series) {
      const auto& u = series.label_values[use];
      const auto bytes = static_cast<uint64_t>(series.value);
      if (u == "weights") s.weights += bytes;
      if (u == "shadows") s.shadows += bytes;
      if (u == "weights" || u == "shadows") per_device[series.label_values[dev]] += bytes;
    }
  }
  for (const auto& [d, b] : per_device) s.held += b > 0;
  s.host = static_cast<uint64_t>(family_value(m, "ember_cache_resident_bytes"));
  s.shadows_started = family_value(m, "ember_shadows_started_total");
  return s;
}

BindingConfig binding_of(const Options& o, const std::string& variant) {
  BindingConfig b;
  b.workspace_bytes = 128ull << 20;
  b.scaling_period_us = static_cast<uint64_t>(o.period_ms * 1000);
  b.burst_window_us = static_cast<uint64_t>(o.window_ms * 1000);
  if (variant == "free") return b;
  b.bodies = BodyScalingMode::model_level;
  if (variant == "mls") return b;
  b.shadows = true;
  if (variant == "asyfunc") {
    b.adaptive_batching = true;
    return b;
  }
  if (variant == "asyfunc-fixed") return b;
  throw std::runtime_error("unknown variant '" + variant + "' (free, mls, asyfunc, asyfunc-fixed)");
}

Result_ run_variant(const Options& o, const Subject& s, const std::string& variant, const std::vector<Arrival>& plan) {
  Result_ r;
  r.variant = variant;
  caf::actor_system sys{in_process_system_config()};
  NodeConfig nc;
  nc.name = "burst";
  nc.repository = (fs::path(o.work) / "repo").string();
  nc.cache_bytes = 2ull << 30;
  nc.max_queued_per_model = 100000;
  DevicesConfig dc;
  dc.count = o.devices;
  dc.kind = DeviceKind::sim;
  dc.sim = sim_config(o);
  dc.sim.populate = true;
  for (uint32_t d = 0; d < o.devices; ++d) dc.pcie_switch.push_back(d / 2);
  auto node = must(NodeProcess::start(sys, nc, dc, TransferConfig{}, binding_of(o, variant)), "starting the node");
  caf::scoped_actor self{sys};
  {
    auto entries = scan_repository_model(nc.repository, s.name);
    if (entries.empty()) throw std::runtime_error("the model is not in " + nc.repository);
    const auto& e = entries.front();
    load_replica req{e.key, e.manifest_json, blob_key_of(e.key), e.weights_bytes, {}};
    req.profile_json = s.profile_json;
    Status st = Status::OK();
    self->request(node->router(), std::chrono::minutes(2), std::move(req))
        .receive([](replica_info&) {}, [&](caf::error& err) { st = from_caf(err); });
    must(st, "loading " + s.name);
  }
  // The sampler: the node's gauges every sample_ms, on its own thread.
  std::atomic<bool> stop{false};
  const auto start = Clock::now();
  std::thread sampler([&] {
    caf::scoped_actor sampler_self{sys};
    while (!stop) {
      sampler_self->request(node->router(), std::chrono::seconds(10), metrics_atom_v)
          .receive(
              [&](metrics_snapshot& m) {
                r.samples.push_back(sample_of(m, std::chrono::duration<double>(Clock::now() - start).count()));
              },
              [](caf::error&) {});
      std::this_thread::sleep_for(std::chrono::milliseconds(o.sample_ms));
    }
  });
  // The load: every arrival at its time, answers compared with the reference.
  struct Pending {
    size_t answered = 0;
  };
  auto pending = std::make_shared<Pending>();
  const model_key key{s.name, 1};
  size_t next = 0;
  std::mutex mu;
  auto driver = sys.spawn([&, pending](caf::event_based_actor* a) -> caf::behavior {
    auto send_due = std::make_shared<std::function<void()>>();
    *send_due = [&, a, pending, send_due] {
      const double now = std::chrono::duration<double>(Clock::now() - start).count();
      for (; next < plan.size() && plan[next].at_s <= now; ++next) {
        const Arrival arr = plan[next];
        infer_request req;
        req.model = key;
        req.id = std::to_string(next);
        req.inputs = encode_tensors(s.inputs[arr.input]);
        const auto sent = Clock::now();
        a->request(node->router(), std::chrono::seconds(60), std::move(req))
            .then(
                [&, arr, sent, pending](infer_reply& reply) {
                  const auto us = static_cast<uint64_t>(
                      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - sent).count());
                  auto out = decode_tensors(std::move(reply.outputs));
                  std::lock_guard<std::mutex> lock(mu);
                  r.latencies.push_back(us);
                  if (!out.ok() || max_relative_error(*out, s.reference[arr.input]) > 1e-4) ++r.wrong;
                  const bool late = us > s.deadline_us;
                  r.late += late;
                  r.burst_late += late && arr.burst;
                  ++pending->answered;
                },
                [&, arr, pending](caf::error&) {
                  std::lock_guard<std::mutex> lock(mu);
                  ++r.failed;
                  r.burst_late += arr.burst;
                  ++pending->answered;
                });
      }
      if (next < plan.size()) a->delayed_send(a, std::chrono::microseconds(500), tick_atom_v);
    };
    (*send_due)();
    return {[send_due](tick_atom) { (*send_due)(); }};
  });
  // Wait for the last answer (bounded: a minute past the plan).
  const auto limit = start + std::chrono::duration<double>(o.seconds + 60);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (pending->answered >= plan.size()) break;
    }
    if (Clock::now() > limit) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop = true;
  sampler.join();
  self->send_exit(driver, caf::exit_reason::user_shutdown);
  r.sent = plan.size();
  for (const auto& a : plan) r.burst_sent += a.burst;
  metrics_snapshot m;
  self->request(node->router(), std::chrono::seconds(10), metrics_atom_v)
      .receive([&](metrics_snapshot& got) { m = std::move(got); }, [](caf::error&) {});
  r.shadows_started = family_value(m, "ember_shadows_started_total");
  r.shadow_start_s = family_value(m, "ember_shadow_start_seconds", {}, true);
  r.splits = family_value(m, "ember_shadow_splits_total", {{"outcome", "shared"}});
  r.shadow_rows = family_value(m, "ember_shadow_rows_total");
  const double batches = family_value(m, "ember_batch_requests");
  r.mean_batch = batches > 0 ? family_value(m, "ember_batch_requests", {}, true) / batches : 0;
  // Time to added capacity: from each burst's start to the first sample with more copies' weights
  // than the last sample before it, or another Shadow started.
  for (double b = o.cycle - o.burst; b < o.seconds; b += o.cycle) {
    Sample before;
    std::optional<double> added;
    for (const auto& smp : r.samples) {
      if (smp.at_s < b) {
        before = smp;
      } else if (smp.at_s < b + o.burst &&
                 (smp.weights > before.weights || smp.shadows_started > before.shadows_started)) {
        added = smp.at_s;
        break;
      }
    }
    if (added) r.time_to_capacity_ms.push_back((*added - b) * 1e3);
  }
  return r;
}

double percentile(std::vector<uint64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))]);
}

int run(const Options& o) {
  const Subject s = prepare(o);
  const auto plan = arrivals(o, s);
  std::printf(
      "burst_bench: %s (%s), %u simulated devices (dilation %.0f), SLO %.1f ms (%.1fx the Body at batch 8), one Body "
      "carries %.1f rows/s within it; load %.1f requests/s, bursts of %.1f for %.0f s every %.0f s, %zu requests "
      "over %.0f s\n",
      s.name.c_str(), format_bytes(s.weights_bytes).c_str(), o.devices, o.dilation, s.deadline_us / 1e3, o.slo_factor,
      s.body_rps, o.load * s.body_rps, o.load * s.body_rps * o.peak, o.burst, o.cycle, plan.size(), o.seconds);
  std::vector<Result_> results;
  std::stringstream words(o.variants);
  for (std::string v; std::getline(words, v, ',');) {
    results.push_back(run_variant(o, s, v, plan));
    std::fflush(stdout);
  }
  std::printf(
      "\n| variant | requests | SLO violations (in bursts) | p50 / p99 ms | device memory MiB: mean, in bursts, peak | "
      "host MiB | rows per device-second held | mean batch | burst start to added capacity, ms | Shadows started (mean "
      "start ms, peak MiB) | rows on Shadows | wrong |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::FILE* csv = o.memory_csv.empty() ? nullptr : std::fopen(o.memory_csv.c_str(), "w");
  if (csv) std::fprintf(csv, "variant,seconds,weights_bytes,shadow_bytes,devices_held\n");
  int wrong = 0;
  for (const auto& r : results) {
    double mean = 0, peak = 0, held_s = 0, host = 0, in_bursts = 0, shadow_peak = 0;
    size_t burst_samples = 0;
    for (size_t k = 0; k < r.samples.size(); ++k) {
      const auto& smp = r.samples[k];
      const double bytes = static_cast<double>(smp.weights + smp.shadows);
      mean += bytes;
      peak = std::max(peak, bytes);
      shadow_peak = std::max(shadow_peak, static_cast<double>(smp.shadows));
      if (std::fmod(smp.at_s, o.cycle) >= o.cycle - o.burst) {
        in_bursts += bytes;
        ++burst_samples;
      }
      host = std::max(host, static_cast<double>(smp.host));
      if (k > 0) held_s += smp.held * (smp.at_s - r.samples[k - 1].at_s);
      if (csv) {
        std::fprintf(csv, "%s,%.3f,%llu,%llu,%u\n", r.variant.c_str(), smp.at_s,
                     static_cast<unsigned long long>(smp.weights), static_cast<unsigned long long>(smp.shadows),
                     smp.held);
      }
    }
    if (!r.samples.empty()) mean /= static_cast<double>(r.samples.size());
    if (burst_samples) in_bursts /= static_cast<double>(burst_samples);
    std::string ttc;
    for (double t : r.time_to_capacity_ms) ttc += (ttc.empty() ? "" : ", ") + std::to_string(std::lround(t));
    if (ttc.empty()) ttc = "none";
    const size_t answered = r.latencies.size();
    std::printf(
        "| %s | %zu | %.1f%% (%.1f%%) | %.0f / %.0f | %.1f, %.1f, %.1f | %.1f | %.1f | %.1f | %s | %.0f (%.2f, %.1f) | "
        "%.0f | %zu |\n",
        r.variant.c_str(), r.sent, 100.0 * static_cast<double>(r.late + r.failed) / std::max<size_t>(r.sent, 1),
        100.0 * static_cast<double>(r.burst_late) / std::max<size_t>(r.burst_sent, 1),
        percentile(r.latencies, 0.5) / 1e3, percentile(r.latencies, 0.99) / 1e3, mean / (1 << 20),
        in_bursts / (1 << 20), peak / (1 << 20), host / (1 << 20),
        held_s > 0 ? static_cast<double>(answered) / held_s : 0.0, r.mean_batch, ttc.c_str(), r.shadows_started,
        r.shadows_started > 0 ? r.shadow_start_s / r.shadows_started * 1e3 : 0.0, shadow_peak / (1 << 20),
        r.shadow_rows, r.wrong);
    wrong += static_cast<int>(r.wrong);
  }
  if (csv) std::fclose(csv);
  return wrong > 0 ? 3 : 0;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  using ember::bench::Options;
  Options o;
  CLI::App app{"burst_bench: bursts on one node, model-level scaling against Shadows (AsyFunc)"};
  app.add_option("--arch", o.arch, "reference architecture (resnet50, bert-base, gpt2, mlp)");
  app.add_flag("--full", o.full, "the full-size model instead of the tiny one");
  app.add_option("--devices", o.devices, "simulated devices");
  app.add_option("--dilation", o.dilation, "device time per host CPU time");
  app.add_option("--pcie", o.pcie, "host-to-device bandwidth (divided by the dilation)");
  app.add_option("--seconds", o.seconds, "length of the load, per variant");
  app.add_option("--cycle", o.cycle, "seconds from one burst's start to the next");
  app.add_option("--burst", o.burst, "seconds each burst lasts (at the end of each cycle)");
  app.add_option("--peak", o.peak, "the bursts' rate over the median");
  app.add_option("--load", o.load, "the median rate, as a share of one Body's capacity within the SLO");
  app.add_option("--slo-factor", o.slo_factor, "SLO: this times the Body's time at batch 8");
  app.add_option("--sample-ms", o.sample_ms, "memory sampled this often");
  app.add_option("--period-ms", o.period_ms, "model-level scaling's period (binding.scaling_period)");
  app.add_option("--window-ms", o.window_ms, "the burst window (binding.burst_window)");
  app.add_option("--variants", o.variants, "comma-separated: free, mls, asyfunc, asyfunc-fixed");
  app.add_option("--work", o.work, "where the model is written");
  app.add_option("--memory-csv", o.memory_csv, "every memory sample, as CSV");
  app.add_option("--seed", o.seed, "the arrivals' and weights' seed");
  app.add_option("--log-level", o.log_level, "the node's log level (trace, debug, info, warn, error, off)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (auto s = ember::set_log_level(o.log_level); !s.ok()) throw std::runtime_error(s.error().message());
    return ember::bench::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "burst_bench: %s\n", e.what());
    return 1;
  }
}
