// KServe v2 JSON bodies (see kserve_json.hpp).
#include "actors/gateway/http/kserve_json.hpp"

#include <cstring>
#include <nlohmann/json.hpp>

#include "actors/tensor_codec.hpp"
#include "base/json_text.hpp"
#include "gpu/host_tensor.hpp"

namespace ember {

namespace {

using nlohmann::json;

json tensor_specs(const std::vector<gpu::TensorSpec>& specs) {
  json out = json::array();
  for (const auto& t : specs) {
    out.push_back({{"name", t.name},
                   {"datatype", gpu::dtype_kserve_name(t.dtype)},
                   {"shape", std::vector<int64_t>(t.shape.dims.begin(), t.shape.dims.begin() + t.shape.rank)}});
  }
  return out;
}

template <class T>
json values_of(const std::vector<uint8_t>& bytes) {
  json data = json::array();
  const size_t n = bytes.size() / sizeof(T);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    data.push_back(v);
  }
  return data;
}

}  // namespace

Result<ModelSignature> parse_model_signature(std::string_view manifest_json, std::string_view source) {
  EMBER_ASSIGN_OR_RETURN(gpu::Manifest manifest, gpu::parse_manifest(manifest_json, source));
  return ModelSignature{std::move(manifest.inputs), std::move(manifest.outputs)};
}

std::string render_model_metadata(const std::string& name, const std::vector<uint32_t>& versions,
                                  const ModelSignature& signature) {
  std::vector<std::string> words;
  words.reserve(versions.size());
  for (uint32_t v : versions) words.push_back(std::to_string(v));
  json j;
  j["name"] = name;
  j["versions"] = std::move(words);
  j["platform"] = "ember";
  j["inputs"] = tensor_specs(signature.inputs);
  j["outputs"] = tensor_specs(signature.outputs);
  return j.dump();
}

Result<infer_request> parse_infer_request(std::string_view body, const model_key& key) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return invalid_argument("the request body is empty; an inference request is a JSON object with 'inputs'");
  }
  EMBER_ASSIGN_OR_RETURN(json j, parse_json_text(body));
  if (!j.is_object()) return invalid_argument("the request body must be a JSON object");
  infer_request req;
  req.model = key;
  if (auto id = j.find("id"); id != j.end()) {
    if (!id->is_string()) return invalid_argument("field 'id' must be a string");
    req.id = id->get<std::string>();
  }
  auto inputs = j.find("inputs");
  if (inputs == j.end() || !inputs->is_array() || inputs->empty()) {
    return invalid_argument("field 'inputs' must be a non-empty list of tensors");
  }
  for (size_t i = 0; i < inputs->size(); ++i) {
    EMBER_ASSIGN_OR_RETURN(gpu::HostTensor t,
                           gpu::tensor_from_kserve_json((*inputs)[i], "inputs[" + std::to_string(i) + "]"));
    req.inputs.push_back(encode_tensor(t));
  }
  if (auto outputs = j.find("outputs"); outputs != j.end()) {
    if (!outputs->is_array()) return invalid_argument("field 'outputs' must be a list");
    for (const auto& o : *outputs) {
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) {
        return invalid_argument("field 'outputs' must hold objects with a 'name'");
      }
      req.outputs.push_back(o["name"].get<std::string>());
    }
  }
  return req;
}

Result<std::string> render_infer_reply(const infer_reply& reply) {
  json out{{"model_name", reply.model.name}, {"model_version", std::to_string(reply.model.version)}};
  if (!reply.id.empty()) out["id"] = reply.id;
  out["outputs"] = json::array();
  for (const auto& t : reply.outputs) {
    if (t.dtype >= static_cast<uint8_t>(gpu::DType::count)) {
      return internal_error("output '" + t.name + "' has an unknown dtype code " + std::to_string(t.dtype));
    }
    const auto dtype = static_cast<gpu::DType>(t.dtype);
    json data;
    switch (dtype) {
      case gpu::DType::f32:
        data = values_of<float>(t.data);
        break;
      case gpu::DType::i64:
        data = values_of<int64_t>(t.data);
        break;
      case gpu::DType::i32:
        data = values_of<int32_t>(t.data);
        break;
      case gpu::DType::u8:
        data = values_of<uint8_t>(t.data);
        break;
      case gpu::DType::count:
        return internal_error("output '" + t.name + "' has no dtype");
      case gpu::DType::f16:
      case gpu::DType::bf16:
        return unsupported("output '" + t.name + "' has datatype " + std::string(gpu::dtype_kserve_name(dtype)) +
                           ", which the JSON API does not carry");
    }
    out["outputs"].push_back(
        {{"name", t.name}, {"datatype", gpu::dtype_kserve_name(dtype)}, {"shape", t.shape}, {"data", std::move(data)}});
  }
  return out.dump();
}

std::string render_model_readiness(const std::string& name, bool ready, const model_state& state) {
  json body{{"name", name}, {"ready", ready}};
  if (!ready) {
    if (state.state == ModelReadiness::failed) {
      body["error"] = "model cannot load: " + state.reason;
    } else if (state.explicitly_unloaded) {
      body["error"] = "model is unloaded";
    } else {
      body["error"] = "no warm replica (" + std::string(to_string(state.state)) + "); the first request loads one";
    }
  }
  return body.dump();
}

std::string render_server_metadata() {
  return json{{"name", "ember"}, {"version", "0.1.0"}, {"extensions", {"model_repository"}}}.dump();
}

std::string render_error(std::string_view message) { return json{{"error", std::string(message)}}.dump(); }

}  // namespace ember
