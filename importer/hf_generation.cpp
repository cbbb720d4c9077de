#include "importer/hf_generation.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/json_text.hpp"

namespace ember::importer {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint64_t kMaxConfigBytes = 4ull << 20;      // generation_config.json, chat templates
constexpr uint64_t kMaxTokenizerBytes = 64ull << 20;  // tokenizer.json (Llama 3's is 9 MB)

Result<json> parse_object(const std::string& text, const std::string& path) {
  auto parsed = parse_json_text(text);
  if (!parsed.ok()) return parsed.error().with_context(path);
  if (!parsed->is_object()) return invalid_argument(path + ": must be a JSON object");
  return std::move(*parsed);
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
  EMBER_ASSIGN_OR_RETURN(auto text, read_optional_file(path, kMaxConfigBytes));
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

Result<HfTokenizerFiles> read_tokenizer(const std::string& dir, const HfConfig& config, gpu::GenerationSpec& g) {
  HfTokenizerFiles t;
  const std::string tpath = dir + "/" + HfTokenizerFiles::kTokenizer, cpath = dir + "/" + HfTokenizerFiles::kTokenizerConfig;
  EMBER_ASSIGN_OR_RETURN(t.tokenizer, read_optional_file(tpath, kMaxTokenizerBytes));
  EMBER_ASSIGN_OR_RETURN(t.config, read_optional_file(cpath, kMaxTokenizerBytes));
  json tok, cfg;
  if (t.tokenizer) {
    EMBER_ASSIGN_OR_RETURN(tok, parse_object(*t.tokenizer, tpath));
  }
  if (t.config) {
    EMBER_ASSIGN_OR_RETURN(cfg, parse_object(*t.config, cpath));
  }
  if (t.tokenizer) g.tokenizer = HfTokenizerFiles::kTokenizer;
  if (t.config) g.tokenizer_config = HfTokenizerFiles::kTokenizerConfig;
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
    EMBER_ASSIGN_OR_RETURN(auto file, read_optional_file(dir + "/chat_template.jinja", kMaxConfigBytes));
    if (file) jinja = *file;
  }
  if (jinja.empty()) {
    const std::string path = dir + "/chat_template.json";
    EMBER_ASSIGN_OR_RETURN(auto file, read_optional_file(path, kMaxConfigBytes));
    if (file) {
      EMBER_ASSIGN_OR_RETURN(json j, parse_object(*file, path));
      jinja = chat_template_text(j);
    }
  }
  g.chat_template = recognise_chat_template(jinja);
  return t;
}

}  // namespace

Result<std::optional<std::string>> read_optional_file(const std::string& path, uint64_t limit) {
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

std::string recognise_chat_template(std::string_view jinja) {
  auto has = [&](std::string_view s) { return jinja.find(s) != std::string_view::npos; };
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return "llama3";
  if (has("<|im_start|>") && has("<|im_end|>")) return "chatml";
  if (has("[INST]") && has("<<SYS>>")) return "llama2";
  return {};
}

Result<HfGeneration> read_hf_generation(const std::string& dir, const HfConfig& c, gpu::DType width) {
  HfGeneration out;
  gpu::GenerationSpec& g = out.spec;
  g.family = std::string(family_name(c.family));
  g.context_length = static_cast<uint32_t>(c.context_length);
  g.vocab_size = static_cast<uint32_t>(c.vocab_size);
  g.num_kv_layers = static_cast<uint32_t>(c.layers);
  g.num_kv_heads = static_cast<uint32_t>(c.kv_heads);
  g.head_dim = static_cast<uint32_t>(c.head_dim);
  g.kv_dtype = width;
  g.bos_token_id = c.bos_token_id;
  g.eos_token_ids = c.eos_token_ids;
  EMBER_RETURN_IF_ERROR(read_generation_config(dir + "/generation_config.json", c, g));
  EMBER_ASSIGN_OR_RETURN(out.files, read_tokenizer(dir, c, g));
  return out;
}

}  // namespace ember::importer
