// A Hugging Face folder's generation facts: model.json's generation section
// (model/generation_spec.hpp) filled from config.json (already read: hf_config.hpp) and the
// folder's other files, and the tokenizer files' texts the importer carries in the weights file.
//
// What is read, each optional:
//   generation_config.json  bos_token_id (when config.json has none), eos_token_id (an id or a
//                           list, added after config.json's), temperature, top_p, top_k (the
//                           sampling defaults, as given; do_sample is not read: servers such as
//                           vLLM take these defaults whatever it says)
//   tokenizer.json          carried as is (checked to be a JSON object); without it the model
//                           takes token ids only
//   tokenizer_config.json   carried as is; its bos_token / eos_token (strings or AddedToken
//                           objects) looked up in tokenizer.json when no config numbers them; its
//                           chat_template (a string, or a list of {name, template}: "default"
//                           first), else chat_template.jinja or chat_template.json beside it,
//                           recognised as a built-in template family
// Every id must be below vocab_size; every file is bounded in size (4 MiB for the small JSON
// files, 64 MiB for the tokenizer's). Errors name the file and the field.
//
// Blocking file I/O on the caller's thread; no global state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.hpp"
#include "importer/hf_config.hpp"
#include "model/generation_spec.hpp"

namespace ember::importer {

/// The tokenizer files' texts (absent files nullopt); the tensor names the section gives them.
struct HfTokenizerFiles {
  static constexpr const char* kTokenizer = "tokenizer.json";
  static constexpr const char* kTokenizerConfig = "tokenizer_config.json";
  std::optional<std::string> tokenizer;
  std::optional<std::string> config;
};

struct HfGeneration {
  gpu::GenerationSpec spec;
  HfTokenizerFiles files;
};

/// The section for a model of `config` held at `width` (its KV cache type), from DIR's files.
Result<HfGeneration> read_hf_generation(const std::string& dir, const HfConfig& config, gpu::DType width);

/// The built-in template family a Jinja chat template is recognised as: "llama3"
/// (<|start_header_id|> headers), "chatml" (<|im_start|>), "llama2" ([INST] with <<SYS>>), or ""
/// for any other (no built-in template claims it; Mistral's [INST] without <<SYS>> is one). Pure.
std::string recognise_chat_template(std::string_view jinja);

/// A file's text, nullopt when it does not exist; invalid_argument past `limit_bytes`.
Result<std::optional<std::string>> read_optional_file(const std::string& path, uint64_t limit_bytes);

}  // namespace ember::importer
