// KvSpace: what the generation batcher (generation_batcher.hpp) asks of a KV cache, per sequence:
// blocks that grow with its tokens, given back when it ends, moved to host memory and back when it
// is preempted. KvBlocks (kv_blocks.hpp) is the cache on a device; the batcher's tests use a
// counting one. The seam keeps the batcher's decisions testable without a device, and keeps the
// copies (the only blocking part) in the cache.
//
// A sequence here is one of three: unknown (no blocks), resident (blocks on the device, a block
// table), swapped (its blocks' bytes in host memory, no device blocks):
//
//   unknown ──grow──▶ resident ──swap_out──▶ swapped ──swap_in──▶ resident
//      ▲                  │                     │
//      └──── release ─────┴──────── release ────┘
//   resident ⟲ grow (more tokens)
// Any other move (grow or swap_out on a swapped sequence, swap_in on a resident one) is rejected
// with ErrorCode::internal, counted, and leaves the sequence as it was.
//
// Who calls: the thread that runs the model's generation steps (not thread-safe), as for the
// batcher. Errors: out_of_memory when blocks or host memory run out (retryable: the caller
// preempts, or waits); nothing is half done then.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.hpp"
#include "gpu/kernel_args.hpp"

namespace ember::engine {

class KvSpace {
 public:
  virtual ~KvSpace() = default;
  /// Tokens per block (kv_meta[1]).
  virtual uint32_t block_size() const = 0;
  /// One block's bytes (what one copy to host memory moves).
  virtual uint64_t block_bytes() const = 0;
  /// The most blocks the cache may ever hold at once (its bound); a sequence needing more can
  /// never run.
  virtual uint64_t capacity_blocks() const = 0;
  /// Blocks in use by resident sequences now.
  virtual uint64_t blocks_in_use() const = 0;
  /// Device blocks `seq` holds (0 when unknown or swapped).
  virtual uint64_t blocks_of(uint64_t seq) const = 0;
  /// Whether host memory can take `bytes` more of swapped blocks now.
  virtual bool host_room(uint64_t bytes) const = 0;

  /// Makes resident `seq`'s blocks cover positions [0, tokens): creates it when unknown, adds
  /// blocks when it needs more, never takes any away. All or nothing: out_of_memory when the
  /// blocks are not to be had (nothing changed).
  virtual Status grow(uint64_t seq, uint64_t tokens) = 0;
  /// Gives back `seq`'s blocks or host copy; unknown: nothing.
  virtual void release(uint64_t seq) = 0;
  /// Copies resident `seq`'s blocks to host memory and frees them. out_of_memory when host memory
  /// has no room (nothing changed); not_found when unknown; a device's fault as it came.
  virtual Status swap_out(uint64_t seq) = 0;
  /// Copies swapped `seq` back into fresh blocks (their addresses may differ; its table is
  /// rewritten) and drops the host copy. out_of_memory when the blocks are not to be had (it stays
  /// swapped, its host copy intact); not_found when unknown; a device's fault as it came.
  virtual Status swap_in(uint64_t seq) = 0;
  /// Resident `seq`'s block addresses in position order (empty when unknown or swapped).
  virtual std::vector<gpu::DevicePtr> table(uint64_t seq) const = 0;
};

}  // namespace ember::engine
