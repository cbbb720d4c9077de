// libFuzzer target for model/safetensors.cpp: parse_safetensors on any bytes.
//
// Input layout:
//   1. 4 bytes  E, unsigned little-endian: bytes of data section that exist in the file beyond the
//               input (the file is the input followed by E bytes the parser never sees), so a
//               header that promises megabytes of tensors stays a small input.
//   2. rest     the first bytes of the file, available to the parser.
// On success the index must keep the header's promises (safetensors.hpp): tensors sorted, each
// inside the data section with exactly desc.bytes() bytes, no overlap, no hole, and the header
// written back by safetensors_header() must parse to the same index. On failure the Error names
// the file.
#include <set>
#include <string>

#include "model/safetensors.hpp"
#include "tests/fuzz/fuzz_common.hpp"

using namespace ember;
using namespace ember::gpu;

namespace {

constexpr std::string_view kSource = "fuzz.safetensors";

void check_index(const SafetensorsIndex& index, size_t available, uint64_t file_size) {
  EMBER_FUZZ_CHECK(index.header_bytes <= kSafetensorsMaxHeaderBytes);
  EMBER_FUZZ_CHECK(index.data_offset == kSafetensorsPrefixBytes + index.header_bytes);
  EMBER_FUZZ_CHECK(index.data_offset <= available);
  EMBER_FUZZ_CHECK(index.data_offset + index.data_bytes == file_size);
  uint64_t cursor = 0;
  std::set<std::string> names;
  for (const TensorInfo& t : index.tensors) {
    EMBER_FUZZ_CHECK(t.desc.dtype < DType::count);
    EMBER_FUZZ_CHECK(t.desc.shape.rank >= 0 && t.desc.shape.rank <= Shape::kMaxRank);
    for (int i = 0; i < t.desc.shape.rank; ++i) EMBER_FUZZ_CHECK(t.desc.shape[i] >= 0);
    EMBER_FUZZ_CHECK(t.data.length == t.desc.bytes());
    EMBER_FUZZ_CHECK(t.data.offset == cursor);  // sorted, no overlap, no hole
    EMBER_FUZZ_CHECK(t.data.end() >= t.data.offset && t.data.end() <= index.data_bytes);
    cursor = t.data.end();
    EMBER_FUZZ_CHECK(t.name != "__metadata__");
    EMBER_FUZZ_CHECK(names.insert(t.name).second);
    EMBER_FUZZ_CHECK(index.find(t.name) == &t);
  }
  EMBER_FUZZ_CHECK(cursor == index.data_bytes);  // the tensors cover the section
}

// Writes the header back and parses it again: same tensors, same metadata.
void check_round_trip(const SafetensorsIndex& index) {
  std::vector<TensorToWrite> tensors;
  for (const TensorInfo& t : index.tensors) tensors.push_back({t.name, t.desc, nullptr});
  const std::string header = safetensors_header(tensors, index.metadata);
  auto again = parse_safetensors(reinterpret_cast<const uint8_t*>(header.data()), header.size(),
                                 header.size() + index.data_bytes, "rewritten.safetensors");
  EMBER_FUZZ_CHECK(again.ok());
  EMBER_FUZZ_CHECK(again->data_bytes == index.data_bytes);
  EMBER_FUZZ_CHECK(again->metadata == index.metadata);
  EMBER_FUZZ_CHECK(again->tensors.size() == index.tensors.size());
  for (const TensorInfo& t : index.tensors) {
    const TensorInfo* u = again->find(t.name);
    EMBER_FUZZ_CHECK(u != nullptr);
    EMBER_FUZZ_CHECK(u->desc.dtype == t.desc.dtype && u->desc.shape == t.desc.shape && u->data == t.data);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint64_t beyond = fuzz::take_u32(data, size);
  const uint64_t file_size = size + beyond;
  auto index = parse_safetensors(data, size, file_size, kSource);
  if (!index.ok()) {
    EMBER_FUZZ_CHECK(index.error().message().starts_with(kSource));  // errors name the file
    return 0;
  }
  check_index(*index, size, file_size);
  check_round_trip(*index);
  return 0;
}
