// What the node room's tests share: an engine over a simulated device, a request for a model, the
// answer its model gives on a device of its own, and for batching: models that batch, answers equal
// up to batched rounding, a metric's value.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/inference_messages.hpp"
#include "actors/node/engine/executor_engine.hpp"
#include "actors/node/node_instruments.hpp"
#include "actors/tensor_codec.hpp"
#include "gpu/executor.hpp"
#include "model/architectures.hpp"
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

/// Writes model `i` of a node's repository into `dir` and loads it.
using ModelMaker = std::function<std::shared_ptr<const gpu::Model>(const std::string& dir, int i)>;

// A reference architecture, tiny, with dynamic batching as model.json would ask for it.
inline ModelMaker batching(std::vector<std::string> archs, uint32_t max_batch, uint64_t delay_us,
                           uint64_t deadline_us = 0) {
  return [=](const std::string& dir, int i) -> std::shared_ptr<const gpu::Model> {
    auto b =
        gpu::build_architecture(archs[static_cast<size_t>(i)],
                                {.tiny = true, .seed = static_cast<uint64_t>(i) + 1, .name = "m" + std::to_string(i)});
    EXPECT_TRUE(b.ok()) << b.error().message();
    b->serving().max_batch = max_batch;
    b->serving().dynamic_batching = true;
    b->serving().max_queue_delay_us = delay_us;
    b->serving().slo_deadline_us = deadline_us;
    EXPECT_TRUE(b->write(dir).ok());
    auto m = gpu::Model::load(dir);
    EXPECT_TRUE(m.ok());
    return *m;
  };
}

/// A batched answer is the solo answer up to the rounding of batched matrix products: OpenBLAS (like
/// cuBLAS) picks its kernel by the matrix's shape, so a row's sums may be added in another order
/// when it shares the product with other rows (measured: at most 2e-7 relative on these models).
inline bool same_answer(const std::vector<gpu::HostTensor>& got, const std::vector<gpu::HostTensor>& want) {
  if (got.size() != want.size()) return false;
  for (size_t o = 0; o < want.size(); ++o) {
    if (got[o].desc.shape != want[o].desc.shape || got[o].desc.dtype != want[o].desc.dtype) return false;
    if (want[o].desc.dtype != gpu::DType::f32) {
      if (!gpu::testing::bitwise_equal(got[o], want[o])) return false;
    } else if (gpu::testing::relative_error(got[o], want[o]) > 1e-5) {
      ADD_FAILURE() << "output " << o << " differs by " << gpu::testing::relative_error(got[o], want[o]);
      return false;
    }
  }
  return true;
}

/// The value of `name{model="m<i>"...}` in the rendered metrics, 0 when absent.
inline double metric(NodeInstruments& in, const std::string& name, int i) {
  const std::string text = in.registry().render();
  const std::string key = name + "{model=\"m" + std::to_string(i) + "\"";
  const size_t at = text.find(key);
  if (at == std::string::npos) return 0;
  const size_t space = text.find(' ', text.find('}', at));
  return std::stod(text.substr(space + 1));
}

}  // namespace ember::testing
