// Text generation over KServe v2 gRPC, Triton's LLM convention (see grpc_generate.hpp).
#include "actors/gateway/grpc/grpc_generate.hpp"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "actors/gateway/grpc/kserve_grpc.hpp"
#include "actors/gateway/http/generation_params_json.hpp"

namespace ember {

namespace {

using nlohmann::json;
using Input = inference::ModelInferRequest::InferInputTensor;

constexpr std::string_view kApi = "ModelStreamInfer";
const std::vector<std::string_view> kInputs = {"text_input", "stream", "sampling_parameters",
                                               "exclude_input_in_output", "max_tokens"};
constexpr std::string_view kEmptyFinal = "triton_enable_empty_final_response";

Error input_error(const Input& t, std::string message) {
  return invalid_argument("'" + t.name() + "' " + std::move(message));
}

/// Whether `t`'s shape holds exactly one element.
Status one_element(const Input& t) {
  int64_t n = 1;
  for (int64_t d : t.shape()) n *= d < 0 ? -1 : d;
  if (n != 1) return input_error(t, "must hold one element (shape [1]), not shape of " + std::to_string(n));
  return Status::OK();
}

Result<std::string> read_bytes(const Input& t, const std::string* raw) {
  if (t.datatype() != "BYTES") return input_error(t, "must be BYTES, not " + t.datatype());
  EMBER_RETURN_IF_ERROR(one_element(t));
  if (!raw) {
    if (t.contents().bytes_contents_size() != 1) return input_error(t, "must hold one element in bytes_contents");
    return t.contents().bytes_contents(0);
  }
  if (raw->size() < 4) return input_error(t, "raw contents hold no 4-byte length");
  uint32_t len = 0;
  for (int i = 3; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>((*raw)[i]);
  if (len != raw->size() - 4) {
    return input_error(t, "raw contents hold " + std::to_string(raw->size() - 4) + " bytes after a length of " +
                              std::to_string(len));
  }
  return raw->substr(4);
}

Result<bool> read_bool(const Input& t, const std::string* raw) {
  if (t.datatype() != "BOOL") return input_error(t, "must be BOOL, not " + t.datatype());
  EMBER_RETURN_IF_ERROR(one_element(t));
  if (!raw) {
    if (t.contents().bool_contents_size() != 1) return input_error(t, "must hold one element in bool_contents");
    return t.contents().bool_contents(0);
  }
  if (raw->size() != 1) return input_error(t, "raw contents must be 1 byte, not " + std::to_string(raw->size()));
  return (*raw)[0] != 0;
}

Result<int64_t> read_int(const Input& t, const std::string* raw) {
  const std::string& type = t.datatype();
  if (type != "INT32" && type != "INT64" && type != "UINT32") return input_error(t, "must be INT32, not " + type);
  EMBER_RETURN_IF_ERROR(one_element(t));
  const size_t width = type == "INT64" ? 8 : 4;
  if (raw) {
    if (raw->size() != width) return input_error(t, "raw contents must be " + std::to_string(width) + " bytes");
    if (type == "INT32") { int32_t v; std::memcpy(&v, raw->data(), 4); return v; }
    if (type == "UINT32") { uint32_t v; std::memcpy(&v, raw->data(), 4); return v; }
    int64_t v;
    std::memcpy(&v, raw->data(), 8);
    return v;
  }
  const auto& c = t.contents();
  if (type == "INT32" && c.int_contents_size() == 1) return c.int_contents(0);
  if (type == "UINT32" && c.uint_contents_size() == 1) return c.uint_contents(0);
  if (type == "INT64" && c.int64_contents_size() == 1) return c.int64_contents(0);
  return input_error(t, "must hold one element in the contents of its datatype");
}

/// A vLLM-style string value ("0.1", "true") as the JSON number or boolean it reads as.
json coerce(std::string_view name, json v) {
  if (!v.is_string() || name == "stop") return v;
  json parsed = json::parse(v.get<std::string>(), nullptr, false);
  return parsed.is_number() || parsed.is_boolean() ? parsed : v;
}

/// Reads shared fields (`fields`, in order) into `r`; unknown names refused as `what`'s.
Status read_fields(const std::vector<std::pair<std::string, json>>& fields, generate_request& r,
                   std::string_view what) {
  std::vector<std::string> unknown;
  for (const auto& [name, value] : fields) {
    bool known = false;
    EMBER_RETURN_IF_ERROR(read_generation_param(name, coerce(name, value), r, known, nullptr));
    if (!known) unknown.push_back(name);
  }
  if (!unknown.empty()) return unknown_fields_error(unknown, what, generation_param_names(), nullptr, "parameter");
  return Status::OK();
}

json to_json(const inference::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam: return p.bool_param();
    case inference::InferParameter::kInt64Param: return p.int64_param();
    case inference::InferParameter::kStringParam: return p.string_param();
    case inference::InferParameter::kDoubleParam: return p.double_param();
    case inference::InferParameter::kUint64Param: return p.uint64_param();
    case inference::InferParameter::PARAMETER_CHOICE_NOT_SET: break;
  }
  return nullptr;
}

std::string raw_bytes(std::string_view text) {
  std::string out(4, '\0');
  const auto n = static_cast<uint32_t>(text.size());
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out.append(text);
  return out;
}

void set_final(inference::ModelInferResponse& r, bool final) {
  (*r.mutable_parameters())["triton_final_response"].set_bool_param(final);
}

}  // namespace

Result<GrpcGenerateRequest> decode_generate_request(const inference::ModelInferRequest& in, const std::string& id) {
  if (in.model_name().empty()) return invalid_argument("model_name is empty");
  EMBER_ASSIGN_OR_RETURN(const uint32_t version, parse_model_version(in.model_version(), "model_version"));
  GrpcGenerateRequest out;
  out.client_id = in.id();
  out.model_name = in.model_name();
  generate_request& r = out.request;
  r.id = id;
  r.model = {in.model_name(), version};
  r.kind = PromptKind::text;
  r.max_tokens = kTritonDefaultMaxTokens;
  for (const auto& o : in.outputs()) {
    if (o.name() != "text_output") return invalid_argument("only the output 'text_output' exists, not '" + o.name() + "'");
  }
  const bool raw = in.raw_input_contents_size() > 0;
  if (raw && in.raw_input_contents_size() != in.inputs_size()) {
    return invalid_argument("raw_input_contents has " + std::to_string(in.raw_input_contents_size()) + " entries for " +
                            std::to_string(in.inputs_size()) + " inputs");
  }
  // Request parameters first, then sampling_parameters, then the max_tokens input (later wins).
  std::vector<std::pair<std::string, json>> params;
  std::vector<std::string> names;
  for (const auto& [name, value] : in.parameters()) names.push_back(name);
  std::sort(names.begin(), names.end());  // a map's order is not the client's: read in a fixed one
  for (const auto& name : names) {
    if (name == kEmptyFinal) continue;
    params.emplace_back(name, to_json(in.parameters().at(name)));
  }
  EMBER_RETURN_IF_ERROR(read_fields(params, r, "ModelStreamInfer's request parameters"));

  std::optional<std::string> text;
  std::optional<int64_t> max_tokens;
  std::vector<std::string> unknown;
  std::vector<std::string> seen;
  for (int i = 0; i < in.inputs_size(); ++i) {
    const Input& t = in.inputs(i);
    const std::string* data = raw ? &in.raw_input_contents(i) : nullptr;
    if (std::find(seen.begin(), seen.end(), t.name()) != seen.end()) return input_error(t, "is given twice");
    seen.push_back(t.name());
    if (t.name() == "text_input") {
      EMBER_ASSIGN_OR_RETURN(text, read_bytes(t, data));
    } else if (t.name() == "stream") {
      EMBER_ASSIGN_OR_RETURN(out.stream, read_bool(t, data));
    } else if (t.name() == "exclude_input_in_output") {
      EMBER_ASSIGN_OR_RETURN(out.exclude_input, read_bool(t, data));
    } else if (t.name() == "max_tokens") {
      EMBER_ASSIGN_OR_RETURN(max_tokens, read_int(t, data));
    } else if (t.name() == "sampling_parameters") {
      EMBER_ASSIGN_OR_RETURN(const std::string body, read_bytes(t, data));
      const json j = json::parse(body, nullptr, false);
      if (!j.is_object()) return input_error(t, "must be a JSON object");
      std::vector<std::pair<std::string, json>> fields;
      for (const auto& item : j.items()) fields.emplace_back(item.key(), item.value());
      EMBER_RETURN_IF_ERROR(read_fields(fields, r, "ModelStreamInfer's sampling_parameters"));
    } else {
      unknown.push_back(t.name());
    }
  }
  if (!unknown.empty()) return unknown_fields_error(unknown, kApi, kInputs, nullptr, "input");
  if (!text) return invalid_argument("'text_input' is required (BYTES, shape [1]: the prompt)");
  r.prompt = std::move(*text);
  if (max_tokens) {
    if (*max_tokens < 1 || *max_tokens > kMaxGenerateTokens) {
      return invalid_argument("'max_tokens' must be in [1, " + std::to_string(kMaxGenerateTokens) + "], not " +
                              std::to_string(*max_tokens));
    }
    r.max_tokens = static_cast<uint32_t>(*max_tokens);
  }
  r.stream = out.stream;
  EMBER_RETURN_IF_ERROR(check_generate_request(r));
  return out;
}

GrpcGenerateAnswer::GrpcGenerateAnswer(const GrpcGenerateRequest& request, std::string model_version)
    : client_id_(request.client_id),
      model_name_(request.model_name),
      model_version_(std::move(model_version)),
      stream_(request.stream),
      text_(request.stream || request.exclude_input ? std::string() : request.request.prompt) {}

inference::ModelStreamInferResponse GrpcGenerateAnswer::response(std::string_view text, bool final) const {
  inference::ModelStreamInferResponse out;
  auto& r = *out.mutable_infer_response();
  r.set_model_name(model_name_);
  r.set_model_version(model_version_);
  r.set_id(client_id_);
  auto& t = *r.add_outputs();
  t.set_name("text_output");
  t.set_datatype("BYTES");
  t.add_shape(1);
  r.add_raw_output_contents(raw_bytes(text));
  set_final(r, final);
  return out;
}

std::optional<inference::ModelStreamInferResponse> GrpcGenerateAnswer::add(const generate_chunk& chunk) {
  if (ended_) return std::nullopt;
  if (chunk.finish == FinishReason::error) return fail(Error(chunk.error.code, chunk.error.message));
  const bool final = chunk.is_final();
  if (!stream_) {
    text_ += chunk.text;
    if (!final) return std::nullopt;
  } else if (!final && chunk.text.empty()) {
    return std::nullopt;
  }
  auto out = response(stream_ ? std::string_view(chunk.text) : std::string_view(text_), final);
  if (final) {
    ended_ = true;
    auto& p = *out.mutable_infer_response()->mutable_parameters();
    p["finish_reason"].set_string_param(std::string(to_string(chunk.finish)));
    p["prompt_tokens"].set_int64_param(chunk.usage.prompt_tokens);
    p["completion_tokens"].set_int64_param(chunk.usage.completion_tokens);
  }
  return out;
}

std::optional<inference::ModelStreamInferResponse> GrpcGenerateAnswer::fail(const Error& e) {
  if (ended_) return std::nullopt;
  ended_ = true;
  inference::ModelStreamInferResponse out;
  out.set_error_message(e.message());
  auto& r = *out.mutable_infer_response();
  r.set_model_name(model_name_);
  r.set_model_version(model_version_);
  r.set_id(client_id_);
  set_final(r, true);
  return out;
}

inference::ModelStreamInferResponse generate_error_response(const inference::ModelInferRequest& in, const Error& e) {
  inference::ModelStreamInferResponse out;
  out.set_error_message(e.message());
  auto& r = *out.mutable_infer_response();
  r.set_model_name(in.model_name());
  r.set_model_version(in.model_version());
  r.set_id(in.id());
  set_final(r, true);
  return out;
}

}  // namespace ember
