// load_bench: drives the KServe v2 HTTP endpoint of `ember serve` with a fixed number of concurrent
// clients (keep-alive connections) and reports throughput and latency percentiles, beside the same
// model's executor time measured directly in this process, so the runtime's own overhead shows.
//
// Two phases, both with the same request: latency (one client, requests back to back: the p50 of
// this phase minus the executor's p50 is the runtime's overhead per request) and throughput
// (`--clients` clients for `--seconds`). By default it starts `ember serve` itself on a temporary
// repository holding the model, so one command measures everything; `--url` measures a running
// server instead. Not a test: it prints figures for a human to judge.
#include <httplib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench/subprocess.hpp"
#include "gpu/architectures.hpp"
#include "gpu/device_registry.hpp"
#include "gpu/executor.hpp"
#include "gpu/sample_inputs.hpp"
#include "gpu/sim_device.hpp"

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Options {
  std::string ember;
  std::string url;
  std::string arch = "mlp";
  bool tiny = true;
  int clients = 8;
  double seconds = 5;
  int latency_requests = 2000;
  uint32_t http_threads = 8;
  uint32_t threads = 1;
  int64_t batch = 1;
  std::string device = "sim";  // sim, or cuda: the server and the direct executor on GPU 0
  bool binary = false;         // also the same request as binary tensors, side by side
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

/// A request as it goes on the wire: the body and its headers.
struct Encoded {
  std::string body;
  std::string content_type = "application/json";
  httplib::Headers headers;
};

Encoded request_body(const std::vector<gpu::HostTensor>& inputs) {
  json body{{"inputs", json::array()}};
  for (const auto& t : inputs) {
    json j;
    gpu::tensor_to_kserve_json(t, j);
    body["inputs"].push_back(std::move(j));
  }
  return {body.dump()};
}

/// The same request with the binary tensor data extension: raw input bytes after the JSON, and the
/// outputs asked back as raw bytes.
Encoded binary_body(const std::vector<gpu::HostTensor>& inputs) {
  json header{{"inputs", json::array()}, {"parameters", {{"binary_data_output", true}}}};
  std::string tail;
  for (const auto& t : inputs) {
    json j;
    gpu::tensor_to_kserve_json(t, j);
    j.erase("data");
    j["parameters"] = {{"binary_data_size", t.desc.bytes()}};
    header["inputs"].push_back(std::move(j));
    tail.append(reinterpret_cast<const char*>(t.data()), t.desc.bytes());
  }
  Encoded e{header.dump(), "application/octet-stream", {}};
  e.headers.emplace("Inference-Header-Content-Length", std::to_string(e.body.size()));
  e.body += tail;
  return e;
}

struct Phase {
  std::vector<double> latency_us;
  uint64_t errors = 0;
  double seconds = 0;
};

/// `clients` threads send `body` until `count` requests are done or `seconds` pass.
Phase drive(const std::string& host, int port, const std::string& path, const Encoded& body, int clients,
            double seconds, int64_t count) {
  Phase phase;
  std::vector<std::vector<double>> per_thread(static_cast<size_t>(clients));
  std::atomic<uint64_t> errors{0};
  std::atomic<int64_t> left{count};
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client client(host, port);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);  // headers and body go out as two writes: without this, Nagle meets delayed ACKs (40 ms)
      client.set_read_timeout(60, 0);
      auto& lat = per_thread[static_cast<size_t>(c)];
      while (Clock::now() < deadline && left.fetch_sub(1) > 0) {
        const auto t0 = Clock::now();
        auto res = client.Post(path, body.headers, body.body, body.content_type);
        const auto t1 = Clock::now();
        if (!res || res->status != 200) {
          ++errors;
          continue;
        }
        lat.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
    });
  }
  for (auto& t : threads) t.join();
  phase.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& v : per_thread) phase.latency_us.insert(phase.latency_us.end(), v.begin(), v.end());
  phase.errors = errors;
  return phase;
}

int run(const Options& o) {
  // The model, written to a temporary repository, and its input.
  const auto work = std::filesystem::temp_directory_path() / ("ember-load-" + std::to_string(::getpid()));
  const std::string name = "bench";
  auto builder = gpu::build_architecture(o.arch, {o.tiny, 1, name});
  if (!builder.ok()) throw std::runtime_error(builder.error().message());
  const std::string dir = (work / name / "1").string();
  if (auto st = builder->write(dir); !st.ok()) throw std::runtime_error(st.error().message());
  auto model = gpu::Model::load(dir);
  if (!model.ok()) throw std::runtime_error(model.error().message());
  auto inputs = gpu::sample_model_inputs(**model, o.batch, 16, 3);
  if (!inputs.ok()) throw std::runtime_error(inputs.error().message());
  const Encoded body = request_body(*inputs);
  const Encoded binary = binary_body(*inputs);

  // The executor alone, on the same kind of device the server uses.
  DevicesConfig dc;
  dc.kind = o.device == "cuda" ? DeviceKind::cuda : DeviceKind::sim;
  dc.sim.memory_bytes = 1ull << 30;
  dc.sim.compute_threads = o.threads;
  if (o.device == "cuda") ::setenv("EMBER_CUDA_MEMORY", "1GiB", 1);  // the server inherits it
  auto opened = gpu::open_devices(dc);
  if (!opened.ok()) throw std::runtime_error(opened.error().message());
  std::unique_ptr<gpu::Device> device = std::move(opened->devices.front());
  auto ex = gpu::LayerExecutor::create(*device, *model, {0, (*model)->num_layers()});
  if (!ex.ok()) throw std::runtime_error(ex.error().message());
  std::vector<double> exec_us;
  for (int i = 0; i < o.latency_requests; ++i) {
    const auto t0 = Clock::now();
    auto out = (*ex)->run_host(*inputs);
    exec_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    if (!out.ok()) throw std::runtime_error(out.error().message());
  }

  std::unique_ptr<Subprocess> server;
  std::string host = "127.0.0.1";
  int port = 0;
  if (o.url.empty()) {
    port = 20000 + static_cast<int>(::getpid() % 20000);
    server = std::make_unique<Subprocess>(std::vector<std::string>{
        o.ember, "--log-level", "warn", "serve", "--repository", work.string(), "--http",
        host + ":" + std::to_string(port), "--http-threads", std::to_string(o.http_threads), "--threads",
        std::to_string(o.threads), "--device-memory", "1GiB", "--cache", "1GiB", "--device", o.device});
  } else {
    httplib::Client probe(o.url);
    auto pos = o.url.rfind(':');
    host = o.url.substr(o.url.find("//") + 2, pos - o.url.find("//") - 2);
    port = std::stoi(o.url.substr(pos + 1));
  }
  httplib::Client admin(host, port);
  for (int i = 0; i < 100; ++i) {
    auto r = admin.Get("/v2/health/ready");
    if (r && r->status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto loaded = admin.Post("/v2/repository/models/" + name + "/load", "{}", "application/json");
  if (!loaded || loaded->status != 200) throw std::runtime_error("cannot load the model on the server");
  const std::string path = "/v2/models/" + name + "/infer";

  drive(host, port, path, body, o.clients, 1.0, INT64_MAX);  // warm-up
  const Phase latency = drive(host, port, path, body, 1, 60, o.latency_requests);
  const Phase load = drive(host, port, path, body, o.clients, o.seconds, INT64_MAX);
  Phase bin_latency, bin_load;
  if (o.binary) {
    // One answer checked: binary out, where the header says.
    httplib::Client check(host, port);
    auto r = check.Post(path, binary.headers, binary.body, binary.content_type);
    if (!r || r->status != 200 || !r->has_header("Inference-Header-Content-Length")) {
      throw std::runtime_error("the binary request was not answered in binary: " +
                               (r ? std::to_string(r->status) + " " + r->body.substr(0, 200) : std::string("no answer")));
    }
    bin_latency = drive(host, port, path, binary, 1, 60, o.latency_requests);
    bin_load = drive(host, port, path, binary, o.clients, o.seconds, INT64_MAX);
  }

  const double exec_p50 = percentile(exec_us, 0.5), exec_p99 = percentile(exec_us, 0.99);
  const double lat_p50 = percentile(latency.latency_us, 0.5), lat_p99 = percentile(latency.latency_us, 0.99);
  std::printf("model: %s%s batch %lld (%zu bytes of JSON per request), %u compute thread(s), %u HTTP threads\n",
              o.arch.c_str(), o.tiny ? " (tiny)" : "", static_cast<long long>(o.batch), body.body.size(), o.threads,
              o.http_threads);
  std::printf("device: %s\n", device->info().name.c_str());
  std::printf("executor alone:        p50 %8.1f us   p99 %8.1f us   (%d runs, in this process)\n", exec_p50, exec_p99,
              o.latency_requests);
  std::printf("HTTP, 1 client:        p50 %8.1f us   p99 %8.1f us   %8.0f req/s  (%zu requests, %llu errors)\n",
              lat_p50, lat_p99, static_cast<double>(latency.latency_us.size()) / latency.seconds,
              latency.latency_us.size(), static_cast<unsigned long long>(latency.errors));
  std::printf("HTTP, %d clients:      p50 %8.1f us   p99 %8.1f us   %8.0f req/s  (%zu requests in %.1f s, %llu errors)\n",
              o.clients, percentile(load.latency_us, 0.5), percentile(load.latency_us, 0.99),
              static_cast<double>(load.latency_us.size()) / load.seconds, load.latency_us.size(), load.seconds,
              static_cast<unsigned long long>(load.errors));
  std::printf("runtime overhead at p50 (1 client minus executor): %.1f us\n", lat_p50 - exec_p50);
  if (o.binary) {
    const double bin_p50 = percentile(bin_latency.latency_us, 0.5);
    const double rate = static_cast<double>(load.latency_us.size()) / load.seconds;
    const double bin_rate = static_cast<double>(bin_load.latency_us.size()) / bin_load.seconds;
    std::printf("binary, 1 client:      p50 %8.1f us   p99 %8.1f us   (%zu bytes per request, %llu errors)\n", bin_p50,
                percentile(bin_latency.latency_us, 0.99), binary.body.size(),
                static_cast<unsigned long long>(bin_latency.errors));
    std::printf("binary, %d clients:    p50 %8.1f us   p99 %8.1f us   %8.0f req/s  (%llu errors)\n", o.clients,
                percentile(bin_load.latency_us, 0.5), percentile(bin_load.latency_us, 0.99), bin_rate,
                static_cast<unsigned long long>(bin_load.errors));
    std::printf("binary / JSON: 1-client p50 %.2f, %d-client throughput %.2f\n", bin_p50 / lat_p50, o.clients,
                bin_rate / rate);
  }
  if (server) server->terminate();
  server.reset();
  std::filesystem::remove_all(work);
  return 0;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  ember::bench::Options o;
  o.ember = std::string(EMBER_BINARY_DIR) + "/bin/ember";
  CLI::App app{"Throughput and latency of the KServe v2 endpoint, beside the executor's own time"};
  app.add_option("--ember", o.ember, "The ember binary to start (`ember serve`)");
  app.add_option("--url", o.url, "Measure a running server instead (http://host:port; the model must be in its repository as 'bench')");
  app.add_option("--arch", o.arch, "mlp, resnet50, bert-base or gpt2");
  app.add_flag("!--full,--tiny", o.tiny, "Full-size instead of the tiny variant (default: tiny)");
  app.add_option("--clients", o.clients, "Concurrent clients in the throughput phase");
  app.add_option("--seconds", o.seconds, "Length of the throughput phase");
  app.add_option("--latency-requests", o.latency_requests, "Requests in the one-client latency phase");
  app.add_option("--http-threads", o.http_threads, "HTTP threads of the server");
  app.add_option("--threads", o.threads, "Compute threads of the simulated device (server and direct)");
  app.add_flag("--binary", o.binary, "Also send the same request as binary tensors (raw bytes in and out), side by side");
  app.add_option("--device", o.device, "sim, or cuda (the server and the direct executor on GPU 0)")
      ->check(CLI::IsMember({"sim", "cuda"}));
  app.add_option("--batch", o.batch, "Batch size of the request");
  CLI11_PARSE(app, argc, argv);
  try {
    return ember::bench::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "load_bench: %s\n", e.what());
    return 1;
  }
}
