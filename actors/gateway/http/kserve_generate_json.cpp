// KServe v2's generate extension (see kserve_generate_json.hpp).
#include "actors/gateway/http/kserve_generate_json.hpp"

#include <nlohmann/json.hpp>
#include <vector>

#include "actors/gateway/http/generation_params_json.hpp"
#include "base/json_text.hpp"

namespace ember {

namespace {

using nlohmann::json;

std::string_view generate_path(bool stream) { return stream ? "/generate_stream" : "/generate"; }

Status read_kserve_parameters(const json& p, bool stream, generate_request& r) {
  if (p.is_null()) return {};
  if (!p.is_object()) return invalid_argument("'parameters' must be an object, not " + json_kind(p));
  std::vector<std::string> unknown;
  for (const auto& [key, value] : p.items()) {
    bool known = false;
    EMBER_RETURN_IF_ERROR(read_generation_param(key, value, r, known, nullptr));
    if (known) continue;
    if (key != "stream") {
      unknown.push_back(key);
      continue;
    }
    if (value.is_null()) continue;
    if (!value.is_boolean()) return invalid_argument("'stream' must be true or false, not " + json_kind(value));
    if (value.get<bool>() != stream) {
      return invalid_argument(stream ? "'stream' must be true on /generate_stream (or left out; use /generate)"
                                     : "'stream' must be false on /generate (or left out; use /generate_stream)");
    }
  }
  if (unknown.empty()) return {};
  std::vector<std::string_view> accepted = generation_param_names();
  accepted.push_back("stream");
  return unknown_fields_error(unknown, generate_path(stream), accepted, nullptr, "parameter");
}

json kserve_head(const KServeGenerateAnswer& a) {
  json j = {{"model_name", a.model_name}, {"model_version", a.model_version}};
  if (!a.client_id.empty()) j["id"] = a.client_id;
  return j;
}

json kserve_usage(const generation_usage& u) {
  return {{"prompt_tokens", u.prompt_tokens}, {"completion_tokens", u.completion_tokens}};
}

}  // namespace

Result<generate_request> parse_kserve_generate(std::string_view body, const model_key& key, const std::string& id,
                                               bool stream, std::string* client_id) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return invalid_argument("the request body is empty; " + std::string(generate_path(stream)) +
                            " takes a JSON object with 'text_input'");
  }
  EMBER_ASSIGN_OR_RETURN(json j, parse_json_text(body));
  if (!j.is_object()) return invalid_argument("the request body must be a JSON object");
  std::vector<std::string> unknown;
  for (const auto& [k, v] : j.items()) {
    if (k != "text_input" && k != "parameters" && k != "id") unknown.push_back(k);
  }
  if (!unknown.empty()) {
    return unknown_fields_error(unknown, generate_path(stream), {"text_input", "parameters", "id"}, nullptr);
  }
  if (!j.contains("text_input") || j["text_input"].is_null()) return invalid_argument("'text_input' is required");
  if (!j["text_input"].is_string()) {
    return invalid_argument("'text_input' must be a string, not " + json_kind(j["text_input"]));
  }
  if (j.contains("id") && !j["id"].is_string() && !j["id"].is_null()) {
    return invalid_argument("'id' must be a string, not " + json_kind(j["id"]));
  }
  if (client_id && j.contains("id") && j["id"].is_string()) *client_id = j["id"].get<std::string>();
  generate_request r;
  r.id = id;
  r.model = key;
  r.kind = PromptKind::text;
  r.prompt = j["text_input"].get<std::string>();
  r.max_tokens = kKServeDefaultMaxTokens;
  r.stream = stream;
  r.include_usage = true;
  if (j.contains("parameters")) EMBER_RETURN_IF_ERROR(read_kserve_parameters(j["parameters"], stream, r));
  EMBER_RETURN_IF_ERROR(check_generate_request(r));
  return r;
}

void KServeGenerateCompletion::add(const generate_chunk& chunk) {
  if (done()) return;
  text_ += chunk.text;
  finish_ = chunk.finish;
  if (chunk.is_final()) usage_ = chunk.usage;
}

std::string KServeGenerateCompletion::render() const {
  json j = kserve_head(answer_);
  j["text_output"] = text_;
  j["finish_reason"] = std::string(to_string(finish_));
  j["usage"] = kserve_usage(usage_);
  return dump_json(j);
}

std::string KServeGenerateStream::add(const generate_chunk& chunk) {
  if (ended_) return {};
  if (chunk.finish == FinishReason::error) {
    const std::string text = chunk.text.empty() ? std::string() : add([&] {
      generate_chunk partial = chunk;
      partial.finish = FinishReason::none;
      return partial;
    }());
    return text + fail(Error(chunk.error.code, chunk.error.message));
  }
  json j = kserve_head(answer_);
  j["text_output"] = chunk.text;
  j["done"] = chunk.is_final();
  if (chunk.is_final()) {
    j["finish_reason"] = std::string(to_string(chunk.finish));
    j["usage"] = kserve_usage(chunk.usage);
    ended_ = true;
  }
  return "data: " + dump_json(j) + "\n\n";
}

std::string KServeGenerateStream::fail(const Error& e) {
  if (ended_) return {};
  ended_ = true;
  return "data: " + dump_json(json{{"error", e.message()}}) + "\n\n";
}

}  // namespace ember
