// Element types, shapes and tensor descriptors shared by the model format, the kernels and the
// executor.
//
// Pure value types (trivially copyable, so they cross into CUDA kernels by value); anyone, any
// thread. Layout is always dense row-major (C order) with the batch dimension first; there are no
// strides because every tensor Ember stores or passes between layers is contiguous.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/status.hpp"

namespace ember::gpu {

/// Element types. Names follow safetensors ("F32"); model.json spells them "float32" etc.
/// Compute is float32; weights may be held as float16 or bfloat16 (kernels widen them, see
/// ops.hpp's workspace_bytes), activations cast to and from them; integer types carry token ids,
/// indices and (uint8) booleans.
enum class DType : uint8_t { f32, f16, bf16, i64, i32, u8, count };

inline constexpr uint32_t kDTypeSize[] = {4, 2, 2, 8, 4, 1};
static_assert(std::size(kDTypeSize) == static_cast<size_t>(DType::count));

inline uint32_t dtype_size(DType t) { return kDTypeSize[static_cast<size_t>(t)]; }
/// float32, float16 or bfloat16.
inline bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }
/// "float32", "float16", "bfloat16", "int64", "int32", "uint8".
std::string_view dtype_name(DType t);
/// safetensors spelling: "F32", "F16", "BF16", "I64", "I32", "U8".
std::string_view dtype_safetensors_name(DType t);
/// KServe v2 spelling: "FP32", "FP16", "BF16", "INT64", "INT32", "UINT8".
std::string_view dtype_kserve_name(DType t);
/// Accepts any of the three spellings above.
Result<DType> parse_dtype(std::string_view text);

/// A dense shape of rank 0..kMaxRank. A dimension of -1 means "any" and appears only in the
/// declared inputs and outputs of a model (batch, sequence length); tensors that exist have none.
struct Shape {
  static constexpr int kMaxRank = 6;
  int32_t rank = 0;
  std::array<int64_t, kMaxRank> dims{};

  Shape() = default;
  Shape(std::initializer_list<int64_t> d);

  int64_t operator[](int i) const { return dims[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return dims[static_cast<size_t>(i)]; }
  /// Product of the dimensions; 1 for rank 0. Callers guarantee no -1 dims.
  int64_t numel() const;
  /// Product of dims [from, to).
  int64_t prod(int from, int to) const;
  int64_t last() const { return dims[static_cast<size_t>(rank - 1)]; }
  bool has_wildcard() const;
  /// True when every fixed dim of `pattern` equals ours (-1 in pattern matches anything).
  bool matches(const Shape& pattern) const;
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  /// "[1, 3, 224, 224]"; -1 prints as "-1".
  std::string to_string() const;
};
static_assert(std::is_trivially_copyable_v<Shape>);

struct TensorDesc {
  DType dtype = DType::f32;
  Shape shape;
  uint64_t bytes() const { return static_cast<uint64_t>(shape.numel()) * dtype_size(dtype); }
};
static_assert(std::is_trivially_copyable_v<TensorDesc>);

/// A half-open range of bytes [offset, offset + length).
struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t end() const { return offset + length; }
  bool operator==(const ByteRange&) const = default;
};

/// A half-open range of layer indices [first, last).
struct LayerRange {
  uint32_t first = 0;
  uint32_t last = 0;
  uint32_t size() const { return last - first; }
  bool empty() const { return last <= first; }
  bool operator==(const LayerRange&) const = default;
};

}  // namespace ember::gpu
