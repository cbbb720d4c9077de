// `ember model import DIR` for a Hugging Face folder: a decoder-only language model (GPT-2 or the
// Llama family, hf_config.hpp) turned into a generative Ember model directory.
//
// What it reads from DIR (a folder is recognised by its config.json):
//   config.json                 the architecture (hf_config.hpp: what is imported, what refused)
//   model.safetensors, or model.safetensors.index.json + its shards (hf_checkpoint.hpp)
//   generation_config.json, tokenizer.json, tokenizer_config.json   optional (hf_generation.hpp:
//                               special tokens, sampling defaults, the chat template's family, the
//                               tokenizer files carried)
// What it writes to OUT:
//   model.json                  hf_families.hpp's graph, with the generation section
//                               (model/generation_spec.hpp)
//   weights.safetensors         every layer's weights in layer order at the chosen width
//                               (kv_attention's inv_freq float32), then tokenizer.json and
//                               tokenizer_config.json as U8 tensors of those names, after every
//                               layer: the blob every cache, multicast and node load moves carries
//                               them, no device copy does
//   tokenizer.json, tokenizer_config.json   plain copies, for people to read (nothing loads them)
// then checks OUT as a server loads it (Model::check_dir); on a failed check the files are removed.
//
// The weights are streamed: one tensor (widened to float32, then written at the width) in memory
// at a time, so a model far larger than the free memory imports. Narrowing to float16 refuses a
// value past its range (naming the tensor), as `ember model convert` does.
//
// Errors: a refused architecture or config key is unsupported; malformed files (JSON, headers,
// missing shards or tensors, wrong shapes, a shard outside the folder) are invalid_argument,
// corrupt or not_found, each naming the file and the field or tensor.
//
// Blocking file I/O on the caller's thread (the CLI's). No global state: any thread, concurrently
// for different outputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "importer/hf_config.hpp"
#include "model/manifest.hpp"

namespace ember::importer {

struct HfImportOptions {
  /// The model's name; empty: the folder's name with characters outside [A-Za-z0-9_.-] replaced.
  std::string name;
  /// The width of the float weights; nullopt: the checkpoint's own (most of its bytes' dtype).
  std::optional<gpu::DType> width;
};

struct HfImported {
  gpu::Manifest manifest;
  HfConfig config;
  gpu::DType width = gpu::DType::f32;
  size_t shards = 0;
  uint64_t parameters = 0;
  uint64_t duplicated_bytes = 0;       // a tied head's copy of the embedding
  uint64_t file_bytes = 0;             // weights.safetensors
  std::vector<std::string> ignored;    // checkpoint tensors not read (buffers, a tied lm_head)
  bool tokenizer = false;              // tokenizer.json carried
  bool tokenizer_config = false;       // tokenizer_config.json carried
};

/// Whether `path` is a directory holding config.json (a Hugging Face folder).
bool is_hf_folder(const std::string& path);

/// Reads DIR, maps it and writes OUT (created if missing).
Result<HfImported> import_hf_folder(const std::string& dir, const std::string& out, const HfImportOptions& options);

}  // namespace ember::importer
