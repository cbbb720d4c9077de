#include "importer/hf_checkpoint.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "base/json_text.hpp"
#include "model/half.hpp"

namespace ember::importer {

namespace {

namespace fs = std::filesystem;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
// An index lists one entry per tensor: a few MB for the largest models.
constexpr uint64_t kMaxIndexBytes = 64ull << 20;

Result<std::string> read_small_file(const std::string& path, uint64_t limit) {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return not_found(path + ": " + ec.message());
  if (size > limit) return invalid_argument(path + ": " + std::to_string(size) + " bytes, more than " +
                                            std::to_string(limit) + " (not a file this importer reads)");
  std::string text(size, '\0');
  std::ifstream f(path, std::ios::binary);
  f.read(text.data(), static_cast<std::streamsize>(size));
  if (!f || static_cast<uint64_t>(f.gcount()) != size) return io_error(path + ": cannot read");
  return text;
}

// The header of one shard, as Model::check_dir reads a weights file's: the prefix, then N bytes.
Result<gpu::SafetensorsIndex> read_header(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found(path + ": cannot open");
  f.seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(f.tellg());
  f.seekg(0);
  std::vector<uint8_t> prefix(gpu::kSafetensorsPrefixBytes);
  f.read(reinterpret_cast<char*>(prefix.data()), static_cast<std::streamsize>(prefix.size()));
  const auto got = static_cast<size_t>(f.gcount());
  EMBER_ASSIGN_OR_RETURN(uint64_t n, gpu::read_safetensors_header_length(prefix.data(), got, file_size, path));
  prefix.resize(gpu::kSafetensorsPrefixBytes + n);
  f.read(reinterpret_cast<char*>(prefix.data() + gpu::kSafetensorsPrefixBytes), static_cast<std::streamsize>(n));
  if (static_cast<uint64_t>(f.gcount()) != n) return io_error(path + ": cannot read the header");
  return gpu::parse_safetensors(prefix.data(), prefix.size(), file_size, path);
}

// A shard named by the index: a plain file name in the folder.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

}  // namespace

Result<HfCheckpoint> HfCheckpoint::open(const std::string& dir) {
  HfCheckpoint c;
  c.dir_ = dir;
  const std::string index_path = dir + "/" + kIndexFile;
  std::error_code ec;
  // shard file -> tensors the index places there
  std::map<std::string, std::vector<std::string>> placed;
  if (fs::exists(index_path, ec)) {
    EMBER_ASSIGN_OR_RETURN(std::string text, read_small_file(index_path, kMaxIndexBytes));
    auto parsed = parse_json_text(text);
    if (!parsed.ok()) return parsed.error().with_context(index_path);
    const auto& root = *parsed;
    auto map = root.is_object() ? root.find("weight_map") : root.end();
    if (map == root.end() || !map->is_object() || map->empty()) {
      return invalid_argument(index_path + ": field 'weight_map' must be a non-empty object {tensor: shard file}");
    }
    for (const auto& [tensor, file] : map->items()) {
      if (!file.is_string()) return invalid_argument(index_path + ": weight_map." + tensor + ": must be a file name");
      const std::string name = file.get<std::string>();
      if (!plain_file_name(name)) {
        return invalid_argument(index_path + ": weight_map." + tensor + ": '" + name +
                                "' is not a file in the folder (shards must sit beside the index)");
      }
      placed[name].push_back(tensor);
    }
    for (const auto& [name, tensors] : placed) {
      const std::string path = dir + "/" + name;
      if (!fs::is_regular_file(path, ec)) {
        return not_found(path + ": missing: " + kIndexFile + " places " + std::to_string(tensors.size()) +
                         " tensor(s) there ('" + tensors.front() + "' ...)");
      }
      c.files_.push_back(path);
    }
  } else {
    const std::string path = dir + "/" + kSingleFile;
    if (!fs::is_regular_file(path, ec)) {
      std::string hint;
      if (fs::exists(dir + "/pytorch_model.bin", ec) || fs::exists(dir + "/pytorch_model.bin.index.json", ec)) {
        hint = " (PyTorch .bin checkpoints are not read: save the model with safe_serialization=True)";
      }
      return not_found(dir + ": no " + kSingleFile + " and no " + kIndexFile + hint);
    }
    c.files_.push_back(path);
  }
  for (const std::string& path : c.files_) {
    EMBER_ASSIGN_OR_RETURN(gpu::SafetensorsIndex index, read_header(path));
    for (auto& t : index.tensors) {
      const std::string name = t.name;
      auto [it, fresh] = c.tensors_.emplace(name, HfTensor{path, index.data_offset, std::move(t)});
      if (!fresh) {
        return invalid_argument(path + ": tensor '" + name + "' is also in " + it->second.file +
                                " (one tensor, one shard)");
      }
    }
  }
  for (const auto& [name, tensors] : placed) {
    const std::string path = dir + "/" + name;
    for (const auto& t : tensors) {
      auto it = c.tensors_.find(t);
      if (it == c.tensors_.end() || it->second.file != path) {
        return corrupt(index_path + ": weight_map places tensor '" + t + "' in " + name + ", which does not hold it");
      }
    }
  }
  return c;
}

const HfTensor* HfCheckpoint::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<std::string> HfCheckpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

gpu::DType HfCheckpoint::width() const {
  uint64_t bytes[3] = {0, 0, 0};
  for (const auto& [name, t] : tensors_) {
    switch (t.info.desc.dtype) {
      case gpu::DType::f32: bytes[0] += t.info.data.length; break;
      case gpu::DType::f16: bytes[1] += t.info.data.length; break;
      case gpu::DType::bf16: bytes[2] += t.info.data.length; break;
      default: break;
    }
  }
  if (bytes[1] > bytes[0] && bytes[1] >= bytes[2]) return gpu::DType::f16;
  if (bytes[2] > bytes[0] && bytes[2] > bytes[1]) return gpu::DType::bf16;
  return gpu::DType::f32;
}

Result<std::vector<float>> HfCheckpoint::read(std::string_view name) const {
  const HfTensor* t = find(name);
  if (!t) return not_found(dir_ + ": the checkpoint has no tensor '" + std::string(name) + "'");
  const gpu::DType dtype = t->info.desc.dtype;
  if (!gpu::is_float(dtype)) {
    return unsupported(t->file + ": tensor '" + std::string(name) + "' is " + std::string(gpu::dtype_name(dtype)) +
                       "; the importer reads float32, float16 and bfloat16 weights (not quantized ones)");
  }
  const uint64_t n = static_cast<uint64_t>(t->info.desc.shape.numel());
  std::vector<uint8_t> raw(t->info.data.length);
  std::ifstream f(t->file, std::ios::binary);
  f.seekg(static_cast<std::streamoff>(t->data_offset + t->info.data.offset));
  f.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
  if (!f || static_cast<uint64_t>(f.gcount()) != raw.size()) {
    return io_error(t->file + ": cannot read tensor '" + std::string(name) + "'");
  }
  std::vector<float> out(n);
  for (uint64_t i = 0; i < n; ++i) {
    uint16_t h;
    switch (dtype) {
      case gpu::DType::f16:
        std::memcpy(&h, raw.data() + 2 * i, 2);
        out[i] = gpu::f16_to_f32(h);
        break;
      case gpu::DType::bf16:
        std::memcpy(&h, raw.data() + 2 * i, 2);
        out[i] = gpu::bf16_to_f32(h);
        break;
      default: std::memcpy(&out[i], raw.data() + 4 * i, 4); break;
    }
  }
  return out;
}

}  // namespace ember::importer
