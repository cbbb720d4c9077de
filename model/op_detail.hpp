// What model/ops.cpp, model/ops_tensor.cpp and model/ops_kv_attention.cpp share: reading model.json attributes and checking
// inputs. Internal to model/ (its op-table files); pure, anyone.
#pragma once

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "model/ops.hpp"

namespace ember::gpu::op_detail {

using nlohmann::json;

// Bounds that keep shape inference in int64 with room to spare, whatever model.json says: every
// integer attribute is at most kMaxAttrValue (so kernel * dilation and 3 * embed_dim cannot
// overflow), and infer_output refuses inputs whose dims multiply past kMaxElements (so products
// of any of their dims cannot either). Both are far beyond any model Ember can hold.
inline constexpr int64_t kMaxAttrValue = INT32_MAX;
inline constexpr int64_t kMaxElements = int64_t{1} << 56;

// Whether `x` is an integer in [min_value, kMaxAttrValue]. nlohmann stores non-negative integers
// as unsigned, which get<int64_t>() would wrap above INT64_MAX.
inline bool attr_in_range(const json& x, int64_t min_value) {
  if (!x.is_number_integer()) return false;
  if (x.is_number_unsigned()) {
    const uint64_t u = x.get<uint64_t>();
    return u <= static_cast<uint64_t>(kMaxAttrValue) && static_cast<int64_t>(u) >= min_value;
  }
  return x.get<int64_t>() >= min_value;
}

// Reads typed attributes out of a JSON object, remembering which keys were used so that leftovers
// (typos) can be reported.
class AttrReader {
 public:
  AttrReader(const json& attrs, const std::string& where) : attrs_(attrs), where_(where) {}

  Status error() const { return status_; }

  int64_t integer(const char* key, int64_t fallback, bool required, int64_t min_value) {
    const json* v = take(key, required);
    if (!v) return fallback;
    if (!v->is_number_integer()) return fail(key, "expected an integer, got " + v->dump()), fallback;
    if (!attr_in_range(*v, min_value)) {
      return fail(key, v->dump() + " is outside " + std::to_string(min_value) + ".." + std::to_string(kMaxAttrValue)),
             fallback;
    }
    return v->get<int64_t>();
  }

  bool boolean(const char* key, bool fallback) {
    const json* v = take(key, false);
    if (!v) return fallback;
    if (!v->is_boolean()) return fail(key, "expected true or false, got " + v->dump()), fallback;
    return v->get<bool>();
  }

  float number(const char* key, float fallback, float min_value, float max_value) {
    const json* v = take(key, false);
    if (!v) return fallback;
    if (!v->is_number()) return fail(key, "expected a number, got " + v->dump()), fallback;
    double x = v->get<double>();
    if (!(x >= min_value && x <= max_value)) {
      return fail(key, v->dump() + " is outside [" + std::to_string(min_value) + ", " + std::to_string(max_value) + "]"),
             fallback;
    }
    return static_cast<float>(x);
  }

  std::string text(const char* key, const std::string& fallback) {
    const json* v = take(key, false);
    if (!v) return fallback;
    if (!v->is_string()) return fail(key, "expected a string, got " + v->dump()), fallback;
    return v->get<std::string>();
  }

  // An int (both dims) or a pair [h, w].
  void pair(const char* key, int64_t out[2], bool required, int64_t fallback, int64_t min_value) {
    const json* v = take(key, required);
    out[0] = out[1] = fallback;
    if (!v) return;
    auto one = [&](const json& x, int64_t& dst) {
      if (!attr_in_range(x, min_value)) {
        fail(key, "expected integers in " + std::to_string(min_value) + ".." + std::to_string(kMaxAttrValue) +
                      ", got " + v->dump());
        return;
      }
      dst = x.get<int64_t>();
    };
    if (v->is_array() && v->size() == 2) {
      one((*v)[0], out[0]);
      one((*v)[1], out[1]);
    } else if (v->is_number_integer()) {
      one(*v, out[0]);
      out[1] = out[0];
    } else {
      fail(key, "expected an integer or a pair [height, width], got " + v->dump());
    }
  }

  // A list of at most `max_size` integers in [min_value, kMaxAttrValue]; with `clamp`, any int64
  // (values past +-2^40 clamp there: slice bounds such as INT64_MAX mean "to the end").
  std::vector<int64_t> int_list(const char* key, bool required = true, size_t max_size = Shape::kMaxRank,
                                int64_t min_value = INT64_MIN, bool clamp = false) {
    const json* v = take(key, required);
    std::vector<int64_t> out;
    if (!v) return out;
    if (!v->is_array() || v->size() > max_size) {
      fail(key, "expected a list of at most " + std::to_string(max_size) + " integers");
      return out;
    }
    constexpr int64_t kClamp = int64_t{1} << 40;
    for (const auto& x : *v) {
      if (clamp && x.is_number_integer()) {
        const int64_t c = x.is_number_unsigned() ? (x.get<uint64_t>() > static_cast<uint64_t>(kClamp) ? kClamp : x.get<int64_t>())
                                                 : std::clamp(x.get<int64_t>(), -kClamp, kClamp);
        out.push_back(c);
        continue;
      }
      if (!attr_in_range(x, min_value)) {
        fail(key, "expected integers in " + (min_value == INT64_MIN ? std::string("..") : std::to_string(min_value) + "..") +
                      std::to_string(kMaxAttrValue) + ", got " + v->dump());
        return {};
      }
      out.push_back(x.get<int64_t>());
    }
    return out;
  }

  // A list of at most `max_size` numbers.
  std::vector<float> float_list(const char* key, bool required, size_t max_size) {
    const json* v = take(key, required);
    std::vector<float> out;
    if (!v) return out;
    if (!v->is_array() || v->size() > max_size) {
      fail(key, "expected a list of at most " + std::to_string(max_size) + " numbers");
      return out;
    }
    for (const auto& x : *v) {
      if (!x.is_number()) {
        fail(key, "expected numbers, got " + v->dump());
        return {};
      }
      out.push_back(x.get<float>());
    }
    return out;
  }

  // One of `names` (an enum's spellings, indexed by value); `fallback` when absent.
  template <class E, size_t N>
  E choice(const char* key, const std::string_view (&names)[N], E fallback, bool required = false) {
    const json* v = take(key, required);
    if (!v) return fallback;
    if (v->is_string()) {
      for (size_t i = 0; i < N; ++i)
        if (names[i] == v->get<std::string>()) return static_cast<E>(i);
    }
    std::string known;
    for (auto n : names) known += (known.empty() ? "" : ", ") + std::string(n);
    fail(key, "expected one of " + known + ", got " + v->dump());
    return fallback;
  }

  // Reports keys that no reader asked for.
  void finish() {
    if (!status_.ok()) return;
    for (const auto& [key, value] : attrs_.items()) {
      (void)value;
      if (!used_.count(key)) {
        status_ = invalid_argument(where_ + ": attrs: unknown attribute '" + key + "'");
        return;
      }
    }
  }

  void fail(const char* key, const std::string& msg) {
    if (status_.ok()) status_ = invalid_argument(where_ + ": attrs." + key + ": " + msg);
  }

 private:
  const json* take(const char* key, bool required) {
    used_.insert(key);
    auto it = attrs_.find(key);
    if (it == attrs_.end()) {
      if (required) fail(key, "required attribute is missing");
      return nullptr;
    }
    return &*it;
  }

  const json& attrs_;
  const std::string& where_;
  std::set<std::string> used_;
  Status status_;
};

inline int normalize_dim(int64_t dim, int rank) { return static_cast<int>(dim < 0 ? dim + rank : dim); }

inline std::string describe(const TensorDesc& d) {
  return std::string(dtype_name(d.dtype)) + d.shape.to_string();
}

inline Status need_float(const TensorDesc& d, int which) {
  if (d.dtype != DType::f32) {
    return invalid_argument("input " + std::to_string(which) + " is " + describe(d) + ", expected float32");
  }
  return Status::OK();
}

inline Status need_rank(const TensorDesc& d, int rank, int which) {
  if (d.shape.rank != rank) {
    return invalid_argument("input " + std::to_string(which) + " has shape " + d.shape.to_string() +
                            ", expected rank " + std::to_string(rank));
  }
  return Status::OK();
}

inline Status need_dim(const TensorDesc& d, int dim, int64_t expected, const char* what) {
  const int i = normalize_dim(dim, d.shape.rank);
  if (d.shape[i] != expected) {
    return invalid_argument("input has shape " + d.shape.to_string() + " but dim " + std::to_string(i) + " (" + what +
                            ") must be " + std::to_string(expected));
  }
  return Status::OK();
}

// The general ops' table (model/ops_tensor.cpp); ops.cpp's functions hand these ops over.
inline bool is_general(OpKind op) { return op >= OpKind::unary && op <= OpKind::topk; }
void parse_general_attrs(OpKind op, const json& attrs, AttrReader& r, LayerAttrs& a);
void general_attrs_to_json(OpKind op, const LayerAttrs& a, json& out);
std::vector<WeightSpec> general_weight_specs(OpKind op, const LayerAttrs& a);
std::pair<int, int> general_input_count(OpKind op);
Result<TensorDesc> infer_general(OpKind op, const LayerAttrs& a, std::span<const TensorDesc> in);
uint64_t general_workspace_bytes(OpKind op, const LayerAttrs& a, std::span<const TensorDesc> in);

// kv_attention's part of the table (model/ops_kv_attention.cpp).
void parse_kv_attention_attrs(AttrReader& r, LayerAttrs& a);
void kv_attention_attrs_to_json(const LayerAttrs& a, json& out);
Result<TensorDesc> infer_kv_attention(const LayerAttrs& a, std::span<const TensorDesc> in);
uint64_t kv_attention_scratch_bytes(const LayerAttrs& a, std::span<const TensorDesc> in);

}  // namespace ember::gpu::op_detail
