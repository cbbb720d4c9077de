// executor_bench: Ember's layer executor against PyTorch on the same weights, inputs and thread
// count, alternating between the two in one run so that machine noise hits both alike.
//
// For every (model, batch) row it times R rounds of K forward passes on each side (Ember: inputs
// already on the device, outputs left there; PyTorch: inference_mode on tensors of the same
// device), reports the medians and their ratio, and checks the two outputs agree
// (max|Ember - PyTorch| / max|PyTorch|). `--device sim` (default) runs Ember on a SimDevice and
// PyTorch on the CPU; `--device cuda` runs both on GPU 0 (Ember through its CUDA plugin), each
// pass timed to its end (Ember's run waits for its stream, PyTorch synchronizes).
// Not a test: it prints figures; the targets (README) are judged by a human reading them.
#include <cblas.h>
#include <sys/utsname.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench/machine.hpp"
#include "base/units.hpp"
#include "bench/subprocess.hpp"
#include "gpu/device_registry.hpp"
#include "gpu/executor.hpp"
#include "gpu/sim_device.hpp"
#include "model/architectures.hpp"
#include "model/sample_inputs.hpp"

namespace ember::bench {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<std::string> archs = {"resnet50", "bert-base", "gpt2"};
  std::vector<int64_t> batches = {1, 8};
  int64_t seq_len = 128;
  uint32_t threads = 2;
  int rounds = 5;
  int reps = 2;
  bool tiny = false;
  std::string models_dir = "build/bench-models";
  std::string python = "/usr/bin/python3";
  std::string worker;
  std::string markdown;
  std::string device = "sim";
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}


json ask(Subprocess& torch, const json& request) {
  json reply = json::parse(torch.ask(request.dump()));
  if (!reply.value("ok", false)) throw std::runtime_error("PyTorch worker: " + reply.value("error", std::string("?")));
  return reply;
}

Result<std::shared_ptr<const gpu::Model>> model_for(const Options& o, const std::string& arch) {
  const std::string dir = o.models_dir + "/" + arch + (o.tiny ? "-tiny" : "") + "/1";
  if (!std::filesystem::exists(dir + "/weights.safetensors")) {
    EMBER_ASSIGN_OR_RETURN(auto builder, gpu::build_architecture(arch, {o.tiny, 1, {}}));
    std::printf("  writing %s (%s parameters) ...\n", dir.c_str(), std::to_string(builder.parameters()).c_str());
    EMBER_RETURN_IF_ERROR(builder.write(dir));
  }
  return gpu::Model::load(dir);
}

double max_relative_error(const gpu::HostTensor& ours, const gpu::HostTensor& theirs) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < theirs.desc.shape.numel(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(ours.as<float>()[i] - theirs.as<float>()[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(theirs.as<float>()[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// Three significant figures without exponents: 1183 -> "1183", 0.6204 -> "0.620".
std::string readable(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : v >= 1 ? "%.2f" : "%.3g", v);
  return buf;
}

struct Row {
  std::string model;
  int64_t batch;
  double ember_ms, torch_ms, gflop, error;
};

int run(const Options& o) {
  struct utsname un {};
  ::uname(&un);
  std::printf("machine: %s, %u hardware threads, %s %s\n", cpu_model().c_str(), std::thread::hardware_concurrency(),
              un.sysname, un.release);
  const bool cuda = o.device == "cuda";
  std::unique_ptr<gpu::Device> device;
  if (cuda) {
    DevicesConfig dc;
    dc.kind = DeviceKind::cuda;
    auto opened = gpu::open_devices(dc);
    if (!opened.ok()) throw std::runtime_error(opened.error().message());
    device = std::move(opened->devices.front());
    std::printf("ember:   %s\n", device->info().name.c_str());
  } else {
    SimDeviceConfig dc;
    dc.memory_bytes = 16ull << 30;
    dc.compute_threads = o.threads;
    auto sim = gpu::SimDevice::create(dc, 0);
    if (!sim.ok()) throw std::runtime_error(sim.error().message());
    device = std::move(*sim);
    std::printf("ember:   OpenBLAS %s, %u compute threads on a SimDevice\n", openblas_get_config(), o.threads);
  }

  Subprocess torch({o.python, o.worker});
  json hello = ask(torch, {{"op", "hello"}, {"threads", o.threads}, {"device", o.device}});
  std::printf("pytorch: %s, %d threads, BLAS mapped: %s\n         build: %s\n",
              hello["torch"].get<std::string>().c_str(), hello["threads"].get<int>(), hello["blas"]["mapped"].dump().c_str(),
              hello["blas"]["build"].dump().c_str());
  std::printf("method:  %d rounds x %d passes per side, alternating; medians; sequence length %lld\n\n", o.rounds, o.reps,
              static_cast<long long>(o.seq_len));

  auto stream = device->create_stream();
  const std::string scratch = o.models_dir + "/scratch";
  std::filesystem::create_directories(scratch);

  std::vector<Row> rows;
  for (const auto& arch : o.archs) {
    auto model = model_for(o, arch);
    if (!model.ok()) throw std::runtime_error(model.error().message());
    const gpu::Model& m = **model;
    ask(torch, {{"op", "load"}, {"dir", m.source()}});
    auto ex = gpu::LayerExecutor::create(*device, *model, {0, m.num_layers()});
    if (!ex.ok()) throw std::runtime_error(ex.error().message());

    for (int64_t batch : o.batches) {
      auto inputs = gpu::sample_model_inputs(m, batch, o.seq_len, 7);
      if (!inputs.ok()) throw std::runtime_error(inputs.error().message());
      const std::string in_file = scratch + "/inputs.safetensors", out_file = scratch + "/torch_out.safetensors";
      if (auto st = gpu::write_tensor_file(in_file, *inputs); !st.ok()) throw std::runtime_error(st.error().message());
      std::vector<uint32_t> ids;
      for (uint32_t i = 0; i < m.graph().num_inputs; ++i) ids.push_back(i);
      auto on_device = gpu::upload(*device, *stream, *inputs, ids);
      if (!on_device.ok() || !stream->synchronize().ok()) throw std::runtime_error("upload failed");

      // FLOPs of one pass, from the op table.
      auto shapes = m.check_inputs(gpu::concrete_inputs(m, batch, o.seq_len));
      double flops = 0;
      for (uint32_t l = 0; l < m.num_layers(); ++l) {
        std::vector<gpu::TensorDesc> in;
        for (uint32_t v : m.graph().layer_inputs[l]) in.push_back(*(*shapes)[v]);
        flops += gpu::flops(m.layer(l).op, m.layer(l).attrs, in, *(*shapes)[m.graph().layer_value(l)]);
      }

      gpu::Activations last;
      auto ember_pass = [&] {
        const auto t0 = Clock::now();
        auto out = (*ex)->run(*on_device);
        if (!out.ok()) throw std::runtime_error(out.error().message());
        last = std::move(*out);
        return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      };
      // Warm-up both sides (first-touch of activation memory, PyTorch's allocator and caches).
      // Small models get more passes per round so that each round lasts at least ~50 ms.
      const double first = ember_pass();
      ask(torch, {{"op", "time"}, {"inputs", in_file}, {"reps", 3}, {"output", out_file}});
      const int reps = std::max(o.reps, std::min(200, static_cast<int>(50.0 / std::max(first, 0.01))));
      std::vector<double> ember_ms, torch_ms;
      for (int r = 0; r < o.rounds; ++r) {
        for (int k = 0; k < reps; ++k) ember_ms.push_back(ember_pass());
        json t = ask(torch, {{"op", "time"}, {"inputs", in_file}, {"reps", reps}, {"output", out_file}});
        for (double x : t["ms"]) torch_ms.push_back(x);
      }

      auto ours = gpu::download(*stream, last, m.graph().value_names);
      auto theirs = gpu::read_tensor_file(out_file);
      if (!ours.ok() || !theirs.ok()) throw std::runtime_error("cannot read outputs back");
      double error = 0;
      for (const auto& t : *theirs)
        for (const auto& e : *ours)
          if (e.name == t.name) error = std::max(error, max_relative_error(e, t));

      Row row{m.manifest().name, batch, median(ember_ms), median(torch_ms), flops / 1e9, error};
      std::printf("%-10s batch %-3lld  ember %9.3f ms  pytorch %9.3f ms  ratio %5.2f  (%7.3g GFLOP, ember %5.1f GFLOP/s)  "
                  "max rel diff %.1e\n",
                  row.model.c_str(), static_cast<long long>(batch), row.ember_ms, row.torch_ms, row.ember_ms / row.torch_ms,
                  row.gflop, row.gflop / row.ember_ms * 1e3, row.error);
      std::fflush(stdout);
      rows.push_back(row);
    }
  }

  std::string md = "| model | batch | Ember ms | PyTorch ms | Ember / PyTorch | GFLOP per pass | max rel. diff |\n"
                   "|---|---|---|---|---|---|---|\n";
  for (const auto& r : rows) {
    char line[256];
    std::snprintf(line, sizeof(line), "| %s | %lld | %s | %s | %.2f | %s | %.0e |\n", r.model.c_str(),
                  static_cast<long long>(r.batch), readable(r.ember_ms).c_str(), readable(r.torch_ms).c_str(),
                  r.ember_ms / r.torch_ms, readable(r.gflop).c_str(), r.error);
    md += line;
  }
  std::printf("\n%s", md.c_str());
  if (!o.markdown.empty()) std::ofstream(o.markdown) << md;
  return 0;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  ember::bench::Options o;
  o.worker = std::string(EMBER_SOURCE_DIR) + "/bench/torch_worker.py";
  CLI::App app{"Ember's layer executor against PyTorch, alternating, on the same weights and inputs"};
  app.add_option("--arch", o.archs, "Architectures to run")->delimiter(',');
  app.add_option("--batch", o.batches, "Batch sizes")->delimiter(',');
  auto* seq_len = app.add_option("--seq-len", o.seq_len, "Sequence length for transformers (default 128; 16 with --tiny)");
  app.add_option("--threads", o.threads, "Threads on both sides");
  app.add_option("--rounds", o.rounds, "Alternation rounds");
  app.add_option("--reps", o.reps, "Passes per side per round");
  app.add_flag("--tiny", o.tiny, "Tiny variants (a smoke run)");
  app.add_option("--models", o.models_dir, "Where generated models are kept between runs");
  app.add_option("--python", o.python, "Python with torch");
  app.add_option("--worker", o.worker, "bench/torch_worker.py");
  app.add_option("--markdown", o.markdown, "Also write the table to this file");
  app.add_option("--device", o.device, "sim: Ember on a SimDevice, PyTorch on the CPU; cuda: both on GPU 0")
      ->check(CLI::IsMember({"sim", "cuda"}));
  CLI11_PARSE(app, argc, argv);
  // The tiny transformers have 32 positions: 128 would be refused by their embedding tables.
  if (o.tiny && seq_len->count() == 0) o.seq_len = 16;
  try {
    return ember::bench::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "executor_bench: %s\n", e.what());
    return 1;
  }
}
