// KvBlocks: one generating model's KV cache on one device, in fixed-size blocks (the engine room:
// executor_engine.hpp; the contract: docs/design/generation.md, "A KV block"). It owns
//   - chunks of several blocks carved from the engine's model pool (DeviceMemory::placer, named
//     "#kv/NAME/N"), so a block's address is a device address and a sequence's blocks need not be
//     contiguous; a chunk goes back to the pool when its last block is free (beyond `spare_chunks`
//     kept for the next sequences), and trim() gives every wholly free chunk back at once;
//   - per sequence, the blocks its tokens need, in position order (its block table): they grow as
//     tokens are generated, so memory follows the tokens actually generated, and are freed when it
//     ends;
//   - a bound: the most bytes of blocks held at once (a byte budget, or a fraction of the pool), and
//     the counts metrics read (in use, free, high water, swapped);
//   - swaps: a sequence's blocks copied to host memory (one copy per block, on this cache's own
//     stream, through the device's pinned staging when it has one: gpu/pinned_staging.hpp, in
//     rounds of as many blocks as the region holds, synchronised between rounds) and freed; copied
//     back later into fresh blocks (the addresses may differ: its table is rewritten). Host memory
//     for swapped blocks is pageable and bounded (`host_bytes`).
//
// A block (generation.md): block_size positions of every kv_attention layer; for layer l, K then V,
// each [block_size, num_kv_heads, head_dim] of the cache's element type, at
//   block + l * 2 * block_size * num_kv_heads * head_dim * elem          (K)
//   block + (l * 2 + 1) * block_size * num_kv_heads * head_dim * elem    (V)
// so a block is num_kv_layers * 2 * block_size * num_kv_heads * head_dim * elem bytes, one
// contiguous device range: what one copy moves. Blocks in a chunk are back to back; chunks are
// 256-byte aligned (the pool's), and so is a block when its bytes are a multiple of 256.
//
// A sequence's lifecycle is KvSpace's (kv_space.hpp): unknown -> resident <-> swapped, release from
// either; illegal moves are rejected with ErrorCode::internal and counted (stats().illegal).
//
// Who calls: the thread that runs the model's generation steps (a job of the engine's worker); not
// thread-safe, except stats(), which any thread may call (a snapshot under its own lock). grow(),
// release() and trim() never wait on the device; swap_out() and swap_in() block until their copies
// are done (a sequence's blocks: milliseconds). Blocks are only bookkeeping here: no kernel runs,
// and blocks given back are not cleared (a new sequence writes each position before reading it).
// Out of memory (the bound, the pool, host memory) is an Error, never a crash, and nothing is half
// done then.
//
// Destruction frees every chunk: no step that reads or writes the blocks may still be in flight.
// The DeviceMemory and the device outlive this.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "actors/node/engine/device_memory.hpp"
#include "actors/node/engine/kv_space.hpp"
#include "base/status.hpp"
#include "gpu/device.hpp"
#include "model/tensor.hpp"

namespace ember::engine {

/// The shape of one model's cache (its generation section: num_kv_layers, num_kv_heads, head_dim).
struct KvLayout {
  uint32_t num_kv_layers = 0;  // kv_attention layers (their kv_layer is 0 .. num_kv_layers - 1)
  uint32_t num_kv_heads = 0;
  uint32_t head_dim = 0;
  /// Tokens per block. Default 16, vLLM's: smaller wastes less of a sequence's last block, larger
  /// makes fewer, longer copies and shorter block tables.
  uint32_t block_size = 16;
  gpu::DType dtype = gpu::DType::f32;  // float32, float16 or bfloat16

  /// One position of one layer's K (or V): num_kv_heads * head_dim * elem.
  uint64_t row_bytes() const;
  /// num_kv_layers * 2 * block_size * num_kv_heads * head_dim * elem.
  uint64_t block_bytes() const;
  /// Where layer `layer`'s K starts in a block; its V follows at + block_size * row_bytes().
  uint64_t k_offset(uint32_t layer) const;
  uint64_t v_offset(uint32_t layer) const;
  /// invalid_argument for a zero dimension, a type other than the three, or a block over 1 GiB.
  Status validate() const;
};

/// A sequence's KV blocks copied to host memory, taken out of the KvBlocks that swapped them
/// (export_host) to be imported by another KvBlocks of the same layout (import_host): a generation
/// stream set aside while its model left the device (parked_generations.hpp). `blocks` blocks of
/// layout.block_bytes() back to back, in position order; the device addresses are not kept.
struct KvHostCopy {
  KvLayout layout;
  std::unique_ptr<uint8_t[]> bytes;
  uint64_t blocks = 0;
  uint64_t size_bytes() const { return blocks * layout.block_bytes(); }
};

struct KvBlocksConfig {
  /// Names the cache's chunks in the pool ("#kv/NAME/N"); the model key, usually. Not empty.
  std::string name = "kv";
  /// The most device bytes of blocks held at once (whole blocks: rounded down). 0 = pool_fraction
  /// of the pool's capacity. Larger lets more tokens run at once and leaves less room for models.
  uint64_t budget_bytes = 0;
  /// With budget_bytes 0: the share of the model pool, in (0, 1]. Default 0.5: half the pool for
  /// tokens, half for the weights of the models late binding swaps through the device.
  double pool_fraction = 0.5;
  /// Blocks per chunk carved from the pool; 0 = as many as fill one pool partition (at least 1). A
  /// chunk the pool cannot give whole is asked for in halves, down to one block.
  uint32_t chunk_blocks = 0;
  /// Wholly free chunks kept when sequences end (default 1: no carve-and-free churn at a chunk's
  /// edge); the rest go back to the pool at once.
  uint32_t spare_chunks = 1;
  /// Host memory for swapped-out blocks, bytes (vLLM's swap_space: 4 GiB by default); 0 = none
  /// (swap_out refuses; the caller recomputes).
  uint64_t host_bytes = 4ull << 30;
};

struct KvBlocksStats {
  uint64_t block_bytes = 0;
  uint64_t bound_blocks = 0;    // the most blocks held at once
  uint64_t in_use = 0;          // blocks of resident sequences
  uint64_t free = 0;            // blocks held in chunks, free
  uint64_t high_water = 0;      // the most in use at once so far
  uint64_t chunks = 0;          // chunks held
  uint64_t device_bytes = 0;    // the chunks' bytes
  uint64_t sequences = 0;       // resident
  uint64_t swapped = 0;         // sequences in host memory
  uint64_t swapped_bytes = 0;   // host bytes they hold
  uint64_t swap_outs = 0, swap_ins = 0;                   // sequences so far
  uint64_t swap_out_bytes = 0, swap_in_bytes = 0;         // so far
  uint64_t refused = 0;         // grows and swap-ins refused out of memory
  uint64_t illegal = 0;         // moves rejected (kv_space.hpp)
};

class KvBlocks final : public KvSpace {
 public:
  /// A cache of `layout` over `memory`'s pool on `device` (both outlive it): nothing carved yet,
  /// one stream created for swaps. invalid_argument for a bad layout or config, or a bound that
  /// holds no block.
  static Result<std::unique_ptr<KvBlocks>> create(gpu::Device& device, DeviceMemory& memory, KvLayout layout,
                                                  KvBlocksConfig config);
  ~KvBlocks() override;
  KvBlocks(const KvBlocks&) = delete;
  KvBlocks& operator=(const KvBlocks&) = delete;

  const KvLayout& layout() const { return layout_; }
  /// Blocks that cover `tokens` positions.
  uint64_t blocks_for(uint64_t tokens) const { return (tokens + layout_.block_size - 1) / layout_.block_size; }

  // -- KvSpace (kv_space.hpp) -------------------------------------------------------------------
  uint32_t block_size() const override { return layout_.block_size; }
  uint64_t block_bytes() const override { return block_bytes_; }
  uint64_t capacity_blocks() const override { return bound_blocks_; }
  uint64_t blocks_in_use() const override { return in_use_; }
  uint64_t blocks_of(uint64_t seq) const override;
  bool host_room(uint64_t bytes) const override { return host_used_ + bytes <= config_.host_bytes; }
  Status grow(uint64_t seq, uint64_t tokens) override;
  void release(uint64_t seq) override;
  Status swap_out(uint64_t seq) override;
  Status swap_in(uint64_t seq) override;
  std::vector<gpu::DevicePtr> table(uint64_t seq) const override;

  /// Takes swapped `seq`'s host copy out of this cache (the sequence is forgotten here, its host
  /// bytes no longer counted). internal (illegal move) when `seq` is not swapped.
  Result<KvHostCopy> export_host(uint64_t seq);
  /// Makes `seq` (unknown here) a swapped sequence holding `copy` (from any KvBlocks of this
  /// layout): swap_in() then copies it into fresh blocks, its table the new addresses.
  /// invalid_argument for another layout, internal for a known `seq`, out_of_memory when the host
  /// swap space has no room (nothing changed: the caller recomputes).
  Status import_host(uint64_t seq, KvHostCopy copy);
  /// Whether `seq` is resident, swapped, or neither.
  enum class State : uint8_t { unknown, resident, swapped };
  State state(uint64_t seq) const;
  /// Gives every wholly free chunk back to the pool (a model needs the room); how many.
  size_t trim();
  /// Any thread.
  KvBlocksStats stats() const;

 private:
  struct Chunk {
    std::string name;     // in the pool
    gpu::DevicePtr base;
    uint32_t blocks = 0;
    std::set<uint32_t> free;  // lowest first
  };
  struct Block {
    uint64_t chunk = 0;  // serial
    uint32_t index = 0;
  };
  struct Seq {
    std::vector<Block> blocks;           // resident: in position order
    std::unique_ptr<uint8_t[]> host;     // swapped: host_blocks blocks back to back
    uint64_t host_blocks = 0;
    bool swapped = false;
  };

  KvBlocks(gpu::Device& device, DeviceMemory& memory, KvLayout layout, KvBlocksConfig config);
  /// `n` free blocks, carving chunks as needed; all or nothing (chunks carved for a failed call go
  /// back). out_of_memory naming the bound or the pool.
  Result<std::vector<Block>> take(uint64_t n);
  /// Returns blocks to their chunks; wholly free chunks beyond spare_chunks go back to the pool.
  void give(const std::vector<Block>& blocks);
  /// Carves one chunk of at most `blocks` blocks (halving when the pool refuses); its serial.
  Result<uint64_t> carve(uint64_t blocks);
  void free_chunk(uint64_t serial);
  gpu::DevicePtr address(const Block& b) const;
  /// Blocks copied per synchronisation in a swap of `n`: what the staging region holds (all `n`
  /// without one).
  uint64_t staging_round(uint64_t n) const;
  Error illegal(uint64_t seq, const char* move, const char* state);
  /// Copies the counts into the snapshot stats() reads.
  void publish();

  gpu::Device& device_;
  DeviceMemory& memory_;
  const KvLayout layout_;
  const KvBlocksConfig config_;
  uint64_t block_bytes_ = 0;
  uint64_t bound_blocks_ = 0;
  uint64_t chunk_blocks_ = 0;
  std::unique_ptr<gpu::Stream> stream_;  // swaps' copies

  std::map<uint64_t, Chunk> chunks_;  // by serial
  uint64_t next_chunk_ = 1;
  uint64_t held_ = 0;    // blocks in chunks
  uint64_t in_use_ = 0;  // blocks of resident sequences
  uint64_t host_used_ = 0;
  std::map<uint64_t, Seq> seqs_;
  uint64_t swapped_seqs_ = 0;
  KvBlocksStats counts_;  // the running totals (swaps, refusals, high water)

  mutable std::mutex stats_mu_;
  KvBlocksStats stats_;  // guarded by stats_mu_
};

}  // namespace ember::engine
