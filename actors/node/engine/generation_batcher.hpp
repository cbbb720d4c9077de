// GenerationBatcher: continuous batching at the iteration level for one generating model on one
// device (the engine room: executor_engine.hpp), as vLLM's scheduler does it (Kwon et al., SOSP
// '23, §4.5; chunked prefill as in Sarathi/vLLM). It owns the waiting queue and the running set,
// each sequence's tokens (prompt, then those generated) and how many of them the KV cache holds;
// the blocks themselves are the KvSpace's (kv_blocks.hpp on a device).
//
// A sequence's lifecycle:
//
//   submit ──▶ waiting ──admit──▶ running ──complete(finished)──▶ (gone: blocks freed)
//                ▲   ▲                │
//                │   └── preempt ─────┘   (to the front of the queue, its tokens kept: its blocks
//                │                         swapped to host memory, or dropped to be recomputed)
//   cancel ──▶ gone at the next schedule(), from waiting or running (blocks or host copy freed)
//   waiting ──▶ failed (out_of_memory) when its blocks can never be had: the cache's bound is
//               smaller than its tokens, or nothing else runs and the cache still cannot give them
//
// One iteration: schedule(now) picks the step, the caller builds its inputs (build_step_inputs,
// step_inputs.hpp), runs the model once and samples a token for each entry that samples, then
// complete(step, sampled) appends them. schedule():
//   0. sequences cancelled since the last step leave; their blocks are freed;
//   1. every running sequence in decode (one token to feed: the last one sampled) gets it, oldest
//      admitted first; one that crosses a block boundary grows by a block. When the cache cannot
//      give it, the most recently admitted running sequence is preempted (possibly this one) and
//      the grow is tried again: swap or recompute as placement/kv_preemption.hpp chooses from the
//      costs set_costs() gave (with hysteresis on the last choice); a swap the cache refuses
//      (host memory full, a copy failed) recomputes instead;
//   2. every running sequence still in its prefill gets its next chunk, oldest first, as far as
//      the token budget (max_num_batched_tokens) left allows (its blocks were taken at admission);
//   3. unless step 1 preempted, waiting sequences are admitted from the front while the running
//      set is below max_num_seqs, tokens are left in the budget and the cache gives the blocks for
//      all its tokens (a swapped one: its blocks swapped back in); the first that does not fit stops
//      admission (first come, first served). A prompt longer than the budget left is fed in chunks
//      over the next steps (chunked prefill).
// Decodes come first so that prefills never delay the running sequences' tokens (vLLM's decode
// priority with chunked prefill); the config requires max_num_batched_tokens >= max_num_seqs, so
// every running sequence's decode fits in every step.
//
// Recompute: a preempted sequence's blocks are dropped and all its tokens (prompt and output so
// far) are prefilled again when it is admitted; the last one's logits give its next token, so no
// token is repeated or skipped. A swapped one resumes where it stopped. No request is dropped by a
// preemption; preemptions are counted by kind.
//
// A step that was scheduled but not completed (its run failed) changes nothing: the next schedule()
// feeds the same tokens again (the cache's writes at those positions are idempotent).
//
// Bounds: the waiting queue holds at most max_waiting submitted sequences; beyond it submit()
// refuses the newest (unavailable, counted in `rejected`). Preempted sequences go back to the front
// even past the bound (they were admitted once; dropping them would drop a request).
//
// Plain C++, owned and called by the thread that runs the model's generation steps (not
// thread-safe); time (now_us, for the queue delays reported) is passed in. It never blocks but in
// the KvSpace's swaps, which copy a sequence's blocks.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "actors/node/engine/kv_space.hpp"
#include "actors/node/engine/step_inputs.hpp"
#include "base/status.hpp"
#include "placement/kv_preemption.hpp"

namespace ember::engine {

struct GenerationBatcherConfig {
  /// Tokens fed in one step, all sequences together (vLLM's max_num_batched_tokens). Larger steps
  /// prefill faster and delay each decode step longer. At least max_num_seqs.
  uint32_t max_num_batched_tokens = 2048;
  /// Sequences running at once, so at most per step (vLLM's max_num_seqs). At least 1.
  uint32_t max_num_seqs = 256;
  /// Sequences waiting at most (preempted ones not counted); beyond it: reject newest. At least 1.
  size_t max_waiting = 1024;
  /// The preemption choice's hysteresis band (placement/kv_preemption.hpp), a fraction.
  double preemption_margin = 0.25;
};

/// What a preemption costs, as the engine measured it (placement::KvPreemptionInput's rates).
struct KvPreemptionCosts {
  double host_bytes_per_s = 0;      // 0: not measured (recompute)
  double copy_fixed_us = 0;
  double prefill_us_per_token = 0;  // 0: not measured (recompute)
};

/// One step: sequences[i] is fed as entries[i] says.
struct GenerationStep {
  struct Entry {
    /// Its last token this step is its last token so far: the logits row gives its next token.
    /// False for a chunk of a prefill that continues next step.
    bool samples = false;
    /// Admitted this step (first admission, or again after a preemption).
    bool admitted = false;
    /// First admitted this step: from submit to now (time to first step).
    std::optional<uint64_t> queued_us;
  };
  std::vector<StepSequence> sequences;
  std::vector<Entry> entries;
  uint64_t tokens = 0;  // fed, all sequences together
  /// Sequences that left in this step's scheduling: cancelled, or failed with their error.
  std::vector<uint64_t> cancelled;
  std::vector<std::pair<uint64_t, Error>> failed;
  /// Sequences preempted while this step was scheduled.
  std::vector<uint64_t> swapped, recomputed;
  bool empty() const { return sequences.empty(); }
};

struct GenerationCounters {
  uint64_t steps = 0;           // schedule() calls that fed tokens
  uint64_t tokens = 0;          // fed so far
  uint64_t last_step_tokens = 0, max_step_tokens = 0;
  uint64_t submitted = 0, admitted = 0, finished = 0, cancelled = 0, failed = 0;
  uint64_t rejected = 0;        // submit() refused: the waiting queue was full (reject newest)
  uint64_t preempted_swap = 0, preempted_recompute = 0;
  uint64_t swap_fallbacks = 0;  // swaps chosen that the cache refused (recomputed instead)
  uint64_t blocks_in_use = 0;   // the cache's, after the last call
};

class GenerationBatcher {
 public:
  /// A batcher over `kv` (which outlives it). invalid_argument for a config that breaks a rule
  /// above.
  static Result<GenerationBatcher> create(KvSpace& kv, GenerationBatcherConfig config);

  /// Queues sequence `seq` with its prompt. invalid_argument for an id in use, an empty prompt, or
  /// a prompt whose blocks exceed the cache's bound (it could never run); unavailable when the
  /// waiting queue is full (the newest refused; counted).
  Status submit(uint64_t seq, std::vector<int64_t> prompt, uint64_t now_us);
  /// The client went away: `seq` leaves at the next schedule() (its blocks freed then), and a step
  /// in flight ignores its token. False for an unknown sequence.
  bool cancel(uint64_t seq);
  /// Step 0 alone, between steps: the cancelled sequences leave now (their blocks or host copies
  /// freed), for a loop that has no step to run next (its last stream was cancelled). Their ids.
  std::vector<uint64_t> release_cancelled();
  /// The header's steps 0-3. An empty step when nothing runs.
  GenerationStep schedule(uint64_t now_us);
  /// One token per sampling entry of `step` (the one schedule() returned last), in entry order:
  /// appended to its sequence, which leaves now (blocks freed) when `finished`. Entries that do not
  /// sample advance their prefill. invalid_argument, changing nothing, when `sampled` does not
  /// match the step's sampling entries.
  struct Sampled {
    int64_t token = 0;
    bool finished = false;
  };
  Status complete(const GenerationStep& step, const std::vector<Sampled>& sampled);
  /// Preempts every running sequence, newest first (the model must leave the device): each swapped
  /// or recomputed as a preemption is. How many.
  size_t preempt_all();

  /// A waiting sequence's state, taken out of this batcher (its model leaves the device and its
  /// stream is set aside: parked_generations.hpp) and restored into another batcher later.
  struct Taken {
    std::vector<int64_t> tokens;
    uint64_t computed = 0;  // positions its KV holds (its host copy, when swapped); 0 when dropped
    bool swapped = false;
    bool ever_admitted = false;
  };
  /// Removes waiting `seq` (preempted, or never admitted) without touching its KV (the caller takes
  /// its host copy from the cache: KvBlocks::export_host). Sequences in the order they wait, front
  /// first. nullopt for an unknown or running sequence (nothing changed). A cancelled one is taken
  /// too (the caller frees its KV and forgets it).
  std::optional<Taken> take(uint64_t seq);
  /// Ids waiting, front first.
  std::vector<uint64_t> waiting_ids() const { return {waiting_.begin(), waiting_.end()}; }
  /// Queues `taken` as waiting sequence `seq` (at the back, past max_waiting: it was accepted once).
  /// A swapped one's host copy must be in the cache already (KvBlocks::import_host); its blocks are
  /// swapped in at admission as for any preempted sequence. invalid_argument for an id in use or
  /// no tokens.
  Status restore(uint64_t seq, Taken taken, uint64_t now_us);

  /// The rates the preemption choice weighs (the engine's measurements; refreshed at will).
  void set_costs(const KvPreemptionCosts& costs) { costs_ = costs; }
  const KvPreemptionCosts& costs() const { return costs_; }

  size_t waiting() const { return waiting_.size(); }
  size_t running() const { return running_.size(); }
  /// A sequence's tokens (prompt, then generated); null when unknown.
  const std::vector<int64_t>* tokens(uint64_t seq) const;
  GenerationCounters counters() const;
  const GenerationBatcherConfig& config() const { return config_; }

 private:
  struct Seq {
    std::vector<int64_t> tokens;
    uint64_t computed = 0;  // tokens whose keys and values the cache holds: positions [0, computed)
    uint64_t submitted_us = 0;
    bool ever_admitted = false;
    bool running = false;
    bool swapped = false;  // waiting, its blocks in host memory
    bool cancelled = false;
  };
  GenerationBatcher(KvSpace& kv, GenerationBatcherConfig config) : kv_(&kv), config_(config) {}
  /// Preempts running sequence `id` (it is removed from running_ by the caller's pop).
  void preempt(uint64_t id, GenerationStep& step);
  /// Admits the front of the waiting queue; false when it does not fit (it stays at the front).
  bool admit(uint64_t now_us, uint64_t& budget, GenerationStep& step);
  void add_entry(GenerationStep& step, uint64_t id, uint64_t n, bool admitted, std::optional<uint64_t> queued_us);
  void forget(uint64_t id);

  KvSpace* kv_;
  GenerationBatcherConfig config_;
  KvPreemptionCosts costs_;
  std::optional<placement::KvPreemption> last_choice_;
  std::map<uint64_t, Seq> seqs_;
  std::deque<uint64_t> waiting_;   // front first
  std::vector<uint64_t> running_;  // oldest admitted first
  size_t submitted_waiting_ = 0;   // waiting sequences never admitted (what max_waiting bounds)
  GenerationCounters counters_;
};

}  // namespace ember::engine
