// What the engine room's tests share (and the node room's late-binding tests): MLPs of 1 MiB
// layers, an engine over a SimDevice with fixed swap groups, the answer a model gives warm on a
// device of its own, and a swap_run waited for.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/node/engine/executor_engine.hpp"
#include "model/model_builder.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::engine_test {

constexpr uint64_t MiB = 1ull << 20;

// An MLP of `depth` 512x512 layers: 1 MiB of weights each; model.json's serving section `serving`.
inline std::shared_ptr<const gpu::Model> write_mlp(const std::string& dir, uint64_t seed, int depth,
                                                   const gpu::ServingConfig& serving = {}) {
  gpu::ModelBuilder b("m" + std::to_string(seed), seed);
  b.serving() = serving;
  std::string x = b.input("input", gpu::DType::f32, {-1, 512});
  for (int i = 0; i < depth; ++i) {
    gpu::LayerAttrs a;
    a.in_features = a.out_features = 512;
    a.bias = true;
    x = b.add("fc" + std::to_string(i), gpu::OpKind::linear, a, {x});
    x = b.add("relu" + std::to_string(i), gpu::OpKind::relu, {}, {x});
  }
  b.output(x, gpu::DType::f32, {-1, 512});
  EXPECT_TRUE(b.write(dir).ok());
  auto m = gpu::Model::load(dir);
  EXPECT_TRUE(m.ok());
  return *m;
}

inline std::unique_ptr<ExecutorEngine> engine(std::unique_ptr<gpu::Device> device, uint32_t streams = 1) {
  // 16 MiB devices: 8 MiB of pool in 1 MiB partitions; fixed 256 KiB groups (no elbow probe).
  // Larger devices keep half for activations.
  const uint64_t workspace = std::max<uint64_t>(8 * MiB, device->memory().capacity_bytes / 2);
  auto e = ExecutorEngine::create(std::move(device), EngineOptions{64, workspace, 256 << 10, streams});
  EXPECT_TRUE(e.ok()) << e.error().message();
  return std::move(*e);
}

inline std::vector<gpu::HostTensor> warm_outputs(const std::shared_ptr<const gpu::Model>& m,
                                                 const std::vector<gpu::HostTensor>& in) {
  auto d = gpu::testing::sim_device(64 * MiB, 9);
  auto ex = gpu::LayerExecutor::create(*d, m, {0, m->num_layers()});
  EXPECT_TRUE(ex.ok());
  auto out = (*ex)->run_host(in);
  EXPECT_TRUE(out.ok());
  return *out;
}

inline ExecutorEngine::SwapRunResult swap_run(ExecutorEngine& e, SwapRun run) {
  std::promise<ExecutorEngine::SwapRunResult> p;
  EXPECT_TRUE(e.swap_run(std::move(run), [&](ExecutorEngine::SwapRunResult r) { p.set_value(std::move(r)); }));
  return p.get_future().get();
}

/// An inline run through `gate`, tried until the engine's worker has finished the job whose callback
/// just answered the test (it may still be returning from it: run_here declines while the worker
/// runs a job). Polls, never sleeps; nullopt only when it never ran.
inline std::optional<InferResult> run_when_idle(EngineGate& gate, const model_key& key,
                                                const std::vector<gpu::HostTensor>& in) {
  std::optional<InferResult> ran;
  for (int i = 0; i < 10'000'000 && !ran; ++i) {
    ran = gate.run_here(key, in);
    if (!ran) std::this_thread::yield();
  }
  return ran;
}

}  // namespace ember::engine_test
