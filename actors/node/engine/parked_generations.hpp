// ParkedStreams: the engine room's ParkedGenerations (actors/engine_run.hpp): a generative model's
// streams taken out of its GenerationLoop when the model left the device (evicted for another
// model), to be taken back by a loop of the same model on this device or another one of the node
// (GenerationLoop::park, GenerationLoop::unpark; docs/design/generation.md "Late binding with
// state"). Each stream keeps
//   - its job (id, prompt, parameters, emit), tokens so far (the batcher's: prompt then generated),
//     sampler counts, stop conditions and matcher, and its incremental decoder with the tokenizer
//     that decoder reads (held here, so the decoder stays valid whichever loop takes it back);
//   - its KV cache: a host copy (KvHostCopy, made by the preemption's swap) imported by the next
//     loop's KvBlocks into fresh blocks, or none (dropped: the next loop recomputes it by a prefill
//     of every token so far; nothing is emitted again).
//
// Who calls: any thread. take() and fail() are exclusive under one lock; streams() and host_bytes()
// read under it. Never blocks but on that lock and on the emits fail() calls (sinks that must not
// block). Invariant: every stream handed to this object ends exactly once: taken back (its loop
// answers it from then on), or failed here with a final output whose error is resumable (fail(),
// or the destructor: unavailable, "set aside and never taken back").
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "actors/engine_run.hpp"
#include "actors/node/engine/generation_batcher.hpp"
#include "actors/node/engine/kv_blocks.hpp"
#include "text/incremental_decoder.hpp"
#include "text/sampling.hpp"
#include "text/stop_conditions.hpp"
#include "text/stop_matcher.hpp"
#include "text/tokenizer.hpp"

namespace ember::engine {

/// A request's stream state in a GenerationLoop (all but its KV and its batcher entry).
struct StreamState {
  GenerationJob job;
  text::Sampler sampler;
  text::StopConditions stop;
  std::optional<text::StopMatcher> stops;
  std::optional<text::IncrementalDecoder> decoder;  // reads *tokenizer
  text::TokenCounts counts;
  uint64_t generated = 0;  // tokens counting the resumed ones
  std::shared_ptr<const text::Tokenizer> tokenizer;
};

/// One stream set aside: its state, its batcher entry, and its KV host copy (blocks 0 when dropped).
struct ParkedStream {
  StreamState state;
  GenerationBatcher::Taken seq;
  KvHostCopy kv;
};

/// The final output of a stream given up unfinished: `error`, resumable.
void fail_stream(StreamState& s, const Error& error);

class ParkedStreams final : public ParkedGenerations {
 public:
  explicit ParkedStreams(std::vector<ParkedStream> streams) : streams_(std::move(streams)) {}
  /// Fails the streams still held, resumable (see the header).
  ~ParkedStreams() override;

  size_t streams() const override;
  uint64_t host_bytes() const override;
  void fail(const Error& error) override;
  /// Every stream held, in their queue order (front first); none left here.
  std::vector<ParkedStream> take();

 private:
  mutable std::mutex mu_;
  std::vector<ParkedStream> streams_;  // guarded by mu_
};

}  // namespace ember::engine
