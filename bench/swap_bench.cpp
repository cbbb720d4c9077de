// swap_bench: the swap-in breakdown of late binding (Torpor §4.3), on one simulated device whose
// host->device copy engine runs at a configured PCIe bandwidth (default 16 GB/s, PCIe 3 x16).
// Not a test: it prints figures.
//
// For each model, in one run: the warm latency (weights resident), then a cold request served by
//   whole    copy every weight, wait, then execute            (SwapInOptions{0})
//   layer    pipelined: each layer runs once its own bytes arrived (SwapInOptions{1})
//   grouped  pipelined in groups at the copy-throughput elbow  (SwapInOptions{elbow})
// each as a ratio to warm (median of --repeat cold starts; every cold start uses a fresh executor).
// The elbow is measured first: the smallest copy size whose throughput reaches 90% of the best
// size's. SimDevice treats all host memory as pinned (its copy engine paces every copy at
// the configured bandwidth), so "+ pinned staging" would print the same figure as "whole" and is
// not a row of its own here.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "config/units.hpp"
#include "gpu/architectures.hpp"
#include "gpu/executor.hpp"
#include "gpu/host_buffer.hpp"
#include "gpu/model.hpp"
#include "gpu/sample_inputs.hpp"
#include "gpu/sim_device.hpp"

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Smallest copy size (power of two from 64 KiB) reaching 90% of the best throughput measured.
uint64_t measure_elbow(gpu::Device& device, std::vector<std::pair<uint64_t, double>>& curve) {
  const uint64_t largest = 64ull << 20;
  auto host = gpu::HostBuffer::allocate(largest);
  auto dev = gpu::DeviceBuffer::allocate(device, largest);
  if (!host.ok() || !dev.ok()) return 2ull << 20;
  auto stream = device.create_stream();
  for (uint64_t size = 64 << 10; size <= largest; size *= 2) {
    const uint64_t copies = std::max<uint64_t>(1, (256ull << 20) / size);
    const auto t0 = Clock::now();
    for (uint64_t i = 0; i < copies; ++i) stream->copy_to_device((*dev)->ptr(), (*host)->data(), size);
    (void)stream->synchronize();
    curve.push_back({size, static_cast<double>(size * copies) / (ms_since(t0) / 1e3) / 1e9});
  }
  double peak = 0;
  for (const auto& [size, gbps] : curve) peak = std::max(peak, gbps);
  for (const auto& [size, gbps] : curve)
    if (gbps >= 0.9 * peak) return size;
  return largest;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Swap-in breakdown: warm vs whole-copy vs pipelined swap-in on a simulated device"};
  std::string models_dir = "bench-models";
  std::vector<std::string> archs = {"resnet50", "bert-base", "gpt2"};
  std::string bandwidth = "16GB/s";
  uint32_t threads = 0, repeat = 5;
  int64_t batch = 1, seq_len = 128;
  app.add_option("--models", models_dir, "Where the models are written (reused between runs)");
  app.add_option("--arch", archs, "Architectures")->delimiter(',');
  app.add_option("--pcie", bandwidth, "Host->device bandwidth of the simulated device, e.g. 16GB/s");
  app.add_option("--threads", threads, "Compute threads (0: all cores)");
  app.add_option("--repeat", repeat, "Cold starts per variant (median)")->check(CLI::Range(1, 100));
  app.add_option("--batch", batch, "Batch size");
  app.add_option("--seq-len", seq_len, "Sequence length (bert, gpt2)");
  CLI11_PARSE(app, argc, argv);

  auto bw = parse_bandwidth(bandwidth);
  if (!bw.ok()) {
    std::fprintf(stderr, "--pcie: %s\n", bw.error().message().c_str());
    return 2;
  }
  SimDeviceConfig dc;
  dc.memory_bytes = 4ull << 30;
  dc.compute_threads = threads;
  dc.pcie_bytes_per_s = *bw;
  auto device = gpu::SimDevice::create(dc, 0);
  if (!device.ok()) {
    std::fprintf(stderr, "%s\n", device.error().message().c_str());
    return 1;
  }
  std::vector<std::pair<uint64_t, double>> curve;
  const uint64_t elbow = measure_elbow(**device, curve);
  std::printf("# simulated device, host->device %s, %u compute thread(s); copy throughput by size:\n",
              bandwidth.c_str(), (*device)->compute_threads());
  for (const auto& [size, gbps] : curve) std::printf("#   %8s  %.2f GB/s\n", format_bytes(size).c_str(), gbps);
  std::printf("# elbow (smallest size at 90%% of the best throughput): %s\n\n", format_bytes(elbow).c_str());
  std::printf("| model | weights | warm ms | whole copy, then run | pipelined per layer | grouped at %s |\n",
              format_bytes(elbow).c_str());
  std::printf("|---|---|---|---|---|---|\n");

  for (const auto& arch : archs) {
    const std::string dir = models_dir + "/" + arch + "/1";
    if (!std::filesystem::exists(dir + "/weights.safetensors")) {
      auto builder = gpu::build_architecture(arch, {false, 1, {}});
      if (!builder.ok() || !builder->write(dir).ok()) {
        std::fprintf(stderr, "cannot write %s\n", dir.c_str());
        return 1;
      }
    }
    auto model = gpu::Model::load(dir);
    if (!model.ok()) {
      std::fprintf(stderr, "%s\n", model.error().message().c_str());
      return 1;
    }
    std::shared_ptr<const gpu::Model> m = std::move(*model);
    auto inputs = gpu::sample_model_inputs(*m, batch, seq_len, 7);
    if (!inputs.ok()) {
      std::fprintf(stderr, "%s\n", inputs.error().message().c_str());
      return 1;
    }
    const gpu::LayerRange all{0, m->num_layers()};
    std::vector<double> warm;
    {
      auto ex = gpu::LayerExecutor::create(**device, m, all);
      if (!ex.ok()) {
        std::fprintf(stderr, "%s\n", ex.error().message().c_str());
        return 1;
      }
      (void)(*ex)->run_host(*inputs);  // plans and first-touch costs out of the figures
      for (uint32_t i = 0; i < repeat; ++i) {
        const auto t0 = Clock::now();
        (void)(*ex)->run_host(*inputs);
        warm.push_back(ms_since(t0));
      }
    }
    auto cold = [&](uint64_t group) {
      std::vector<double> t;
      for (uint32_t i = 0; i < repeat; ++i) {
        const auto t0 = Clock::now();
        auto ex = gpu::LayerExecutor::swap_in(**device, m, all, gpu::SwapInOptions{group});
        if (!ex.ok() || !(*ex)->run_host(*inputs).ok()) return -1.0;
        t.push_back(ms_since(t0));
      }
      return median(t);
    };
    const double w = median(warm);
    const double whole = cold(0), layer = cold(1), grouped = cold(elbow);
    std::printf("| %s | %s | %.1f | %.1f ms (%.2fx) | %.1f ms (%.2fx) | %.1f ms (%.2fx) |\n", arch.c_str(),
                format_bytes(m->range_bytes(all).length).c_str(), w, whole, whole / w, layer, layer / w, grouped,
                grouped / w);
    std::fflush(stdout);
  }
  return 0;
}
