// The client's answer from an engine's run: what the gpu_executor (its jobs' continuations) and the
// front ends' inline runs (actors/node/inline_runs.hpp) send back. Pure: anyone, any thread.
#pragma once

#include <string>
#include <vector>

#include "actors/engine_run.hpp"
#include "actors/inference_messages.hpp"
#include "base/status.hpp"

namespace ember {

/// The outputs asked for (all when `wanted` is empty), encoded into `skeleton` (the request's model,
/// id, node and device) with the run's times; the run's error as it is; invalid_argument for an
/// output the model lacks.
Result<infer_reply> build_reply(infer_reply skeleton, const std::vector<std::string>& wanted, const InferResult& r);

}  // namespace ember
