#include "model/host_tensor.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "model/safetensors.hpp"

namespace ember::gpu {

using nlohmann::json;

Result<HostTensor> HostTensor::allocate(std::string name, TensorDesc desc) {
  EMBER_ASSIGN_OR_RETURN(auto buffer, HostBuffer::allocate(desc.bytes()));
  return HostTensor{std::move(name), desc, std::move(buffer)};
}

Result<std::vector<HostTensor>> read_tensor_file(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(auto file, HostBuffer::read_file(path, UINT64_MAX));
  EMBER_ASSIGN_OR_RETURN(auto index, parse_safetensors(file->data(), file->size(), file->size(), path));
  std::vector<HostTensor> out;
  for (const auto& t : index.tensors) {
    EMBER_ASSIGN_OR_RETURN(HostTensor h, HostTensor::allocate(t.name, t.desc));
    std::memcpy(h.data(), file->data() + index.data_offset + t.data.offset, t.data.length);
    out.push_back(std::move(h));
  }
  return out;
}

Status write_tensor_file(const std::string& path, const std::vector<HostTensor>& tensors) {
  std::vector<TensorToWrite> w;
  for (const auto& t : tensors) w.push_back({t.name, t.desc, t.data()});
  return write_safetensors(path, w);
}

namespace {

// Appends the numbers of a (possibly nested) JSON array in row-major order.
bool flatten_numbers(const json& j, std::vector<const json*>& out, int depth) {
  if (depth > Shape::kMaxRank + 1) return false;
  if (j.is_array()) {
    for (const auto& x : j)
      if (!flatten_numbers(x, out, depth + 1)) return false;
    return true;
  }
  if (!j.is_number() && !j.is_boolean()) return false;
  out.push_back(&j);
  return true;
}

/// The tensor `header` describes, once `count` values were given for it: exactly its shape's.
Result<HostTensor> allocate_for_values(const std::pair<std::string, TensorDesc>& header, size_t count,
                                       const std::string& at) {
  const TensorDesc& desc = header.second;
  const uint64_t numel = static_cast<uint64_t>(desc.shape.numel());
  if (count != numel) {
    return invalid_argument(at + ": field 'data' holds " + std::to_string(count) + " values but shape " +
                            desc.shape.to_string() + " needs " + std::to_string(numel));
  }
  return HostTensor::allocate(header.first, desc);
}

// `shape` for an error message. dump() recurses, and the caller's parser allows any depth, so a
// list holding nested values is not printed.
std::string shape_text(const json& shape) {
  for (const auto& d : shape)
    if (d.is_structured()) return "a list of nested values";
  return shape.dump();
}

template <class T>
bool store_int(const json& v, uint8_t* dst) {
  if (!v.is_number_integer()) return false;
  T x;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
    x = static_cast<T>(u);
  } else {
    const int64_t s = v.get<int64_t>();
    if (s < static_cast<int64_t>(std::numeric_limits<T>::min()) || s > static_cast<int64_t>(std::numeric_limits<T>::max())) {
      return false;
    }
    x = static_cast<T>(s);
  }
  std::memcpy(dst, &x, sizeof(T));
  return true;
}

}  // namespace

namespace {

/// A KServe tensor's name, datatype and shape (what JSON and binary data share); `at` is set to
/// "<where> '<name>'" for the caller's errors.
Result<std::pair<std::string, TensorDesc>> kserve_header(const json& j, const std::string& where, bool binary,
                                                         std::string& at) {
  if (!j.is_object()) return invalid_argument(where + ": expected an object with name, datatype, shape, data");
  auto name = j.find("name");
  if (name == j.end() || !name->is_string()) return invalid_argument(where + ": field 'name' must be a string");
  at = where + " '" + name->get<std::string>() + "'";
  auto dt = j.find("datatype");
  if (dt == j.end() || !dt->is_string()) return invalid_argument(at + ": field 'datatype' must be a string");
  auto dtype = parse_dtype(dt->get<std::string>());
  if (!dtype.ok()) return invalid_argument(at + ": field 'datatype': " + dtype.error().message());
  if (!binary && (*dtype == DType::f16 || *dtype == DType::bf16)) {
    return unsupported(at + ": field 'datatype': " + dt->get<std::string>() +
                       " is not accepted in JSON; send FP32, or the tensor as binary data");
  }
  auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array() || shape->size() > static_cast<size_t>(Shape::kMaxRank)) {
    return invalid_argument(at + ": field 'shape' must be a list of at most " + std::to_string(Shape::kMaxRank) + " dims");
  }
  TensorDesc desc{*dtype, Shape()};
  uint64_t numel = 1;
  for (const auto& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > (1ll << 31) ||
        __builtin_mul_overflow(numel, d.get<uint64_t>(), &numel) || numel > (1ull << 32)) {
      return invalid_argument(at + ": field 'shape': " + shape_text(*shape) + " must hold non-negative dims of sane size");
    }
    desc.shape[desc.shape.rank++] = d.get<int64_t>();
  }
  return std::pair{name->get<std::string>(), desc};
}

}  // namespace

Result<std::pair<std::string, TensorDesc>> kserve_binary_header(const json& j, uint64_t bytes,
                                                                const std::string& where) {
  std::string at;
  EMBER_ASSIGN_OR_RETURN(auto header, kserve_header(j, where, true, at));
  if (j.contains("data")) return invalid_argument(at + ": has both 'data' and parameters.binary_data_size");
  const TensorDesc& desc = header.second;
  if (bytes != desc.bytes()) {
    return invalid_argument(at + ": binary_data_size is " + std::to_string(bytes) + " bytes but " +
                            std::string(dtype_kserve_name(desc.dtype)) + " " + desc.shape.to_string() + " needs " +
                            std::to_string(desc.bytes()));
  }
  return header;
}

Result<HostTensor> tensor_from_kserve_binary(const json& j, std::string_view bytes, const std::string& where) {
  EMBER_ASSIGN_OR_RETURN(auto header, kserve_binary_header(j, bytes.size(), where));
  EMBER_ASSIGN_OR_RETURN(HostTensor t, HostTensor::allocate(header.first, header.second));
  if (!bytes.empty()) std::memcpy(t.data(), bytes.data(), bytes.size());
  return t;
}

Result<HostTensor> tensor_from_kserve_json(const json& j, const std::string& where) {
  std::string at;
  EMBER_ASSIGN_OR_RETURN(auto header, kserve_header(j, where, false, at));
  const TensorDesc& desc = header.second;
  auto data = j.find("data");
  if (data == j.end()) return invalid_argument(at + ": field 'data' is missing");
  std::vector<const json*> values;
  if (!flatten_numbers(*data, values, 0)) return invalid_argument(at + ": field 'data' must hold numbers");
  EMBER_ASSIGN_OR_RETURN(HostTensor t, allocate_for_values(header, values.size(), at));
  const uint32_t size = dtype_size(desc.dtype);
  for (size_t i = 0; i < values.size(); ++i) {
    const json& v = *values[i];
    uint8_t* dst = t.data() + i * size;
    bool ok = true;
    switch (desc.dtype) {
      case DType::f32: {
        if (!v.is_number()) { ok = false; break; }
        const double d = v.get<double>();
        if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max()) { ok = false; break; }
        const float f = static_cast<float>(d);
        std::memcpy(dst, &f, 4);
        break;
      }
      case DType::i64: ok = store_int<int64_t>(v, dst); break;
      case DType::i32: ok = store_int<int32_t>(v, dst); break;
      case DType::u8: ok = store_int<uint8_t>(v, dst); break;
      default: ok = false;
    }
    if (!ok) {
      return invalid_argument(at + ": field 'data': element " + std::to_string(i) + " (" + v.dump() +
                              ") is not a valid " + std::string(dtype_kserve_name(desc.dtype)));
    }
  }
  return t;
}

namespace {

/// A JSON number's value as a JSON parser gives it: integers as int64 or uint64 converted to
/// double, anything else (a fraction, an exponent, an integer beyond 64 bits) parsed as a double.
std::optional<double> json_number_value(std::string_view t) {
  const char* first = t.data();
  const char* last = t.data() + t.size();
  if (std::none_of(t.begin(), t.end(), [](char c) { return c == '.' || c == 'e' || c == 'E'; })) {
    int64_t s = 0;
    if (auto r = std::from_chars(first, last, s); r.ec == std::errc() && r.ptr == last) return static_cast<double>(s);
    uint64_t u = 0;
    if (auto r = std::from_chars(first, last, u); r.ec == std::errc() && r.ptr == last) return static_cast<double>(u);
  }
  double d = 0;
  if (auto r = std::from_chars(first, last, d); r.ec == std::errc() && r.ptr == last) return d;
  return std::nullopt;  // out of a double's range: the caller asks the JSON parser
}

}  // namespace

Result<HostTensor> tensor_from_kserve_numbers(const json& j, const std::vector<std::string_view>& numbers,
                                              const std::string& where) {
  std::string at;
  EMBER_ASSIGN_OR_RETURN(auto header, kserve_header(j, where, false, at));
  const TensorDesc& desc = header.second;
  EMBER_ASSIGN_OR_RETURN(HostTensor t, allocate_for_values(header, numbers.size(), at));
  const uint32_t size = dtype_size(desc.dtype);
  for (size_t i = 0; i < numbers.size(); ++i) {
    uint8_t* dst = t.data() + i * size;
    if (desc.dtype == DType::f32) {
      const auto d = json_number_value(numbers[i]);
      if (d && std::isfinite(*d) && std::fabs(*d) <= std::numeric_limits<float>::max()) {
        const float f = static_cast<float>(*d);
        std::memcpy(dst, &f, 4);
        continue;
      }
    }
    // Other datatypes, and numbers an FP32 cannot hold: as the JSON parser reads them (and says why).
    const json v = json::parse(numbers[i], nullptr, false);
    bool ok = false;
    switch (desc.dtype) {
      case DType::i64:
        ok = store_int<int64_t>(v, dst);
        break;
      case DType::i32:
        ok = store_int<int32_t>(v, dst);
        break;
      case DType::u8:
        ok = store_int<uint8_t>(v, dst);
        break;
      default:
        break;
    }
    if (!ok) {
      return invalid_argument(at + ": field 'data': element " + std::to_string(i) + " (" + v.dump() + ") is not a valid " +
                              std::string(dtype_kserve_name(desc.dtype)));
    }
  }
  return t;
}

void tensor_to_kserve_json(const HostTensor& t, json& out) {
  std::vector<int64_t> shape(t.desc.shape.dims.begin(), t.desc.shape.dims.begin() + t.desc.shape.rank);
  out = {{"name", t.name}, {"datatype", dtype_kserve_name(t.desc.dtype)}, {"shape", shape}};
  const int64_t n = t.desc.shape.numel();
  json data = json::array();
  switch (t.desc.dtype) {
    case DType::f32: for (int64_t i = 0; i < n; ++i) data.push_back(t.as<float>()[i]); break;
    case DType::i64: for (int64_t i = 0; i < n; ++i) data.push_back(t.as<int64_t>()[i]); break;
    case DType::i32: for (int64_t i = 0; i < n; ++i) data.push_back(t.as<int32_t>()[i]); break;
    case DType::u8: for (int64_t i = 0; i < n; ++i) data.push_back(t.as<uint8_t>()[i]); break;
    default: break;
  }
  out["data"] = std::move(data);
}

}  // namespace ember::gpu
