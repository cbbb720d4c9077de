// swap_bench: the swap-in breakdown of late binding (Torpor §4.3), on one simulated device whose
// host->device copy engine runs at a configured PCIe bandwidth (default 16 GB/s, PCIe 3 x16;
// pageable host memory at half of it, as drivers stage such copies). Not a test: it prints figures.
//
// For each model, in one run: the warm latency (weights resident), then a cold request served by
//   whole     copy every weight from pageable host memory, wait, then execute
//   +pinned   the same from pinned (registered) host memory
//   +layer    pinned, pipelined: each layer runs once its own bytes arrived (SwapInOptions{1}; both
//             pipelined swaps through the device's I/O scheduler, as executors' are)
//   +grouped  pinned, pipelined in groups at the copy-throughput elbow (what Ember's executors do)
// each as a ratio to warm (median of --repeat cold starts; every cold start uses a fresh executor).
// With --dtype fp32,fp16 (or bf16) each model runs at each width of its weights (converted as
// `ember model convert` does) and a last table gives each width's bytes and cold starts against
// fp32's: half the bytes to copy, and on a simulated device the CPU kernels' cost of widening
// half-precision weights in every run (a GPU computes from them directly).
// The elbow is measured first (gpu/copy_elbow.hpp, as executors do at start).
//
// Then a model of the grouped pipeline from the measured per-layer compute times: group g arrives
// at (bytes up to its end) / bandwidth, layer l starts when layer l-1 ended and its group arrived.
// Printed at the emulated bandwidth (to check the model against the measurement) and at PCIe 4
// x16 (25 GB/s), and with the compute times divided by --gpu-speedup (how much faster a GPU runs
// these layers than this host's CPU: an assumption, stated as such).
//
// `--device cuda` runs the same on GPU 0 through the CUDA plugin: real copies over the card's own
// link (--pcie does not apply; "model at" uses the best throughput the elbow probe measured), real
// kernels, and the GPU-speedup columns are left out, since the compute times are the GPU's own.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "base/units.hpp"
#include "gpu/copy_elbow.hpp"
#include "gpu/device_registry.hpp"
#include "gpu/executor.hpp"
#include "gpu/io_scheduler.hpp"
#include "gpu/sim_device.hpp"
#include "model/architectures.hpp"
#include "model/convert.hpp"
#include "model/host_buffer.hpp"
#include "model/model.hpp"
#include "model/sample_inputs.hpp"

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// The grouped pipeline's latency, modelled: copies back to back at `bytes_per_s`, each layer after
/// the previous one and after its group arrived (groups of whole layers, as LayerExecutor::swap_in).
double model_pipeline(const gpu::Model& m, const std::vector<double>& layer_us, uint64_t group, double bytes_per_s,
                      double speedup) {
  double now = 0, copied = 0;
  uint64_t start = m.range_bytes({0, m.num_layers()}).offset;
  std::vector<double> arrival(m.num_layers(), 0);
  std::vector<uint32_t> pending;  // layers of the group in progress
  for (uint32_t l = 0; l < m.num_layers(); ++l) {
    const auto r = m.range_bytes({l, l + 1});
    pending.push_back(l);
    if (r.length > 0 && r.offset + r.length - start >= group) {
      copied += static_cast<double>(r.offset + r.length - start);
      for (uint32_t p : pending) arrival[p] = copied / bytes_per_s * 1e6;
      pending.clear();
      start = r.offset + r.length;
    }
  }
  copied = static_cast<double>(m.data_bytes());
  for (uint32_t p : pending) arrival[p] = copied / bytes_per_s * 1e6;
  for (uint32_t l = 0; l < m.num_layers(); ++l) now = std::max(now, arrival[l]) + layer_us[l] / speedup;
  return now / 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Swap-in breakdown: warm vs whole-copy vs pipelined swap-in on a simulated device"};
  std::string models_dir = "bench-models";
  std::vector<std::string> archs = {"resnet50", "bert-base", "gpt2"};
  std::string bandwidth = "16GB/s";
  uint32_t threads = 0, repeat = 5;
  double gpu_speedup = 30;
  int64_t batch = 1, seq_len = 128;
  std::string device_kind = "sim";
  std::vector<std::string> dtypes = {"fp32"};
  app.add_option("--models", models_dir, "Where the models are written (reused between runs)");
  app.add_option("--arch", archs, "Architectures")->delimiter(',');
  app.add_option("--pcie", bandwidth, "Host->device bandwidth of the simulated device, e.g. 16GB/s");
  app.add_option("--threads", threads, "Compute threads (0: all cores)");
  app.add_option("--repeat", repeat, "Cold starts per variant (median)")->check(CLI::Range(1, 100));
  app.add_option("--batch", batch, "Batch size");
  app.add_option("--seq-len", seq_len, "Sequence length (bert, gpt2)");
  app.add_option("--gpu-speedup", gpu_speedup, "For the model: how much faster a GPU computes than this CPU");
  app.add_option("--device", device_kind, "sim (a simulated device paced at --pcie) or cuda (GPU 0)")
      ->check(CLI::IsMember({"sim", "cuda"}));
  app.add_option("--dtype", dtypes,
                 "Widths of the weights, each model at each (fp32, fp16, bf16; `ember model convert`), e.g. "
                 "fp32,fp16: a last table compares every width with fp32")
      ->delimiter(',')
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  CLI11_PARSE(app, argc, argv);

  auto bw = parse_bandwidth(bandwidth);
  if (!bw.ok()) {
    std::fprintf(stderr, "--pcie: %s\n", bw.error().message().c_str());
    return 2;
  }
  const bool cuda = device_kind == "cuda";
  Result<std::unique_ptr<gpu::Device>> device = internal_error("no device");
  uint32_t sim_threads = 0;
  if (cuda) {
    DevicesConfig dc;
    dc.kind = DeviceKind::cuda;
    auto opened = gpu::open_devices(dc);
    if (opened.ok()) {
      device = std::move(opened->devices.front());
    } else {
      device = opened.error();
    }
  } else {
    SimDeviceConfig dc;
    dc.memory_bytes = 4ull << 30;
    dc.compute_threads = threads;
    dc.pcie_bytes_per_s = *bw;
    dc.populate = true;  // no first-touch page faults charged to copies (a GPU has none)
    auto sim = gpu::SimDevice::create(dc, 0);
    if (sim.ok()) {
      sim_threads = (*sim)->compute_threads();
      device = std::unique_ptr<gpu::Device>(std::move(*sim));
    } else {
      device = sim.error();
    }
  }
  if (!device.ok()) {
    std::fprintf(stderr, "%s\n", device.error().message().c_str());
    return 1;
  }
  Result<gpu::CopyElbow> probe = internal_error("no device memory for the elbow probe");
  {
    auto scratch = gpu::DeviceBuffer::allocate(**device, 64ull << 20);
    if (scratch.ok()) probe = gpu::measure_copy_elbow(**device, (*scratch)->ptr(), 64ull << 20);
  }
  if (!probe.ok()) {
    std::fprintf(stderr, "%s\n", probe.error().message().c_str());
    return 1;
  }
  const uint64_t elbow = probe->elbow_bytes;
  const auto& curve = probe->curve;
  double best_gbps = 0;
  for (const auto& [size, gbps] : curve) best_gbps = std::max(best_gbps, gbps);
  if (cuda) {
    bandwidth = std::to_string(static_cast<int>(best_gbps + 0.5)) + " GB/s";
    *bw = best_gbps * 1e9;
    std::printf("# %s; copy throughput by size:\n", (*device)->info().name.c_str());
  } else {
    std::printf("# simulated device, host->device %s, %u compute thread(s); copy throughput by size:\n",
                bandwidth.c_str(), sim_threads);
  }
  for (const auto& [size, gbps] : curve) std::printf("#   %8s  %.2f GB/s\n", format_bytes(size).c_str(), gbps);
  std::printf("# elbow (smallest size at 90%% of the best throughput): %s\n\n", format_bytes(elbow).c_str());
  if (cuda) {
    std::printf(
        "| model | weights | warm ms | whole copy (pageable), then run | + pinned | + pipelined per layer | "
        "+ grouped at %s | model at %s |\n|---|---|---|---|---|---|---|---|\n",
        format_bytes(elbow).c_str(), bandwidth.c_str());
  } else {
    std::printf(
        "| model | weights | warm ms | whole copy (pageable), then run | + pinned | + pipelined per layer | "
        "+ grouped at %s | model at %s | model at 25 GB/s | model at 25 GB/s, GPU %.0fx |\n",
        format_bytes(elbow).c_str(), bandwidth.c_str(), gpu_speedup);
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  }

  // Per model and width: weight bytes, whole-copy (pinned) and grouped cold starts, for the last table.
  struct WidthRow {
    std::string arch, dtype;
    uint64_t bytes = 0;
    double warm = 0, pinned = 0, grouped = 0;
  };
  std::vector<WidthRow> widths;
  for (const auto& arch : archs) {
    for (const auto& dtype : dtypes) {
      const std::string base = models_dir + "/" + arch + "/1";
      if (!std::filesystem::exists(base + "/weights.safetensors")) {
        auto builder = gpu::build_architecture(arch, {false, 1, {}});
        if (!builder.ok() || !builder->write(base).ok()) {
          std::fprintf(stderr, "cannot write %s\n", base.c_str());
          return 1;
        }
      }
      const std::string dir = dtype == "fp32" ? base : models_dir + "/" + arch + "-" + dtype + "/1";
      if (!std::filesystem::exists(dir + "/weights.safetensors")) {
        auto converted = gpu::convert_model_dir(base, dir, dtype == "fp16" ? gpu::DType::f16 : gpu::DType::bf16);
        if (!converted.ok()) {
          std::fprintf(stderr, "%s\n", converted.error().message().c_str());
          return 1;
        }
      }
      const std::string label = dtypes.size() > 1 ? arch + " " + dtype : arch;
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
      std::vector<double> warm, layer_us;
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
        (*ex)->set_profiling(true);
        (void)(*ex)->run_host(*inputs);
        layer_us = (*ex)->last_layer_us();
      }
      // Pipelined swaps go through the device's I/O scheduler, as an executor's do: the copy engine
      // serves commands in issue order, so a run's input issued after every group would wait for all.
      gpu::IoScheduler io(**device, {elbow, 6});
      auto cold = [&](uint64_t group) {
        std::vector<double> t;
        for (uint32_t i = 0; i < repeat; ++i) {
          const auto t0 = Clock::now();
          auto ex = gpu::LayerExecutor::swap_in(**device, m, all,
                                                gpu::SwapInOptions{group, {}, nullptr, group ? &io : nullptr});
          if (!ex.ok() || !(*ex)->run_host(*inputs).ok()) return -1.0;
          t.push_back(ms_since(t0));
        }
        return median(t);
      };
      const double w = median(warm);
      const double pageable = cold(0);
      if (!(*device)->register_host(m->data(), m->data_bytes()).ok()) return 1;
      const double pinned = cold(0), layer = cold(1), grouped = cold(elbow);
      (*device)->unregister_host(m->data());
      double profiled = 0;
      for (double us : layer_us) profiled += us;
      const double at_emulated = model_pipeline(*m, layer_us, elbow, *bw, 1);
      const double at_pcie4 = model_pipeline(*m, layer_us, elbow, 25e9, 1);
      const double gpu_pcie4 = model_pipeline(*m, layer_us, elbow, 25e9, gpu_speedup);
      const double gpu_warm = profiled / 1e3 / gpu_speedup;
      std::printf("| %s | %s | %.2f | %.2f ms (%.2fx) | %.2f ms (%.2fx) | %.2f ms (%.2fx) | %.2f ms (%.2fx) | %.2fx",
                  label.c_str(), format_bytes(m->range_bytes(all).length).c_str(), w, pageable, pageable / w, pinned,
                  pinned / w, layer, layer / w, grouped, grouped / w, at_emulated / (profiled / 1e3));
      if (cuda) {
        std::printf(" |\n");
      } else {
        std::printf(" | %.2fx | %.2fx |\n", at_pcie4 / (profiled / 1e3), gpu_pcie4 / gpu_warm);
      }
      std::fflush(stdout);
      widths.push_back({arch, dtype, m->range_bytes(all).length, w, pinned, grouped});
    }
  }
  if (dtypes.size() > 1) {
    std::printf(
        "\n| model | width | weights | bytes vs fp32 | warm vs fp32 | cold, whole copy (pinned), vs fp32 | "
        "cold, grouped, vs fp32 |\n|---|---|---|---|---|---|---|\n");
    for (const WidthRow& r : widths) {
      auto fp32 = std::find_if(widths.begin(), widths.end(),
                               [&](const WidthRow& o) { return o.arch == r.arch && o.dtype == "fp32"; });
      if (fp32 == widths.end() || r.dtype == "fp32") continue;
      std::printf("| %s | %s | %s | %.2fx | %.2fx | %.2f ms vs %.2f ms (%.2fx) | %.2f ms vs %.2f ms (%.2fx) |\n",
                  r.arch.c_str(), r.dtype.c_str(), format_bytes(r.bytes).c_str(),
                  static_cast<double>(r.bytes) / static_cast<double>(fp32->bytes), r.warm / fp32->warm, r.pinned,
                  fp32->pinned, r.pinned / fp32->pinned, r.grouped, fp32->grouped, r.grouped / fp32->grouped);
    }
  }
  return 0;
}
