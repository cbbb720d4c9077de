#include "model/generation_spec.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "model/manifest.hpp"

namespace ember::gpu {

namespace {

using nlohmann::json;

constexpr int64_t kMaxGenerationSize = int64_t{1} << 24;
constexpr const char* kInputs[] = {"input_ids", "positions", "kv_meta", "last_index"};

Result<uint32_t> section_count(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return invalid_argument(where + ": field '" + key + "' is missing");
  if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > kMaxGenerationSize) {
    return invalid_argument(where + "." + key + ": " + it->dump() + " is not an integer in 1.." +
                            std::to_string(kMaxGenerationSize));
  }
  return static_cast<uint32_t>(it->get<int64_t>());
}

Result<int64_t> section_token_id(const json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= kMaxGenerationSize) {
    return invalid_argument(where + ": " + v.dump() + " is not a token id");
  }
  return v.get<int64_t>();
}

Result<std::string> section_tensor(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return std::string();
  if (!it->is_string() || it->get<std::string>().empty() || it->get<std::string>().size() > 256) {
    return invalid_argument(where + "." + key + ": must be the name of a tensor of weights.safetensors");
  }
  return it->get<std::string>();
}

Status section_keys(const json& j, std::initializer_list<std::string_view> keys, const std::string& where) {
  for (const auto& [key, value] : j.items()) {
    (void)value;
    bool known = false;
    for (auto k : keys) known |= k == key;
    if (!known) return invalid_argument(where + ": unknown field '" + key + "'");
  }
  return Status::OK();
}

}  // namespace

uint64_t GenerationSpec::kv_bytes_per_token() const {
  return uint64_t{num_kv_layers} * 2 * num_kv_heads * head_dim * dtype_size(kv_dtype);
}

bool known_generation_family(std::string_view family) { return family == "gpt2" || family == "llama"; }

bool known_chat_template(std::string_view name) { return name == "llama3" || name == "llama2" || name == "chatml"; }

Result<GenerationSpec> parse_generation(const json& j, const std::string& where) {
  if (!j.is_object()) return invalid_argument(where + ": must be an object");
  EMBER_RETURN_IF_ERROR(section_keys(j,
                                   {"family", "context_length", "vocab_size", "num_kv_layers", "num_kv_heads",
                                    "head_dim", "kv_dtype", "kv_bytes_per_token", "bos_token_id", "eos_token_ids",
                                    "sampling", "chat_template", "tokenizer", "tokenizer_config"},
                                   where));
  GenerationSpec g;
  auto family = j.find("family");
  if (family == j.end() || !family->is_string() || !known_generation_family(family->get<std::string>())) {
    return invalid_argument(where + ".family: must be \"gpt2\" or \"llama\"");
  }
  g.family = family->get<std::string>();
  EMBER_ASSIGN_OR_RETURN(g.context_length, section_count(j, "context_length", where));
  EMBER_ASSIGN_OR_RETURN(g.vocab_size, section_count(j, "vocab_size", where));
  EMBER_ASSIGN_OR_RETURN(g.num_kv_layers, section_count(j, "num_kv_layers", where));
  EMBER_ASSIGN_OR_RETURN(g.num_kv_heads, section_count(j, "num_kv_heads", where));
  EMBER_ASSIGN_OR_RETURN(g.head_dim, section_count(j, "head_dim", where));
  auto kv = j.find("kv_dtype");
  if (kv == j.end() || !kv->is_string()) return invalid_argument(where + ".kv_dtype: must be float32, float16 or bfloat16");
  auto dtype = parse_dtype(kv->get<std::string>());
  if (!dtype.ok() || !is_float(*dtype)) return invalid_argument(where + ".kv_dtype: must be float32, float16 or bfloat16");
  g.kv_dtype = *dtype;
  if (auto b = j.find("kv_bytes_per_token"); b != j.end()) {
    if (!b->is_number_integer() || b->get<int64_t>() < 0 || static_cast<uint64_t>(b->get<int64_t>()) != g.kv_bytes_per_token()) {
      return invalid_argument(where + ".kv_bytes_per_token: " + b->dump() + ", but the shapes and kv_dtype make " +
                              std::to_string(g.kv_bytes_per_token()));
    }
  }
  if (auto b = j.find("bos_token_id"); b != j.end()) {
    EMBER_ASSIGN_OR_RETURN(g.bos_token_id, section_token_id(*b, where + ".bos_token_id"));
  }
  if (auto e = j.find("eos_token_ids"); e != j.end()) {
    if (!e->is_array() || e->size() > 64) return invalid_argument(where + ".eos_token_ids: must be a list of at most 64 ids");
    for (const auto& id : *e) {
      EMBER_ASSIGN_OR_RETURN(int64_t x, section_token_id(id, where + ".eos_token_ids"));
      g.eos_token_ids.push_back(x);
    }
  }
  if (auto s = j.find("sampling"); s != j.end()) {
    const std::string at = where + ".sampling";
    if (!s->is_object()) return invalid_argument(at + ": must be an object");
    EMBER_RETURN_IF_ERROR(section_keys(*s, {"temperature", "top_p", "top_k"}, at));
    if (auto t = s->find("temperature"); t != s->end()) {
      if (!t->is_number() || !(t->get<double>() >= 0 && t->get<double>() <= 100)) {
        return invalid_argument(at + ".temperature: " + t->dump() + " is not a number in [0, 100]");
      }
      g.temperature = t->get<double>();
    }
    if (auto p = s->find("top_p"); p != s->end()) {
      if (!p->is_number() || !(p->get<double>() > 0 && p->get<double>() <= 1)) {
        return invalid_argument(at + ".top_p: " + p->dump() + " is not a number in (0, 1]");
      }
      g.top_p = p->get<double>();
    }
    if (auto k = s->find("top_k"); k != s->end()) {
      if (!k->is_number_integer() || k->get<int64_t>() < 0 || k->get<int64_t>() > kMaxGenerationSize) {
        return invalid_argument(at + ".top_k: " + k->dump() + " is not an integer in 0.." + std::to_string(kMaxGenerationSize));
      }
      g.top_k = k->get<int64_t>();
    }
  }
  if (auto c = j.find("chat_template"); c != j.end()) {
    if (!c->is_string() || !known_chat_template(c->get<std::string>())) {
      return invalid_argument(where + ".chat_template: must be \"llama3\", \"llama2\" or \"chatml\"");
    }
    g.chat_template = c->get<std::string>();
  }
  EMBER_ASSIGN_OR_RETURN(g.tokenizer, section_tensor(j, "tokenizer", where));
  EMBER_ASSIGN_OR_RETURN(g.tokenizer_config, section_tensor(j, "tokenizer_config", where));
  if (!g.tokenizer.empty() && g.tokenizer == g.tokenizer_config) {
    return invalid_argument(where + ": tokenizer and tokenizer_config name one tensor");
  }
  return g;
}

void generation_to_json(const GenerationSpec& g, nlohmann::ordered_json& out) {
  out = nlohmann::ordered_json::object();
  out["family"] = g.family;
  out["context_length"] = g.context_length;
  out["vocab_size"] = g.vocab_size;
  out["num_kv_layers"] = g.num_kv_layers;
  out["num_kv_heads"] = g.num_kv_heads;
  out["head_dim"] = g.head_dim;
  out["kv_dtype"] = dtype_name(g.kv_dtype);
  out["kv_bytes_per_token"] = g.kv_bytes_per_token();
  if (g.bos_token_id) out["bos_token_id"] = *g.bos_token_id;
  out["eos_token_ids"] = g.eos_token_ids;
  if (g.temperature || g.top_p || g.top_k) {
    nlohmann::ordered_json s = nlohmann::ordered_json::object();
    if (g.temperature) s["temperature"] = *g.temperature;
    if (g.top_p) s["top_p"] = *g.top_p;
    if (g.top_k) s["top_k"] = *g.top_k;
    out["sampling"] = s;
  }
  if (!g.chat_template.empty()) out["chat_template"] = g.chat_template;
  if (!g.tokenizer.empty()) out["tokenizer"] = g.tokenizer;
  if (!g.tokenizer_config.empty()) out["tokenizer_config"] = g.tokenizer_config;
}

Status check_generation(const Manifest& m, const Graph& g, const std::string& where) {
  const GenerationSpec& s = *m.generation;
  if (m.inputs.size() != std::size(kInputs)) {
    return invalid_argument(where + ": a generative model's inputs are input_ids, positions, kv_meta and last_index; it has " +
                            std::to_string(m.inputs.size()));
  }
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    const TensorSpec& in = m.inputs[i];
    if (in.name != kInputs[i] || in.dtype != DType::i64 || in.shape != Shape{-1}) {
      return invalid_argument(where + ": inputs[" + std::to_string(i) + "] is '" + in.name + "' " +
                              std::string(dtype_name(in.dtype)) + in.shape.to_string() + "; a generative model's is '" +
                              kInputs[i] + "' int64[-1]");
    }
  }
  if (m.outputs.size() != 1 || m.outputs[0].dtype != DType::f32 || m.outputs[0].shape != Shape{-1, s.vocab_size}) {
    return invalid_argument(where + ": a generative model has one output, float32 [-1, vocab_size " +
                            std::to_string(s.vocab_size) + "] (the logits of each sequence's last token)");
  }
  uint32_t kv_layers = 0;
  const auto positions = g.find("positions");
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerSpec& l = m.layers[i];
    const std::string at = where + ": layers[" + std::to_string(i) + "] '" + l.name + "'";
    if (l.op == OpKind::kv_attention) {
      if (l.attrs.kv_layer != kv_layers) {
        return invalid_argument(at + ": kv_layer " + std::to_string(l.attrs.kv_layer) + ", expected " +
                                std::to_string(kv_layers) + " (kv_attention layers number 0, 1, ... in model order)");
      }
      if (l.attrs.num_kv_heads != s.num_kv_heads || l.attrs.head_dim != s.head_dim) {
        return invalid_argument(at + ": num_kv_heads " + std::to_string(l.attrs.num_kv_heads) + ", head_dim " +
                                std::to_string(l.attrs.head_dim) + "; the generation section says " +
                                std::to_string(s.num_kv_heads) + " and " + std::to_string(s.head_dim));
      }
      ++kv_layers;
    }
    if (l.op == OpKind::embedding && positions && g.layer_inputs[i][0] == *positions &&
        l.attrs.num_embeddings < s.context_length) {
      return invalid_argument(at + ": a table of " + std::to_string(l.attrs.num_embeddings) +
                              " positions for a context_length of " + std::to_string(s.context_length));
    }
  }
  if (kv_layers != s.num_kv_layers) {
    return invalid_argument(where + ": num_kv_layers " + std::to_string(s.num_kv_layers) + " but the model has " +
                            std::to_string(kv_layers) + " kv_attention layers");
  }
  auto below_vocab = [&](int64_t id, const char* what) -> Status {
    if (id >= static_cast<int64_t>(s.vocab_size)) {
      return invalid_argument(where + "." + what + ": " + std::to_string(id) + " is not below vocab_size " +
                              std::to_string(s.vocab_size));
    }
    return Status::OK();
  };
  if (s.bos_token_id) EMBER_RETURN_IF_ERROR(below_vocab(*s.bos_token_id, "bos_token_id"));
  for (int64_t id : s.eos_token_ids) EMBER_RETURN_IF_ERROR(below_vocab(id, "eos_token_ids"));
  if (s.top_k && *s.top_k > static_cast<int64_t>(s.vocab_size)) {
    return invalid_argument(where + ".sampling.top_k: " + std::to_string(*s.top_k) + " is more than vocab_size " +
                            std::to_string(s.vocab_size));
  }
  return Status::OK();
}

}  // namespace ember::gpu
