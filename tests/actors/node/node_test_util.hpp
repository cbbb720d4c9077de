// What the node room's tests share: an engine over a simulated device, a request for a model, and
// the answer its model gives on a device of its own.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "actors/node/engine/executor_engine.hpp"
#include "actors/tensor_codec.hpp"
#include "gpu/executor.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::testing {

inline std::unique_ptr<ExecutorEngine> engine(uint64_t memory = 64 << 20) {
  auto e = ExecutorEngine::create(gpu::testing::sim_device(memory), EngineOptions{16, 0, 2 << 20});
  EXPECT_TRUE(e.ok()) << e.error().message();
  return std::move(*e);
}

/// A request of `key` on `m`'s sample inputs (batch 2, sequence 5), id "r<seed>".
inline infer_request request_for(const gpu::Model& m, const model_key& key, uint64_t seed) {
  infer_request req;
  req.model = key;
  req.id = "r" + std::to_string(seed);
  req.inputs = encode_tensors(gpu::testing::arch_inputs(m, 2, 5, seed));
  return req;
}

/// The outputs of `req` on a device of its own.
inline std::vector<gpu::HostTensor> direct(const std::shared_ptr<const gpu::Model>& m, const infer_request& req) {
  auto d = gpu::testing::sim_device();
  auto ex = gpu::LayerExecutor::create(*d, m, {0, m->num_layers()});
  auto out = (*ex)->run_host(*decode_tensors(req.inputs));
  EXPECT_TRUE(out.ok());
  return *out;
}

}  // namespace ember::testing
