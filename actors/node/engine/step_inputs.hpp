// StepInputs: the four host tensors one generation step feeds a generative model, built from the
// step's sequences exactly as docs/design/generation.md lays them out (the engine room:
// executor_engine.hpp; the kv_attention op reads kv_meta). Pure: anyone, any thread; no device.
//
// A step's sequences s = 0 .. B-1, each with n_s >= 1 tokens to feed starting at position p_s, and
// its block table (device addresses of its KV blocks, in position order); T = sum of n_s.
//   1. input_ids  int64 [T]: sequence 0's tokens, then sequence 1's, ... (each contiguous, in order)
//   2. positions  int64 [T]: p_s, p_s + 1, ..., p_s + n_s - 1 for each sequence in the same order
//   3. kv_meta    int64 [M], M = 4 + T + B * W:
//        [0] B   [1] block_size   [2] W, the table width   [3] the cache's type (0 f32, 1 f16, 2 bf16)
//        [4, 4 + T)            each token's sequence index in [0, B)
//        [4 + T, 4 + T + B*W)  row s: sequence s's block addresses, position order; unused entries 0
//   4. last_index int64 [B]: per sequence, the row in [0, T) of its last token this step
// W is the longest table given (at least 1). A table must cover the step's positions: at least
// ceil((p_s + n_s) / block_size) blocks, none of them address 0 (0 marks an unused entry).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.hpp"
#include "gpu/kernel_args.hpp"
#include "model/host_tensor.hpp"
#include "model/tensor.hpp"

namespace ember::engine {

/// kv_meta's fixed fields (the numbered layout above).
inline constexpr size_t kKvMetaSequences = 0;
inline constexpr size_t kKvMetaBlockSize = 1;
inline constexpr size_t kKvMetaWidth = 2;
inline constexpr size_t kKvMetaDType = 3;
inline constexpr size_t kKvMetaHeader = 4;
static_assert(kKvMetaHeader == kKvMetaDType + 1, "the token indices follow the header");
static_assert(sizeof(int64_t) == 8, "kv_meta is int64");

/// kv_meta[3] for a cache of `dtype`: 0 float32, 1 float16, 2 bfloat16; invalid_argument otherwise.
Result<int64_t> kv_dtype_code(gpu::DType dtype);

/// One sequence's part of a step.
struct StepSequence {
  uint64_t id = 0;                    // the caller's (named in errors only)
  uint64_t start = 0;                 // the position of tokens[0]
  std::vector<int64_t> tokens;        // to feed, at least one
  std::vector<gpu::DevicePtr> table;  // its KV blocks, position order
};

/// The model's inputs, in its input order (model.json): input_ids, positions, kv_meta, last_index.
struct StepTensors {
  gpu::HostTensor input_ids, positions, kv_meta, last_index;
  /// The four, in that order (moved out).
  std::vector<gpu::HostTensor> take();
};

/// Builds the layout above. invalid_argument for no sequence, block_size 0, a cache type other than
/// the three, a sequence without tokens, a table that does not cover its positions or lists address
/// 0 where a position needs a block, or an address or position beyond int64.
Result<StepTensors> build_step_inputs(const std::vector<StepSequence>& sequences, uint32_t block_size,
                                      gpu::DType cache_dtype);

}  // namespace ember::engine
