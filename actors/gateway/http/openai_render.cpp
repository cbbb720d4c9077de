// OpenAI's answers (see openai_render.hpp).
#include "actors/gateway/http/openai_render.hpp"

#include <nlohmann/json.hpp>

#include "actors/errors.hpp"
#include "actors/gateway/http/generation_params_json.hpp"

namespace ember {

namespace {

using nlohmann::json;

std::string_view error_type(int status) {
  switch (status) {
    case 400:
    case 404:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 429:
      return "rate_limit_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

json error_object(ErrorCode code, const std::string& message, std::string_view param) {
  const int status = http_status(code);
  json e;
  e["message"] = message;
  e["type"] = error_type(status);
  e["param"] = param.empty() ? json(nullptr) : json(param);
  e["code"] = code == ErrorCode::not_found ? std::string("model_not_found") : std::string(to_string(code));
  return json{{"error", std::move(e)}};
}

json usage_json(const generation_usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", uint64_t{u.prompt_tokens} + u.completion_tokens}};
}

json finish_json(FinishReason finish) {
  return finish == FinishReason::none ? json(nullptr) : json(std::string(to_string(finish)));
}

/// The UTF-8 bytes of a token's text, as chat's logprobs list them.
json text_bytes(const std::string& text) {
  json out = json::array();
  for (unsigned char c : text) out.push_back(c);
  return out;
}

/// Chat's logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
json chat_logprobs(const std::vector<token_logprobs>& tokens) {
  json content = json::array();
  for (const auto& t : tokens) {
    json top = json::array();
    for (const auto& alt : t.top) {
      top.push_back({{"token", alt.text}, {"logprob", alt.logprob}, {"bytes", text_bytes(alt.text)}});
    }
    content.push_back({{"token", t.chosen.text},
                       {"logprob", t.chosen.logprob},
                       {"bytes", text_bytes(t.chosen.text)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

/// Completions' logprobs: parallel lists, text_offset counted from `offset` bytes of text before.
json completion_logprobs(const std::vector<token_logprobs>& tokens, size_t offset) {
  json text = json::array(), logprob = json::array(), top = json::array(), offsets = json::array();
  for (const auto& t : tokens) {
    text.push_back(t.chosen.text);
    logprob.push_back(t.chosen.logprob);
    json alternatives = json::object();
    for (const auto& alt : t.top) alternatives[alt.text] = alt.logprob;
    top.push_back(std::move(alternatives));
    offsets.push_back(offset);
    offset += t.chosen.text.size();
  }
  return {{"tokens", std::move(text)},
          {"token_logprobs", std::move(logprob)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

json answer_head(const OpenAiAnswer& a, bool chunk) {
  const char* object = a.api == OpenAiApi::chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                : "text_completion";
  return {{"id", a.id}, {"object", object}, {"created", a.created}, {"model", a.model}};
}

}  // namespace

std::string render_openai_models(const std::vector<GenerativeModel>& models) {
  json data = json::array();
  for (const auto& m : models) {
    json entry = {{"id", m.name}, {"object", "model"}, {"created", m.created_unix_s}, {"owned_by", "ember"}};
    if (m.context_tokens > 0) entry["max_model_len"] = m.context_tokens;
    data.push_back(std::move(entry));
  }
  return dump_json({{"object", "list"}, {"data", std::move(data)}});
}

std::string render_openai_error(const Error& e, std::string_view param) {
  return dump_json(error_object(e.code(), e.message(), param));
}

std::string render_openai_error(int status, std::string_view message) {
  json e = {{"message", message}, {"type", error_type(status)}, {"param", nullptr}, {"code", nullptr}};
  return dump_json(json{{"error", std::move(e)}});
}

void OpenAiCompletion::add(const generate_chunk& chunk) {
  if (done()) return;
  text_ += chunk.text;
  if (answer_.logprobs) logprobs_.insert(logprobs_.end(), chunk.logprobs.begin(), chunk.logprobs.end());
  finish_ = chunk.finish;
  if (chunk.is_final()) usage_ = chunk.usage;
}

std::string OpenAiCompletion::render() const {
  json choice = {{"index", 0}};
  if (answer_.api == OpenAiApi::chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text_}};
    choice["logprobs"] = answer_.logprobs ? chat_logprobs(logprobs_) : json(nullptr);
  } else {
    choice["text"] = text_;
    choice["logprobs"] = answer_.logprobs ? completion_logprobs(logprobs_, 0) : json(nullptr);
  }
  choice["finish_reason"] = finish_json(finish_);
  json body = answer_head(answer_, /*chunk=*/false);
  body["choices"] = json::array({std::move(choice)});
  body["usage"] = usage_json(usage_);
  return dump_json(body);
}

std::string OpenAiStream::event(const std::string& json_text) const { return "data: " + json_text + "\n\n"; }

std::string OpenAiStream::start() {
  if (answer_.api != OpenAiApi::chat || ended_) return {};
  json choice = {{"index", 0},
                 {"delta", {{"role", "assistant"}, {"content", ""}}},
                 {"logprobs", nullptr},
                 {"finish_reason", nullptr}};
  json body = answer_head(answer_, /*chunk=*/true);
  body["choices"] = json::array({std::move(choice)});
  if (answer_.include_usage) body["usage"] = nullptr;
  return event(dump_json(body));
}

std::string OpenAiStream::content_event(const generate_chunk& chunk) {
  json choice = {{"index", 0}};
  const bool logprobs = answer_.logprobs && !chunk.logprobs.empty();
  if (answer_.api == OpenAiApi::chat) {
    choice["delta"] = {{"content", chunk.text}};
    choice["logprobs"] = logprobs ? chat_logprobs(chunk.logprobs) : json(nullptr);
  } else {
    choice["text"] = chunk.text;
    choice["logprobs"] = logprobs ? completion_logprobs(chunk.logprobs, text_bytes_) : json(nullptr);
  }
  choice["finish_reason"] = nullptr;
  text_bytes_ += chunk.text.size();
  json body = answer_head(answer_, /*chunk=*/true);
  body["choices"] = json::array({std::move(choice)});
  if (answer_.include_usage) body["usage"] = nullptr;
  return event(dump_json(body));
}

std::string OpenAiStream::finish_event(FinishReason finish) const {
  json choice = {{"index", 0}};
  if (answer_.api == OpenAiApi::chat) {
    choice["delta"] = json::object();
  } else {
    choice["text"] = "";
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_json(finish);
  json body = answer_head(answer_, /*chunk=*/true);
  body["choices"] = json::array({std::move(choice)});
  if (answer_.include_usage) body["usage"] = nullptr;
  return event(dump_json(body));
}

std::string OpenAiStream::usage_event(const generation_usage& usage) const {
  json body = answer_head(answer_, /*chunk=*/true);
  body["choices"] = json::array();
  body["usage"] = usage_json(usage);
  return event(dump_json(body));
}

std::string OpenAiStream::add(const generate_chunk& chunk) {
  if (ended_) return {};
  std::string out;
  if (!chunk.text.empty() || !chunk.tokens.empty()) out += content_event(chunk);
  if (chunk.finish == FinishReason::error) {
    return out + fail(Error(chunk.error.code, chunk.error.message));
  }
  if (!chunk.is_final()) return out;
  out += finish_event(chunk.finish);
  if (answer_.include_usage) out += usage_event(chunk.usage);
  ended_ = true;
  return out + "data: [DONE]\n\n";
}

std::string OpenAiStream::fail(const Error& e) {
  if (ended_) return {};
  ended_ = true;
  return event(dump_json(error_object(e.code(), e.message(), {}))) + "data: [DONE]\n\n";
}

}  // namespace ember
