// KV preemption: when a generating sequence must give up its KV blocks (the cache's blocks ran out,
// or its model must leave the device under late binding), whether its blocks are copied to host
// memory now and back when it runs again (swap), or dropped and rebuilt from its tokens by a prefill
// when it runs again (recompute). Issue 35: "choose per case by the bytes against the recompute time
// and say how". Pure: anyone, any thread; no I/O, no clock, no state (the previous choice comes in).
//
// The cost model, for one sequence (inputs in KvPreemptionInput):
//
//   swap_us      = 2 * (blocks * copy_fixed_us + bytes / host_bytes_per_s * 1e6)
//   recompute_us = tokens * prefill_us_per_token
//
//   - bytes, blocks: the sequence's KV blocks (blocks * the block's bytes), one copy per block;
//     they cross the host link twice, out now and in later, and both copies are charged here (the
//     swap-in delays the sequence's next step as the recompute's prefill does);
//   - host_bytes_per_s: the device's host link as measured (the copy elbow's rate at the block's
//     size, or the swap-in rate the engine observed); copy_fixed_us: what one copy costs besides
//     its bytes (a DMA setup: microseconds);
//   - tokens: the tokens whose keys and values are in the blocks (the sequence's computed tokens,
//     not those still to prefill: those cost the same either way);
//   - prefill_us_per_token: the model's measured prefill time per token (a step's compute time over
//     its tokens, at the step sizes served).
// vLLM (v0's scheduler) makes the same choice by a fixed rule: recompute for a request of one
// sequence, swap for a group (beam search). Ember weighs the two with the rates it measured.
// Departure: the prefill time is taken as linear in the tokens. Attention's share grows with the
// context, so recompute_us is low for very long contexts; the swap's cost is exactly linear, and
// the margin below absorbs the difference at the lengths served.
//
// Decision, with hysteresis (margin m, default 0.25):
//   no previous choice, or recompute last:  swap  iff  swap_us * (1 + m) < recompute_us
//   swap last:                              swap  iff  swap_us <= recompute_us * (1 + m)
// so measurements jittering around the break-even do not flip the choice from one preemption to
// the next. Ties and the band go to whatever was chosen last, and without a previous choice to
// recompute: it holds no host memory and needs no copy now, when the blocks are needed at once.
// Recompute always, whatever the costs, when a measurement is missing (host_bytes_per_s or
// prefill_us_per_token 0: nothing to weigh), when host memory has no room for the bytes
// (host_room false), or when there is nothing to move (bytes or tokens 0).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ember::placement {

enum class KvPreemption : uint8_t { swap, recompute };
/// "swap", "recompute".
std::string_view to_string(KvPreemption how);

struct KvPreemptionInput {
  uint64_t bytes = 0;   // the sequence's KV blocks, bytes
  uint64_t blocks = 0;  // how many (one copy each way per block)
  uint64_t tokens = 0;  // tokens whose keys and values the blocks hold
  /// Measured host link rate, bytes/s; 0 = not measured yet.
  double host_bytes_per_s = 0;
  /// Fixed cost of one host copy, microseconds.
  double copy_fixed_us = 0;
  /// Measured prefill time per token, microseconds; 0 = not measured yet.
  double prefill_us_per_token = 0;
  /// Host memory can take `bytes` now (the swap space's bound).
  bool host_room = true;
};

struct KvPreemptionChoice {
  KvPreemption how = KvPreemption::recompute;
  double swap_us = 0;       // both copies; 0 when not computable
  double recompute_us = 0;  // 0 when not computable
};

/// The header's decision. `previous`: what was chosen at the last preemption of this model (nullopt:
/// none yet). `margin` (m >= 0): the hysteresis band, a fraction; negative values count as 0.
KvPreemptionChoice choose_kv_preemption(const KvPreemptionInput& in, std::optional<KvPreemption> previous = std::nullopt,
                                        double margin = 0.25);

}  // namespace ember::placement
