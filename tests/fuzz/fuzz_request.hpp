// Shared by the gateway's request-decoder fuzz targets (kserve_binary, kserve_grpc): what every
// decoded inference request promises, and the answer that echoes it.
#pragma once

#include "actors/inference_messages.hpp"
#include "model/tensor.hpp"
#include "tests/fuzz/fuzz_common.hpp"

namespace ember::fuzz {

/// Checks that every input of `req` holds exactly its shape's bytes in a dtype Ember runs, with at
/// most Shape::kMaxRank dimensions, none negative; returns the answer whose outputs are the inputs.
inline infer_reply check_and_echo(const infer_request& req) {
  EMBER_FUZZ_CHECK(!req.inputs.empty());
  infer_reply reply;
  reply.model = req.model;
  reply.id = req.id;
  for (const auto& t : req.inputs) {
    EMBER_FUZZ_CHECK(t.dtype < static_cast<uint8_t>(gpu::DType::count));
    EMBER_FUZZ_CHECK(t.shape.size() <= static_cast<size_t>(gpu::Shape::kMaxRank));
    uint64_t n = gpu::dtype_size(static_cast<gpu::DType>(t.dtype));
    for (int64_t d : t.shape) {
      EMBER_FUZZ_CHECK(d >= 0);
      n *= static_cast<uint64_t>(d);
    }
    EMBER_FUZZ_CHECK(n == t.data.size());
    reply.outputs.push_back(t);
  }
  return reply;
}

}  // namespace ember::fuzz
