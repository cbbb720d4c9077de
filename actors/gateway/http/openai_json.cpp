// OpenAI's completions and chat request bodies (see openai_json.hpp).
#include "actors/gateway/http/openai_json.hpp"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "actors/gateway/http/generation_params_json.hpp"
#include "base/json_text.hpp"

namespace ember {

namespace {

using nlohmann::json;

enum class Api { completions, chat };

std::string_view path_of(Api api) { return api == Api::chat ? "/v1/chat/completions" : "/v1/completions"; }

/// A documented OpenAI field this server does not implement: accepted when null or one of `noop`
/// (the values that change nothing).
struct Unsupported {
  std::string_view name;
  std::vector<json> noop;
};

const std::vector<Unsupported>& unsupported_fields(Api api) {
  static const std::vector<Unsupported> kCompletions = {
      {"echo", {false}}, {"suffix", {""}}, {"best_of", {1}}};
  static const std::vector<Unsupported> kChat = {
      {"tools", {json::array()}},
      {"tool_choice", {"none"}},
      {"functions", {json::array()}},
      {"function_call", {"none"}},
      {"response_format", {json{{"type", "text"}}}},
      {"store", {false}},
      {"modalities", {json::array({"text"})}},
      {"audio", {}},
      {"prediction", {}},
      {"reasoning_effort", {}},
      {"web_search_options", {}},
  };
  return api == Api::chat ? kChat : kCompletions;
}

/// Fields accepted and not used: what they ask changes nothing here.
const std::vector<std::string_view> kIgnored = {"user", "metadata", "parallel_tool_calls", "service_tier"};

/// The fields an endpoint implements (for the unknown-field message), in OpenAI's documented order.
std::vector<std::string_view> implemented(Api api) {
  std::vector<std::string_view> names = {"model"};
  if (api == Api::chat) {
    names.insert(names.end(), {"messages", "max_completion_tokens", "logprobs", "top_logprobs"});
  } else {
    names.insert(names.end(), {"prompt", "logprobs"});
  }
  names.insert(names.end(), {"n", "stream", "stream_options", "user"});
  const auto& shared = generation_param_names();
  names.insert(names.end(), shared.begin(), shared.end());
  return names;
}

bool known_field(Api api, const std::string& name) {
  const auto names = implemented(api);
  if (std::find(names.begin(), names.end(), name) != names.end()) return true;
  if (std::find(kIgnored.begin(), kIgnored.end(), name) != kIgnored.end()) return true;
  const auto& u = unsupported_fields(api);
  return std::any_of(u.begin(), u.end(), [&](const Unsupported& f) { return f.name == name; });
}

Result<json> body_object(std::string_view body, Api api) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return invalid_argument("the request body is empty; " + std::string(path_of(api)) + " takes a JSON object with " +
                            (api == Api::chat ? "'model' and 'messages'" : "'model' and 'prompt'"));
  }
  EMBER_ASSIGN_OR_RETURN(json j, parse_json_text(body));
  if (!j.is_object()) return invalid_argument("the request body must be a JSON object");
  return j;
}

Status read_boolean(std::string_view name, const json& v, bool& out, std::string* param) {
  if (v.is_null()) return {};
  if (!v.is_boolean()) {
    return field_error(param, name, "'" + std::string(name) + "' must be true or false, not " + json_kind(v));
  }
  out = v.get<bool>();
  return {};
}

Status read_stream_options(const json& v, generate_request& r, std::string* param) {
  if (v.is_null()) return {};
  if (!v.is_object()) return field_error(param, "stream_options", "'stream_options' must be an object, not " + json_kind(v));
  for (const auto& [key, value] : v.items()) {
    if (key != "include_usage") {
      return field_error(param, "stream_options",
                         "'stream_options' has an unknown field '" + key + "': it takes include_usage");
    }
    EMBER_RETURN_IF_ERROR(read_boolean("stream_options.include_usage", value, r.include_usage, param));
  }
  return {};
}

Status unsupported_field(const Unsupported& f, const json& v, std::string* param) {
  if (v.is_null() || std::find(f.noop.begin(), f.noop.end(), v) != f.noop.end()) return {};
  std::string message = "'" + std::string(f.name) + "' is not supported by this server";
  if (!f.noop.empty()) message += " (only " + f.noop.front().dump() + " is accepted)";
  return field_error(param, f.name, message);
}

Status completion_prompt(const json& v, generate_request& r, std::string* param) {
  constexpr const char* kShape = "'prompt' must be a string, a list of one string, or a list of token ids";
  if (v.is_string()) {
    r.kind = PromptKind::text;
    r.prompt = v.get<std::string>();
    return {};
  }
  if (!v.is_array() || v.empty()) return field_error(param, "prompt", std::string(kShape) + ", not " + json_kind(v));
  if (v[0].is_string() || v[0].is_array()) {
    if (v.size() != 1) {
      return field_error(param, "prompt",
                         "'prompt' holds " + std::to_string(v.size()) +
                             " prompts; this server takes one prompt per request");
    }
    if (v[0].is_string()) {
      r.kind = PromptKind::text;
      r.prompt = v[0].get<std::string>();
      return {};
    }
    r.kind = PromptKind::tokens;
    return read_token_ids("prompt", v[0], kMaxPromptTokens, r.prompt_tokens, param);
  }
  r.kind = PromptKind::tokens;
  return read_token_ids("prompt", v, kMaxPromptTokens, r.prompt_tokens, param);
}

/// A message's content: a string, text parts joined with "\n", or nothing (null, for an assistant).
Status message_content(const json& v, const std::string& where, std::string& out, std::string* param) {
  if (v.is_string()) {
    out = v.get<std::string>();
    return {};
  }
  if (!v.is_array()) return field_error(param, "messages", where + ".content must be a string or a list of parts");
  for (size_t j = 0; j < v.size(); ++j) {
    const std::string part = where + ".content[" + std::to_string(j) + "]";
    const json& p = v[j];
    if (!p.is_object() || !p.contains("type") || !p["type"].is_string()) {
      return field_error(param, "messages", part + " must be an object with a 'type'");
    }
    const std::string type = p["type"].get<std::string>();
    if (type != "text") {
      return field_error(param, "messages", part + " has type '" + type + "'; this server takes text only");
    }
    if (!p.contains("text") || !p["text"].is_string()) {
      return field_error(param, "messages", part + " must have a 'text' string");
    }
    out += (j == 0 ? "" : "\n") + p["text"].get<std::string>();
  }
  return {};
}

Status chat_messages(const json& v, generate_request& r, std::string* param) {
  if (!v.is_array()) return field_error(param, "messages", "'messages' must be a list of messages, not " + json_kind(v));
  r.kind = PromptKind::chat;
  if (v.size() > kMaxChatMessages) {  // before reading them: the count alone refuses it
    return field_error(param, "messages",
                       "'messages' holds " + std::to_string(v.size()) + " messages; at most " +
                           std::to_string(kMaxChatMessages));
  }
  r.messages.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    const json& m = v[i];
    if (!m.is_object()) return field_error(param, "messages", where + " must be an object with 'role' and 'content'");
    chat_message out;
    bool has_role = false, has_content = false;
    for (const auto& [key, value] : m.items()) {
      if (key == "role") {
        if (!value.is_string()) return field_error(param, "messages", where + ".role must be a string");
        out.role = value.get<std::string>();
        has_role = true;
      } else if (key == "content") {
        if (value.is_null()) continue;
        EMBER_RETURN_IF_ERROR(message_content(value, where, out.content, param));
        has_content = true;
      } else if (key == "name") {
        if (!value.is_string()) return field_error(param, "messages", where + ".name must be a string");
      } else if (key == "tool_calls" || key == "refusal" || key == "function_call") {
        if (!value.is_null() && !(value.is_array() && value.empty())) {
          return field_error(param, "messages", where + "." + key + " is not supported by this server");
        }
      } else {
        return field_error(param, "messages",
                           where + " has an unknown field '" + key + "': a message takes role, content and name");
      }
    }
    if (!has_role) return field_error(param, "messages", where + ".role is missing");
    if (!has_content && out.role != "assistant") return field_error(param, "messages", where + ".content is missing");
    r.messages.push_back(std::move(out));
  }
  return {};
}

/// Both endpoints: the envelope, the shared fields, the checks; `own` reads the endpoint's fields
/// (true when it knew the name).
template <class Own>
Result<generate_request> parse_openai_body(std::string_view body, const std::string& id, Api api, std::string* param,
                                           Own own) {
  if (param) param->clear();
  EMBER_ASSIGN_OR_RETURN(json j, body_object(body, api));
  std::vector<std::string> unknown;
  for (const auto& item : j.items()) {
    if (!known_field(api, item.key())) unknown.push_back(item.key());
  }
  if (!unknown.empty()) return unknown_fields_error(unknown, path_of(api), implemented(api), param);
  if (!j.contains("model") || j["model"].is_null()) return field_error(param, "model", "'model' is required");
  generate_request r;
  r.id = id;
  if (api == Api::completions) r.max_tokens = kOpenAiCompletionsDefaultMaxTokens;
  json options;
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    const json& value = item.value();
    bool known = false;
    EMBER_RETURN_IF_ERROR(read_generation_param(key, value, r, known, param));
    if (known) continue;
    EMBER_ASSIGN_OR_RETURN(known, own(key, value, r));
    if (known) continue;
    if (key == "model") {
      if (!value.is_string()) return field_error(param, "model", "'model' must be a string, not " + json_kind(value));
      r.model = {value.get<std::string>(), 0};
    } else if (key == "n") {
      if (value.is_null()) continue;
      if (!value.is_number_integer()) return field_error(param, "n", "'n' must be an integer, not " + json_kind(value));
      if (value.get<int64_t>() != 1 || (value.is_number_unsigned() && value.get<uint64_t>() != 1)) {
        return field_error(param, "n", "'n' must be 1: this server generates one choice per request, not " + value.dump());
      }
    } else if (key == "stream") {
      EMBER_RETURN_IF_ERROR(read_boolean("stream", value, r.stream, param));
    } else if (key == "stream_options") {
      options = value;
    } else if (key == "user") {
      if (!value.is_null() && !value.is_string()) {
        return field_error(param, "user", "'user' must be a string, not " + json_kind(value));
      }
    } else {
      for (const auto& f : unsupported_fields(api)) {
        if (f.name == key) EMBER_RETURN_IF_ERROR(unsupported_field(f, value, param));
      }
    }
  }
  if (!options.is_null() && !r.stream) {
    return field_error(param, "stream_options", "'stream_options' is only allowed when 'stream' is true");
  }
  EMBER_RETURN_IF_ERROR(read_stream_options(options, r, param));
  EMBER_RETURN_IF_ERROR(check_generate_request(r, param));
  return r;
}

}  // namespace

Result<generate_request> parse_openai_completion(std::string_view body, const std::string& id, std::string* param) {
  bool has_prompt = false;
  auto r = parse_openai_body(body, id, Api::completions, param,
                 [&](const std::string& key, const json& value, generate_request& req) -> Result<bool> {
                   if (key == "prompt") {
                     if (value.is_null()) return true;
                     has_prompt = true;
                     EMBER_RETURN_IF_ERROR(completion_prompt(value, req, param));
                     return true;
                   }
                   if (key == "logprobs") {
                     if (value.is_null()) return true;
                     int64_t n = 0;
                     EMBER_RETURN_IF_ERROR(read_integer("logprobs", value, 0, kMaxTopLogprobs, n, param));
                     req.logprobs = true;
                     req.top_logprobs = static_cast<uint32_t>(n);
                     return true;
                   }
                   return false;
                 });
  if (r.ok() && !has_prompt) return field_error(param, "prompt", "'prompt' is required");
  return r;
}

Result<generate_request> parse_openai_chat(std::string_view body, const std::string& id, std::string* param) {
  bool has_messages = false;
  std::optional<int64_t> max_completion;
  auto r = parse_openai_body(body, id, Api::chat, param,
                 [&](const std::string& key, const json& value, generate_request& req) -> Result<bool> {
                   if (key == "messages") {
                     if (value.is_null()) return true;
                     has_messages = true;
                     EMBER_RETURN_IF_ERROR(chat_messages(value, req, param));
                     return true;
                   }
                   if (key == "max_completion_tokens") {
                     if (value.is_null()) return true;
                     int64_t n = 0;
                     EMBER_RETURN_IF_ERROR(read_integer(key, value, 1, UINT32_MAX, n, param));
                     max_completion = n;
                     return true;
                   }
                   if (key == "logprobs") {
                     EMBER_RETURN_IF_ERROR(read_boolean("logprobs", value, req.logprobs, param));
                     return true;
                   }
                   if (key == "top_logprobs") {
                     if (value.is_null()) return true;
                     int64_t n = 0;
                     EMBER_RETURN_IF_ERROR(read_integer(key, value, 0, kMaxTopLogprobs, n, param));
                     req.top_logprobs = static_cast<uint32_t>(n);
                     return true;
                   }
                   return false;
                 });
  if (!r.ok()) return r;
  if (!has_messages) return field_error(param, "messages", "'messages' is required");
  if (max_completion) {
    if (r->max_tokens != 0 && r->max_tokens != *max_completion) {
      return field_error(param, "max_completion_tokens",
                         "'max_tokens' and 'max_completion_tokens' differ (" + std::to_string(r->max_tokens) +
                             " and " + std::to_string(*max_completion) + "); give one");
    }
    r->max_tokens = static_cast<uint32_t>(*max_completion);
    EMBER_RETURN_IF_ERROR(check_generate_request(*r, param));
  }
  return r;
}

}  // namespace ember
