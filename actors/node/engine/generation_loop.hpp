// GenerationLoop: one generative model's token-by-token serving on one device (the engine room:
// executor_engine.hpp; the contract: docs/design/generation.md). It composes, for that model,
//   - its KV cache (KvBlocks over the engine's device memory, kv_blocks.hpp),
//   - the continuous batcher (GenerationBatcher, generation_batcher.hpp) that picks each step,
//   - and per request the rest of a stream: its sampler (text/sampling.hpp, seeded per request),
//     stop conditions and stop strings (text/stop_conditions.hpp, text/stop_matcher.hpp), and the
//     streaming detokenizer (text/incremental_decoder.hpp),
// and runs iterations: step() schedules one step, builds its four inputs (step_inputs.hpp), runs the
// model once through its LayerExecutor, samples a token for each sequence whose last token was fed,
// and hands each request what it may send now (emit), until a stop.
//
// A request's stream:  submit ──▶ [waiting ─▶ running ⟲ one token per step] ──▶ final output
//   - a final output carries the finish reason (stop: EOS, a stop token or a stop string; length:
//     max_tokens or the context window) and the usage, or an error (the run failed, the model left
//     the device with nowhere to keep its cache);
//   - cancel() (the client went away) ends it at the next step with no further output;
//   - a request refused at submit (bad parameters, a prompt over the context window, a full queue)
//     gets its Error back from submit() and never an output.
// Emitted text is whole UTF-8 characters, never any part of a stop string; token ids are sent with
// their text (the ids a resumed stream continues from). Token i of a stream (counting the resumed
// ones) is drawn from (seed, i) alone, so a stream continued elsewhere from the tokens already sent
// draws what this one would have.
//
// Who calls: the thread running the engine's jobs, one call at a time (not thread-safe); emit is
// called on it too, and must not block. Time (now_us) is passed in. step() blocks while the model
// runs (a job's work), as any run does.
//
// The model must stay resident while the loop has work: before the model leaves the device the
// engine parks the loop's streams (park: every sequence preempted, its blocks to host memory or
// dropped to be recomputed, then every stream taken out into a ParkedStreams,
// parked_generations.hpp), and a loop of the same model, here or on another device, takes them back
// (unpark) once the model is resident there.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/engine_run.hpp"
#include "actors/node/engine/generation_batcher.hpp"
#include "actors/node/engine/kv_blocks.hpp"
#include "actors/node/engine/parked_generations.hpp"
#include "base/status.hpp"
#include "gpu/executor.hpp"
#include "text/incremental_decoder.hpp"
#include "text/stop_matcher.hpp"
#include "text/tokenizer.hpp"

namespace ember::engine {

/// What a generative model is, for its loop (from its model.json's generation section).
struct GenerativeSpec {
  KvLayout layout;
  uint32_t vocab_size = 0;      // the logits' width
  uint64_t context_window = 0;  // positions the model was trained for
  std::vector<int32_t> eos_ids;
};

struct GenerationLoopConfig {
  GenerationBatcherConfig batcher;
  KvBlocksConfig kv;
  /// The preemption costs a new loop weighs until a profile measures them (set_costs); all 0 by
  /// default: every preemption recomputes.
  KvPreemptionCosts costs;
};

struct GenerationLoopStats {
  GenerationCounters batcher;
  KvBlocksStats kv;
  KvPreemptionCosts costs;  // what the preemption choice weighs now
  uint64_t streams = 0;           // requests holding a stream now
  uint64_t tokens_generated = 0;  // sampled so far
};

class GenerationLoop {
 public:
  /// A loop for `spec` over `memory`'s pool on `device` (which outlive it); `tokenizer` may be null
  /// (then only token-id prompts, and outputs without text). invalid_argument for a bad spec or config.
  static Result<std::unique_ptr<GenerationLoop>> create(gpu::Device& device, DeviceMemory& memory, GenerativeSpec spec,
                                                        std::shared_ptr<const text::Tokenizer> tokenizer,
                                                        GenerationLoopConfig config);
  ~GenerationLoop();

  /// The model's executor, while it is resident (null: it left; steps wait).
  void attach(gpu::LayerExecutor* executor) { executor_ = executor; }
  bool attached() const { return executor_ != nullptr; }

  /// Queues `job`. invalid_argument (parameters, a prompt the context window cannot take, an id in
  /// use), unavailable (the queue is full): the job was not taken and `emit` is never called.
  Status submit(GenerationJob job, uint64_t now_us);
  /// Ends request `id` at the next step, with no further output. False when unknown.
  bool cancel(const std::string& id);
  /// One iteration (see the header). False when nothing is left to run (no step was taken), or
  /// the model is not attached.
  bool step(uint64_t now_us);
  /// Fails every stream with `error` (a final output each) and forgets them: the device broke
  /// (`resumable`: the gateway may continue them elsewhere).
  void fail_all(const Error& error, bool resumable = false);
  /// The model must leave the device: every running sequence is preempted (generation_batcher.hpp).
  size_t preempt_all() { return batcher_->preempt_all(); }
  /// The model leaves the device: every sequence preempted (swapped or dropped as a preemption
  /// is), then every stream taken out (in its queue order) with its host KV copy; null when none
  /// was left. The loop is empty after (cancelled sequences leave at once, their KV freed), and so
  /// is its share of the device pool: a loop with no stream (parked, finished, cancelled) gives its
  /// KV chunks back to the pool, which the late-binding router counts as free for other models.
  std::unique_ptr<ParkedStreams> park();
  /// Takes back streams another loop of this model parked (this device or another): each queued
  /// behind the waiting ones with its host KV copy imported (swapped in at admission, into fresh
  /// blocks) or, without one or when the host swap space has no room, its tokens to be recomputed
  /// (nothing emitted twice). A stream that cannot be taken (its id generating here already, a
  /// copy of another layout) ends with its error, resumable. How many joined.
  size_t unpark(std::vector<ParkedStream> streams, uint64_t now_us);
  /// The preemption's measured costs (generation_batcher.hpp set_costs).
  void set_costs(const KvPreemptionCosts& costs) { batcher_->set_costs(costs); }
  /// A KV copy probe: `blocks` blocks taken, swapped out and back in, freed. The caller times it to
  /// measure host bytes/s (the engine: no clock here). Its bytes, or the cache's error.
  Result<uint64_t> probe_swap(uint64_t blocks);
  /// Requests with work left (waiting or running).
  bool busy() const { return !streams_.empty(); }

  const text::Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const GenerativeSpec& spec() const { return spec_; }
  GenerationLoopStats stats() const;

 private:
  using Stream = StreamState;
  GenerationLoop(GenerativeSpec spec, std::shared_ptr<const text::Tokenizer> tokenizer);
  /// The token sampled for `s` (from its logits row): counted, checked, its text emitted. True
  /// when the stream finished.
  bool take(uint64_t seq, Stream& s, const text::SampledToken& sampled);
  void finish(uint64_t seq, Stream& s, text::FinishReason reason, GenerationOutput out);
  void fail(uint64_t seq, const Error& error, bool resumable = false);

  const GenerativeSpec spec_;
  std::shared_ptr<const text::Tokenizer> tokenizer_;
  std::unique_ptr<KvBlocks> kv_;
  std::optional<GenerationBatcher> batcher_;
  gpu::LayerExecutor* executor_ = nullptr;
  std::map<uint64_t, Stream> streams_;       // by sequence
  std::map<std::string, uint64_t> by_id_;    // request id -> sequence
  uint64_t next_seq_ = 1;
  uint64_t tokens_generated_ = 0;
};

}  // namespace ember::engine
