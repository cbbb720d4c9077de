#include "importer/hf_import.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "importer/hf_checkpoint.hpp"
#include "importer/hf_families.hpp"
#include "importer/hf_generation.hpp"
#include "model/half.hpp"
#include "model/model.hpp"
#include "model/safetensors.hpp"

namespace ember::importer {

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxConfigJsonBytes = 4ull << 20;  // config.json

std::string default_name(const std::string& dir) {
  fs::path p(dir);
  std::string stem = p.filename().string();
  if (stem.empty() || stem == ".") stem = p.parent_path().filename().string();
  stem = stem.substr(0, 128);
  for (char& c : stem) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) c = '_';
  }
  return stem.empty() || stem == "." || stem == ".." ? "model" : stem;
}

// The Ember tensor's float32 elements from the checkpoint.
Result<std::vector<float>> materialise(const PlannedWeight& w, const HfCheckpoint& ckpt) {
  const WeightRecipe& r = w.recipe;
  switch (r.kind) {
    case WeightRecipe::Kind::values: return r.values;
    case WeightRecipe::Kind::copy: return ckpt.read(r.from.front());
    case WeightRecipe::Kind::transpose: {
      EMBER_ASSIGN_OR_RETURN(std::vector<float> src, ckpt.read(r.from.front()));
      const auto out = static_cast<size_t>(w.shape[0]), in = static_cast<size_t>(w.shape[1]);
      std::vector<float> t(src.size());
      for (size_t i = 0; i < in; ++i)
        for (size_t o = 0; o < out; ++o) t[o * in + i] = src[i * out + o];
      return t;
    }
    case WeightRecipe::Kind::concat_rows: {
      std::vector<float> all;
      all.reserve(static_cast<size_t>(w.shape.numel()));
      for (const auto& name : r.from) {
        EMBER_ASSIGN_OR_RETURN(std::vector<float> part, ckpt.read(name));
        all.insert(all.end(), part.begin(), part.end());
      }
      return all;
    }
  }
  return internal_error("materialise: recipe kind");
}

Result<std::vector<uint8_t>> encode(const std::vector<float>& v, gpu::DType width, const std::string& tensor) {
  std::vector<uint8_t> out(v.size() * gpu::dtype_size(width));
  for (size_t i = 0; i < v.size(); ++i) {
    if (width == gpu::DType::f32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
      continue;
    }
    const uint16_t h = width == gpu::DType::f16 ? gpu::f32_to_f16(v[i]) : gpu::f32_to_bf16(v[i]);
    const float back = width == gpu::DType::f16 ? gpu::f16_to_f32(h) : gpu::bf16_to_f32(h);
    if (std::isfinite(v[i]) && !std::isfinite(back)) {
      return invalid_argument("tensor '" + tensor + "' element " + std::to_string(i) + " (" + std::to_string(v[i]) +
                              ") is outside " + std::string(gpu::dtype_name(width)) + "'s range");
    }
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

// weights.safetensors written tensor by tensor, to a temporary file renamed into place.
class StreamWriter {
 public:
  explicit StreamWriter(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {}
  ~StreamWriter() {
    if (f_) {
      std::fclose(f_);
      std::remove(tmp_.c_str());
    }
  }
  Status open(const std::string& header) {
    f_ = std::fopen(tmp_.c_str(), "wb");
    if (!f_) return io_error(tmp_ + ": cannot create: " + std::strerror(errno));
    return write(header.data(), header.size());
  }
  Status write(const void* data, size_t bytes) {
    if (bytes && std::fwrite(data, 1, bytes, f_) != bytes) return io_error(tmp_ + ": write failed: " + std::strerror(errno));
    written_ += bytes;
    return Status::OK();
  }
  Result<uint64_t> finish() {
    const bool ok = std::fclose(f_) == 0;
    f_ = nullptr;
    if (!ok) {
      std::remove(tmp_.c_str());
      return io_error(tmp_ + ": write failed");
    }
    std::error_code ec;
    fs::rename(tmp_, path_, ec);
    if (ec) return io_error(path_ + ": " + ec.message());
    return written_;
  }

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  uint64_t written_ = 0;
};

Status write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return io_error(tmp + ": cannot create: " + std::strerror(errno));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    return io_error(tmp + ": write failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return io_error(path + ": " + ec.message());
  return Status::OK();
}

Result<uint64_t> write_weights(const std::string& path, const HfPlan& plan, const HfCheckpoint& ckpt, gpu::DType width,
                               const HfTokenizerFiles& files) {
  std::vector<gpu::TensorToWrite> layout;
  for (const auto& w : plan.weights) layout.push_back({w.tensor, {w.exact ? gpu::DType::f32 : width, w.shape}, nullptr});
  const std::pair<const char*, const std::optional<std::string>*> trailing[] = {{HfTokenizerFiles::kTokenizer, &files.tokenizer}, {HfTokenizerFiles::kTokenizerConfig, &files.config}};
  for (const auto& [name, text] : trailing) {
    if (*text) layout.push_back({name, {gpu::DType::u8, gpu::Shape{static_cast<int64_t>((*text)->size())}}, nullptr});
  }
  StreamWriter out(path);
  EMBER_RETURN_IF_ERROR(out.open(gpu::safetensors_header(layout, {{"format", "pt"}, {"ember.importer", "huggingface"}})));
  for (size_t i = 0; i < plan.weights.size(); ++i) {
    const PlannedWeight& w = plan.weights[i];
    EMBER_ASSIGN_OR_RETURN(std::vector<float> values, materialise(w, ckpt));
    if (values.size() != static_cast<size_t>(w.shape.numel())) {
      return internal_error("tensor '" + w.tensor + "': " + std::to_string(values.size()) + " elements for " + w.shape.to_string());
    }
    EMBER_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, encode(values, layout[i].desc.dtype, w.tensor));
    EMBER_RETURN_IF_ERROR(out.write(bytes.data(), bytes.size()));
  }
  for (const auto& [name, text] : trailing) {
    if (*text) EMBER_RETURN_IF_ERROR(out.write((*text)->data(), (*text)->size()));
  }
  return out.finish();
}

}  // namespace

bool is_hf_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "config.json", ec);
}

Result<HfImported> import_hf_folder(const std::string& dir, const std::string& out, const HfImportOptions& options) {
  const std::string config_path = dir + "/config.json";
  EMBER_ASSIGN_OR_RETURN(auto config_text, read_optional_file(config_path, kMaxConfigJsonBytes));
  if (!config_text) return not_found(dir + ": no config.json (not a Hugging Face model folder)");
  HfImported result;
  EMBER_ASSIGN_OR_RETURN(result.config, parse_hf_config(*config_text, config_path));
  const HfConfig& c = result.config;
  EMBER_ASSIGN_OR_RETURN(HfCheckpoint ckpt, HfCheckpoint::open(dir));
  const std::string name = options.name.empty() ? default_name(dir) : options.name;
  auto planned = plan_hf_model(c, ckpt, name);
  if (!planned.ok()) return planned.error().with_context(dir);
  HfPlan& plan = *planned;
  result.width = options.width.value_or(ckpt.width());
  if (!gpu::is_float(result.width)) return invalid_argument("--dtype: weights are held as fp32, fp16 or bf16");

  EMBER_ASSIGN_OR_RETURN(HfGeneration generation, read_hf_generation(dir, c, result.width));
  const HfTokenizerFiles& files = generation.files;
  plan.manifest.generation = std::move(generation.spec);
  plan.manifest.description = "imported from the Hugging Face folder " + default_name(dir) + " (" + c.model_type +
                              ", " + std::to_string(c.layers) + " layers)";
  const std::string manifest_json = gpu::manifest_to_json(plan.manifest);
  if (auto checked = gpu::parse_manifest(manifest_json, out + "/model.json"); !checked.ok()) {
    return internal_error("the importer made a model.json that does not validate: " + checked.error().message());
  }

  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return io_error(out + ": cannot create directory: " + ec.message());
  const std::string weights = out + "/" + gpu::kWeightsFile, manifest = out + "/" + gpu::kManifestFile;
  EMBER_ASSIGN_OR_RETURN(result.file_bytes, write_weights(weights, plan, ckpt, result.width, files));
  EMBER_RETURN_IF_ERROR(write_file(manifest, manifest_json));
  if (files.tokenizer) EMBER_RETURN_IF_ERROR(write_file(out + "/" + HfTokenizerFiles::kTokenizer, *files.tokenizer));
  if (files.config) EMBER_RETURN_IF_ERROR(write_file(out + "/" + HfTokenizerFiles::kTokenizerConfig, *files.config));
  if (auto checked = gpu::Model::check_dir(out); !checked.ok()) {
    fs::remove(weights, ec);
    fs::remove(manifest, ec);
    return internal_error("the imported model does not load (files removed): " + checked.error().message());
  }
  result.manifest = std::move(plan.manifest);
  result.shards = ckpt.files().size();
  result.parameters = plan.parameters;
  result.duplicated_bytes = plan.duplicated_elements * gpu::dtype_size(result.width);
  result.ignored = plan.ignored;
  result.tokenizer = files.tokenizer.has_value();
  result.tokenizer_config = files.config.has_value();
  return result;
}

}  // namespace ember::importer
