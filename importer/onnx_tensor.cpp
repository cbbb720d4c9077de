#include "importer/onnx_tensor.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "onnx/onnx.pb.h"

namespace ember::importer {

namespace {

namespace fs = std::filesystem;
using onnx::TensorProto;

// Bytes per element in raw_data and external files; 0 for types the importer does not read.
int element_bytes(int32_t type) {
  switch (type) {
    case TensorProto::FLOAT: case TensorProto::INT32: case TensorProto::UINT32: return 4;
    case TensorProto::DOUBLE: case TensorProto::INT64: case TensorProto::UINT64: return 8;
    case TensorProto::FLOAT16: case TensorProto::BFLOAT16: case TensorProto::INT16: case TensorProto::UINT16: return 2;
    case TensorProto::INT8: case TensorProto::UINT8: case TensorProto::BOOL: return 1;
    default: return 0;
  }
}

bool is_float_type(int32_t type) {
  return type == TensorProto::FLOAT || type == TensorProto::DOUBLE || type == TensorProto::FLOAT16 ||
         type == TensorProto::BFLOAT16;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    exp = 113;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16_to_float(uint16_t h) {
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void allocate(Constant& c) {
  if (c.kind == Constant::Kind::f32) c.f.resize(static_cast<size_t>(c.numel()));
  else c.a.resize(static_cast<size_t>(c.numel()));
}

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Little-endian bytes of `type` into c (sized already).
Status decode(const uint8_t* p, int32_t type, Constant& c, const std::string& where) {
  const auto n = static_cast<size_t>(c.numel());
  for (size_t i = 0; i < n; ++i) {
    switch (type) {
      case TensorProto::FLOAT: c.f[i] = load<float>(p + 4 * i); break;
      case TensorProto::DOUBLE: c.f[i] = static_cast<float>(load<double>(p + 8 * i)); break;
      case TensorProto::FLOAT16: c.f[i] = half_to_float(load<uint16_t>(p + 2 * i)); break;
      case TensorProto::BFLOAT16: c.f[i] = bf16_to_float(load<uint16_t>(p + 2 * i)); break;
      case TensorProto::INT8: c.a[i] = load<int8_t>(p + i); break;
      case TensorProto::UINT8: c.a[i] = load<uint8_t>(p + i); break;
      case TensorProto::BOOL: c.a[i] = load<uint8_t>(p + i) != 0; break;
      case TensorProto::INT16: c.a[i] = load<int16_t>(p + 2 * i); break;
      case TensorProto::UINT16: c.a[i] = load<uint16_t>(p + 2 * i); break;
      case TensorProto::INT32: c.a[i] = load<int32_t>(p + 4 * i); break;
      case TensorProto::UINT32: c.a[i] = load<uint32_t>(p + 4 * i); break;
      case TensorProto::INT64: c.a[i] = load<int64_t>(p + 8 * i); break;
      case TensorProto::UINT64: {
        const auto u = load<uint64_t>(p + 8 * i);
        if (u > static_cast<uint64_t>(INT64_MAX)) return invalid_argument(where + ": a UINT64 value exceeds int64");
        c.a[i] = static_cast<int64_t>(u);
        break;
      }
      default: return internal_error(where + ": decode of " + onnx_type_name(type));
    }
  }
  return Status::OK();
}

// The typed field that holds `type`'s values when raw_data is absent.
Status from_typed_fields(const TensorProto& t, Constant& c, const std::string& where) {
  const auto n = static_cast<size_t>(c.numel());
  auto count_is = [&](size_t got, const char* field) -> Status {
    if (got == n) return Status::OK();
    return invalid_argument(where + ": " + field + " holds " + std::to_string(got) + " values but the dims " +
                            c.describe() + " need " + std::to_string(n));
  };
  switch (t.data_type()) {
    case TensorProto::FLOAT:
      EMBER_RETURN_IF_ERROR(count_is(static_cast<size_t>(t.float_data_size()), "float_data"));
      for (size_t i = 0; i < n; ++i) c.f[i] = t.float_data(static_cast<int>(i));
      return Status::OK();
    case TensorProto::DOUBLE:
      EMBER_RETURN_IF_ERROR(count_is(static_cast<size_t>(t.double_data_size()), "double_data"));
      for (size_t i = 0; i < n; ++i) c.f[i] = static_cast<float>(t.double_data(static_cast<int>(i)));
      return Status::OK();
    case TensorProto::INT64:
      EMBER_RETURN_IF_ERROR(count_is(static_cast<size_t>(t.int64_data_size()), "int64_data"));
      for (size_t i = 0; i < n; ++i) c.a[i] = t.int64_data(static_cast<int>(i));
      return Status::OK();
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      EMBER_RETURN_IF_ERROR(count_is(static_cast<size_t>(t.uint64_data_size()), "uint64_data"));
      for (size_t i = 0; i < n; ++i) {
        const uint64_t u = t.uint64_data(static_cast<int>(i));
        if (u > static_cast<uint64_t>(INT64_MAX)) return invalid_argument(where + ": a value exceeds int64");
        c.a[i] = static_cast<int64_t>(u);
      }
      return Status::OK();
    default:  // int32_data holds every narrower type, float16 and bfloat16 as their bits
      EMBER_RETURN_IF_ERROR(count_is(static_cast<size_t>(t.int32_data_size()), "int32_data"));
      for (size_t i = 0; i < n; ++i) {
        const int32_t v = t.int32_data(static_cast<int>(i));
        if (t.data_type() == TensorProto::FLOAT16) c.f[i] = half_to_float(static_cast<uint16_t>(v));
        else if (t.data_type() == TensorProto::BFLOAT16) c.f[i] = bf16_to_float(static_cast<uint16_t>(v));
        else if (t.data_type() == TensorProto::BOOL) c.a[i] = v != 0;
        else c.a[i] = v;
      }
      return Status::OK();
  }
}

// The external file's bytes: location checked against the model's folder, offset and length
// against the file and the dims.
Result<std::vector<uint8_t>> read_external(const TensorProto& t, uint64_t want_bytes, const std::string& model_dir,
                                           const std::string& where) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& e : t.external_data()) {
    try {
      if (e.key() == "location") location = e.value();
      else if (e.key() == "offset") offset = std::stoll(e.value());
      else if (e.key() == "length") length = std::stoll(e.value());
    } catch (const std::exception&) {
      return invalid_argument(where + ": external_data '" + e.key() + "' is not a number: '" + e.value() + "'");
    }
  }
  if (location.empty()) return invalid_argument(where + ": external data without a 'location'");
  if (model_dir.empty()) {
    return invalid_argument(where + ": its data is in the external file '" + location +
                            "', which needs the model's folder (import the .onnx file, not bytes)");
  }
  const fs::path rel = fs::path(location).lexically_normal();
  if (rel.is_absolute() || rel.empty() || *rel.begin() == "..") {
    return invalid_argument(where + ": external data location '" + location + "' leads out of the model's folder");
  }
  std::error_code ec;
  const fs::path base = fs::canonical(model_dir, ec);
  if (ec) return io_error(where + ": cannot resolve the model's folder '" + model_dir + "': " + ec.message());
  const fs::path file = fs::canonical(base / rel, ec);
  if (ec) return not_found(where + ": external data file '" + location + "': " + ec.message());
  const auto [end, ignored] = std::mismatch(base.begin(), base.end(), file.begin(), file.end());
  (void)ignored;
  if (end != base.end()) {
    return invalid_argument(where + ": external data location '" + location + "' resolves to " + file.string() +
                            ", outside the model's folder");
  }
  if (offset < 0) return invalid_argument(where + ": external data offset " + std::to_string(offset) + " is negative");
  if (length >= 0 && static_cast<uint64_t>(length) != want_bytes) {
    return invalid_argument(where + ": external data length " + std::to_string(length) + " but the dims need " +
                            std::to_string(want_bytes) + " bytes");
  }
  const uint64_t size = fs::file_size(file, ec);
  if (ec) return io_error(where + ": " + file.string() + ": " + ec.message());
  if (static_cast<uint64_t>(offset) > size || size - static_cast<uint64_t>(offset) < want_bytes) {
    return invalid_argument(where + ": external data [" + std::to_string(offset) + ", +" + std::to_string(want_bytes) +
                            ") is past the end of " + location + " (" + std::to_string(size) + " bytes)");
  }
  std::vector<uint8_t> bytes(want_bytes);
  std::ifstream in(file, std::ios::binary);
  in.seekg(offset);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(want_bytes));
  if (!in || static_cast<uint64_t>(in.gcount()) != want_bytes) return io_error(where + ": cannot read " + file.string());
  return bytes;
}

}  // namespace

std::string onnx_type_name(int32_t type) {
  if (TensorProto::DataType_IsValid(type)) return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(type));
  return "type " + std::to_string(type);
}

Result<Constant> read_tensor(const TensorProto& t, const std::string& model_dir, const std::string& where) {
  const int32_t type = t.data_type();
  const int bytes_per = element_bytes(type);
  if (bytes_per == 0) {
    return unsupported(where + ": element type " + onnx_type_name(type) + " is not read by the importer");
  }
  if (t.has_segment()) return unsupported(where + ": segmented tensors are not read by the importer");
  Constant c;
  c.kind = is_float_type(type) ? Constant::Kind::f32 : Constant::Kind::i64;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) return invalid_argument(where + ": dim " + std::to_string(d) + " is negative");
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxConstantElements) {
      return unsupported(where + ": more than " + std::to_string(kMaxConstantElements) + " elements");
    }
    c.dims.push_back(d);
  }
  if (c.dims.size() > static_cast<size_t>(gpu::Shape::kMaxRank)) {
    return unsupported(where + ": rank " + std::to_string(c.dims.size()) + " (at most " +
                       std::to_string(gpu::Shape::kMaxRank) + ")");
  }
  const uint64_t want = static_cast<uint64_t>(n) * static_cast<uint64_t>(bytes_per);
  // Sizes are checked before anything of size n is allocated.
  if (t.data_location() == TensorProto::EXTERNAL) {
    EMBER_ASSIGN_OR_RETURN(auto bytes, read_external(t, want, model_dir, where));
    allocate(c);
    EMBER_RETURN_IF_ERROR(decode(bytes.data(), type, c, where));
  } else if (t.has_raw_data()) {
    if (t.raw_data().size() != want) {
      return invalid_argument(where + ": raw_data holds " + std::to_string(t.raw_data().size()) + " bytes but the dims " +
                              c.describe() + " of " + onnx_type_name(type) + " need " + std::to_string(want));
    }
    allocate(c);
    EMBER_RETURN_IF_ERROR(decode(reinterpret_cast<const uint8_t*>(t.raw_data().data()), type, c, where));
  } else {
    const int64_t held = std::max({static_cast<int64_t>(t.float_data_size()), static_cast<int64_t>(t.int32_data_size()),
                                   static_cast<int64_t>(t.int64_data_size()), static_cast<int64_t>(t.double_data_size()),
                                   static_cast<int64_t>(t.uint64_data_size())});
    if (held != n) {
      return invalid_argument(where + ": holds " + std::to_string(held) + " values but the dims " + c.describe() +
                              " need " + std::to_string(n));
    }
    allocate(c);
    EMBER_RETURN_IF_ERROR(from_typed_fields(t, c, where));
  }
  if (c.kind == Constant::Kind::i64) c.b = c.a;
  return c;
}

Result<Constant> read_constant_node(const onnx::NodeProto& node, const std::string& model_dir,
                                    const std::string& where) {
  if (node.attribute_size() != 1) {
    return invalid_argument(where + ": a Constant node holds exactly one value attribute, this one has " +
                            std::to_string(node.attribute_size()));
  }
  const onnx::AttributeProto& a = node.attribute(0);
  const std::string& name = a.name();
  if (name == "value") return read_tensor(a.t(), model_dir, where + ": attribute 'value'");
  if (name == "value_float") return Constant::floats({}, {a.f()});
  if (name == "value_floats") {
    return Constant::floats({static_cast<int64_t>(a.floats_size())}, {a.floats().begin(), a.floats().end()});
  }
  if (name == "value_int") return Constant::ints({}, {a.i()});
  if (name == "value_ints") {
    return Constant::ints({static_cast<int64_t>(a.ints_size())}, {a.ints().begin(), a.ints().end()});
  }
  return unsupported(where + ": a Constant given by '" + name + "' is not imported");
}

}  // namespace ember::importer
