// GenerationProfiler: the profile of one generative model through its GenerationLoop (the engine
// room: executor_engine.hpp; the contract: docs/design/generation.md's Serving). The engine runs it
// for a SwapRun::profile of a model with a generation section, in place of a profile's two runs of
// `inputs`; it owns what the profile measures, the engine keeps the glue (evicting on a failed
// weight copy, publishing, the footprint, kicking the loop's steps).
//
// What it does, in order (run()):
//   1. cold: one synthetic request (a prompt of prompt_tokens valid ids 1, 2, …, then decode_tokens
//      greedy tokens, EOS ignored, nothing emitted anywhere) submitted to the loop and stepped here,
//      one guarded step at a time, to its end: cold_us, and its first step (the prefill)
//      cold_prefill_us. The model's weights may still be arriving (a late-binding swap-in);
//   2. the weights' copy waited for (wait_weights): a failed copy fails the profile with its error
//      (weights_failed(): the caller drops the half-copied replica), even when the cold request
//      failed too; else a failed cold request fails it;
//   3. warm: the same request again: warm_us, warm_prefill_us;
//   4. the preemption's costs, measured (GenerationBatcher::set_costs, through the loop):
//      prefill_us_per_token = warm_prefill_us / prompt_tokens (at least 1e-3); host_bytes_per_s =
//      the elbow curve's fastest size (gbps · 1e9) when the engine measured one at start, else a
//      timed KV swap of kProbeBlocks blocks (GenerationLoop::probe_swap: its bytes over its µs, at
//      least 1 µs; left 0, i.e. recompute, when the probe fails); copy_fixed_us stays 0.
// prompt_tokens = min(kProfilePromptTokens, max(1, context window / 2)); decode_tokens =
// min(kProfileDecodeTokens, context window - prompt_tokens).
//
// Errors: a step that faults (guarded answers an Error): `fault` is told first (the engine ends
// every stream on the device, resumable), then the profile fails with it; a step after which the
// loop has nothing left to run while the request is unfinished (the model detached): the request
// is cancelled, internal_error; the request's own final error (refused at submit, a failed run):
// that error. plan_bytes() is the largest step's activation plan seen so far, also after a failure
// (the router notes a failed profile's activations too).
//
// Who calls: the engine's worker thread, in a swap job (the loop's one caller: not thread-safe).
// Never touches a clock (now_us is passed in) and never sleeps; it blocks while the steps run, as
// any run does. The loop, the seams and what they capture outlive the profiler; it holds no
// stream after run() returns (both requests end or are cancelled; a fault fails them all).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "actors/node/engine/generation_batcher.hpp"
#include "actors/node/engine/generation_loop.hpp"
#include "base/status.hpp"

namespace ember::engine {

/// The profile's synthetic request (see the header), and the KV swap probe's size.
inline constexpr uint32_t kProfilePromptTokens = 16, kProfileDecodeTokens = 4;
inline constexpr uint64_t kProbeBlocks = 4;

/// What a profile measured (µs on the seams' clock).
struct GenerationProfile {
  uint32_t prompt_tokens = 0, decode_tokens = 0;
  uint64_t cold_us = 0, cold_prefill_us = 0;  // the first request, with the weights' copy
  uint64_t warm_us = 0, warm_prefill_us = 0;  // the second, alone on the device
  uint64_t plan_bytes = 0;                    // the largest step's activation plan (the prefill's)
  KvPreemptionCosts costs;                    // what was set on the loop
};

/// What the profiler reaches outside the loop (the engine's: its JobWorker, its clock, the model's
/// executor, its device memory). Every function must be set except `fault`.
struct GenerationProfileSeams {
  /// Runs `fn` as the engine runs any device work (JobWorker::guarded): fn's Status, or the fault.
  std::function<Status(const std::function<Status()>&)> guarded;
  /// Microseconds, monotonic (the steady clock; a test's fake one).
  std::function<uint64_t()> now_us;
  /// The activation plan of the executor's last run, in bytes (LayerExecutor::last_plan_bytes).
  std::function<uint64_t()> plan_bytes;
  /// Waits for the model's weights' copy, guarded: OK once they are all on the device.
  std::function<Status()> wait_weights;
  /// A step faulted (the device broke): told before run() returns the fault. May be empty.
  std::function<void(const Error&)> fault;
  /// The copy elbow's (bytes, gbps) points measured at start (DeviceMemory::elbow_curve); empty: none.
  std::vector<std::pair<uint64_t, double>> elbow;
  /// The model's name, for error messages.
  std::string model;
};

class GenerationProfiler {
 public:
  GenerationProfiler(GenerationLoop& loop, GenerationProfileSeams seams);

  /// The profile (see the header); once per profiler.
  Result<GenerationProfile> run();
  /// The largest step's activation plan so far, in bytes (after a failure too).
  uint64_t plan_bytes() const { return plan_bytes_; }
  /// run() failed because the weights' copy did.
  bool weights_failed() const { return weights_failed_; }

 private:
  /// One synthetic request `id`, stepped to its end: its µs, and its first step's in `prefill_us`.
  Result<uint64_t> request(const std::string& id, uint64_t& prefill_us);

  GenerationLoop& loop_;
  const GenerationProfileSeams seams_;
  uint32_t prompt_tokens_ = 0, decode_tokens_ = 0;
  uint64_t plan_bytes_ = 0;
  bool weights_failed_ = false;
};

}  // namespace ember::engine
