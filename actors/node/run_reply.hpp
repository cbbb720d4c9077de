// The client's answer from an engine's run: what the gpu_executor's engine jobs and the front ends'
// inline runs (actors/node/inline_runs.hpp) send back, and the gpu_executor's inputs for those jobs.
// Pure: anyone, any thread. The executor calls decoded_inputs, execution_answers and swap_answer
// only to hand them to its engine, which runs them on its worker or a lane: decoding and encoding
// never happen on the actor's thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "actors/engine_run.hpp"
#include "actors/gpu_executor_interface.hpp"
#include "actors/inference_messages.hpp"
#include "actors/node/request_batch.hpp"
#include "base/status.hpp"

namespace ember {

/// The outputs asked for (all when `wanted` is empty), encoded into `skeleton` (the request's model,
/// id, node and device) with the run's times; the run's error as it is; invalid_argument for an
/// output the model lacks.
Result<infer_reply> build_reply(infer_reply skeleton, const std::vector<std::string>& wanted, const InferResult& r);

/// The inputs of one execution of `requests` (one request, or a batch: every member batch_compatible
/// with the first under `padding`, request_batch.hpp), made when called: a batch concatenated (its
/// sequences padded), then decoded. For
/// ExecutorEngine::infer and SwapRun::make_inputs, which call it on the engine's thread. Owns the
/// shared requests (const: they are read, never written, by every holder).
RunInputs decoded_inputs(std::vector<std::shared_ptr<const infer_request>> requests, BatchPadding padding = {});

/// The answers to one execution of `requests` (as decoded_inputs took them): one per request, in
/// order (a batch's answer split into its members', split_reply), or none when a batch failed, its
/// inputs included: each member must then run again alone, so that one bad member cannot fail the
/// others. `skeleton` is build_reply's, for the first request (whose outputs the batch asks for).
std::vector<Result<infer_reply>> execution_answers(infer_reply skeleton,
                                                   const std::vector<std::shared_ptr<const infer_request>>& requests,
                                                   const InferResult& r, const BatchPadding& padding = {});

/// The swap_reply to a swap_request from what the engine did: the client's answer (build_reply) or
/// why it failed, and `r` with its outputs, now encoded into the answer, left empty (a failed run's
/// error stays there, as it is `error` too).
swap_reply swap_answer(infer_reply skeleton, const std::vector<std::string>& wanted, SwapRunResult r);

}  // namespace ember
