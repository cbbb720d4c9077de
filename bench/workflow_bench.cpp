// workflow_bench: a workflow of models served by `ember serve` (StreamBox's Traffic shape: a detector
// whose features feed two classifiers) against the same models called one at a time by the client
// with the tensors going through it (independent functions: detect, then both classifiers on its
// features), and against the same workflow on a server that runs one request per device at a time
// (binding.streams 1, Ember before functions ran as streams), under the same Poisson arrivals,
// alternating rounds, side by side in one run.
//
// It writes the models (MLPs at fixed widths, deterministic weights) and the workflow into a
// temporary repository, starts `ember serve` on it, warms every model, and then, per round and
// mode, sends `--requests` requests at exponential gaps of mean 1/`--rate`, each from one of
// `--workers` keep-alive connections (open loop: a request waits for a free worker, and its latency
// counts from its scheduled arrival). Tensors travel as raw bytes (binary tensor data) in both
// modes. Every answer is compared byte for byte with the answer of the chained models for the same
// input, computed once before the clock starts: a wrong answer is counted, never ignored. At the end
// it prints the server's hand-off counters (bytes between steps by path) from /metrics. With
// `--sweep R1,R2,...` it runs one round per offered rate and mode instead, and prints each mode's
// throughput at the SLO: the highest rate at which `--slo-share` of the requests met the deadline
// with no wrong answer and no error. Device memory over time: while a round runs, the server's
// /metrics is read every `--sample-ms` (ember_device_memory_in_use_bytes: weights, activations, kept
// values, read afresh at each scrape); each round prints the mean and peak, and `--memory-csv`
// writes every sample.
// Not a test: it prints figures for a human to judge.
#include <httplib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bench/subprocess.hpp"
#include "model/model_builder.hpp"

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
namespace fs = std::filesystem;

struct Options {
  std::string ember;
  double rate = 40;    // requests per second, offered
  int requests = 200;  // per round and mode
  int rounds = 2;
  int workers = 16;
  int64_t rows = 8;      // rows per request
  int64_t width = 3072;  // the detector's input width (a 32x32 RGB image, flattened)
  int64_t features = 1024;
  double deadline_ms = 50;
  uint32_t threads = 1;
  uint32_t streams = 4;  // binding.streams of the server under test (the other runs 1)
  /// Offered rates to sweep instead of the rounds: one round per rate and mode, then each mode's
  /// throughput at the SLO (the highest rate with at least `slo_share` of requests within it).
  std::vector<double> sweep;
  double slo_share = 0.98;
  int sample_ms = 50;      // device memory read this often while a round runs
  std::string memory_csv;  // every sample, when set
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

/// A model of linear layers with ReLUs between them: input "input" [-1, widths[0]], output named
/// `output`.
void write_mlp(const fs::path& dir, const std::string& name, const std::vector<int64_t>& widths,
               const std::string& output, uint64_t seed) {
  gpu::ModelBuilder b(name, seed);
  std::string x = b.input("input", gpu::DType::f32, {-1, widths[0]});
  for (size_t i = 1; i < widths.size(); ++i) {
    gpu::LayerAttrs a;
    a.in_features = widths[i - 1];
    a.out_features = widths[i];
    const bool last = i + 1 == widths.size();
    x = b.add(last ? output : "fc" + std::to_string(i), gpu::OpKind::linear, a, {x});
    if (!last) x = b.add("relu" + std::to_string(i), gpu::OpKind::relu, {}, {x});
  }
  b.output(x, gpu::DType::f32, {-1, widths.back()});
  if (auto st = b.write((dir / name / "1").string()); !st.ok()) throw std::runtime_error(st.error().message());
}

/// A request with binary tensors: the JSON header, then the raw bytes; outputs asked back raw.
struct Wire {
  std::string body;
  httplib::Headers headers;
};

Wire binary_request(const std::string& input, const std::vector<int64_t>& shape, const std::string& bytes) {
  json header{{"inputs", json::array({{{"name", input},
                                       {"datatype", "FP32"},
                                       {"shape", shape},
                                       {"parameters", {{"binary_data_size", bytes.size()}}}}})},
              {"parameters", {{"binary_data_output", true}}}};
  Wire w{header.dump(), {}};
  w.headers.emplace("Inference-Header-Content-Length", std::to_string(w.body.size()));
  w.body += bytes;
  return w;
}

/// The raw bytes of each output of a binary reply, by name; empty on a malformed reply.
std::map<std::string, std::string> outputs_of(const httplib::Result& res) {
  std::map<std::string, std::string> out;
  if (!res || res->status != 200 || !res->has_header("Inference-Header-Content-Length")) return out;
  const size_t n = std::stoul(res->get_header_value("Inference-Header-Content-Length"));
  auto header = json::parse(res->body.substr(0, n), nullptr, false);
  if (header.is_discarded()) return out;
  size_t at = n;
  for (const auto& o : header["outputs"]) {
    const size_t size = o["parameters"]["binary_data_size"].get<size_t>();
    out[o["name"].get<std::string>()] = res->body.substr(at, size);
    at += size;
  }
  return out;
}

/// Device memory in use at one moment (the server's gauges summed over its devices), in bytes.
struct MemorySample {
  double ms = 0;  // since the round started
  double weights = 0, activations = 0, kept = 0;
  double total() const { return weights + activations + kept; }
};

/// Reads the server's device memory gauges every `period` until stopped.
class MemorySampler {
 public:
  MemorySampler(int port, int period_ms) : client_("127.0.0.1", port) {
    thread_ = std::thread([this, period_ms] {
      const auto start = Clock::now();
      while (!stop_.load()) {
        auto r = client_.Get("/metrics");
        if (r && r->status == 200) {
          MemorySample m;
          m.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
          std::istringstream lines(r->body);
          for (std::string line; std::getline(lines, line);) {
            if (line.rfind("ember_device_memory_in_use_bytes{", 0) != 0) continue;
            const double v = std::stod(line.substr(line.rfind(' ')));
            if (line.find("use=\"weights\"") != std::string::npos) m.weights += v;
            if (line.find("use=\"activations\"") != std::string::npos) m.activations += v;
            if (line.find("use=\"kept\"") != std::string::npos) m.kept += v;
          }
          samples_.push_back(m);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(period_ms));
      }
    });
  }
  /// Stops sampling; the samples taken.
  std::vector<MemorySample> stop() {
    stop_ = true;
    thread_.join();
    return std::move(samples_);
  }

 private:
  httplib::Client client_;
  std::atomic<bool> stop_{false};
  std::vector<MemorySample> samples_;  // written by thread_ only, read after it joined
  std::thread thread_;
};

/// One way of answering a request: "a" and "b" (the classifiers' logits), or empty on failure.
using Answer = std::function<std::map<std::string, std::string>(httplib::Client&, const std::string& image)>;

struct Round {
  std::vector<double> latency_ms;
  int wrong = 0, errors = 0;
  double seconds = 0;
  std::vector<MemorySample> memory;
};

Round drive(const Options& o, int port, const Answer& answer, const std::vector<std::string>& images,
            const std::vector<std::map<std::string, std::string>>& want, uint64_t seed, double rate) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::vector<double> at;  // scheduled arrivals, seconds from the start
  double t = 0;
  for (int i = 0; i < o.requests; ++i) at.push_back(t += gap(rng));
  Round r;
  std::vector<std::vector<double>> lat(static_cast<size_t>(o.workers));
  std::atomic<int> next{0}, wrong{0}, errors{0};
  const auto start = Clock::now() + std::chrono::milliseconds(20);
  MemorySampler sampler(port, o.sample_ms);
  std::vector<std::thread> threads;
  for (int w = 0; w < o.workers; ++w) {
    threads.emplace_back([&, w] {
      httplib::Client client("127.0.0.1", port);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      client.set_read_timeout(60, 0);
      for (int i; (i = next.fetch_add(1)) < o.requests;) {
        const auto due = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at[i]));
        std::this_thread::sleep_until(due);
        const size_t k = static_cast<size_t>(i) % images.size();
        auto got = answer(client, images[k]);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - due).count();
        if (got.empty()) {
          ++errors;
          continue;
        }
        if (got.at("a") != want[k].at("a") || got.at("b") != want[k].at("b")) ++wrong;
        lat[static_cast<size_t>(w)].push_back(ms);
      }
    });
  }
  for (auto& th : threads) th.join();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.memory = sampler.stop();
  for (auto& v : lat) r.latency_ms.insert(r.latency_ms.end(), v.begin(), v.end());
  r.wrong = wrong;
  r.errors = errors;
  return r;
}

/// Mean and peak of the samples' totals (MiB), and the peaks of activations and kept values (KiB).
struct MemoryFigures {
  double mean_mib = 0, peak_mib = 0, activations_kib = 0, kept_kib = 0;
};

MemoryFigures figures_of(const std::vector<MemorySample>& samples) {
  MemoryFigures f;
  if (samples.empty()) return f;
  for (const auto& m : samples) {
    f.mean_mib += m.total();
    f.peak_mib = std::max(f.peak_mib, m.total());
    f.activations_kib = std::max(f.activations_kib, m.activations);
    f.kept_kib = std::max(f.kept_kib, m.kept);
  }
  f.mean_mib /= static_cast<double>(samples.size()) * (1 << 20);
  f.peak_mib /= 1 << 20;
  f.activations_kib /= 1 << 10;
  f.kept_kib /= 1 << 10;
  return f;
}

int run(const Options& o) {
  const fs::path repo = fs::temp_directory_path() / ("ember-workflow-bench-" + std::to_string(::getpid()));
  fs::remove_all(repo);
  write_mlp(repo, "detect", {o.width, 2048, o.features}, "features", 1);
  write_mlp(repo, "left", {o.features, 256, 10}, "logits", 2);
  write_mlp(repo, "right", {o.features, 256, 10}, "logits", 3);
  fs::create_directories(repo / "traffic");
  {
    std::FILE* f = std::fopen((repo / "traffic" / "workflow.json").c_str(), "w");
    std::fputs(R"({"inputs": ["image"],
      "steps": [{"name": "detect", "model": "detect", "inputs": {"input": "image"}},
                {"name": "left", "model": "left", "inputs": {"input": "detect.features"}},
                {"name": "right", "model": "right", "inputs": {"input": "detect.features"}}],
      "outputs": {"a": "left.logits", "b": "right.logits"}})",
               f);
    std::fclose(f);
  }
  const int port = 20000 + static_cast<int>(::getpid() % 20000);
  auto start_server = [&](int at, uint32_t streams) {
    const fs::path config = repo / ("streams-" + std::to_string(streams) + ".yaml");
    std::FILE* f = std::fopen(config.c_str(), "w");
    std::fprintf(f, "binding:\n  streams: %u\n", streams);
    std::fclose(f);
    auto server = std::make_unique<Subprocess>(std::vector<std::string>{
        o.ember, "--log-level", "warn", "serve", "--config", config.string(), "--repository", repo.string(), "--http",
        "127.0.0.1:" + std::to_string(at), "--http-threads", std::to_string(o.workers + 4), "--threads",
        std::to_string(o.threads), "--device-memory", "1GiB", "--cache", "1GiB", "--device", "sim"});
    httplib::Client c("127.0.0.1", at);
    for (int i = 0; i < 100; ++i) {
      auto r = c.Get("/v2/health/ready");
      if (r && r->status == 200) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return server;
  };
  auto server = start_server(port, o.streams);
  auto serial = start_server(port + 1, 1);
  httplib::Client admin("127.0.0.1", port);
  httplib::Client serial_admin("127.0.0.1", port + 1);

  const std::vector<int64_t> shape{o.rows, o.width};
  Answer chained = [&](httplib::Client& c, const std::string& image) {
    std::map<std::string, std::string> out;
    auto detect = binary_request("input", shape, image);
    auto f = outputs_of(c.Post("/v2/models/detect/infer", detect.headers, detect.body, "application/octet-stream"));
    if (!f.count("features")) return out;
    auto next = binary_request("input", {o.rows, o.features}, f["features"]);
    for (const char* m : {"left", "right"}) {
      auto l = outputs_of(
          c.Post(std::string("/v2/models/") + m + "/infer", next.headers, next.body, "application/octet-stream"));
      if (!l.count("logits")) return std::map<std::string, std::string>{};
      out[m == std::string("left") ? "a" : "b"] = l["logits"];
    }
    return out;
  };
  Answer workflow = [&](httplib::Client& c, const std::string& image) {
    auto w = binary_request("image", shape, image);
    return outputs_of(c.Post("/v2/workflows/traffic/infer", w.headers, w.body, "application/octet-stream"));
  };

  // Four inputs; their answers by the chained models (warming every model too).
  std::vector<std::string> images;
  std::vector<std::map<std::string, std::string>> want;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (int k = 0; k < 4; ++k) {
    std::vector<float> v(static_cast<size_t>(o.rows * o.width));
    for (auto& x : v) x = uni(rng);
    images.emplace_back(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    want.push_back(chained(admin, images.back()));
    if (want.back().empty()) throw std::runtime_error("the chained models did not answer; is `ember serve` up?");
  }
  for (auto* c : {&admin, &serial_admin}) {
    if (workflow(*c, images[0]).empty() || workflow(*c, images[0]).empty() || chained(*c, images[0]).empty()) {
      throw std::runtime_error("the workflow did not answer");
    }
  }

  std::printf(
      "workflow_bench: detect %lld -> 2048 -> %lld, two classifiers %lld -> 256 -> 10; %lld rows a "
      "request; Poisson arrivals at %.0f req/s, %d requests a round, %d workers; SLO %.0f ms; streams %u "
      "(\"1 stream\": a server running one request per device at a time)\n",
      static_cast<long long>(o.width), static_cast<long long>(o.features), static_cast<long long>(o.features),
      static_cast<long long>(o.rows), o.rate, o.requests, o.workers, o.deadline_ms, o.streams);
  std::FILE* csv = o.memory_csv.empty() ? nullptr : std::fopen(o.memory_csv.c_str(), "w");
  if (!o.memory_csv.empty() && !csv) throw std::runtime_error("cannot write " + o.memory_csv);
  if (csv) std::fprintf(csv, "mode,offered,round,ms,weights,activations,kept\n");
  auto write_samples = [&](const std::string& mode, double offered, int round, const Round& r) {
    if (!csv) return;
    for (const auto& m : r.memory) {
      std::fprintf(csv, "%s,%.0f,%d,%.1f,%.0f,%.0f,%.0f\n", mode.c_str(), offered, round, m.ms, m.weights,
                   m.activations, m.kept);
    }
  };
  const std::vector<std::tuple<std::string, int, Answer>> modes{
      {"chained", port, chained}, {"workflow", port, workflow}, {"1 stream", port + 1, workflow}};
  auto met_share = [&](const Round& r) {
    return static_cast<double>(std::count_if(r.latency_ms.begin(), r.latency_ms.end(),
                                             [&](double ms) { return ms <= o.deadline_ms; })) /
           static_cast<double>(o.requests);
  };
  if (!o.sweep.empty()) {
    std::printf("%-10s %9s %9s %9s %9s %9s %7s %6s %9s %9s\n", "mode", "offered", "req/s", "p50 ms", "p99 ms",
                "SLO met", "wrong", "errors", "MiB mean", "MiB peak");
    std::map<std::string, double> best;
    for (double rate : o.sweep) {
      for (const auto& [name, at, answer] : modes) {
        Round r = drive(o, at, answer, images, want, 100 + static_cast<uint64_t>(rate), rate);
        const double met = met_share(r);
        const MemoryFigures mem = figures_of(r.memory);
        std::printf("%-10s %9.0f %9.1f %9.2f %9.2f %8.1f%% %7d %6d %9.2f %9.2f\n", name.c_str(), rate,
                    static_cast<double>(r.latency_ms.size()) / r.seconds, percentile(r.latency_ms, 0.5),
                    percentile(r.latency_ms, 0.99), 100 * met, r.wrong, r.errors, mem.mean_mib, mem.peak_mib);
        write_samples(name, rate, 0, r);
        if (met >= o.slo_share && r.wrong == 0 && r.errors == 0) best[name] = std::max(best[name], rate);
      }
    }
    std::printf("throughput at the SLO (%.0f%% within %.0f ms): chained %.0f, workflow %.0f, 1 stream %.0f req/s\n",
                100 * o.slo_share, o.deadline_ms, best["chained"], best["workflow"], best["1 stream"]);
    if (csv) std::fclose(csv);
    server->terminate();
    serial->terminate();
    fs::remove_all(repo);
    return 0;
  }
  std::printf("%-10s %5s %9s %9s %9s %9s %7s %6s %9s %9s %8s %8s\n", "mode", "round", "req/s", "p50 ms", "p99 ms",
              "SLO met", "wrong", "errors", "MiB mean", "MiB peak", "act KiB", "kept KiB");
  std::map<std::string, std::vector<double>> all;
  std::map<std::string, std::vector<MemorySample>> memory;
  for (int round = 0; round < o.rounds; ++round) {
    for (const auto& [name, at, answer] : modes) {
      Round r = drive(o, at, answer, images, want, 100 + static_cast<uint64_t>(round), o.rate);
      const double met = r.latency_ms.empty() ? 0 : 100.0 * met_share(r);
      const MemoryFigures mem = figures_of(r.memory);
      std::printf("%-10s %5d %9.1f %9.2f %9.2f %8.1f%% %7d %6d %9.2f %9.2f %8.0f %8.0f\n", name.c_str(), round,
                  static_cast<double>(r.latency_ms.size()) / r.seconds, percentile(r.latency_ms, 0.5),
                  percentile(r.latency_ms, 0.99), met, r.wrong, r.errors, mem.mean_mib, mem.peak_mib,
                  mem.activations_kib, mem.kept_kib);
      all[name].insert(all[name].end(), r.latency_ms.begin(), r.latency_ms.end());
      memory[name].insert(memory[name].end(), r.memory.begin(), r.memory.end());
      write_samples(name, o.rate, round, r);
    }
  }
  if (csv) std::fclose(csv);
  std::printf("device memory in use (MiB, mean / peak of %d-ms samples):", o.sample_ms);
  for (const auto& [name, at, answer] : modes) {
    const MemoryFigures mem = figures_of(memory[name]);
    std::printf(" %s %.2f / %.2f;", name.c_str(), mem.mean_mib, mem.peak_mib);
  }
  std::printf("\n");
  std::printf("all rounds: p50 workflow / chained %.2f, p99 %.2f; p50 workflow / 1 stream %.2f, p99 %.2f\n",
              percentile(all["workflow"], 0.5) / percentile(all["chained"], 0.5),
              percentile(all["workflow"], 0.99) / percentile(all["chained"], 0.99),
              percentile(all["workflow"], 0.5) / percentile(all["1 stream"], 0.5),
              percentile(all["workflow"], 0.99) / percentile(all["1 stream"], 0.99));
  auto metrics = admin.Get("/metrics");
  if (metrics && metrics->status == 200) {
    std::printf("hand-off between steps (the server's counters, warm-up included):\n");
    std::istringstream lines(metrics->body);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("ember_workflow_handoff_bytes_total{", 0) == 0) std::printf("  %s\n", line.c_str());
    }
  }
  server->terminate();
  serial->terminate();
  fs::remove_all(repo);
  return 0;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  ember::bench::Options o;
  CLI::App app{"A workflow (a detector feeding two classifiers) against the same models chained by the client"};
  o.ember = std::string(EMBER_BINARY_DIR) + "/bin/ember";
  app.add_option("--ember", o.ember, "The ember binary to start");
  app.add_option("--rate", o.rate, "Offered requests per second (Poisson)");
  app.add_option("--requests", o.requests, "Requests per round and mode");
  app.add_option("--rounds", o.rounds, "Alternating rounds");
  app.add_option("--workers", o.workers, "Client connections (open loop while one is free)");
  app.add_option("--rows", o.rows, "Rows per request");
  app.add_option("--deadline-ms", o.deadline_ms, "The SLO deadline the attainment is counted at");
  app.add_option("--threads", o.threads, "Compute threads of the simulated device");
  app.add_option("--streams", o.streams, "binding.streams of the server under test (the baseline runs 1)");
  app.add_option("--sweep", o.sweep, "Offered rates to sweep (req/s), one round each: throughput at the SLO")
      ->delimiter(',');
  app.add_option("--slo-share", o.slo_share, "Share of requests within the deadline that meets the SLO");
  app.add_option("--sample-ms", o.sample_ms, "Read the server's device memory this often while a round runs")
      ->check(CLI::Range(1, 10000));
  app.add_option("--memory-csv", o.memory_csv, "Write every device memory sample here (CSV)");
  CLI11_PARSE(app, argc, argv);
  try {
    return ember::bench::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "workflow_bench: %s\n", e.what());
    return 1;
  }
}
