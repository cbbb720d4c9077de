// shadow_bench: a Body with a Shadow against the Body alone, on running executors (AsyFunc's pair;
// gpu/shadow_split.hpp), side by side in one run. Not a test: it prints figures for a human to judge.
//
// It builds a full-size reference model, profiles it on the first of two simulated devices
// (batches 1, 2, 4 and the batch under test), asks the Shadow policy (placement/shadow_policy.hpp)
// which span of blocks a Shadow should hold and how to split the batch (or takes --layers), loads
// that span on the second device, and then alternates: the batch on the Body alone, the batch split
// with the Shadow. Per mode the median time a batch and rows per second; the policy's prediction
// beside the measurement; every split answer compared with the Body's own (relative 1e-5, the
// batch size's own effect): a wrong answer is counted, never ignored.
//
// The two simulated devices compute on the host's cores (`--threads` each): on this 2-core machine
// one thread each is what lets them run at once, as two GPUs would.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/tensor_compare.hpp"
#include "gpu/profiler.hpp"
#include "gpu/shadow_split.hpp"
#include "gpu/sim_device.hpp"
#include "model/architectures.hpp"
#include "model/model_profile.hpp"
#include "model/sample_inputs.hpp"
#include "placement/shadow_profile.hpp"

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct Options {
  std::string arch = "resnet50";
  uint32_t batch = 8;
  int rounds = 5;
  uint32_t threads = 1;
  double slo_ms = 0;   // 0: the Body alone's time at the batch, times 1.5
  std::string layers;  // "A:B": the Shadow's range instead of the policy's
  int64_t shadow_rows = 0;
  int64_t seq_len = 16;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class T>
T must(Result<T> r, const std::string& what) {
  if (!r.ok()) throw std::runtime_error(what + ": " + r.error().message());
  return std::move(*r);
}

int run(const Options& o) {
  const fs::path dir = fs::temp_directory_path() / ("ember-shadow-bench-" + o.arch);
  fs::remove_all(dir);
  auto builder = must(gpu::build_architecture(o.arch, {false, 1, {}}), "building " + o.arch);
  if (auto st = builder.write(dir.string()); !st.ok()) throw std::runtime_error(st.error().message());
  auto model = must(gpu::Model::load(dir.string()), "loading");
  SimDeviceConfig c;
  c.memory_bytes = 8ull << 30;
  c.compute_threads = o.threads;
  auto body_device = must(gpu::SimDevice::create(c, 0), "device 0");
  auto shadow_device = must(gpu::SimDevice::create(c, 1), "device 1");

  std::vector<uint32_t> batches{1, 2, 4};
  if (o.batch > 4) batches.push_back(o.batch);
  auto no_hash = [](const uint8_t*, uint64_t) { return std::string(64, '0'); };
  const auto profile = must(gpu::measure_profile(model, *body_device, batches, o.seq_len, no_hash), "profiling");
  const auto p = placement::shadow_profile(*model, profile);
  const double alone_us = placement::body_us(p, o.batch);
  const double slo_us = o.slo_ms > 0 ? o.slo_ms * 1000 : alone_us * 1.5;

  gpu::LayerRange range;
  placement::Split predicted;
  if (!o.layers.empty()) {
    const auto colon = o.layers.find(':');
    range = {static_cast<uint32_t>(std::stoul(o.layers.substr(0, colon))),
             static_cast<uint32_t>(std::stoul(o.layers.substr(colon + 1)))};
    // The policy's prediction when the range is made of whole blocks.
    size_t first = p.blocks.size(), last = p.blocks.size();
    for (size_t i = 0; i < p.blocks.size(); ++i) {
      if (p.blocks[i].first_layer == range.first) first = i;
      if (p.blocks[i].last_layer == range.last) last = i + 1;
    }
    if (first < last && last <= p.blocks.size()) predicted = placement::split_batch(p, first, last, o.batch);
  } else {
    auto choice = must(placement::choose_shadow(p, slo_us, o.batch), "choosing a Shadow");
    if (!choice) {
      std::printf("shadow_bench: the policy gives %s no Shadow at an SLO of %.1f ms\n", o.arch.c_str(), slo_us / 1000);
      return 0;
    }
    range = gpu::LayerRange{(*choice).first_layer, (*choice).last_layer};
    predicted = placement::split_batch(p, choice->first_block, choice->last_block, o.batch);
  }
  const int64_t shadow_rows =
      o.shadow_rows > 0 ? o.shadow_rows : (predicted.shadow_rows ? predicted.shadow_rows : o.batch / 2);

  auto body = must(gpu::LayerExecutor::create(*body_device, model, {0, model->num_layers()}), "the Body");
  std::unique_ptr<gpu::LayerExecutor> before, after;
  if (range.first > 0) before = must(gpu::LayerExecutor::view(*body, {0, range.first}), "a view");
  if (range.last < model->num_layers())
    after = must(gpu::LayerExecutor::view(*body, {range.last, model->num_layers()}), "a view");
  auto inside = must(gpu::LayerExecutor::view(*body, range), "a view");
  const auto load_start = Clock::now();
  auto shadow = must(gpu::LayerExecutor::create(*shadow_device, model, range), "the Shadow");
  const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - load_start).count();

  const auto inputs = must(gpu::sample_model_inputs(*model, o.batch, o.seq_len, 7), "inputs");
  auto stream = body_device->create_stream();
  const auto want = must(body->run_host(inputs), "the Body alone");
  std::printf(
      "shadow_bench: %s, batch %u, %u compute thread(s) a device; the Shadow holds layers [%u, %u) (%.1f of %.1f "
      "MiB), loaded in %.1f ms; %lld of %u rows on it; %d rounds, medians\n",
      o.arch.c_str(), o.batch, o.threads, range.first, range.last,
      static_cast<double>(model->range_bytes(range).length) / (1 << 20),
      static_cast<double>(model->range_bytes({0, model->num_layers()}).length) / (1 << 20), load_ms,
      static_cast<long long>(shadow_rows), o.batch, o.rounds);
  std::vector<double> alone, split;
  int wrong = 0;
  for (int r = 0; r < o.rounds; ++r) {
    auto t0 = Clock::now();
    auto got = must(body->run_host(inputs), "the Body alone");
    alone.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (max_relative_error(got, want) > 1e-5) ++wrong;
    t0 = Clock::now();
    auto in = must(body->upload_inputs(inputs, *stream), "uploading");
    gpu::SplitStats st;
    auto out = must(gpu::run_split({before.get(), inside.get(), shadow.get(), after.get()}, in, shadow_rows, &st),
                    "the split");
    auto host = must(gpu::download(*stream, out, model->graph().value_names), "downloading");
    split.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (st.shadow_failed || max_relative_error(host, want) > 1e-5) ++wrong;
  }
  std::printf("%-22s %12s %12s %12s\n", "mode", "ms a batch", "rows/s", "policy's ms");
  std::printf("%-22s %12.1f %12.1f %12.1f\n", "Body alone", median(alone), o.batch * 1000 / median(alone),
              alone_us / 1000);
  std::printf("%-22s %12.1f %12.1f %12.1f\n", "Body + Shadow", median(split), o.batch * 1000 / median(split),
              predicted.latency_us / 1000);
  std::printf("split / alone %.2f (policy %.2f); wrong answers %d\n", median(split) / median(alone),
              predicted.latency_us > 0 ? predicted.latency_us / alone_us : 0.0, wrong);
  fs::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  ember::bench::Options o;
  CLI::App app{"A Body with a Shadow against the Body alone, on running executors"};
  app.add_option("--arch", o.arch, "Reference architecture (full size)");
  app.add_option("--batch", o.batch, "Rows a batch")->check(CLI::Range(2, 256));
  app.add_option("--rounds", o.rounds, "Alternating rounds (medians reported)")->check(CLI::Range(1, 1000));
  app.add_option("--threads", o.threads, "Compute threads of each simulated device")->check(CLI::Range(1, 64));
  app.add_option("--slo-ms", o.slo_ms, "The SLO the policy chooses for (0: 1.5x the Body alone)");
  app.add_option("--layers", o.layers, "The Shadow's layers A:B instead of the policy's");
  app.add_option("--shadow-rows", o.shadow_rows, "Rows on the Shadow (0: the policy's split)");
  CLI11_PARSE(app, argc, argv);
  try {
    return ember::bench::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shadow_bench: %s\n", e.what());
    return 1;
  }
}
