#include "importer/hf_import.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/json_text.hpp"
#include "importer/hf_checkpoint.hpp"
#include "importer/hf_families.hpp"
#include "model/half.hpp"
#include "model/model.hpp"
#include "model/safetensors.hpp"

namespace ember::importer {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint64_t kMaxConfigBytes = 4ull << 20;      // config.json, generation_config.json
constexpr uint64_t kMaxTokenizerBytes = 64ull << 20;  // tokenizer.json (Llama 3's is 9 MB)
constexpr const char* kTokenizer = "tokenizer.json";
constexpr const char* kTokenizerConfig = "tokenizer_config.json";

Result<std::optional<std::string>> read_optional(const std::string& path, uint64_t limit) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::optional<std::string>();
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return io_error(path + ": " + ec.message());
  if (size > limit) {
    return invalid_argument(path + ": " + std::to_string(size) + " bytes, more than the " +
                            std::to_string(limit >> 20) + " MiB this importer reads");
  }
  std::string text(size, '\0');
  std::ifstream f(path, std::ios::binary);
  f.read(text.data(), static_cast<std::streamsize>(size));
  if (!f || static_cast<uint64_t>(f.gcount()) != size) return io_error(path + ": cannot read");
  return std::optional<std::string>(std::move(text));
}

Result<json> parse_object(const std::string& text, const std::string& path) {
  auto parsed = parse_json_text(text);
  if (!parsed.ok()) return parsed.error().with_context(path);
  if (!parsed->is_object()) return invalid_argument(path + ": must be a JSON object");
  return std::move(*parsed);
}

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

// Ids from an int or a list of ints (generation_config.json's eos_token_id).
Status read_ids(const json& j, const char* key, const std::string& path, std::vector<int64_t>& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::OK();
  auto one = [&](const json& v) -> Status {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return invalid_argument(path + ": field '" + key + "': " + it->dump() + " is not a token id or a list of them");
    }
    out.push_back(v.get<int64_t>());
    return Status::OK();
  };
  if (!it->is_array()) return one(*it);
  for (const auto& v : *it) EMBER_RETURN_IF_ERROR(one(v));
  return Status::OK();
}

// generation_config.json: special tokens and the sampling defaults.
Status read_generation_config(const std::string& path, const HfConfig& config, gpu::GenerationSpec& g) {
  EMBER_ASSIGN_OR_RETURN(auto text, read_optional(path, kMaxConfigBytes));
  if (!text) return Status::OK();
  EMBER_ASSIGN_OR_RETURN(json j, parse_object(*text, path));
  std::vector<int64_t> bos;
  EMBER_RETURN_IF_ERROR(read_ids(j, "bos_token_id", path, bos));
  if (!g.bos_token_id && !bos.empty()) g.bos_token_id = bos.front();
  std::vector<int64_t> eos;
  EMBER_RETURN_IF_ERROR(read_ids(j, "eos_token_id", path, eos));
  for (int64_t id : eos) {
    if (std::find(g.eos_token_ids.begin(), g.eos_token_ids.end(), id) == g.eos_token_ids.end()) g.eos_token_ids.push_back(id);
  }
  auto number = [&](const char* key, double lo, double hi, bool open_low) -> Result<std::optional<double>> {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::optional<double>();
    const bool in = it->is_number() && (open_low ? it->get<double>() > lo : it->get<double>() >= lo) && it->get<double>() <= hi;
    if (!in) return invalid_argument(path + ": field '" + key + "': " + it->dump() + " is out of range");
    return std::optional<double>(it->get<double>());
  };
  EMBER_ASSIGN_OR_RETURN(g.temperature, number("temperature", 0, 100, false));
  EMBER_ASSIGN_OR_RETURN(g.top_p, number("top_p", 0, 1, true));
  if (auto k = j.find("top_k"); k != j.end() && !k->is_null()) {
    if (!k->is_number_integer() || k->get<int64_t>() < 0 || k->get<int64_t>() > config.vocab_size) {
      return invalid_argument(path + ": field 'top_k': " + k->dump() + " is not an integer in 0..vocab_size");
    }
    g.top_k = k->get<int64_t>();
  }
  for (int64_t id : g.eos_token_ids) {
    if (id >= config.vocab_size) return invalid_argument(path + ": eos id " + std::to_string(id) + " is not below vocab_size");
  }
  if (g.bos_token_id && *g.bos_token_id >= config.vocab_size) {
    return invalid_argument(path + ": bos id " + std::to_string(*g.bos_token_id) + " is not below vocab_size");
  }
  return Status::OK();
}

// A special token of tokenizer_config.json: a string, or an AddedToken object {"content": ...}.
std::string token_text(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return {};
}

// The id of `token` in tokenizer.json (its added tokens, then its model's vocabulary); -1 if absent.
int64_t token_id(const json& tokenizer, const std::string& token) {
  if (auto added = tokenizer.find("added_tokens"); added != tokenizer.end() && added->is_array()) {
    for (const auto& a : *added) {
      if (a.is_object() && a.value("content", std::string()) == token && a.contains("id") && a["id"].is_number_integer()) {
        return a["id"].get<int64_t>();
      }
    }
  }
  auto model = tokenizer.find("model");
  if (model == tokenizer.end() || !model->is_object()) return -1;
  auto vocab = model->find("vocab");
  if (vocab == model->end() || !vocab->is_object()) return -1;
  auto it = vocab->find(token);
  return it != vocab->end() && it->is_number_integer() ? it->get<int64_t>() : -1;
}

// tokenizer_config.json's chat_template: a string, or a list of {"name", "template"} ("default" first).
std::string chat_template_text(const json& cfg) {
  auto it = cfg.find("chat_template");
  if (it == cfg.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    std::string first;
    for (const auto& t : *it) {
      if (!t.is_object() || !t.contains("template") || !t["template"].is_string()) continue;
      if (t.value("name", std::string()) == "default") return t["template"].get<std::string>();
      if (first.empty()) first = t["template"].get<std::string>();
    }
    return first;
  }
  return {};
}

// Tokenizer files, special tokens and chat template into the generation section; the files'
// texts are kept for writing.
struct TokenizerFiles {
  std::optional<std::string> tokenizer, config;
};

Result<TokenizerFiles> read_tokenizer(const std::string& dir, const HfConfig& config, gpu::GenerationSpec& g) {
  TokenizerFiles t;
  const std::string tpath = dir + "/" + kTokenizer, cpath = dir + "/" + kTokenizerConfig;
  EMBER_ASSIGN_OR_RETURN(t.tokenizer, read_optional(tpath, kMaxTokenizerBytes));
  EMBER_ASSIGN_OR_RETURN(t.config, read_optional(cpath, kMaxTokenizerBytes));
  json tok, cfg;
  if (t.tokenizer) {
    EMBER_ASSIGN_OR_RETURN(tok, parse_object(*t.tokenizer, tpath));
  }
  if (t.config) {
    EMBER_ASSIGN_OR_RETURN(cfg, parse_object(*t.config, cpath));
  }
  if (t.tokenizer) g.tokenizer = kTokenizer;
  if (t.config) g.tokenizer_config = kTokenizerConfig;
  // Special tokens the configs do not number: by their text in tokenizer_config.json.
  if (t.tokenizer && t.config) {
    auto lookup = [&](const char* key) -> Result<int64_t> {
      const std::string text = token_text(cfg, key);
      if (text.empty()) return int64_t{-1};
      const int64_t id = token_id(tok, text);
      if (id >= config.vocab_size) {
        return invalid_argument(cpath + ": " + key + " '" + text + "' is id " + std::to_string(id) +
                                " in tokenizer.json, not below vocab_size " + std::to_string(config.vocab_size));
      }
      return id;
    };
    if (!g.bos_token_id) {
      EMBER_ASSIGN_OR_RETURN(int64_t id, lookup("bos_token"));
      if (id >= 0) g.bos_token_id = id;
    }
    if (g.eos_token_ids.empty()) {
      EMBER_ASSIGN_OR_RETURN(int64_t id, lookup("eos_token"));
      if (id >= 0) g.eos_token_ids.push_back(id);
    }
  }
  // The chat template: tokenizer_config.json's, or the files newer transformers write beside it.
  std::string jinja = t.config ? chat_template_text(cfg) : std::string();
  if (jinja.empty()) {
    EMBER_ASSIGN_OR_RETURN(auto file, read_optional(dir + "/chat_template.jinja", kMaxConfigBytes));
    if (file) jinja = *file;
  }
  if (jinja.empty()) {
    const std::string path = dir + "/chat_template.json";
    EMBER_ASSIGN_OR_RETURN(auto file, read_optional(path, kMaxConfigBytes));
    if (file) {
      EMBER_ASSIGN_OR_RETURN(json j, parse_object(*file, path));
      jinja = chat_template_text(j);
    }
  }
  g.chat_template = recognise_chat_template(jinja);
  return t;
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
                               const TokenizerFiles& files) {
  std::vector<gpu::TensorToWrite> layout;
  for (const auto& w : plan.weights) layout.push_back({w.tensor, {w.exact ? gpu::DType::f32 : width, w.shape}, nullptr});
  const std::pair<const char*, const std::optional<std::string>*> trailing[] = {{kTokenizer, &files.tokenizer},
                                                                               {kTokenizerConfig, &files.config}};
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

std::string recognise_chat_template(std::string_view jinja) {
  auto has = [&](std::string_view s) { return jinja.find(s) != std::string_view::npos; };
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return "llama3";
  if (has("<|im_start|>") && has("<|im_end|>")) return "chatml";
  if (has("[INST]") && has("<<SYS>>")) return "llama2";
  return {};
}

Result<HfImported> import_hf_folder(const std::string& dir, const std::string& out, const HfImportOptions& options) {
  const std::string config_path = dir + "/config.json";
  EMBER_ASSIGN_OR_RETURN(auto config_text, read_optional(config_path, kMaxConfigBytes));
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

  gpu::GenerationSpec g;
  g.family = std::string(family_name(c.family));
  g.context_length = static_cast<uint32_t>(c.context_length);
  g.vocab_size = static_cast<uint32_t>(c.vocab_size);
  g.num_kv_layers = static_cast<uint32_t>(c.layers);
  g.num_kv_heads = static_cast<uint32_t>(c.kv_heads);
  g.head_dim = static_cast<uint32_t>(c.head_dim);
  g.kv_dtype = result.width;
  g.bos_token_id = c.bos_token_id;
  g.eos_token_ids = c.eos_token_ids;
  EMBER_RETURN_IF_ERROR(read_generation_config(dir + "/generation_config.json", c, g));
  EMBER_ASSIGN_OR_RETURN(TokenizerFiles files, read_tokenizer(dir, c, g));
  plan.manifest.generation = g;
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
  if (files.tokenizer) EMBER_RETURN_IF_ERROR(write_file(out + "/" + kTokenizer, *files.tokenizer));
  if (files.config) EMBER_RETURN_IF_ERROR(write_file(out + "/" + kTokenizerConfig, *files.config));
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
