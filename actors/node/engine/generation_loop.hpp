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
// The model must stay resident while the loop has work: the engine preempts every sequence
// (preempt_all: blocks to host memory or dropped to be recomputed) before the model leaves the
// device, and attaches the new executor when it is back.
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
};

struct GenerationLoopStats {
  GenerationCounters batcher;
  KvBlocksStats kv;
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
  /// Fails every stream with `error` (a final output each) and forgets them: the device broke.
  void fail_all(const Error& error);
  /// The model must leave the device: every running sequence is preempted (generation_batcher.hpp).
  size_t preempt_all() { return batcher_->preempt_all(); }
  /// Requests with work left (waiting or running).
  bool busy() const { return !streams_.empty(); }

  const text::Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const GenerativeSpec& spec() const { return spec_; }
  GenerationLoopStats stats() const;

 private:
  struct Stream {
    GenerationJob job;
    text::Sampler sampler;
    text::StopConditions stop;
    std::optional<text::StopMatcher> stops;
    std::optional<text::IncrementalDecoder> decoder;
    text::TokenCounts counts;
    uint64_t generated = 0;  // tokens counting the resumed ones
  };
  GenerationLoop(GenerativeSpec spec, std::shared_ptr<const text::Tokenizer> tokenizer);
  /// The token sampled for `s` (from its logits row): counted, checked, its text emitted. True
  /// when the stream finished.
  bool take(uint64_t seq, Stream& s, const text::SampledToken& sampled);
  void finish(uint64_t seq, Stream& s, text::FinishReason reason, GenerationOutput out);
  void fail(uint64_t seq, const Error& error);

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
