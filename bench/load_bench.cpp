// load_bench: drives the KServe v2 endpoints of `ember serve` (HTTP, and gRPC with --grpc) with a
// fixed number of concurrent clients (keep-alive connections) and reports throughput and latency
// percentiles, beside the same model's executor time measured directly in this process, so the
// runtime's own overhead shows.
//
// Two phases, both with the same request: latency (one client, requests back to back: the p50 of
// this phase minus the executor's p50 is the runtime's overhead per request) and throughput
// (`--clients` clients for `--seconds`). By default it starts `ember serve` itself on a temporary
// repository holding the model, so one command measures everything; `--url` measures a running
// server instead.
//
// --floor starts, inside this process, the bare servers Ember's front ends are measured against:
// a cpp-httplib server (same library, same threads, TCP_NODELAY) and a gRPC server (same library)
// that decode the same request with Ember's own decoders and answer a fixed reply rendered by its own
// encoders: no actors, no model. Every phase runs against the floor too, and the targets print as
// ratios measured in the same run. --sweep runs the throughput phase at several client counts, with
// dynamic batching off and on (a second copy of the model whose model.json asks for it).
// --tenants measures one tenant's flood against another tenant's latency: the server starts with API
// tokens (gateway.api_tokens_file), a victim sends back to back with a token of its own while
// `--clients` flooders send with a token without limits, then with one limited to --tenant-rate
// calls per second and --tenant-concurrent at once; the victim's p50 and p99 print beside its own
// alone, as ratios.
// Not a test: it prints figures for a human to judge.
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "actors/gateway/grpc/grpc_service.grpc.pb.h"
#include "actors/gateway/grpc/kserve_grpc.hpp"
#include "actors/gateway/http/kserve_json.hpp"
#include "actors/tensor_codec.hpp"
#include "bench/subprocess.hpp"
#include "gpu/device_registry.hpp"
#include "gpu/executor.hpp"
#include "gpu/sim_device.hpp"
#include "model/architectures.hpp"
#include "model/sample_inputs.hpp"

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
  bool floor = false;          // the bare HTTP (and gRPC) servers beside Ember
  bool grpc = false;           // also over gRPC
  std::vector<int> sweep;      // throughput at these client counts, batching off and on
  uint32_t max_batch = 32;     // the batching copy's max_batch
  uint64_t queue_delay_us = 0;  // and its max_queue_delay_us
  bool tenants = false;         // the tenants' isolation phases (see the file comment)
  double tenant_rate = 100;     // the limited flooder's rate= ...
  uint32_t tenant_concurrent = 2;  // ... and concurrent=
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
  std::map<std::string, uint64_t> error_kinds;
  double seconds = 0;
  double p50() const { return percentile(latency_us, 0.5); }
  double p99() const { return percentile(latency_us, 0.99); }
  double rate() const { return seconds > 0 ? static_cast<double>(latency_us.size()) / seconds : 0; }
};

/// One client's way to send one request: "" when it was answered 200 / OK, else what went wrong.
using Send = std::function<std::string()>;
/// Makes a client (its own connection) for one driving thread.
using MakeClient = std::function<Send()>;

/// `clients` threads, each with its own client, send until `count` requests are done or `seconds`
/// pass. Each client's connection is made (one untimed request) before the clock starts, so that a
/// burst of new connections is not what is measured.
Phase drive(const MakeClient& make, int clients, double seconds, int64_t count) {
  Phase phase;
  std::vector<std::vector<double>> per_thread(static_cast<size_t>(clients));
  std::vector<std::map<std::string, uint64_t>> kinds(static_cast<size_t>(clients));
  std::atomic<uint64_t> errors{0};
  std::atomic<int64_t> left{count};
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<Send> senders;
  for (int c = 0; c < clients; ++c) senders.push_back(make());
  Clock::time_point deadline;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto& lat = per_thread[static_cast<size_t>(c)];
      auto& send = senders[static_cast<size_t>(c)];
      (void)send();  // connect
      ++ready;
      while (!go.load()) std::this_thread::yield();
      while (Clock::now() < deadline && left.fetch_sub(1) > 0) {
        const auto t0 = Clock::now();
        const std::string failed = send();
        const auto t1 = Clock::now();
        if (!failed.empty()) {
          ++errors;
          ++kinds[static_cast<size_t>(c)][failed];
          continue;
        }
        lat.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
    });
  }
  while (ready.load() < clients) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto start = Clock::now();
  deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  go = true;
  for (auto& t : threads) t.join();
  phase.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& v : per_thread) phase.latency_us.insert(phase.latency_us.end(), v.begin(), v.end());
  for (const auto& k : kinds) {
    for (const auto& [what, n] : k) phase.error_kinds[what] += n;
  }
  phase.errors = errors;
  return phase;
}

/// `polite`: a client that, answered 429, waits the Retry-After it was given before its next call.
MakeClient http_client(const std::string& host, int port, const std::string& path, const Encoded& body,
                       bool polite = false) {
  return [=, &body]() -> Send {
    auto client = std::make_shared<httplib::Client>(host, port);
    client->set_keep_alive(true);
    client->set_tcp_nodelay(
        true);  // headers and body go out as two writes: without this, Nagle meets delayed ACKs (40 ms)
    client->set_read_timeout(60, 0);
    return [client, path, &body, polite]() -> std::string {
      auto res = client->Post(path, body.headers, body.body, body.content_type);
      if (!res) return "HTTP: " + httplib::to_string(res.error());
      if (polite && res->status == 429) {
        std::this_thread::sleep_for(std::chrono::seconds(std::atoi(res->get_header_value("Retry-After").c_str())));
      }
      if (res->status != 200) return "HTTP " + std::to_string(res->status) + ": " + res->body.substr(0, 120);
      return "";
    };
  };
}

MakeClient grpc_client(const std::string& target, const inference::ModelInferRequest& req) {
  return [target, &req]() -> Send {
    grpc::ChannelArguments args;
    static std::atomic<int> next{0};
    args.SetInt("ember.bench.client", next++);  // a channel (and connection) of its own
    args.SetMaxReceiveMessageSize(-1);
    auto stub = inference::GRPCInferenceService::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
    return [stub = std::shared_ptr<inference::GRPCInferenceService::Stub>(std::move(stub)), &req]() -> std::string {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      inference::ModelInferResponse resp;
      const grpc::Status st = stub->ModelInfer(&ctx, req, &resp);
      return st.ok() ? "" : "gRPC " + std::to_string(st.error_code()) + ": " + st.error_message().substr(0, 120);
    };
  };
}

/// The floor over HTTP: cpp-httplib with the server's settings, decoding each request with Ember's
/// own parser and answering a fixed reply with Ember's own renderer.
class HttpFloor {
 public:
  HttpFloor(uint32_t threads, infer_reply canned, const std::string& model) : canned_(std::move(canned)) {
    server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server_.set_tcp_nodelay(true);
    server_.set_keep_alive_max_count(1'000'000);
    server_.Post("/v2/models/" + model + "/infer", [this](const httplib::Request& req, httplib::Response& res) {
      std::optional<uint64_t> json_bytes;
      if (req.has_header("Inference-Header-Content-Length")) {
        json_bytes = std::stoull(req.get_header_value("Inference-Header-Content-Length"));
      }
      auto parsed = parse_infer_http(req.body, json_bytes, canned_.model);
      if (!parsed.ok()) {
        res.status = 400;
        return res.set_content(render_error(parsed.error().message()), "application/json");
      }
      auto rendered = render_infer_http(canned_, *parsed);
      if (!rendered.ok()) {
        res.status = 500;
        return res.set_content(render_error(rendered.error().message()), "application/json");
      }
      if (!rendered->json_bytes) return res.set_content(rendered->body, "application/json");
      res.set_header("Inference-Header-Content-Length", std::to_string(*rendered->json_bytes));
      res.set_content(rendered->body, "application/octet-stream");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~HttpFloor() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  infer_reply canned_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

/// The floor over gRPC: gRPC's synchronous server, decoding each request with Ember's decoder and
/// answering a fixed reply with Ember's encoder.
class GrpcFloor final : public inference::GRPCInferenceService::Service {
 public:
  GrpcFloor(uint32_t threads, infer_reply canned) : canned_(std::move(canned)) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(this);
    b.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
    b.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
    b.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 8);
    grpc::ResourceQuota quota("floor");
    quota.SetMaxThreads(static_cast<int>(threads) + 4);
    b.SetResourceQuota(quota);
    server_ = b.BuildAndStart();
  }
  ~GrpcFloor() override { server_->Shutdown(); }
  int port() const { return port_; }
  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest* in,
                          inference::ModelInferResponse* out) override {
    auto decoded = decode_infer_request(*in);
    if (!decoded.ok()) return {grpc::StatusCode::INVALID_ARGUMENT, decoded.error().message()};
    auto encoded = encode_infer_reply(canned_, *decoded, *out);
    return encoded.ok() ? grpc::Status::OK : grpc::Status(grpc::StatusCode::INTERNAL, encoded.error().message());
  }

 private:
  infer_reply canned_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

inference::ModelInferRequest grpc_request(const std::string& model, const std::vector<gpu::HostTensor>& inputs) {
  inference::ModelInferRequest r;
  r.set_model_name(model);
  for (const auto& t : inputs) {
    auto* in = r.add_inputs();
    in->set_name(t.name);
    in->set_datatype(std::string(gpu::dtype_kserve_name(t.desc.dtype)));
    for (int i = 0; i < t.desc.shape.rank; ++i) in->add_shape(t.desc.shape[i]);
    r.add_raw_input_contents(reinterpret_cast<const char*>(t.data()), t.desc.bytes());
  }
  return r;
}

void print_errors(const Phase& p);

/// `e` with the bearer token `token`.
Encoded with_token(Encoded e, const std::string& token) {
  e.headers.emplace("Authorization", "Bearer " + token);
  return e;
}

/// The tokens file of --tenants, written to `path`.
void write_tenant_tokens(const std::string& path, const Options& o) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write " + path);
  std::fprintf(f, "bench-admin admin name=admin\nbench-victim infer name=victim\nbench-flood infer name=flood\n");
  std::fprintf(f, "bench-flood-limited infer rate=%g concurrent=%u name=flood-limited\n", o.tenant_rate,
               o.tenant_concurrent);
  std::fclose(f);
}

/// CPU seconds process `pid` used so far (user and system; 0 without a pid or /proc).
double cpu_seconds(pid_t pid) {
  if (pid <= 0) return 0;
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f) return 0;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');  // the command may hold spaces; the fields follow its ')'
  unsigned long long utime = 0, stime = 0;
  if (!p || std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2) return 0;
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

/// --tenants: the victim alone, then beside a flood without limits, then beside a limited one (a
/// flood that ignores 429 and one that waits as Retry-After says). `server`: the server's pid, for
/// its CPU (0: not measured).
void tenants(const std::string& host, int port, const std::string& path, const Encoded& body, const Options& o,
             pid_t server) {
  // http_client keeps a reference to its body: each lives until the phases end.
  const Encoded victim_body = with_token(body, "bench-victim"), open_body = with_token(body, "bench-flood"),
                limited_body = with_token(body, "bench-flood-limited");
  const MakeClient victim = http_client(host, port, path, victim_body);
  std::printf("tenants, HTTP JSON, %.1f s each: one victim client back to back; %d flooding clients "
              "(limited: rate=%g concurrent=%u)\n",
              o.seconds, o.clients, o.tenant_rate, o.tenant_concurrent);
  std::printf("  %-34s | %10s %10s %10s | %12s %12s | %11s %10s\n", "phase", "victim p50", "victim p99",
              "p99/alone", "flood ok/s", "flood 429/s", "server CPU", "victim err");
  drive(victim, 1, 0.5, INT64_MAX);  // warm
  double cpu = cpu_seconds(server);
  const Phase alone = drive(victim, 1, o.seconds, INT64_MAX);
  auto row = [&](const char* label, const Phase& v, const Phase* flood) {
    const double used = cpu_seconds(server) - cpu;
    uint64_t refused = 0;
    if (flood) {
      for (const auto& [what, n] : flood->error_kinds) {
        if (what.rfind("HTTP 429", 0) == 0) refused += n;
      }
    }
    std::printf("  %-34s | %10.1f %10.1f %10.2f | %12.0f %12.0f | %6.2f core %10llu\n", label, v.p50(), v.p99(),
                v.p99() / alone.p99(), flood ? flood->rate() : 0.0,
                flood ? static_cast<double>(refused) / flood->seconds : 0.0,
                server ? used / (flood ? flood->seconds : v.seconds) : 0.0, static_cast<unsigned long long>(v.errors));
  };
  row("victim alone", alone, nullptr);
  struct Flood {
    const char* label;
    const Encoded* body;
    bool polite;
  };
  for (const Flood& f : {Flood{"flood, no limits", &open_body, false},
                         Flood{"flood, limited, ignores 429", &limited_body, false},
                         Flood{"flood, limited, waits Retry-After", &limited_body, true}}) {
    const MakeClient flood = http_client(host, port, path, *f.body, f.polite);
    Phase flooded;
    cpu = cpu_seconds(server);
    std::thread flooder([&] { flooded = drive(flood, o.clients, o.seconds + 0.5, INT64_MAX); });
    std::this_thread::sleep_for(std::chrono::milliseconds(250));  // the flood runs before and after
    const Phase v = drive(victim, 1, o.seconds, INT64_MAX);
    flooder.join();
    row(f.label, v, &flooded);
    for (const auto& [what, n] : flooded.error_kinds) {
      if (what.rfind("HTTP 429", 0) != 0) std::printf("      flood: %llu x %s\n", static_cast<unsigned long long>(n), what.c_str());
    }
    print_errors(v);
  }
}

void print_errors(const Phase& p) {
  for (const auto& [what, n] : p.error_kinds)
    std::printf("      %llu x %s\n", static_cast<unsigned long long>(n), what.c_str());
}

void print_phase(const char* label, const Phase& p) {
  std::printf("  %-34s p50 %9.1f us   p99 %9.1f us   %8.0f req/s  (%zu requests, %llu errors)\n", label, p.p50(),
              p.p99(), p.rate(), p.latency_us.size(), static_cast<unsigned long long>(p.errors));
  print_errors(p);
}

/// The server's ember_swap_dispatches_total by kind (run, host, peer, inline), from /metrics.
using Dispatches = std::map<std::string, double>;
Dispatches dispatch_counts(const std::string& host, int port) {
  Dispatches out;
  httplib::Client c(host, port);
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) return out;
  std::istringstream lines(r->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("ember_swap_dispatches_total{", 0) != 0) continue;
    const auto kind = line.find("kind=\"");
    const auto quote = kind == std::string::npos ? kind : line.find('"', kind + 6);
    const auto space = line.rfind(' ');
    if (quote == std::string::npos || space == std::string::npos) continue;
    out[line.substr(kind + 6, quote - kind - 6)] += std::atof(line.c_str() + space + 1);
  }
  return out;
}

/// The share of requests between two readings that ran inline (on the front end's thread).
double inline_share(const Dispatches& before, const Dispatches& after) {
  double all = 0, inl = 0;
  for (const auto& [kind, n] : after) {
    const auto b = before.find(kind);
    const double d = n - (b == before.end() ? 0 : b->second);
    all += d;
    if (kind == "inline") inl += d;
  }
  return all > 0 ? inl / all : 0;
}

/// One protocol's two phases against Ember and, when given, its floor; the targets as ratios.
/// `dispatches` (when set) reads the server's dispatch counts: the share of runs taken inline prints.
void compare(const char* protocol, const MakeClient& ember, const MakeClient* floor, const Options& o, double exec_p50,
             const std::function<Dispatches()>& dispatches = {}) {
  drive(ember, o.clients, 1.0, INT64_MAX);  // warm-up
  const Dispatches d0 = dispatches ? dispatches() : Dispatches{};
  const Phase one = drive(ember, 1, 60, o.latency_requests);
  const Dispatches d1 = dispatches ? dispatches() : Dispatches{};
  const Phase many = drive(ember, o.clients, o.seconds, INT64_MAX);
  const Dispatches d2 = dispatches ? dispatches() : Dispatches{};
  std::printf("%s:\n", protocol);
  print_phase("Ember, 1 client", one);
  print_phase(("Ember, " + std::to_string(o.clients) + " clients").c_str(), many);
  if (dispatches) {
    std::printf("  runs on the front end's thread (inline): %.0f%% with 1 client, %.0f%% with %d\n",
                100 * inline_share(d0, d1), 100 * inline_share(d1, d2), o.clients);
  }
  std::printf("  runtime overhead at p50 (1 client minus executor): %.1f us\n", one.p50() - exec_p50);
  if (!floor) return;
  drive(*floor, o.clients, 0.5, INT64_MAX);
  const Phase f1 = drive(*floor, 1, 60, o.latency_requests);
  const Phase fn = drive(*floor, o.clients, o.seconds, INT64_MAX);
  print_phase("floor, 1 client", f1);
  print_phase(("floor, " + std::to_string(o.clients) + " clients").c_str(), fn);
  const double target = f1.p50() + exec_p50 + 30;
  std::printf(
      "  target 1: 1-client p50 <= floor p50 + executor p50 + 30 us = %.1f us: Ember %.1f us, ratio %.2f (%s)\n",
      target, one.p50(), one.p50() / target, one.p50() <= target ? "met" : "NOT met");
  std::printf("  target 2: %d-client throughput >= 0.8x the floor's: ratio %.2f (%s)\n", o.clients,
              many.rate() / fn.rate(), many.rate() >= 0.8 * fn.rate() ? "met" : "NOT met");
}

int run(const Options& o) {
  // The model, written to a temporary repository twice: as is, and asking for dynamic batching.
  const auto work = std::filesystem::temp_directory_path() / ("ember-load-" + std::to_string(::getpid()));
  const std::string name = "bench";
  const std::string batched = "bench_batched";
  std::shared_ptr<const gpu::Model> model;
  for (const std::string& n : {name, batched}) {
    auto builder = gpu::build_architecture(o.arch, {o.tiny, 1, n});
    if (!builder.ok()) throw std::runtime_error(builder.error().message());
    if (n == batched) {
      builder->serving().max_batch = o.max_batch;
      builder->serving().dynamic_batching = true;
      builder->serving().max_queue_delay_us = o.queue_delay_us;
    }
    const std::string dir = (work / n / "1").string();
    if (auto st = builder->write(dir); !st.ok()) throw std::runtime_error(st.error().message());
    auto loaded = gpu::Model::load(dir);
    if (!loaded.ok()) throw std::runtime_error(loaded.error().message());
    if (n == name) model = *loaded;
  }
  auto inputs = gpu::sample_model_inputs(*model, o.batch, 16, 3);
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
  auto ex = gpu::LayerExecutor::create(*device, model, {0, model->num_layers()});
  if (!ex.ok()) throw std::runtime_error(ex.error().message());
  std::vector<double> exec_us;
  std::vector<gpu::HostTensor> outputs;
  for (int i = 0; i < o.latency_requests; ++i) {
    const auto t0 = Clock::now();
    auto out = (*ex)->run_host(*inputs);
    exec_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    if (!out.ok()) throw std::runtime_error(out.error().message());
    if (i == 0) outputs = std::move(*out);
  }

  int clients_most = o.clients;
  for (int c : o.sweep) clients_most = std::max(clients_most, c);
  // A keep-alive connection holds an HTTP thread: enough threads for every client of the sweep.
  const uint32_t http_threads =
      std::max<uint32_t>(o.http_threads, static_cast<uint32_t>(clients_most) + (o.tenants ? 2 : 0));
  std::unique_ptr<Subprocess> server;
  std::string host = "127.0.0.1";
  int port = 0;
  int grpc_port = 0;
  if (o.url.empty()) {
    port = 20000 + static_cast<int>(::getpid() % 20000);
    grpc_port = port + 1;
    std::vector<std::string> argv{o.ember,
                                  "--log-level",
                                  "warn",
                                  "serve",
                                  "--repository",
                                  work.string(),
                                  "--http",
                                  host + ":" + std::to_string(port),
                                  "--http-threads",
                                  std::to_string(http_threads),
                                  "--threads",
                                  std::to_string(o.threads),
                                  "--device-memory",
                                  "1GiB",
                                  "--cache",
                                  "1GiB",
                                  "--device",
                                  o.device};
    if (o.grpc) {
      argv.insert(argv.end(),
                  {"--grpc", host + ":" + std::to_string(grpc_port), "--grpc-threads", std::to_string(http_threads)});
    }
    if (o.tenants) {
      const std::string tokens = (work / "api.tokens").string();
      write_tenant_tokens(tokens, o);
      argv.insert(argv.end(), {"--api-tokens-file", tokens});
    }
    server = std::make_unique<Subprocess>(argv);
  } else {
    auto pos = o.url.rfind(':');
    host = o.url.substr(o.url.find("//") + 2, pos - o.url.find("//") - 2);
    port = std::stoi(o.url.substr(pos + 1));
    grpc_port = port + 1;
  }
  httplib::Client admin(host, port);
  for (int i = 0; i < 100; ++i) {
    auto r = admin.Get("/v2/health/ready");
    if (r && r->status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (const std::string& n : {name, batched}) {
    if (n == batched && o.sweep.empty()) continue;
    httplib::Headers who;
    if (o.tenants) who.emplace("Authorization", "Bearer bench-admin");
    auto loaded = admin.Post("/v2/repository/models/" + n + "/load", who, "{}", "application/json");
    if (!loaded || loaded->status != 200) throw std::runtime_error("cannot load " + n + " on the server");
  }
  const std::string path = "/v2/models/" + name + "/infer";

  // The floor's fixed answer: the model's real outputs for this request.
  infer_reply canned;
  canned.model = {name, 1};
  canned.outputs = encode_tensors(outputs);
  std::unique_ptr<HttpFloor> http_floor;
  std::unique_ptr<GrpcFloor> grpc_floor;
  if (o.floor) {
    http_floor = std::make_unique<HttpFloor>(http_threads, canned, name);
    if (o.grpc) grpc_floor = std::make_unique<GrpcFloor>(http_threads, canned);
  }

  const double exec_p50 = percentile(exec_us, 0.5), exec_p99 = percentile(exec_us, 0.99);
  std::printf("model: %s%s batch %lld (%zu bytes of JSON per request), %u compute thread(s), %u HTTP threads\n",
              o.arch.c_str(), o.tiny ? " (tiny)" : "", static_cast<long long>(o.batch), body.body.size(), o.threads,
              http_threads);
  std::printf("device: %s\n", device->info().name.c_str());
  std::printf("executor alone:        p50 %8.1f us   p99 %8.1f us   (%d runs, in this process)\n", exec_p50, exec_p99,
              o.latency_requests);

  if (o.tenants) {
    tenants(host, port, path, body, o, server ? server->pid() : 0);
    if (server) server->terminate();
    server.reset();
    std::filesystem::remove_all(work);
    return 0;
  }
  const MakeClient ember_http = http_client(host, port, path, body);
  MakeClient floor_http;
  if (http_floor) floor_http = http_client("127.0.0.1", http_floor->port(), path, body);
  const auto dispatches = [host, port] { return dispatch_counts(host, port); };
  compare("HTTP, JSON tensors", ember_http, http_floor ? &floor_http : nullptr, o, exec_p50, dispatches);
  if (o.binary) {
    // One answer checked: binary out, where the header says.
    httplib::Client check(host, port);
    auto r = check.Post(path, binary.headers, binary.body, binary.content_type);
    if (!r || r->status != 200 || !r->has_header("Inference-Header-Content-Length")) {
      throw std::runtime_error(
          "the binary request was not answered in binary: " +
          (r ? std::to_string(r->status) + " " + r->body.substr(0, 200) : std::string("no answer")));
    }
    MakeClient floor_bin;
    if (http_floor) floor_bin = http_client("127.0.0.1", http_floor->port(), path, binary);
    compare("HTTP, binary tensors", http_client(host, port, path, binary), http_floor ? &floor_bin : nullptr, o,
            exec_p50, dispatches);
  }
  const inference::ModelInferRequest greq = grpc_request(name, *inputs);
  if (o.grpc) {
    MakeClient floor_grpc;
    if (grpc_floor) floor_grpc = grpc_client("127.0.0.1:" + std::to_string(grpc_floor->port()), greq);
    compare("gRPC, raw tensors", grpc_client(host + ":" + std::to_string(grpc_port), greq),
            grpc_floor ? &floor_grpc : nullptr, o, exec_p50, dispatches);
  }
  if (!o.sweep.empty()) {
    // Throughput by concurrency, batching off and on (same weights, same request), over HTTP.
    const std::string batched_path = "/v2/models/" + batched + "/infer";
    // With --binary the sweep sends binary tensors: what batching saves is then the model's work alone,
    // not hidden behind the JSON of large inputs.
    const Encoded& sweep_body = o.binary ? binary : body;
    std::printf("concurrency sweep, HTTP %s, %.1f s each (batching: max_batch %u, max_queue_delay_us %llu):\n",
                o.binary ? "binary tensors" : "JSON", o.seconds, o.max_batch,
                static_cast<unsigned long long>(o.queue_delay_us));
    std::printf("  %8s | %10s %10s %10s | %10s %10s %10s | %8s %8s\n", "clients", "off req/s", "off p50", "off p99",
                "on req/s", "on p50", "on p99", "on/off", "p99 on/off");
    for (int c : o.sweep) {
      const MakeClient off = http_client(host, port, path, sweep_body);
      const MakeClient on = http_client(host, port, batched_path, sweep_body);
      drive(on, c, 0.5, INT64_MAX);
      const Phase a = drive(off, c, o.seconds, INT64_MAX);
      const Phase b = drive(on, c, o.seconds, INT64_MAX);
      std::printf("  %8d | %10.0f %10.1f %10.1f | %10.0f %10.1f %10.1f | %8.2f %8.2f\n", c, a.rate(), a.p50(), a.p99(),
                  b.rate(), b.p50(), b.p99(), b.rate() / a.rate(), b.p99() / a.p99());
      if (a.errors) std::printf("    batching off: %llu errors\n", static_cast<unsigned long long>(a.errors));
      print_errors(a);
      if (b.errors) std::printf("    batching on: %llu errors\n", static_cast<unsigned long long>(b.errors));
      print_errors(b);
    }
  }
  http_floor.reset();
  grpc_floor.reset();
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
  app.add_flag("--floor", o.floor,
               "Also measure the bare HTTP (and with --grpc, gRPC) server in this process, with the targets as ratios");
  app.add_flag("--grpc", o.grpc, "Also measure KServe v2 over gRPC (raw tensor contents)");
  app.add_option("--sweep", o.sweep, "Throughput at these client counts, batching off and on, e.g. 1,8,32,128")
      ->delimiter(',');
  app.add_option("--max-batch", o.max_batch, "max_batch of the batching copy of the model (--sweep)");
  app.add_option("--queue-delay-us", o.queue_delay_us, "max_queue_delay_us of the batching copy (--sweep)");
  app.add_flag("--tenants", o.tenants,
               "Instead: one tenant's latency beside another's flood, without and with the flooder's token limited");
  app.add_option("--tenant-rate", o.tenant_rate, "The limited flooder's calls per second (--tenants)");
  app.add_option("--tenant-concurrent", o.tenant_concurrent, "The limited flooder's calls at once (--tenants)");
  CLI11_PARSE(app, argc, argv);
  try {
    return ember::bench::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "load_bench: %s\n", e.what());
    return 1;
  }
}
