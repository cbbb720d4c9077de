// `ember sim`: a request trace replayed on a simulated cluster whose placement and autoscaling are
// the live manager's own classes (sim/sim_cluster.hpp; docs/design/simulator.md). Reads the cluster
// and models files (config/sim_config.hpp) and the profiles they name, runs, prints the replay's
// table row and the run's figures, and writes OUT/requests.csv, OUT/trace.json, OUT/plot.svg and
// OUT/summary.json.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "base/read_file.hpp"
#include "base/units.hpp"
#include "cli/commands.hpp"
#include "config/choices.hpp"
#include "config/sim_config.hpp"
#include "model/model_profile.hpp"
#include "sim/sim_cluster.hpp"
#include "sim/sim_report.hpp"

namespace ember::cli {
namespace {

constexpr uint64_t kMaxInputBytes = 64ull << 20;

struct SimArgs {
  std::string cluster, trace, models, out = "sim-out", label, policy, window;
  std::vector<std::string> set;
  int64_t seed = -1;
  bool decision_time = false;
};

/// "FROM:TO" in simulated seconds (either may be empty: the start, the end).
Result<std::pair<uint64_t, uint64_t>> parse_window(const std::string& text) {
  if (text.empty()) return std::pair<uint64_t, uint64_t>{0, UINT64_MAX};
  const auto colon = text.find(':');
  if (colon == std::string::npos) return invalid_argument("--window " + text + ": expected FROM:TO in seconds (60:120)");
  auto seconds = [&](const std::string& s, uint64_t none) -> Result<uint64_t> {
    if (s.empty()) return none;
    auto v = parse_number(s);
    if (!v.ok() || *v < 0) return invalid_argument("--window " + text + ": '" + s + "' is not a number of seconds");
    return static_cast<uint64_t>(*v * 1e6);
  };
  EMBER_ASSIGN_OR_RETURN(uint64_t from, seconds(text.substr(0, colon), 0));
  EMBER_ASSIGN_OR_RETURN(uint64_t to, seconds(text.substr(colon + 1), UINT64_MAX));
  if (to <= from) return invalid_argument("--window " + text + ": the end must follow the start");
  return std::pair{from, to};
}

Result<std::vector<sim::ModelCosts>> load_models(const std::vector<SimModelConfig>& configs, const std::string& path,
                                                 std::vector<uint64_t>& slo_us, uint64_t default_slo_us) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::vector<sim::ModelCosts> out;
  for (const auto& m : configs) {
    const std::filesystem::path file =
        std::filesystem::path(m.profile).is_absolute() ? std::filesystem::path(m.profile) : dir / m.profile;
    auto json = read_file(file.string(), kMaxInputBytes, "a profile");
    if (!json.ok()) return json.error().with_context(path + ": model " + m.name);
    auto profile = gpu::parse_profile(*json, file.string());
    if (!profile.ok()) return profile.error().with_context(path + ": model " + m.name);
    gpu::ModelProfile p = std::move(*profile);
    p.model = m.name;
    if (m.weights) {
      EMBER_ASSIGN_OR_RETURN(p, sim::scaled_profile(std::move(p), m.name, m.weights));
    }
    auto costs = sim::ModelCosts::from_profile(p, m.speedup);
    if (!costs.ok()) return costs.error().with_context(path);
    out.push_back(std::move(*costs));
    slo_us.push_back(m.slo_us ? m.slo_us : default_slo_us);
  }
  return out;
}

Status write_file(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write) {
  std::ofstream f(path);
  if (!f) return unavailable("cannot write " + path.string());
  write(f);
  f.close();
  if (!f) return unavailable("cannot write " + path.string());
  return Status::OK();
}

int run_sim(const SimArgs& a) {
  // The manager's classes log every placement at info: a simulation shows them with --log-level debug.
  if (spdlog::get_level() == spdlog::level::info) spdlog::set_level(spdlog::level::warn);
  std::vector<std::pair<std::string, std::string>> overrides;
  for (const auto& s : a.set) {
    const auto eq = s.find('=');
    if (eq == std::string::npos) return report(invalid_argument("--set " + s + ": expected section.key=value"));
    overrides.emplace_back(s.substr(0, eq), s.substr(eq + 1));
  }
  if (!a.policy.empty()) overrides.emplace_back("autoscale.policy", a.policy);
  if (a.seed >= 0) overrides.emplace_back("sim.seed", std::to_string(a.seed));
  auto window = parse_window(a.window);
  if (!window.ok()) return report(window.error());

  auto cluster_text = read_file(a.cluster, kMaxInputBytes, "a cluster file");
  if (!cluster_text.ok()) return report(cluster_text.error());
  auto cluster = parse_sim_cluster(*cluster_text, a.cluster, overrides);
  if (!cluster.ok()) return report(cluster.error());
  auto models_text = read_file(a.models, kMaxInputBytes, "a models file");
  if (!models_text.ok()) return report(models_text.error());
  auto model_configs = parse_sim_models(*models_text, a.models);
  if (!model_configs.ok()) return report(model_configs.error());
  std::vector<uint64_t> model_slo;
  auto models = load_models(*model_configs, a.models, model_slo, cluster->sim.slo_us);
  if (!models.ok()) return report(models.error());
  auto trace = sim::load_request_trace(a.trace);
  if (!trace.ok()) return report(trace.error());

  const SimTopologyConfig& t = cluster->topology;
  sim::TopologySpec topo{t.hosts, t.gpus_per_host, t.hosts_per_leaf, t.spines, t.host_link_bytes_per_s,
                         t.spine_link_bytes_per_s, t.cloud_bytes_per_s, t.pcie_bytes_per_s};
  sim::SimOptions options;
  options.device_bytes = t.device_memory;
  options.cache_bytes = t.host_cache;
  options.autoscale = cluster->autoscale;
  options.autoscaler = cluster->autoscaler;
  options.cold_start_timeout_us = cluster->sim.cold_start_timeout_us;
  options.chunk_bytes = cluster->sim.chunk_bytes;
  options.sample_interval_us = cluster->sim.sample_interval_us;
  options.seed = cluster->sim.seed;
  options.warm_replicas = cluster->sim.warm_replicas;
  options.load_replicas = cluster->sim.load_replicas;
  options.failures = cluster->sim.failures;
  if (a.decision_time) {
    options.decision_clock = [] {
      return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                       std::chrono::steady_clock::now().time_since_epoch())
                                       .count());
    };
  }
  std::vector<std::string> names;
  for (const auto& m : *models) names.push_back(m.model());
  std::vector<uint64_t> slo_us;  // by the trace's model
  for (const auto& name : trace->models) {
    const auto it = std::find(names.begin(), names.end(), name);
    slo_us.push_back(it == names.end() ? cluster->sim.slo_us : model_slo[static_cast<size_t>(it - names.begin())]);
  }

  auto sim = sim::SimCluster::create(topo, std::move(*models), options);
  if (!sim.ok()) return report(sim.error());
  const auto wall0 = std::chrono::steady_clock::now();
  auto result = (*sim)->run(*trace);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (!result.ok()) return report(result.error());

  const sim::SimSummary s = sim::summarize(*result, slo_us);
  const std::string label = !a.label.empty()               ? a.label
                            : cluster->autoscaler.enabled ? std::string(to_string(cluster->autoscale.policy))
                                                          : std::string("no autoscaler");
  std::cout << sim::summary_header() << sim::summary_row(label, s) << '\n';
  std::printf("%u hosts x %u GPUs; %zu requests over %.1f simulated s; %u chains; most replicas %u\n", t.hosts,
              t.gpus_per_host, trace->requests.size(), s.simulated_s, s.chains, s.max_replicas);
  std::printf("mean cold start %.0f ms (%llu); p50 %.1f ms; requests that waited for a replica %llu\n",
              s.cold_start_mean_ms, static_cast<unsigned long long>(s.cold_starts), s.p50_ms,
              static_cast<unsigned long long>(s.cold_requests));
  if (result->failures > 0) {
    std::printf("host failures: %u; requests sent again after their host failed: %llu\n", result->failures,
                static_cast<unsigned long long>(s.retried));
  }
  if (s.tiers.count("stage")) {
    std::printf("partitioned cold starts: %llu stage loads (mean %.0f ms); %llu requests ran through a pipeline\n",
                static_cast<unsigned long long>(s.tiers.at("stage").count), s.tiers.at("stage").mean_ms,
                static_cast<unsigned long long>(s.pipeline_requests));
  }
  std::printf("%llu events in %.2f s of wall time (%.2f M events/s)\n", static_cast<unsigned long long>(s.events),
              wall_s, wall_s > 0 ? static_cast<double>(s.events) / wall_s / 1e6 : 0.0);
  if (a.decision_time) {
    std::printf("decision time charged: %llu decisions, %.3f s in all (%.1f us each)\n",
                static_cast<unsigned long long>(result->decisions), static_cast<double>(result->decision_us) / 1e6,
                result->decisions ? static_cast<double>(result->decision_us) / static_cast<double>(result->decisions) : 0.0);
  }

  std::error_code ec;
  std::filesystem::create_directories(a.out, ec);
  if (ec) return report(unavailable("cannot create " + a.out + ": " + ec.message()));
  const std::filesystem::path out(a.out);
  Status st = write_file(out / "requests.csv", [&](std::ostream& o) { sim::write_requests_csv(o, *result, *trace); });
  if (st.ok()) {
    st = write_file(out / "trace.json", [&](std::ostream& o) {
      sim::write_chrome_trace(o, *result, *trace, names, window->first, window->second);
    });
  }
  if (st.ok()) {
    st = write_file(out / "plot.svg", [&](std::ostream& o) {
      sim::write_plot_svg(o, *result, names, label + ": replicas and end-to-end latency");
    });
  }
  if (st.ok()) st = write_file(out / "summary.json", [&](std::ostream& o) { o << sim::summary_json(label, s); });
  if (!st.ok()) return report(st.error());
  std::printf("wrote %s/: requests.csv, trace.json (chrome://tracing), plot.svg, summary.json\n", a.out.c_str());
  return 0;
}

}  // namespace

void add_sim_command(CLI::App& app, Runner& runner) {
  auto a = std::make_shared<SimArgs>();
  auto* cmd = app.add_subcommand("sim", "Replay a request trace on a simulated cluster running the manager's own code");
  cmd->add_option("--cluster", a->cluster, "CLUSTER.yaml: topology:, sim:, autoscale: (deploy/sim/)")->required();
  cmd->add_option("--trace", a->trace, "a CSV of time_s,model lines")->required();
  cmd->add_option("--models", a->models, "MODELS.yaml: each model's name, profile.json, size, speedup, SLO")->required();
  cmd->add_option("--policy", a->policy, "autoscale.policy (ongoing_requests, arrival_rate, queue_latency, ...)");
  cmd->add_option("--seed", a->seed, "sim.seed: the random placement's seed");
  cmd->add_option("--set", a->set, "section.key=value, replacing the cluster file's (repeatable)");
  cmd->add_option("--out", a->out, "folder for requests.csv, trace.json, plot.svg and summary.json")->default_val("sim-out");
  cmd->add_option("--label", a->label, "the table row's name (default: the policy)");
  cmd->add_option("--window", a->window, "FROM:TO seconds of the Chrome trace (default: all)");
  cmd->add_flag("--decision-time", a->decision_time,
                "charge the manager's measured decision time (loads start after it; runs then differ)");
  cmd->callback([a, &runner] { runner = [a] { return run_sim(*a); }; });
}

}  // namespace ember::cli
