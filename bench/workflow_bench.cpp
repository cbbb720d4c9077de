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
// with no wrong answer and no error.
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
#include "gpu/model_builder.hpp"

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

/// One way of answering a request: "a" and "b" (the classifiers' logits), or empty on failure.
using Answer = std::function<std::map<std::string, std::string>(httplib::Client&, const std::string& image)>;

struct Round {
  std::vector<double> latency_ms;
  int wrong = 0, errors = 0;
  double seconds = 0;
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
  for (auto& v : lat) r.latency_ms.insert(r.latency_ms.end(), v.begin(), v.end());
  r.wrong = wrong;
  r.errors = errors;
  return r;
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
  const std::vector<std::tuple<std::string, int, Answer>> modes{
      {"chained", port, chained}, {"workflow", port, workflow}, {"1 stream", port + 1, workflow}};
  auto met_share = [&](const Round& r) {
    return static_cast<double>(std::count_if(r.latency_ms.begin(), r.latency_ms.end(),
                                             [&](double ms) { return ms <= o.deadline_ms; })) /
           static_cast<double>(o.requests);
  };
  if (!o.sweep.empty()) {
    std::printf("%-10s %9s %9s %9s %9s %9s %7s %6s\n", "mode", "offered", "req/s", "p50 ms", "p99 ms", "SLO met",
                "wrong", "errors");
    std::map<std::string, double> best;
    for (double rate : o.sweep) {
      for (const auto& [name, at, answer] : modes) {
        Round r = drive(o, at, answer, images, want, 100 + static_cast<uint64_t>(rate), rate);
        const double met = met_share(r);
        std::printf("%-10s %9.0f %9.1f %9.2f %9.2f %8.1f%% %7d %6d\n", name.c_str(), rate,
                    static_cast<double>(r.latency_ms.size()) / r.seconds, percentile(r.latency_ms, 0.5),
                    percentile(r.latency_ms, 0.99), 100 * met, r.wrong, r.errors);
        if (met >= o.slo_share && r.wrong == 0 && r.errors == 0) best[name] = std::max(best[name], rate);
      }
    }
    std::printf("throughput at the SLO (%.0f%% within %.0f ms): chained %.0f, workflow %.0f, 1 stream %.0f req/s\n",
                100 * o.slo_share, o.deadline_ms, best["chained"], best["workflow"], best["1 stream"]);
    server->terminate();
    serial->terminate();
    fs::remove_all(repo);
    return 0;
  }
  std::printf("%-10s %5s %9s %9s %9s %9s %7s %6s\n", "mode", "round", "req/s", "p50 ms", "p99 ms", "SLO met", "wrong",
              "errors");
  std::map<std::string, std::vector<double>> all;
  for (int round = 0; round < o.rounds; ++round) {
    for (const auto& [name, at, answer] : modes) {
      Round r = drive(o, at, answer, images, want, 100 + static_cast<uint64_t>(round), o.rate);
      const double met = r.latency_ms.empty() ? 0 : 100.0 * met_share(r);
      std::printf("%-10s %5d %9.1f %9.2f %9.2f %8.1f%% %7d %6d\n", name.c_str(), round,
                  static_cast<double>(r.latency_ms.size()) / r.seconds, percentile(r.latency_ms, 0.5),
                  percentile(r.latency_ms, 0.99), met, r.wrong, r.errors);
      all[name].insert(all[name].end(), r.latency_ms.begin(), r.latency_ms.end());
    }
  }
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
  CLI11_PARSE(app, argc, argv);
  try {
    return ember::bench::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "workflow_bench: %s\n", e.what());
    return 1;
  }
}
