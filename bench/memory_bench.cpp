// memory_bench: the device memory N functions need as streams of one engine (Ember: one executor
// per device, their runs beside each other, activations from one shared pool) against N engines,
// one per function (a runtime per function, as serverless platforms without StreamBox run them),
// measured on simulated devices, side by side in one run.
//
// Functions cycle through three MLP families (different widths and depths) at 64 rows a request.
// For the one engine: all N models resident on one device, then `--rounds` bursts in which every
// function sends one request at once; for N engines: each function alone on a device of its own,
// the same requests. The figure per setup is the weights' pool footprint (whole partitions, as an
// executor places them) plus the most device memory its runs held at once beyond the weights
// (inputs, intermediates, outputs: SimDevice::peak_used_bytes). A per-function runtime on a GPU also
// pays a CUDA context (hundreds of MiB each), which the simulation does not have: left out, so the
// ratio printed is a lower bound of the saving. Every answer is compared with the model's warm run.
// Not a test: it prints figures for a human to judge.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "actors/node/engine/executor_engine.hpp"
#include "base/units.hpp"
#include "gpu/sim_device.hpp"
#include "model/model_builder.hpp"
#include "model/sample_inputs.hpp"

namespace ember::bench {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kMiB = 1ull << 20;

struct Options {
  std::vector<uint32_t> ns = {1, 2, 4, 8};
  int rounds = 5;
  double spread_ms = 0;  // each round's requests at random offsets within this (0: all at once)
  int64_t rows = 64;
  uint32_t threads = 1;
};

std::shared_ptr<const gpu::Model> write_mlp(const fs::path& dir, int family, uint64_t seed) {
  static const std::vector<std::vector<int64_t>> kWidths = {
      {1024, 2048, 2048, 1024}, {512, 1024, 1024, 1024, 1024, 512}, {2048, 1024, 256}};
  const auto& w = kWidths[static_cast<size_t>(family)];
  gpu::ModelBuilder b("f" + std::to_string(seed), seed);
  std::string x = b.input("input", gpu::DType::f32, {-1, w[0]});
  for (size_t i = 1; i < w.size(); ++i) {
    gpu::LayerAttrs a;
    a.in_features = w[i - 1];
    a.out_features = w[i];
    a.bias = true;
    x = b.add("fc" + std::to_string(i), gpu::OpKind::linear, a, {x});
    x = b.add("relu" + std::to_string(i), gpu::OpKind::relu, {}, {x});
  }
  b.output(x, gpu::DType::f32, {-1, w.back()});
  if (auto st = b.write(dir.string()); !st.ok()) throw std::runtime_error(st.error().message());
  auto m = gpu::Model::load(dir.string());
  if (!m.ok()) throw std::runtime_error(m.error().message());
  return *m;
}

struct Device {
  gpu::SimDevice* sim = nullptr;
  std::unique_ptr<ExecutorEngine> engine;
};

Device open_engine(uint64_t memory, uint32_t streams, uint32_t threads) {
  SimDeviceConfig c;
  c.memory_bytes = memory;
  c.compute_threads = threads;
  auto d = gpu::SimDevice::create(c, 0);
  if (!d.ok()) throw std::runtime_error(d.error().message());
  Device out;
  out.sim = d->get();
  // The workspace the smallest an engine takes (it grows into the pool under load), groups fixed.
  auto e = ExecutorEngine::create(std::move(*d), EngineOptions{1024, 1 * kMiB, 1 * kMiB, streams});
  if (!e.ok()) throw std::runtime_error(e.error().message());
  out.engine = std::move(*e);
  return out;
}

SwapRun request(size_t function, std::shared_ptr<const gpu::Model> model, std::vector<gpu::HostTensor> inputs) {
  SwapRun r;
  r.key = model_key{"f" + std::to_string(function), 1};
  r.model = std::move(model);
  r.inputs = std::move(inputs);
  return r;
}

ExecutorEngine::SwapRunResult run(ExecutorEngine& e, SwapRun r) {
  std::promise<ExecutorEngine::SwapRunResult> p;
  if (!e.swap_run(std::move(r), [&](ExecutorEngine::SwapRunResult x) { p.set_value(std::move(x)); })) {
    throw std::runtime_error("the engine's queue is full");
  }
  return p.get_future().get();
}

struct Figures {
  uint64_t weights = 0, runs = 0;
  int wrong = 0;
};

/// Loads `models` on `dev` (one warm request each), then `rounds` bursts of one request per model
/// at once; the weights' footprint and the peak beyond it.
Figures measure(Device& dev, const std::vector<std::shared_ptr<const gpu::Model>>& models, size_t first,
                const std::vector<std::vector<gpu::HostTensor>>& inputs,
                const std::vector<std::vector<gpu::HostTensor>>& want, int rounds, double spread_ms) {
  Figures f;
  const uint64_t pool_free = dev.engine->engine_memory().pool_free;
  for (size_t i = 0; i < models.size(); ++i) {
    auto r = run(*dev.engine, request(first + i, models[i], inputs[i]));
    if (!r.run.outputs.ok()) throw std::runtime_error(r.run.outputs.error().message());
  }
  f.weights = pool_free - dev.engine->engine_memory().pool_free;
  const uint64_t base = dev.sim->memory().used_bytes;  // the pool's reservation and the engine's own
  dev.sim->reset_peak();
  for (int k = 0; k < rounds; ++k) {
    std::vector<std::promise<ExecutorEngine::SwapRunResult>> done(models.size());
    std::vector<std::thread> senders;
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < models.size(); ++i) {
      // The same offsets for a function whichever setup serves it.
      std::mt19937_64 rng((first + i) * 1000 + static_cast<uint64_t>(k));
      const double at_ms = std::uniform_real_distribution<double>(0, spread_ms)(rng);
      senders.emplace_back([&, i, at_ms] {
        std::this_thread::sleep_until(start + std::chrono::microseconds(static_cast<int64_t>(at_ms * 1000)));
        if (!dev.engine->swap_run(request(first + i, models[i], inputs[i]),
                                  [&, i](ExecutorEngine::SwapRunResult r) { done[i].set_value(std::move(r)); })) {
          done[i].set_value(ExecutorEngine::SwapRunResult{});
        }
      });
    }
    for (auto& t : senders) t.join();
    for (size_t i = 0; i < models.size(); ++i) {
      auto r = done[i].get_future().get();
      if (!r.run.outputs.ok()) throw std::runtime_error(r.run.outputs.error().message());
      const auto& got = (*r.run.outputs)[0];
      const auto& exp = want[i][0];
      if (got.desc.bytes() != exp.desc.bytes() || std::memcmp(got.data(), exp.data(), exp.desc.bytes()) != 0) ++f.wrong;
    }
  }
  // Beyond the reservation, and what the pool lent to activations at the peak.
  f.runs = dev.sim->peak_used_bytes() - base + dev.engine->activation_stats().peak_reserved_bytes;
  return f;
}

int run_bench(const Options& o) {
  const fs::path dir = fs::temp_directory_path() / ("ember-memory-bench-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const uint32_t most = *std::max_element(o.ns.begin(), o.ns.end());
  std::vector<std::shared_ptr<const gpu::Model>> models;
  std::vector<std::vector<gpu::HostTensor>> inputs, want;
  for (uint32_t i = 0; i < most; ++i) {
    models.push_back(write_mlp(dir / ("f" + std::to_string(i)), static_cast<int>(i % 3), i + 1));
    auto in = gpu::sample_model_inputs(*models.back(), o.rows, 1, 100 + i);
    if (!in.ok()) throw std::runtime_error(in.error().message());
    inputs.push_back(std::move(*in));
  }
  {  // The answers, each model warm and alone.
    Device ref = open_engine(512 * kMiB, 1, o.threads);
    for (uint32_t i = 0; i < most; ++i) {
      auto r = run(*ref.engine, request(i, models[i], inputs[i]));
      if (!r.run.outputs.ok()) throw std::runtime_error(r.run.outputs.error().message());
      want.push_back(std::move(*r.run.outputs));
      ref.engine->unbind(model_key{"f" + std::to_string(i), 1}, [] {});
    }
  }
  std::printf(
      "memory_bench: functions cycling through three MLPs (%s), %lld rows a request, %d rounds of one request "
      "per function (%s); device memory = weights (pool partitions) + the most the runs held at once\n",
      "1024-2048-2048-1024, 512-1024x4-512, 2048-1024-256", static_cast<long long>(o.rows), o.rounds,
      o.spread_ms > 0 ? ("at random offsets within " + std::to_string(o.spread_ms) + " ms").c_str() : "all at once");
  std::printf("%3s %-22s %12s %12s %12s %7s %7s\n", "N", "setup", "weights", "runs", "total", "ratio", "wrong");
  for (uint32_t n : o.ns) {
    std::vector<std::shared_ptr<const gpu::Model>> ms(models.begin(), models.begin() + n);
    std::vector<std::vector<gpu::HostTensor>> in(inputs.begin(), inputs.begin() + n), w(want.begin(), want.begin() + n);
    Device one = open_engine(1024 * kMiB, std::max<uint32_t>(n, 1), o.threads);
    Figures shared = measure(one, ms, 0, in, w, o.rounds, o.spread_ms);
    Figures apart;
    for (uint32_t i = 0; i < n; ++i) {
      Device own = open_engine(1024 * kMiB, 1, o.threads);  // the same pool geometry as the one engine
      Figures f = measure(own, {ms[i]}, i, {in[i]}, {w[i]}, o.rounds, o.spread_ms);
      apart.weights += f.weights;
      apart.runs += f.runs;
      apart.wrong += f.wrong;
    }
    const uint64_t a = shared.weights + shared.runs, b = apart.weights + apart.runs;
    std::printf("%3u %-22s %12s %12s %12s %7s %7d\n", n, "one engine, streams", format_bytes(shared.weights).c_str(),
                format_bytes(shared.runs).c_str(), format_bytes(a).c_str(), "", shared.wrong);
    std::printf("%3u %-22s %12s %12s %12s %7.2f %7d\n", n, "an engine per function",
                format_bytes(apart.weights).c_str(), format_bytes(apart.runs).c_str(), format_bytes(b).c_str(),
                static_cast<double>(a) / static_cast<double>(b), apart.wrong);
  }
  fs::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  ember::bench::Options o;
  CLI::App app{"Device memory of N functions as streams of one engine against an engine per function"};
  app.add_option("--n", o.ns, "Function counts")->delimiter(',');
  app.add_option("--rounds", o.rounds, "Bursts per setup");
  app.add_option("--rows", o.rows, "Rows per request");
  app.add_option("--spread-ms", o.spread_ms, "A round's requests at random offsets within this (0: all at once)");
  app.add_option("--threads", o.threads, "Compute threads per simulated device");
  CLI11_PARSE(app, argc, argv);
  try {
    return ember::bench::run_bench(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memory_bench: %s\n", e.what());
    return 1;
  }
}
