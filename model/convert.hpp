// `ember model convert`: a model directory's float weights rewritten at another width (float32,
// float16 or bfloat16), everything else kept: model.json byte for byte, the tensors' names and
// order (so each layer's bytes stay one range), constant layers' values untouched (they are data,
// not weights: an index or a mask keeps its dtype), and so are kv_attention's rotary frequencies
// (ops.hpp's exact_weights: float16 would move a rotary angle of p * inv_freq by about p / 2000
// radians), and a generative model's tokenizer files (U8 tensors after the layers,
// model/generation_spec.hpp: bytes, not numbers). A profile.json in the destination is removed:
// it measured other bytes.
//
// Narrowing rounds to nearest even (model/half.hpp); a float32 value beyond float16's range
// becomes infinity, which the conversion refuses (naming the tensor) rather than write a model
// that answers inf. Widening is exact.
//
// Blocking file I/O on the caller's thread (the CLI's). No global state: any thread.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.hpp"
#include "model/tensor.hpp"

namespace ember::gpu {

struct ConvertStats {
  uint64_t tensors_converted = 0;
  uint64_t bytes_before = 0;  // weights.safetensors, header included
  uint64_t bytes_after = 0;
  bool profile_removed = false;  // dst_dir's profile.json described other bytes (run `ember model profile` again)
};

/// Converts the model version in `src_dir` into `dst_dir` (created if missing; may equal src_dir:
/// the weights file is replaced atomically). `width`: f32, f16 or bf16. The result is checked as
/// a server loads it (Model::check_dir).
Result<ConvertStats> convert_model_dir(const std::string& src_dir, const std::string& dst_dir, DType width);

}  // namespace ember::gpu
