#include "model/tensor.hpp"

namespace ember::gpu {

namespace {
struct DTypeNames {
  std::string_view name, safetensors, kserve;
};
constexpr DTypeNames kNames[] = {
    {"float32", "F32", "FP32"}, {"float16", "F16", "FP16"}, {"bfloat16", "BF16", "BF16"},
    {"int64", "I64", "INT64"},  {"int32", "I32", "INT32"},  {"uint8", "U8", "UINT8"},
};
static_assert(std::size(kNames) == static_cast<size_t>(DType::count));
}  // namespace

std::string_view dtype_name(DType t) { return kNames[static_cast<size_t>(t)].name; }
std::string_view dtype_safetensors_name(DType t) { return kNames[static_cast<size_t>(t)].safetensors; }
std::string_view dtype_kserve_name(DType t) { return kNames[static_cast<size_t>(t)].kserve; }

Result<DType> parse_dtype(std::string_view text) {
  for (size_t i = 0; i < std::size(kNames); ++i) {
    if (text == kNames[i].name || text == kNames[i].safetensors || text == kNames[i].kserve) {
      return static_cast<DType>(i);
    }
  }
  return unsupported("unknown dtype '" + std::string(text) +
                     "' (supported: float32, float16, bfloat16, int64, int32, uint8)");
}

Shape::Shape(std::initializer_list<int64_t> d) {
  assert(d.size() <= static_cast<size_t>(kMaxRank));
  for (int64_t v : d) dims[static_cast<size_t>(rank++)] = v;
}

int64_t Shape::numel() const { return prod(0, rank); }

int64_t Shape::prod(int from, int to) const {
  int64_t n = 1;
  for (int i = from; i < to; ++i) n *= dims[static_cast<size_t>(i)];
  return n;
}

bool Shape::has_wildcard() const {
  for (int i = 0; i < rank; ++i)
    if (dims[static_cast<size_t>(i)] < 0) return true;
  return false;
}

bool Shape::matches(const Shape& pattern) const {
  if (rank != pattern.rank) return false;
  for (int i = 0; i < rank; ++i) {
    if (pattern[i] >= 0 && pattern[i] != (*this)[i]) return false;
  }
  return true;
}

bool Shape::operator==(const Shape& o) const {
  if (rank != o.rank) return false;
  for (int i = 0; i < rank; ++i)
    if ((*this)[i] != o[i]) return false;
  return true;
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += std::to_string((*this)[i]);
  }
  return s + "]";
}

}  // namespace ember::gpu
