#include "text/tokenizer.hpp"

#include <algorithm>
#include <fstream>
#include <system_error>
#include <tuple>

#include "base/json_text.hpp"
#include "text/added_tokens.hpp"
#include "text/bpe_model.hpp"
#include "text/json_fields.hpp"
#include "text/pre_tokenizer.hpp"
#include "text/token_decoder.hpp"
#include "text/utf8.hpp"

namespace ember::text {

struct Tokenizer::Impl {
  BpeModel model;
  AddedTokens added;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  TokenDecoder decoder;
  std::vector<int32_t> prefix;  // the post-processor's ids before the text
  std::vector<int32_t> suffix;  // and after it
  int32_t vocab_size = 0;
  TokenizerKind kind = TokenizerKind::plain;

  std::optional<int32_t> bos_id;
  std::optional<int32_t> eos_id;
  std::string bos_token;
  std::string eos_token;
  std::string chat_template;
  std::string tokenizer_class;
  bool clean_up_spaces = true;
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

namespace tokenizer_detail {

/// The file's text, at most `limit` bytes.
Result<std::string> read_file(const std::filesystem::path& path, size_t limit) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) return not_found(path.string() + ": no such file");
    return io_error(path.string() + ": " + ec.message());
  }
  if (size > limit) {
    return invalid_argument(path.string() + ": " + std::to_string(size) + " bytes (at most " + std::to_string(limit) +
                            ")");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(path.string() + ": cannot be opened");
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (in.gcount() != static_cast<std::streamsize>(size)) return io_error(path.string() + ": short read");
  return text;
}

/// A token named in tokenizer_config.json: a string, {"content": ...} (an AddedToken), or null.
Result<std::optional<std::string>> config_token(const nlohmann::json& config, std::string_view key) {
  const nlohmann::json* v = member(config, key);
  if (v == nullptr) return std::optional<std::string>();
  if (v->is_string()) return std::optional<std::string>(v->get<std::string>());
  if (v->is_object()) {
    auto content = string_field(*v, "content", std::string(key));
    if (!content.ok()) return content.error();
    return std::optional<std::string>(std::move(*content));
  }
  return type_error(std::string(key), "a string or an object with content", *v);
}

/// TemplateProcessing's single template: the special tokens before and after $A.
Status parse_template(const nlohmann::json& j, const std::string& where, std::vector<int32_t>& prefix,
                      std::vector<int32_t>& suffix) {
  const nlohmann::json* single = member(j, "single");
  if (single == nullptr || !single->is_array()) return invalid_argument(where + ".single: expected an array");
  const nlohmann::json* specials = member(j, "special_tokens");
  if (specials != nullptr && !specials->is_object())
    return type_error(where + ".special_tokens", "an object", *specials);
  bool seen_a = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const std::string item_where = where + ".single[" + std::to_string(i) + "]";
    const nlohmann::json& item = (*single)[i];
    if (const nlohmann::json* seq = member(item, "Sequence")) {
      auto id = string_field(*seq, "id", item_where + ".Sequence");
      if (!id.ok()) return id.error();
      if (*id != "A" || seen_a) return invalid_argument(item_where + ": a single template holds the sequence A once");
      seen_a = true;
      continue;
    }
    const nlohmann::json* special = member(item, "SpecialToken");
    if (special == nullptr) return invalid_argument(item_where + ": neither Sequence nor SpecialToken");
    auto name = string_field(*special, "id", item_where + ".SpecialToken");
    if (!name.ok()) return name.error();
    const nlohmann::json* entry = specials == nullptr ? nullptr : member(*specials, *name);
    if (entry == nullptr) return invalid_argument(item_where + ": \"" + *name + "\" is not in special_tokens");
    const nlohmann::json* ids = member(*entry, "ids");
    if (ids == nullptr || !ids->is_array() || ids->size() > 16) {
      return invalid_argument(where + ".special_tokens[\"" + *name + "\"].ids: expected an array of ids");
    }
    for (const auto& id : *ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= BpeModel::kMaxVocab) {
        return invalid_argument(where + ".special_tokens[\"" + *name + "\"].ids: not a token id");
      }
      (seen_a ? suffix : prefix).push_back(id.get<int32_t>());
    }
  }
  if (!seen_a) return invalid_argument(where + ".single: no sequence A");
  return Status::OK();
}

Status parse_post_processor(const nlohmann::json& j, const std::string& where, std::vector<int32_t>& prefix,
                            std::vector<int32_t>& suffix, int depth) {
  if (j.is_null()) return Status::OK();
  if (!j.is_object()) return type_error(where, "an object", j);
  auto type = string_field(j, "type", where);
  if (!type.ok()) return type.error();
  if (*type == "ByteLevel") return Status::OK();  // it only trims offsets, which ids do not carry
  if (*type == "TemplateProcessing") return parse_template(j, where, prefix, suffix);
  if (*type == "Sequence") {
    const nlohmann::json* items = member(j, "processors");
    if (depth >= 4) return invalid_argument(where + ": Sequences nested too deep");
    if (items == nullptr || !items->is_array() || items->size() > 32) {
      return invalid_argument(where + ".processors: expected an array");
    }
    for (const auto& item : *items) {
      if (Status s = parse_post_processor(item, where + "(sequence item)", prefix, suffix, depth + 1); !s.ok())
        return s;
    }
    return Status::OK();
  }
  return unsupported(where + ": type \"" + *type +
                     "\" is not supported (Ember's tokenizer reads TemplateProcessing, ByteLevel and Sequence "
                     "post-processors)");
}

bool is_llama_class(std::string_view c) {
  return c == "LlamaTokenizer" || c == "LlamaTokenizerFast" || c == "CodeLlamaTokenizer" ||
         c == "CodeLlamaTokenizerFast";
}

}  // namespace tokenizer_detail

Result<Tokenizer> Tokenizer::parse(std::string_view tokenizer_json, std::string_view tokenizer_config_json) {
  namespace d = tokenizer_detail;
  auto fail = [](const Error& e) { return e.with_context("tokenizer.json"); };
  if (tokenizer_json.size() > kMaxFileBytes) {
    return invalid_argument("tokenizer.json: " + std::to_string(tokenizer_json.size()) + " bytes (at most " +
                            std::to_string(kMaxFileBytes) + ")");
  }
  if (tokenizer_config_json.size() > kMaxConfigBytes) {
    return invalid_argument("tokenizer_config.json: " + std::to_string(tokenizer_config_json.size()) +
                            " bytes (at most " + std::to_string(kMaxConfigBytes) + ")");
  }
  auto root = parse_json_text(tokenizer_json, kMaxJsonDepth);
  if (!root.ok()) return fail(root.error());
  if (!root->is_object()) return fail(type_error("root", "an object", *root));

  auto impl = std::make_unique<Impl>();
  const nlohmann::json* model = member(*root, "model");
  if (model == nullptr) return fail(invalid_argument("model: missing"));
  auto bpe = BpeModel::parse(*model);
  if (!bpe.ok()) return fail(bpe.error());
  impl->model = std::move(bpe).value();

  const nlohmann::json null_json;
  auto field = [&](const char* key) -> const nlohmann::json& {
    const nlohmann::json* v = member(*root, key);
    return v == nullptr ? null_json : *v;
  };
  auto added = AddedTokens::parse(field("added_tokens"), BpeModel::kMaxVocab);
  if (!added.ok()) return fail(added.error());
  impl->added = std::move(added).value();
  auto normalizer = Normalizer::parse(field("normalizer"));
  if (!normalizer.ok()) return fail(normalizer.error());
  impl->normalizer = std::move(normalizer).value();
  auto pre = PreTokenizer::parse(field("pre_tokenizer"));
  if (!pre.ok()) return fail(pre.error());
  impl->pre_tokenizer = std::move(pre).value();
  auto decoder = TokenDecoder::parse(field("decoder"));
  if (!decoder.ok()) return fail(decoder.error());
  impl->decoder = std::move(decoder).value();
  if (Status s = d::parse_post_processor(field("post_processor"), "post_processor", impl->prefix, impl->suffix, 0);
      !s.ok()) {
    return fail(s.error());
  }

  int32_t limit = impl->model.id_limit();
  for (const AddedToken& t : impl->added.tokens()) limit = std::max(limit, t.id + 1);
  impl->vocab_size = limit;
  Tokenizer tok(std::move(impl));
  Impl& m = *tok.impl_;
  for (const std::vector<int32_t>* ids : {&m.prefix, &m.suffix}) {
    for (const int32_t id : *ids) {
      if (!tok.id_to_token(id)) {
        return fail(invalid_argument("post_processor: special token id " + std::to_string(id) + " is not a token"));
      }
    }
  }
  if (m.pre_tokenizer.byte_level()) {
    m.kind = TokenizerKind::byte_level;
  } else if (!m.normalizer.empty() || field("pre_tokenizer").is_object()) {
    m.kind = TokenizerKind::sentencepiece;
  }

  // BOS and EOS from tokenizer.json, which tokenizer_config.json may then name otherwise.
  if (!m.prefix.empty()) m.bos_id = m.prefix.front();
  if (!m.suffix.empty()) m.eos_id = m.suffix.front();
  if (!m.eos_id) {
    for (const char* name : {"</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>"}) {
      const AddedToken* t = m.added.find_content(name);
      if (t != nullptr && t->special) {
        m.eos_id = t->id;
        break;
      }
    }
  }

  if (!tokenizer_config_json.empty()) {
    auto cfail = [](const Error& e) { return e.with_context("tokenizer_config.json"); };
    auto config = parse_json_text(tokenizer_config_json, kMaxJsonDepth);
    if (!config.ok()) return cfail(config.error());
    if (!config->is_object()) return cfail(type_error("root", "an object", *config));
    for (auto [key, id, text] :
         {std::tuple{"bos_token", &m.bos_id, &m.bos_token}, {"eos_token", &m.eos_id, &m.eos_token}}) {
      auto name = d::config_token(*config, key);
      if (!name.ok()) return cfail(name.error());
      if (!name->has_value()) continue;
      auto named = tok.token_to_id(**name);
      if (!named) return cfail(invalid_argument(std::string(key) + ": \"" + **name + "\" is not a token"));
      *id = *named;
    }
    if (const nlohmann::json* t = member(*config, "chat_template")) {
      if (t->is_string()) {
        m.chat_template = t->get<std::string>();
      } else if (t->is_array()) {
        for (const auto& entry : *t) {
          auto name = string_field(entry, "name", "chat_template[]");
          auto source = string_field(entry, "template", "chat_template[]");
          if (!name.ok()) return cfail(name.error());
          if (!source.ok()) return cfail(source.error());
          if (*name == "default") m.chat_template = std::move(*source);
        }
      } else {
        return cfail(type_error("chat_template", "a string or a list of {name, template}", *t));
      }
    }
    auto clean = bool_field(*config, "clean_up_tokenization_spaces", true, "");
    if (!clean.ok()) return cfail(clean.error());
    m.clean_up_spaces = *clean;
    auto cls = optional_string_field(*config, "tokenizer_class", "");
    if (!cls.ok()) return cfail(cls.error());
    m.tokenizer_class = cls->value_or("");
    if (d::is_llama_class(m.tokenizer_class)) {
      auto add_bos = bool_field(*config, "add_bos_token", true, "");
      auto add_eos = bool_field(*config, "add_eos_token", false, "");
      if (!add_bos.ok()) return cfail(add_bos.error());
      if (!add_eos.ok()) return cfail(add_eos.error());
      if ((*add_bos && !m.bos_id) || (*add_eos && !m.eos_id)) {
        return cfail(invalid_argument("add_bos_token/add_eos_token: no bos_token/eos_token to add"));
      }
      m.prefix.clear();
      m.suffix.clear();
      if (*add_bos) m.prefix.push_back(*m.bos_id);
      if (*add_eos) m.suffix.push_back(*m.eos_id);
    }
  }
  for (auto [id, text] : {std::pair{&m.bos_id, &m.bos_token}, {&m.eos_id, &m.eos_token}}) {
    if (*id) *text = std::string(*tok.id_to_token(**id));
  }
  return tok;
}

Result<Tokenizer> Tokenizer::load(const std::filesystem::path& path) {
  namespace d = tokenizer_detail;
  std::error_code ec;
  const std::filesystem::path file = std::filesystem::is_directory(path, ec) ? path / "tokenizer.json" : path;
  auto text = d::read_file(file, kMaxFileBytes);
  if (!text.ok()) return text.error();
  const std::filesystem::path config_path = file.parent_path() / "tokenizer_config.json";
  std::string config;
  if (std::filesystem::exists(config_path, ec)) {
    auto c = d::read_file(config_path, kMaxConfigBytes);
    if (!c.ok()) return c.error();
    config = std::move(c).value();
  }
  auto tok = parse(*text, config);
  if (!tok.ok()) return tok.error().with_context(file.parent_path().string());
  return tok;
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  const Impl& m = *impl_;
  if (const size_t bad = first_invalid_utf8(text); bad != text.size()) {
    return invalid_argument("text is not valid UTF-8 (at byte " + std::to_string(bad) + ")");
  }
  std::vector<int32_t> ids;
  if (options.add_special_tokens) ids = m.prefix;
  std::vector<TextSection> sections;
  m.added.split(text, /*normalized_pass=*/false, options.special_in_text, sections);
  std::vector<TextSection> parts;
  std::vector<std::string> pieces;
  for (const TextSection& section : sections) {
    if (section.id >= 0) {
      ids.push_back(section.id);
      continue;
    }
    auto normalized = m.normalizer.apply(text.substr(section.begin, section.end - section.begin));
    if (!normalized.ok()) return normalized.error();
    parts.clear();
    m.added.split(*normalized, /*normalized_pass=*/true, options.special_in_text, parts);
    for (const TextSection& part : parts) {
      if (part.id >= 0) {
        ids.push_back(part.id);
        continue;
      }
      pieces.clear();
      const std::string_view part_text = std::string_view(*normalized).substr(part.begin, part.end - part.begin);
      if (Status s = m.pre_tokenizer.split(part_text, section.begin == 0 && part.begin == 0, pieces); !s.ok()) {
        return s.error();
      }
      for (const std::string& piece : pieces) m.model.encode(piece, ids);
    }
  }
  if (options.add_special_tokens) ids.insert(ids.end(), m.suffix.begin(), m.suffix.end());
  return ids;
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
  const Impl& m = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (const AddedToken* t = m.added.find_id(id)) {
      if (!(options.skip_special_tokens && t->special)) tokens.push_back(t->content);
      continue;
    }
    const auto t = m.model.id_to_token(id);
    if (!t) {
      return invalid_argument("token id " + std::to_string(id) + " has no token (vocabulary size " +
                              std::to_string(m.vocab_size) + ")");
    }
    tokens.emplace_back(*t);
  }
  std::string out = m.decoder.decode(std::move(tokens));
  if (options.clean_up_tokenization_spaces) out = clean_up_tokenization(out);
  return out;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const AddedToken* t = impl_->added.find_content(token)) return t->id;
  return impl_->model.token_to_id(token);
}

std::optional<std::string_view> Tokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* t = impl_->added.find_id(id)) return std::string_view(t->content);
  return impl_->model.id_to_token(id);
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

bool Tokenizer::is_special(int32_t id) const {
  const AddedToken* t = impl_->added.find_id(id);
  return t != nullptr && t->special;
}

std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos_id; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos_id; }
const std::string& Tokenizer::bos_token() const { return impl_->bos_token; }
const std::string& Tokenizer::eos_token() const { return impl_->eos_token; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }
bool Tokenizer::clean_up_tokenization_spaces() const { return impl_->clean_up_spaces; }
const std::string& Tokenizer::tokenizer_class() const { return impl_->tokenizer_class; }
TokenizerKind Tokenizer::kind() const { return impl_->kind; }
std::span<const int32_t> Tokenizer::prefix_ids() const { return impl_->prefix; }
std::span<const int32_t> Tokenizer::suffix_ids() const { return impl_->suffix; }

}  // namespace ember::text
