// What a device's engine is asked to run and what it answers: the vocabulary the node router's
// swap_request and swap_reply carry (actors/gpu_executor_interface.hpp), the gpu_executor hands on,
// and the engine (actors/node/engine/executor_engine.hpp) runs. Its own header so that the engine
// room uses it without CAF.
//
// Pure data: anyone may build and read it on any thread. Ownership: a SwapRun shares the host copy
// of its model and, when paired, the Shadow's gate; the engine takes the run by value and answers
// with a SwapRunResult it gives away. RunInputs (a run's inputs made when the run starts) owns
// whatever it reads: it is called on the engine's thread that runs the job, never its caller's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/model_key.hpp"
#include "base/status.hpp"
#include "gpu/executor.hpp"
#include "gpu/shadow_split.hpp"
#include "model/host_tensor.hpp"
#include "model/model.hpp"
#include "text/sampling.hpp"
#include "text/stop_conditions.hpp"

namespace ember {

class EngineGate;
namespace text {
class Tokenizer;
}

/// A model's generation streams an engine set aside when the model left its device (evicted for
/// another model, docs/design/generation.md "Late binding with state"): each stream's tokens so far,
/// its sampling and stop state, its `emit`, and its KV cache either copied to host memory or to be
/// recomputed from the tokens. The engine that evicted the model hands it out in
/// SwapRunResult::parked; the router queues it as a request of the model, and whichever device binds
/// the model next takes it back (SwapRun::resume): the streams go on from where they stopped, the
/// host KV copied in (or recomputed), no token repeated or skipped.
///
/// Thread-safe to move between threads; its streams are touched only by the engine that takes it
/// (resume) or by fail(). Destroyed untaken, it fails every stream it still holds with unavailable
/// and GenerationOutput::resumable, so that nothing waits forever and the gateway continues each
/// from the tokens it sent.
class ParkedGenerations {
 public:
  virtual ~ParkedGenerations() = default;
  /// Streams held (0 once taken or failed).
  virtual size_t streams() const = 0;
  /// Host bytes their KV copies hold.
  virtual uint64_t host_bytes() const = 0;
  /// Ends every stream held with `error` as its final output (resumable: the gateway may continue
  /// it elsewhere). Any thread; idempotent.
  virtual void fail(const Error& error) = 0;
};

/// A run of a resident model: its outputs (named as the model names them) and its times.
struct InferResult {
  Result<std::vector<gpu::HostTensor>> outputs = internal_error("not run");
  /// From the job's posting to its start, and its run, microseconds.
  uint64_t queue_us = 0;
  uint64_t compute_us = 0;
};

/// A run's inputs, made by the job itself right before the run, on the thread that runs it (the
/// engine's worker or a lane): the gpu_executor decodes the client's tensors there, not on its actor
/// (ExecutorEngine::infer, SwapRun::make_inputs). Called once, when the job starts (never when the
/// engine refused the job: its queue was full). An error answers the job with it, before anything
/// changed on the device.
using RunInputs = std::function<Result<std::vector<gpu::HostTensor>>()>;

/// What the loop streams to a request; `final` on the last.
struct GenerationOutput {
  std::vector<int32_t> tokens;  // generated since the last output
  std::string text;             // their text (what of it may be sent now)
  /// Per token of `tokens` when the request asked for log probabilities.
  std::vector<text::SampledToken> logprobs;
  bool final = false;
  text::FinishReason finish = text::FinishReason::none;
  uint32_t prompt_tokens = 0, completion_tokens = 0;  // on the final output
  std::optional<Error> error;                         // the final output of a failed stream
  /// With `error`: the stream was given up unfinished by this replica (its device broke, its model
  /// was unloaded or set aside with nowhere to go), not refused: whoever relays it may continue it
  /// on another replica from the tokens already sent (generate_request::resume_tokens).
  bool resumable = false;
};

/// One generation request as a model's GenerationLoop runs it (actors/node/engine/generation_loop.hpp):
/// the executor makes it from the client's request on the engine's thread (tokenized, the chat
/// template applied), and `emit` carries each GenerationOutput back.
struct GenerationJob {
  std::string id;               // the request's (cancel() names it)
  std::vector<int32_t> prompt;  // token ids, the chat template applied
  /// Ids a lost replica already sent: fed after the prompt, counted as generated, never sent again.
  std::vector<int32_t> resumed;
  text::SamplingParams sampling;
  uint64_t fallback_seed = 0;   // the seed when sampling has none
  text::StopParams stop;
  std::vector<std::string> stop_strings;
  bool skip_special_tokens = true;
  std::function<void(GenerationOutput)> emit;
};

/// Makes a generation's job when it starts, on the engine's thread, with the model's tokenizer (null
/// when the model carries none): the gpu_executor tokenizes the client's prompt there, not on its
/// actor. An error answers the run with it (nothing was generated).
using MakeGeneration = std::function<Result<GenerationJob>(const text::Tokenizer*)>;

/// One request on a model that may not be resident (late binding). The router fills what to copy,
/// evict and keep; the executor fills key, make_inputs and wanted from the client's request.
struct SwapRun {
  model_key key;
  std::shared_ptr<const gpu::Model> model;  // the host copy
  std::vector<gpu::HostTensor> inputs;
  /// Copy from this device copy (the router locked it: ExecutorEngine::weights_of) instead of host
  /// memory.
  std::optional<gpu::PeerWeights> peer;
  /// Evicted first (the router's plan), then `fallback` in order while the pool still has no room
  /// for the model (fragmentation), so the policy's order holds either way.
  std::vector<model_key> evict;
  std::vector<model_key> fallback;
  /// Registration profile: time the run (cold when not resident), then run again warm.
  bool profile = false;
  /// Device hand-off (a workflow's steps): inputs kept on this device by an earlier run, by handle,
  /// named as the model's inputs; the consumer reads the producer's buffer.
  std::vector<std::pair<std::string, uint64_t>> device_inputs;
  /// Outputs to keep on the device (SwapRunResult::kept) instead of copying them back; the others
  /// `wanted` names (all when empty and nothing is kept) come back as usual.
  std::vector<std::string> keep;
  std::vector<std::string> wanted;
  /// Inputs kept on another device of the node (ExecutorEngine::lend there), copied over the link
  /// first.
  std::vector<gpu::PeerValue> peer_inputs;
  /// AsyFunc: a Shadow of this model on another device of the node (load_shadow there, reached
  /// through its engine's gate): a plain run puts `shadow_share` of its rows on it (at least one,
  /// leaving one; gpu/shadow_split.hpp) and runs on the worker, not beside others. A Shadow gone
  /// leaves its rows to this device (SwapRunResult::split says so).
  std::shared_ptr<EngineGate> shadow;
  double shadow_share = 0.5;
  /// When set, `inputs` are made by it when the job starts (see RunInputs); an error answers the
  /// job with a SwapRunResult that holds only that error and inputs_failed (nothing evicted, copied
  /// or run).
  RunInputs make_inputs;
  /// A generation (docs/design/generation.md) instead of a run: once the model is resident, the job
  /// this makes joins the model's generation loop on this device, which streams through the job's
  /// `emit` from then on; the SwapRunResult answers when it joined (outputs empty) or why it did
  /// not (nothing was generated, `emit` is never called).
  MakeGeneration generate;
  /// Streams set aside when the model last left a device (ParkedGenerations): once the model is
  /// resident, they join its generation loop here and go on. Answered like `generate` (outputs
  /// empty once they joined).
  std::shared_ptr<ParkedGenerations> resume;
};

/// What a SwapRun did: its answer and what changed on the device.
struct SwapRunResult {
  InferResult run;
  /// The weights were copied in for this request.
  bool swapped = false;
  /// Models dropped from the device for it (the plan's and fallbacks actually used).
  std::vector<model_key> evicted;
  /// Pool bytes the model takes on the device after the job; 0 when not resident.
  uint64_t footprint = 0;
  uint64_t pool_free = 0;
  /// profile only: the second, warm run.
  uint64_t warm_us = 0;
  /// The device faulted or the job threw: the engine is broken until restarted.
  bool fault = false;
  /// The outputs kept on the device (SwapRun::keep), each under a new handle.
  std::vector<gpu::KeptValue> kept;
  /// Device bytes the run's activations took (its liveness plan): what a concurrent run of the
  /// model needs free.
  uint64_t plan_bytes = 0;
  /// A run with SwapRun::shadow: the rows the Shadow computed, or why the Body took them back.
  gpu::SplitStats split;
  /// SwapRun::make_inputs failed: the job did nothing else (run.outputs says why; the rest is as
  /// default-constructed).
  bool inputs_failed = false;
  /// Generation streams of models this job evicted, set aside (see ParkedGenerations): one entry per
  /// evicted model that had streams; the router queues each to resume where the model binds next.
  std::vector<std::pair<model_key, std::shared_ptr<ParkedGenerations>>> parked;
};

}  // namespace ember
