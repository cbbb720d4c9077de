#include "actors/node/engine/step_inputs.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

namespace ember::engine {

Result<int64_t> kv_dtype_code(gpu::DType dtype) {
  switch (dtype) {
    case gpu::DType::f32:
      return int64_t{0};
    case gpu::DType::f16:
      return int64_t{1};
    case gpu::DType::bf16:
      return int64_t{2};
    default:
      return invalid_argument("a KV cache holds float32, float16 or bfloat16, not " + std::string(gpu::dtype_name(dtype)));
  }
}

std::vector<gpu::HostTensor> StepTensors::take() {
  std::vector<gpu::HostTensor> v;
  v.push_back(std::move(input_ids));
  v.push_back(std::move(positions));
  v.push_back(std::move(kv_meta));
  v.push_back(std::move(last_index));
  return v;
}

Result<StepTensors> build_step_inputs(const std::vector<StepSequence>& sequences, uint32_t block_size,
                                      gpu::DType cache_dtype) {
  if (sequences.empty()) return invalid_argument("a generation step of no sequence");
  if (block_size == 0) return invalid_argument("a generation step with block_size 0");
  EMBER_ASSIGN_OR_RETURN(const int64_t dtype_code, kv_dtype_code(cache_dtype));
  constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
  uint64_t tokens = 0, width = 1;
  for (const StepSequence& s : sequences) {
    const std::string who = "sequence " + std::to_string(s.id);
    if (s.tokens.empty()) return invalid_argument(who + " has no token to feed in this step");
    if (s.start > kMax - s.tokens.size()) return invalid_argument(who + "'s positions pass int64");
    const uint64_t end = s.start + s.tokens.size();
    const uint64_t needed = (end + block_size - 1) / block_size;
    if (s.table.size() < needed) {
      return invalid_argument(who + "'s block table lists " + std::to_string(s.table.size()) + " blocks; positions " +
                              std::to_string(s.start) + ".." + std::to_string(end - 1) + " need " +
                              std::to_string(needed));
    }
    for (uint64_t b = 0; b < needed; ++b) {
      if (s.table[b].addr == 0) return invalid_argument(who + "'s block " + std::to_string(b) + " has address 0");
    }
    for (const gpu::DevicePtr& p : s.table) {
      if (p.addr > kMax) return invalid_argument(who + " lists a block address beyond int64");
    }
    tokens += s.tokens.size();
    width = std::max<uint64_t>(width, s.table.size());
  }
  const uint64_t b = sequences.size();
  const uint64_t meta = kKvMetaHeader + tokens + b * width;
  const auto i64 = [](uint64_t n) {
    gpu::TensorDesc d;
    d.dtype = gpu::DType::i64;
    d.shape = {static_cast<int64_t>(n)};
    return d;
  };
  StepTensors t;
  EMBER_ASSIGN_OR_RETURN(t.input_ids, gpu::HostTensor::allocate("input_ids", i64(tokens)));
  EMBER_ASSIGN_OR_RETURN(t.positions, gpu::HostTensor::allocate("positions", i64(tokens)));
  EMBER_ASSIGN_OR_RETURN(t.kv_meta, gpu::HostTensor::allocate("kv_meta", i64(meta)));
  EMBER_ASSIGN_OR_RETURN(t.last_index, gpu::HostTensor::allocate("last_index", i64(b)));
  int64_t* ids = t.input_ids.as<int64_t>();
  int64_t* pos = t.positions.as<int64_t>();
  int64_t* m = t.kv_meta.as<int64_t>();
  int64_t* last = t.last_index.as<int64_t>();
  m[kKvMetaSequences] = static_cast<int64_t>(b);
  m[kKvMetaBlockSize] = block_size;
  m[kKvMetaWidth] = static_cast<int64_t>(width);
  m[kKvMetaDType] = dtype_code;
  int64_t* seq_of = m + kKvMetaHeader;
  int64_t* tables = seq_of + tokens;
  std::fill(tables, tables + b * width, int64_t{0});
  uint64_t row = 0;
  for (uint64_t s = 0; s < b; ++s) {
    const StepSequence& q = sequences[s];
    for (uint64_t i = 0; i < q.tokens.size(); ++i, ++row) {
      ids[row] = q.tokens[i];
      pos[row] = static_cast<int64_t>(q.start + i);
      seq_of[row] = static_cast<int64_t>(s);
    }
    last[s] = static_cast<int64_t>(row - 1);
    for (uint64_t k = 0; k < q.table.size(); ++k) tables[s * width + k] = static_cast<int64_t>(q.table[k].addr);
  }
  return t;
}

}  // namespace ember::engine
