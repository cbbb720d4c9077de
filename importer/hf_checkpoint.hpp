// A Hugging Face checkpoint folder's weights as the importer reads them: model.safetensors, or
// shards named by model.safetensors.index.json, each tensor found by name and read as float32.
//
// The layouts read (what transformers' save_pretrained writes):
//   1. DIR/model.safetensors, one file; or
//   2. DIR/model.safetensors.index.json {"metadata": {...}, "weight_map": {tensor: shard file}} and
//      the shard files it names (model-00001-of-00003.safetensors, ...), every one in DIR itself.
// The index wins when both are there (as transformers' loader does).
//
// Untrusted input, checked before a byte of data is read: a shard the index names that is missing,
// a shard name with a '/' or '..' (a file outside the folder), a header that lies (offsets past the
// file, overlaps, holes: gpu::parse_safetensors), a tensor the index places in one shard but that
// shard lacks, a tensor in two shards, a tensor of a dtype that is not F32, F16 or BF16 (a quantized
// checkpoint) when it is read. Each Error names the file and the tensor.
//
// Only the headers are held (open() reads each shard's header, not its data); read() reads one
// tensor's bytes at a time, so importing a large model holds one tensor (widened to float32) in
// memory, not the model. Blocking file I/O on the caller's thread (the CLI's). Not shared between
// threads; no global state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "model/safetensors.hpp"

namespace ember::importer {

/// A tensor of the checkpoint: its shard and where it is in it.
struct HfTensor {
  std::string file;      // the shard's path
  uint64_t data_offset = 0;  // of the shard's data section, in the file
  gpu::TensorInfo info;  // dtype, shape, bytes relative to the data section
};

class HfCheckpoint {
 public:
  /// Reads the index (if any) and every shard's header. `dir` is the folder.
  static Result<HfCheckpoint> open(const std::string& dir);

  /// nullptr when the checkpoint has no such tensor.
  const HfTensor* find(std::string_view name) const;
  /// Every tensor name, sorted.
  std::vector<std::string> names() const;
  /// The shard files read (one for a single model.safetensors).
  const std::vector<std::string>& files() const { return files_; }
  /// The float dtype most of the tensors' bytes are in (f32, f16 or bf16): the checkpoint's width.
  gpu::DType width() const;

  /// The tensor's elements widened to float32 (row-major, as stored). unsupported for a dtype other
  /// than F32, F16, BF16; io_error when the file cannot be read.
  Result<std::vector<float>> read(std::string_view name) const;

 private:
  std::string dir_;
  std::vector<std::string> files_;
  std::map<std::string, HfTensor, std::less<>> tensors_;
};

}  // namespace ember::importer
