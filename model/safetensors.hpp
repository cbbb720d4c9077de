// The safetensors file format (https://github.com/huggingface/safetensors), read and written.
//
// Layout of a file, as the public format defines it:
//   1. 8 bytes      N, the header length, unsigned little-endian.
//   2. N bytes      the header: a UTF-8 JSON object. Each key names a tensor and maps to
//                   {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]};
//                   the optional key "__metadata__" maps to an object of string -> string.
//                   Ember pads the header with spaces so that 8 + N is a multiple of 8.
//   3. the rest     the data section. data_offsets are relative to its first byte; `end` is
//                   exclusive; end - begin == product(shape) * dtype size. Tensors do not
//                   overlap and together cover the section with no holes.
//
// Pure parsing and writing; anyone, any thread. The parser never trusts the file: a truncated
// file, a header that lies about offsets or sizes, an unknown dtype, overlapping or missing
// bytes, each is an Error that names the file (`source`) and the tensor and field at fault.
// Nothing here reads or keeps tensor bytes; callers own the buffers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "model/tensor.hpp"

namespace ember::gpu {

inline constexpr uint64_t kSafetensorsPrefixBytes = 8;
/// Headers larger than this are refused, as the reference implementation does (100 MB).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

struct TensorInfo {
  std::string name;
  TensorDesc desc;
  /// Where the bytes are, relative to the start of the data section.
  ByteRange data;
};

struct SafetensorsIndex {
  /// N, the JSON header's length in bytes.
  uint64_t header_bytes = 0;
  /// Offset of the data section in the file: 8 + N.
  uint64_t data_offset = 0;
  /// Length of the data section: file size - data_offset.
  uint64_t data_bytes = 0;
  /// Every tensor, sorted by data.offset.
  std::vector<TensorInfo> tensors;
  std::map<std::string, std::string> metadata;

  /// nullptr when there is no tensor of that name.
  const TensorInfo* find(std::string_view name) const;
};

/// Reads the 8-byte length prefix. Fails when fewer than 8 bytes are available or when the header
/// would not fit in `file_size` or exceeds kSafetensorsMaxHeaderBytes.
Result<uint64_t> read_safetensors_header_length(const uint8_t* data, size_t available, uint64_t file_size,
                                                std::string_view source);

/// Parses and validates a header. `data` holds the first `available` bytes of a file of
/// `file_size` bytes; at least 8 + N of them must be present.
Result<SafetensorsIndex> parse_safetensors(const uint8_t* data, size_t available, uint64_t file_size,
                                           std::string_view source);

/// A tensor to write: the bytes at `data` (desc.bytes() of them) stay owned by the caller.
struct TensorToWrite {
  std::string name;
  TensorDesc desc;
  const void* data = nullptr;
};

/// Builds the 8-byte prefix plus the padded JSON header for tensors laid out in the given order.
std::string safetensors_header(const std::vector<TensorToWrite>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

/// Writes a whole file (header, then each tensor's bytes in order) to `path`, via a temporary
/// file renamed into place so readers never see a partial file.
Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace ember::gpu
