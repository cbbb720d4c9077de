// generation_bench: a generative model's token-by-token serving at engine level (issue 35), measured
// side by side in one run on one device: the model's GenerationLoop (KV cache in blocks, continuous
// batching; actors/node/engine/generation_loop.hpp) over its LayerExecutor, fed as the engine feeds
// it, one step() after another, no actors, no network.
//
//   generation_bench DIR [--device sim|cuda] [--threads 2] [--prompt 128] [--decode-prompt 16]
//                    [--tokens 64] [--streams 1,8,32] [--rounds 3] [--torch] [--markdown FILE]
//
// DIR is an imported generative model (ember format: model.json with a generation section, as
// `ember model import` writes it from a Hugging Face folder); the loop gets the model's tokenizer as
// the engine's does, so every token is detokenized as it would be served. It prints:
//   - prefill tokens/s: one prompt of --prompt tokens in one step (its first token sampled);
//   - decode tokens/s at each --streams count: that many greedy streams of --decode-prompt tokens
//     each, prefilled together in the first step (not timed), then --tokens - 1 more tokens each,
//     one per stream per step, timed from the end of the prefill step to the last; aggregate =
//     tokens of all streams / time. The 1-stream row is the single-stream decode rate. EOS is ignored
//     so every stream runs its whole length;
//   - the memory-bandwidth bound of a decode step: every weight byte (the model's layers_bytes) read
//     once per step, at the memory rate measured in this run (host memcpy on sim, a device-to-device
//     copy on cuda) counted as bytes read plus bytes written (as NVIDIA's bandwidthTest counts a
//     device-to-device copy), so bound tokens/s = rate / layers_bytes for one stream, and the ratio
//     single-stream achieved / bound (issue 35's target: >= 0.8 on a GPU). On the CPU the KV cache and
//     activations add traffic the bound leaves out; it is the weights' floor, not a model of the run.
//   - with --torch, bench/generation_torch.py decodes the same folder's model with its KV cache in
//     PyTorch (same threads, same prompt), each of its prefill and single-stream decode measured
//     right after Ember's so that machine noise hits both alike, the ratio Ember / PyTorch of their
//     tokens/s (>1: Ember faster), and how many of the first round's greedy tokens agree (the same
//     model on both sides). --hf names the Hugging Face folder PyTorch reads (default: DIR). CPU only.
// Medians over --rounds. Not a test: it prints figures (docs/benchmarks/generation.md).
#include <cblas.h>
#include <sys/utsname.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/machine.hpp"
#include "actors/node/engine/device_memory.hpp"
#include "actors/node/engine/generation_loop.hpp"
#include "actors/node/engine/generations.hpp"
#include "bench/subprocess.hpp"
#include "gpu/device_registry.hpp"
#include "gpu/executor.hpp"
#include "gpu/sim_device.hpp"
#include "model/model.hpp"
#include "text/tokenizer.hpp"

namespace ember::bench {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
constexpr uint64_t MiB = 1ull << 20;

struct Options {
  std::string dir;
  std::string hf;  // the Hugging Face folder for --torch (default: dir)
  std::string device = "sim";
  uint32_t threads = 2;
  int64_t prompt = 128;
  int64_t decode_prompt = 16;
  int64_t tokens = 64;
  std::vector<int64_t> streams = {1, 8, 32};
  int rounds = 3;
  uint64_t copy_mib = 256;
  bool torch = false;
  std::string python = "/usr/bin/python3";
  std::string torch_script;
  std::string markdown;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The 1-, 5- and 15-minute load averages: on a shared machine they say how much the figures were
// contended (printed before and after the run).
std::string load_average() {
  std::ifstream f("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  f >> a >> b >> c;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f %.2f %.2f", a, b, c);
  return buf;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }


void check(const Status& s, const std::string& what) {
  if (!s.ok()) throw std::runtime_error(what + ": " + s.error().message());
}

// The prompt every run feeds (and the PyTorch side too): ids spread over the vocabulary, fixed.
std::vector<int32_t> prompt_ids(int64_t n, uint32_t vocab) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((i * 7919 + 13) % vocab));
  return ids;
}

// The memory rate, bytes read plus written per second: the median of `rounds` copies of `bytes`.
// Host memcpy on sim (the SimDevice's kernels read host memory), a device-to-device copy on cuda.
double memory_rate(gpu::Device& device, bool cuda, uint64_t bytes, int rounds) {
  std::vector<double> rates;
  if (cuda) {
    auto src = gpu::DeviceBuffer::allocate(device, bytes);
    auto dst = gpu::DeviceBuffer::allocate(device, bytes);
    if (!src.ok() || !dst.ok()) throw std::runtime_error("cannot allocate the copy probe's buffers on the device");
    auto stream = device.create_stream();
    for (int r = 0; r <= rounds; ++r) {
      const auto t0 = Clock::now();
      stream->copy_on_device((*dst)->ptr(), (*src)->ptr(), bytes);
      check(stream->synchronize(), "device-to-device copy");
      if (r > 0) rates.push_back(2.0 * static_cast<double>(bytes) / seconds_since(t0));  // r 0: warm-up
    }
  } else {
    std::vector<char> src(bytes, 1), dst(bytes, 2);  // touched: no page faults in the timed copies
    for (int r = 0; r <= rounds; ++r) {
      const auto t0 = Clock::now();
      std::memcpy(dst.data(), src.data(), bytes);
      const double s = seconds_since(t0);
      if (dst[bytes / 2] != 1) throw std::runtime_error("memcpy probe");
      if (r > 0) rates.push_back(2.0 * static_cast<double>(bytes) / s);
    }
  }
  return median(rates);
}

struct Rig {
  std::unique_ptr<gpu::Device> device;
  std::unique_ptr<engine::DeviceMemory> memory;
  std::shared_ptr<const gpu::Model> model;
  std::unique_ptr<gpu::LayerExecutor> ex;
  engine::GenerativeSpec spec;
  engine::GenerationLoopConfig config;
  std::shared_ptr<const text::Tokenizer> tokenizer;  // the model's, as the engine's loop has it (or null)
};

// One measurement: `n` greedy streams of `prompt` each, `tokens` tokens each. Returns the seconds of
// the first step (the prefill; each stream's first token) and of the decode steps after it, and the
// tokens those decode steps gave.
struct Timed {
  double prefill_s = 0, decode_s = 0;
  uint64_t decode_tokens = 0;
  uint64_t prefill_steps = 0;
  std::vector<int32_t> first;  // stream 0's tokens (checked against PyTorch's)
};

Timed generate(Rig& rig, const std::vector<int32_t>& prompt, int64_t n, int64_t tokens, int round) {
  auto loop = engine::GenerationLoop::create(*rig.device, *rig.memory, rig.spec, rig.tokenizer, rig.config);
  if (!loop.ok()) throw std::runtime_error(loop.error().message());
  (*loop)->attach(rig.ex.get());
  std::vector<uint64_t> got(static_cast<size_t>(n), 0);
  uint64_t failed = 0;
  Timed t;
  for (int64_t i = 0; i < n; ++i) {
    GenerationJob job;
    job.id = "r" + std::to_string(round) + "s" + std::to_string(i);
    job.prompt = prompt;
    job.sampling.temperature = 0;
    job.stop.max_tokens = tokens;
    job.stop.ignore_eos = true;
    job.emit = [&got, &failed, &t, i](GenerationOutput out) {
      got[static_cast<size_t>(i)] += out.tokens.size();
      if (i == 0) t.first.insert(t.first.end(), out.tokens.begin(), out.tokens.end());
      if (out.error) ++failed;
    };
    check((*loop)->submit(std::move(job), 0), "submit");
  }
  auto all_started = [&] { return std::all_of(got.begin(), got.end(), [](uint64_t g) { return g > 0; }); };
  const auto t0 = Clock::now();
  uint64_t now_us = 0;
  while (!all_started() && (*loop)->step(now_us++)) ++t.prefill_steps;
  t.prefill_s = seconds_since(t0);
  uint64_t before = 0;
  for (uint64_t g : got) before += g;
  const auto t1 = Clock::now();
  while ((*loop)->step(now_us++)) {
  }
  t.decode_s = seconds_since(t1);
  uint64_t after = 0;
  for (uint64_t g : got) after += g;
  t.decode_tokens = after - before;
  if (failed > 0 || (*loop)->busy()) throw std::runtime_error("a stream failed or did not finish");
  if (after != static_cast<uint64_t>(n * tokens)) throw std::runtime_error("a stream ended early");
  return t;
}

json ask(Subprocess& torch, const json& request) {
  json reply = json::parse(torch.ask(request.dump()));
  if (!reply.value("ok", false)) throw std::runtime_error("PyTorch: " + reply.value("error", std::string("?")));
  return reply;
}

std::string gb(double bytes_per_s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GB/s", bytes_per_s / 1e9);
  return buf;
}

int run(const Options& o) {
  struct utsname un {};
  ::uname(&un);
  std::printf("machine: %s, %u hardware threads, %s %s, load average %s\n", cpu_model().c_str(),
              std::thread::hardware_concurrency(), un.sysname, un.release, load_average().c_str());
  Rig rig;
  auto model = gpu::Model::load(o.dir);
  if (!model.ok()) throw std::runtime_error(model.error().message());
  rig.model = *model;
  auto spec = engine::generative_spec(*rig.model);
  if (!spec.ok()) throw std::runtime_error(spec.error().message());
  rig.spec = *spec;
  // The model's tokenizer, as Generations::join gives it to the loop: every token is detokenized
  // as it would be served (its text emitted with it).
  if (!rig.model->tokenizer_json().empty()) {
    auto t = text::Tokenizer::parse(rig.model->tokenizer_json(), rig.model->tokenizer_config_json());
    if (!t.ok()) throw std::runtime_error("the model's tokenizer: " + t.error().message());
    rig.tokenizer = std::make_shared<const text::Tokenizer>(std::move(*t));
  }
  const uint64_t weights = rig.model->layers_bytes();
  // What a decode step streams when an embedding table counts as the rows it gathers (a few KB):
  // the bound without the tables, printed beside the one the issue asks for.
  uint64_t tables = 0;
  for (uint32_t l = 0; l < rig.model->num_layers(); ++l)
    if (rig.model->layer(l).op == gpu::OpKind::embedding) tables += rig.model->range_bytes({l, l + 1}).length;
  const uint64_t streamed = weights - tables;
  if (o.prompt < 1 || o.decode_prompt < 1 || o.tokens < 2 || o.rounds < 1 || o.streams.empty())
    throw std::runtime_error("--prompt and --decode-prompt must be >= 1, --tokens >= 2, --rounds >= 1");
  const int64_t max_streams = *std::max_element(o.streams.begin(), o.streams.end());
  if (*std::min_element(o.streams.begin(), o.streams.end()) < 1) throw std::runtime_error("--streams: each >= 1");
  const uint64_t longest = static_cast<uint64_t>(std::max(o.prompt + 1, o.decode_prompt + o.tokens));
  if (longest > rig.spec.context_window)
    throw std::runtime_error("a sequence of " + std::to_string(longest) + " tokens is over the model's context window of " +
                             std::to_string(rig.spec.context_window));

  // The KV budget: every stream's whole sequence at once (no preemption in a measurement), plus one
  // block each of slack; the batcher takes every prompt in one step.
  const uint64_t blocks_per_stream = (longest + rig.spec.layout.block_size - 1) / rig.spec.layout.block_size + 1;
  const uint64_t kv_bytes = static_cast<uint64_t>(max_streams) * blocks_per_stream * rig.spec.layout.block_bytes();
  rig.config.kv.budget_bytes = kv_bytes;
  rig.config.kv.host_bytes = 0;
  rig.config.batcher.max_num_seqs = static_cast<uint32_t>(std::max<int64_t>(max_streams, 1));
  rig.config.batcher.max_num_batched_tokens =
      static_cast<uint32_t>(std::max<int64_t>({2048, o.prompt, max_streams * o.decode_prompt}));
  // The device: the weights and a run's activations in the workspace (LayerExecutor::create
  // allocates outside the pool), the KV blocks in the pool.
  const uint64_t workspace = weights + 2048 * MiB;
  const uint64_t pool = kv_bytes + kv_bytes / 4 + 256 * MiB;
  const bool cuda = o.device == "cuda";
  if (cuda) {
    DevicesConfig dc;
    dc.kind = DeviceKind::cuda;
    auto opened = gpu::open_devices(dc);
    if (!opened.ok()) throw std::runtime_error(opened.error().message());
    rig.device = std::move(opened->devices.front());
    std::printf("device:  %s\n", rig.device->info().name.c_str());
  } else {
    SimDeviceConfig dc;
    dc.memory_bytes = workspace + pool;
    dc.compute_threads = o.threads;
    auto sim = gpu::SimDevice::create(dc, 0);
    if (!sim.ok()) throw std::runtime_error(sim.error().message());
    rig.device = std::move(*sim);
    std::printf("device:  SimDevice, OpenBLAS %s, %u compute threads\n", openblas_get_config(), o.threads);
  }
  // The copy probe first, before the pool takes the device's memory.
  const double rate = memory_rate(*rig.device, cuda, o.copy_mib * MiB, 5);
  auto memory = engine::DeviceMemory::reserve(*rig.device, workspace, 1 * MiB, 0);
  if (!memory.ok()) throw std::runtime_error(memory.error().message());
  rig.memory = std::move(*memory);
  auto ex = gpu::LayerExecutor::create(*rig.device, rig.model, {0, rig.model->num_layers()});
  if (!ex.ok()) throw std::runtime_error(ex.error().message());
  rig.ex = std::move(*ex);
  const gpu::GenerationSpec* g = rig.model->generation();
  std::printf("model:   %s (%s), %.1f MB of weights, vocab %u, %u KV layers x %u heads x %u, context %llu, %s\n",
              rig.model->manifest().name.c_str(), g->family.c_str(), static_cast<double>(weights) / 1e6,
              rig.spec.vocab_size, rig.spec.layout.num_kv_layers, rig.spec.layout.num_kv_heads, rig.spec.layout.head_dim,
              static_cast<unsigned long long>(rig.spec.context_window),
              rig.tokenizer ? "tokens detokenized as served" : "no tokenizer (token ids only)");
  std::printf("method:  %d rounds, medians; prefill: one %lld-token prompt; decode: %lld-token prompts, %lld tokens each, "
              "greedy, EOS ignored\n\n",
              o.rounds, static_cast<long long>(o.prompt), static_cast<long long>(o.decode_prompt),
              static_cast<long long>(o.tokens));

  std::unique_ptr<Subprocess> torch;
  if (o.torch) {
    torch = std::make_unique<Subprocess>(std::vector<std::string>{o.python, o.torch_script, "--serve"});
    json hello = ask(*torch, {{"op", "load"}, {"dir", o.hf.empty() ? o.dir : o.hf}, {"threads", o.threads},
                              {"device", o.device}});
    std::printf("pytorch: %s, %d threads (%s)\n\n", hello["torch"].get<std::string>().c_str(), hello["threads"].get<int>(),
                hello["family"].get<std::string>().c_str());
  }

  const auto long_prompt = prompt_ids(o.prompt, rig.spec.vocab_size);
  const auto short_prompt = prompt_ids(o.decode_prompt, rig.spec.vocab_size);
  generate(rig, short_prompt, 1, 4, -1);  // warm-up: first touch of activations and blocks

  std::vector<double> prefill, torch_prefill, torch_decode;
  size_t agree = 0, compared = 0;
  std::map<int64_t, std::vector<double>> decode;
  // Each PyTorch measurement right after Ember's of the same thing, so that a neighbour's load on
  // this shared machine hits both alike; the multi-stream runs after them.
  std::vector<double> single_rates;
  for (int r = 0; r < o.rounds; ++r) {
    const Timed p = generate(rig, long_prompt, 1, 2, r);
    prefill.push_back(static_cast<double>(o.prompt) / p.prefill_s);
    if (torch) {
      std::vector<int> long_ids(long_prompt.begin(), long_prompt.end());
      json tp = ask(*torch, {{"op", "decode"}, {"prompt", long_ids}, {"tokens", 2}});
      torch_prefill.push_back(tp["prefill_tokens_per_s"].get<double>());
    }
    const Timed one = generate(rig, short_prompt, 1, o.tokens, r);
    single_rates.push_back(static_cast<double>(one.decode_tokens) / one.decode_s);
    if (torch) {
      std::vector<int> ids(short_prompt.begin(), short_prompt.end());
      json t = ask(*torch, {{"op", "decode"}, {"prompt", ids}, {"tokens", o.tokens}});
      torch_decode.push_back(t["decode_tokens_per_s"].get<double>());
      if (r == 0) {  // the same model on both sides: greedy tokens agree (up to float near-ties)
        const std::vector<int32_t> theirs = t["tokens"].get<std::vector<int32_t>>();
        compared = std::min(one.first.size(), theirs.size());
        while (agree < compared && one.first[agree] == theirs[agree]) ++agree;
      }
    }
    for (int64_t n : o.streams) {
      if (n == 1) {
        decode[n].push_back(single_rates.back());
        continue;
      }
      const Timed d = generate(rig, short_prompt, n, o.tokens, r);
      if (d.prefill_steps != 1) std::printf("  (%lld streams: prefill took %llu steps)\n", static_cast<long long>(n),
                                             static_cast<unsigned long long>(d.prefill_steps));
      decode[n].push_back(static_cast<double>(d.decode_tokens) / d.decode_s);
    }
  }

  const double single = median(single_rates);
  const double bound = rate / static_cast<double>(weights);
  std::printf("prefill            %10.1f tokens/s   (one %lld-token prompt)\n", median(prefill),
              static_cast<long long>(o.prompt));
  for (const auto& [n, rates] : decode)
    std::printf("decode %3lld stream%s %10.1f tokens/s   (aggregate; %.1f per stream)\n", static_cast<long long>(n),
                n == 1 ? " " : "s", median(rates), median(rates) / static_cast<double>(n));
  std::printf("memory rate        %s (%s, %llu MiB, read + written)\n", gb(rate).c_str(),
              cuda ? "device-to-device copy" : "host memcpy", static_cast<unsigned long long>(o.copy_mib));
  std::printf("bandwidth bound    %10.1f tokens/s   (%.1f MB of weights read per decode step)\n", bound,
              static_cast<double>(weights) / 1e6);
  std::printf("achieved / bound   %10.2f         (single stream; issue 35's target on a GPU: >= 0.8)\n", single / bound);
  if (tables > 0)
    std::printf("  without tables   %10.1f tokens/s   bound, ratio %.2f (%.1f MB of embedding tables only gathered from)\n",
                rate / static_cast<double>(streamed), single / (rate / static_cast<double>(streamed)),
                static_cast<double>(tables) / 1e6);
  if (torch) {
    std::printf("pytorch prefill    %10.1f tokens/s   ember / pytorch %.2f\n", median(torch_prefill),
                median(prefill) / median(torch_prefill));
    std::printf("pytorch decode 1   %10.1f tokens/s   ember / pytorch %.2f\n", median(torch_decode),
                single / median(torch_decode));
    std::printf("greedy tokens      %zu of %zu the same as PyTorch's, from the first\n", agree, compared);
  }

  std::printf("load average after: %s\n", load_average().c_str());
  if (!o.markdown.empty()) {  // appended; the header when the file is new or empty
    const bool fresh = !std::filesystem::exists(o.markdown) || std::filesystem::file_size(o.markdown) == 0;
    std::ofstream md(o.markdown, std::ios::app);
    if (fresh) {
      md << "| model | weights MB | prefill tok/s |";
      for (int64_t n : o.streams) md << " decode " << n << " tok/s |";
      md << " memory rate GB/s | bound tok/s | achieved / bound |"
         << (torch ? " PyTorch prefill tok/s | PyTorch decode 1 tok/s | Ember / PyTorch prefill, decode 1 |" : "")
         << "\n|---|---|---|";
      for (size_t i = 0; i < o.streams.size(); ++i) md << "---|";
      md << "---|---|---|" << (torch ? "---|---|---|" : "") << "\n";
    }
    char buf[96];
    std::snprintf(buf, sizeof(buf), "| %s (%s) | %.1f | %.0f |", rig.model->manifest().name.c_str(), g->family.c_str(),
                  static_cast<double>(weights) / 1e6, median(prefill));
    md << buf;
    for (int64_t n : o.streams) {
      std::snprintf(buf, sizeof(buf), " %.1f |", median(decode[n]));
      md << buf;
    }
    std::snprintf(buf, sizeof(buf), " %.2f | %.1f | %.2f |", rate / 1e9, bound, single / bound);
    md << buf;
    if (torch) {
      std::snprintf(buf, sizeof(buf), " %.0f | %.1f | %.2f, %.2f |", median(torch_prefill), median(torch_decode),
                    median(prefill) / median(torch_prefill), single / median(torch_decode));
      md << buf;
    }
    md << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  ember::bench::Options o;
  CLI::App app{"Text generation at engine level: prefill, decode at 1..N streams, the memory-bandwidth bound"};
  app.add_option("dir", o.dir, "An imported generative model (ember format)")->required();
  app.add_option("--device", o.device, "sim (a SimDevice on the CPU) or cuda (GPU 0)")
      ->check(CLI::IsMember({"sim", "cuda"}));
  app.add_option("--threads", o.threads, "Compute threads (SimDevice) and PyTorch's threads");
  app.add_option("--prompt", o.prompt, "Prompt tokens of the prefill measurement");
  app.add_option("--decode-prompt", o.decode_prompt, "Prompt tokens of each decode stream");
  app.add_option("--tokens", o.tokens, "Tokens each decode stream generates (>= 2; the first is the prefill's)");
  app.add_option("--streams", o.streams, "Concurrent streams to measure decode at")->delimiter(',');
  app.add_option("--rounds", o.rounds, "Rounds (medians)");
  app.add_option("--copy-mib", o.copy_mib, "Bytes of the memory-rate probe's copy, MiB");
  app.add_flag("--torch", o.torch, "Also decode with PyTorch (bench/generation_torch.py) and print the ratio");
  app.add_option("--hf", o.hf, "The Hugging Face folder PyTorch reads (default: DIR)");
  app.add_option("--python", o.python, "Python for --torch");
  app.add_option("--markdown", o.markdown, "Append the figures to FILE as a markdown table row (its header when FILE is new or empty)");
  o.torch_script = std::string(EMBER_SOURCE_DIR) + "/bench/generation_torch.py";
  CLI11_PARSE(app, argc, argv);
  try {
    return ember::bench::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "generation_bench: %s\n", e.what());
    return 1;
  }
}
