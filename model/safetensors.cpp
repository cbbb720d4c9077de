#include "model/safetensors.hpp"

#include "base/json_text.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace ember::gpu {

using nlohmann::json;

const TensorInfo* SafetensorsIndex::find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

Result<uint64_t> read_safetensors_header_length(const uint8_t* data, size_t available, uint64_t file_size,
                                                std::string_view source) {
  const std::string at(source);
  if (available < kSafetensorsPrefixBytes || file_size < kSafetensorsPrefixBytes) {
    return corrupt(at + ": truncated: " + std::to_string(file_size) +
                   " bytes, shorter than the 8-byte header length");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  if (n > kSafetensorsMaxHeaderBytes) {
    return corrupt(at + ": header length " + std::to_string(n) + " exceeds the " +
                   std::to_string(kSafetensorsMaxHeaderBytes) + "-byte limit");
  }
  if (n > file_size - kSafetensorsPrefixBytes) {
    return corrupt(at + ": truncated: header length says " + std::to_string(n) + " bytes but only " +
                   std::to_string(file_size - kSafetensorsPrefixBytes) + " follow");
  }
  return n;
}

namespace {

Result<uint64_t> read_uint(const json& v, const std::string& where) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
    return corrupt(where + ": expected a non-negative integer, got " + v.dump());
  }
  return v.get<uint64_t>();
}

Result<TensorInfo> parse_entry(const std::string& name, const json& e, uint64_t data_bytes,
                               const std::string& at) {
  const std::string where = at + ": tensor '" + name + "'";
  if (!e.is_object()) return corrupt(where + ": expected an object");
  for (const auto& [key, value] : e.items()) {
    (void)value;
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return corrupt(where + ": unknown field '" + key + "'");
    }
  }
  TensorInfo info;
  info.name = name;

  auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) return corrupt(where + ": field 'dtype' missing or not a string");
  auto dtype = parse_dtype(dt->get<std::string>());
  if (!dtype.ok()) return dtype.error().with_context(where + ": field 'dtype'");
  info.desc.dtype = *dtype;

  auto sh = e.find("shape");
  if (sh == e.end() || !sh->is_array()) return corrupt(where + ": field 'shape' missing or not an array");
  if (sh->size() > static_cast<size_t>(Shape::kMaxRank)) {
    return unsupported(where + ": field 'shape' has rank " + std::to_string(sh->size()) + ", more than " +
                       std::to_string(Shape::kMaxRank));
  }
  uint64_t numel = 1;
  for (const auto& d : *sh) {
    EMBER_ASSIGN_OR_RETURN(uint64_t dim, read_uint(d, where + ": field 'shape'"));
    if (dim > (1ull << 40) || __builtin_mul_overflow(numel, dim, &numel) || numel > (1ull << 56)) {
      return corrupt(where + ": field 'shape' " + sh->dump() + " is too large");
    }
    info.desc.shape[info.desc.shape.rank++] = static_cast<int64_t>(dim);
  }

  auto off = e.find("data_offsets");
  if (off == e.end() || !off->is_array() || off->size() != 2) {
    return corrupt(where + ": field 'data_offsets' missing or not a pair [begin, end]");
  }
  EMBER_ASSIGN_OR_RETURN(uint64_t begin, read_uint((*off)[0], where + ": field 'data_offsets'"));
  EMBER_ASSIGN_OR_RETURN(uint64_t end, read_uint((*off)[1], where + ": field 'data_offsets'"));
  if (begin > end) {
    return corrupt(where + ": field 'data_offsets' [" + std::to_string(begin) + ", " + std::to_string(end) +
                   "] has begin after end");
  }
  if (end > data_bytes) {
    return corrupt(where + ": field 'data_offsets' ends at " + std::to_string(end) +
                   " but the data section has only " + std::to_string(data_bytes) + " bytes (truncated file?)");
  }
  const uint64_t expected = numel * dtype_size(info.desc.dtype);
  if (end - begin != expected) {
    return corrupt(where + ": field 'data_offsets' spans " + std::to_string(end - begin) + " bytes but " +
                   std::string(dtype_safetensors_name(info.desc.dtype)) + info.desc.shape.to_string() +
                   " needs " + std::to_string(expected));
  }
  info.data = {begin, end - begin};
  return info;
}

}  // namespace

Result<SafetensorsIndex> parse_safetensors(const uint8_t* data, size_t available, uint64_t file_size,
                                           std::string_view source) {
  const std::string at(source);
  EMBER_ASSIGN_OR_RETURN(uint64_t n, read_safetensors_header_length(data, available, file_size, source));
  if (available < kSafetensorsPrefixBytes + n) {
    return corrupt(at + ": truncated: header needs " + std::to_string(kSafetensorsPrefixBytes + n) +
                   " bytes, have " + std::to_string(available));
  }
  SafetensorsIndex index;
  index.header_bytes = n;
  index.data_offset = kSafetensorsPrefixBytes + n;
  index.data_bytes = file_size - index.data_offset;

  const char* begin = reinterpret_cast<const char*>(data + kSafetensorsPrefixBytes);
  auto parsed = parse_json_text(std::string_view(begin, n));
  if (!parsed.ok()) return corrupt(at + ": header: " + parsed.error().message());
  json header = std::move(*parsed);
  if (!header.is_object()) return corrupt(at + ": header must be a JSON object");

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return corrupt(at + ": field '__metadata__' must be an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) return corrupt(at + ": field '__metadata__." + k + "' must be a string");
        index.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    EMBER_ASSIGN_OR_RETURN(TensorInfo info, parse_entry(name, entry, index.data_bytes, at));
    index.tensors.push_back(std::move(info));
  }

  std::sort(index.tensors.begin(), index.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.data.offset != b.data.offset ? a.data.offset < b.data.offset : a.data.length < b.data.length;
  });
  uint64_t cursor = 0;
  const TensorInfo* prev = nullptr;
  for (const auto& t : index.tensors) {
    if (t.data.offset < cursor) {
      return corrupt(at + ": tensor '" + t.name + "' field 'data_offsets' overlaps tensor '" + prev->name + "'");
    }
    if (t.data.offset > cursor) {
      return corrupt(at + ": bytes " + std::to_string(cursor) + ".." + std::to_string(t.data.offset) +
                     " of the data section belong to no tensor (a hole before '" + t.name + "')");
    }
    cursor = t.data.end();
    prev = &t;
  }
  if (cursor != index.data_bytes) {
    return corrupt(at + ": " + std::to_string(index.data_bytes - cursor) +
                   " trailing bytes after the last tensor belong to no tensor");
  }
  return index;
}

std::string safetensors_header(const std::vector<TensorToWrite>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  // Keys are written in data order (ordered_json) so the header reads like the layer list.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    std::vector<int64_t> shape(t.desc.shape.dims.begin(), t.desc.shape.dims.begin() + t.desc.shape.rank);
    const uint64_t bytes = t.desc.bytes();
    header[t.name] = {{"dtype", dtype_safetensors_name(t.desc.dtype)},
                      {"shape", shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  while ((kSafetensorsPrefixBytes + text.size()) % 8 != 0) text.push_back(' ');
  std::string out(kSafetensorsPrefixBytes, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return io_error(path + ": cannot create: " + std::strerror(errno));
  const std::string header = safetensors_header(tensors, metadata);
  bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size();
  for (const auto& t : tensors) {
    if (!ok) break;
    const size_t bytes = t.desc.bytes();
    ok = bytes == 0 || std::fwrite(t.data, 1, bytes, f) == bytes;
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    return io_error(path + ": write failed: " + std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return io_error(path + ": rename failed: " + ec.message());
  return Status::OK();
}

}  // namespace ember::gpu
