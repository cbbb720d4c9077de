// KServe v2 JSON bodies (see kserve_json.hpp).
#include "actors/gateway/http/kserve_json.hpp"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "actors/gateway/http/kserve_data_scan.hpp"
#include "actors/tensor_codec.hpp"
#include "base/json_text.hpp"
#include "model/host_tensor.hpp"

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
                                  const ModelSignature& signature, std::string_view platform) {
  std::vector<std::string> words;
  words.reserve(versions.size());
  for (uint32_t v : versions) words.push_back(std::to_string(v));
  json j;
  j["name"] = name;
  j["versions"] = std::move(words);
  j["platform"] = platform;
  j["inputs"] = tensor_specs(signature.inputs);
  j["outputs"] = tensor_specs(signature.outputs);
  return j.dump();
}

namespace {

/// parameters.<name> of `j` when it is a boolean true.
bool flag(const json& j, const char* name) {
  auto p = j.find("parameters");
  if (p == j.end() || !p->is_object()) return false;
  auto f = p->find(name);
  return f != p->end() && f->is_boolean() && f->get<bool>();
}

}  // namespace

Result<HttpInferRequest> parse_infer_http(std::string_view body, std::optional<uint64_t> json_bytes,
                                          const model_key& key, size_t scan_from) {
  std::string_view binary;
  if (json_bytes) {
    if (*json_bytes > body.size()) {
      return invalid_argument("Inference-Header-Content-Length is " + std::to_string(*json_bytes) +
                              " but the body has only " + std::to_string(body.size()) + " bytes");
    }
    binary = body.substr(*json_bytes);
    body = body.substr(0, *json_bytes);
  }
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return invalid_argument("the request body is empty; an inference request is a JSON object with 'inputs'");
  }
  // Large requests: the inputs' data lists are read from the text (kserve_data_scan.hpp) and the
  // parser gets the rest; anything the scanner declines, or the rest failing to parse, takes the
  // whole body through the parser as before, so that every error reads as it always did.
  std::optional<std::vector<InputDataSpan>> scanned;
  json j;
  if (body.size() >= scan_from) scanned = scan_input_data(body);
  if (scanned && !scanned->empty()) {
    std::string rest;
    rest.reserve(body.size());
    size_t from = 0;
    for (const auto& span : *scanned) {
      rest.append(body.substr(from, span.begin - from)).append("[]");
      from = span.end;
    }
    rest.append(body.substr(from));
    if (auto parsed = parse_json_text(rest); parsed.ok()) {
      j = std::move(*parsed);
    } else {
      scanned.reset();
    }
  } else {
    scanned.reset();
  }
  if (!scanned) {
    EMBER_ASSIGN_OR_RETURN(j, parse_json_text(body));
  }
  if (!j.is_object()) return invalid_argument("the request body must be a JSON object");
  HttpInferRequest out;
  out.all_binary = flag(j, "binary_data_output");
  infer_request& req = out.request;
  req.model = key;
  if (auto id = j.find("id"); id != j.end()) {
    if (!id->is_string()) return invalid_argument("field 'id' must be a string");
    req.id = id->get<std::string>();
  }
  auto inputs = j.find("inputs");
  if (inputs == j.end() || !inputs->is_array() || inputs->empty()) {
    return invalid_argument("field 'inputs' must be a non-empty list of tensors");
  }
  uint64_t offset = 0;  // into the binary section
  for (size_t i = 0; i < inputs->size(); ++i) {
    const json& in = (*inputs)[i];
    const std::string where = "inputs[" + std::to_string(i) + "]";
    const json* size = nullptr;
    if (in.is_object()) {
      if (auto p = in.find("parameters"); p != in.end() && p->is_object()) {
        if (auto s = p->find("binary_data_size"); s != p->end()) size = &*s;
      }
    }
    if (!size) {
      const InputDataSpan* span = nullptr;
      if (scanned) {
        for (const auto& s : *scanned) span = s.input == i ? &s : span;
      }
      EMBER_ASSIGN_OR_RETURN(gpu::HostTensor t, span ? gpu::tensor_from_kserve_numbers(in, span->numbers, where)
                                                     : gpu::tensor_from_kserve_json(in, where));
      req.inputs.push_back(encode_tensor(t));
      continue;
    }
    if (!size->is_number_unsigned()) {
      return invalid_argument(where + ": parameters.binary_data_size must be a non-negative integer");
    }
    if (!json_bytes) {
      return invalid_argument(where + ": parameters.binary_data_size needs the binary data after the JSON, with the "
                              "Inference-Header-Content-Length header giving the JSON's length");
    }
    const uint64_t n = size->get<uint64_t>();
    if (n > binary.size() - offset) {
      return invalid_argument(where + ": binary_data_size is " + std::to_string(n) + " but only " +
                              std::to_string(binary.size() - offset) + " bytes of binary data are left");
    }
    // Straight from the body into the message: one copy of the bytes.
    EMBER_ASSIGN_OR_RETURN(auto header, gpu::kserve_binary_header(in, n, where));
    tensor_msg t;
    t.name = std::move(header.first);
    t.dtype = static_cast<uint8_t>(header.second.dtype);
    t.shape.assign(header.second.shape.dims.begin(), header.second.shape.dims.begin() + header.second.shape.rank);
    t.data.assign(binary.begin() + static_cast<std::ptrdiff_t>(offset),
                  binary.begin() + static_cast<std::ptrdiff_t>(offset + n));
    offset += n;
    req.inputs.push_back(std::move(t));
  }
  if (offset != binary.size()) {
    return invalid_argument(std::to_string(binary.size() - offset) +
                            " bytes of binary data follow the JSON that no input's binary_data_size accounts for");
  }
  if (auto outputs = j.find("outputs"); outputs != j.end()) {
    if (!outputs->is_array()) return invalid_argument("field 'outputs' must be a list");
    for (const auto& o : *outputs) {
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) {
        return invalid_argument("field 'outputs' must hold objects with a 'name'");
      }
      req.outputs.push_back(o["name"].get<std::string>());
      if (flag(o, "binary_data")) out.binary_outputs.push_back(req.outputs.back());
    }
  }
  return out;
}

Result<HttpInferReply> render_infer_http(const infer_reply& reply, const HttpInferRequest& asked) {
  json out{{"model_name", reply.model.name}, {"model_version", std::to_string(reply.model.version)}};
  std::string tail;  // the binary outputs' bytes, in output order
  if (!reply.id.empty()) out["id"] = reply.id;
  out["outputs"] = json::array();
  for (const auto& t : reply.outputs) {
    if (t.dtype >= static_cast<uint8_t>(gpu::DType::count)) {
      return internal_error("output '" + t.name + "' has an unknown dtype code " + std::to_string(t.dtype));
    }
    const auto dtype = static_cast<gpu::DType>(t.dtype);
    const bool binary = asked.all_binary || std::find(asked.binary_outputs.begin(), asked.binary_outputs.end(),
                                                      t.name) != asked.binary_outputs.end();
    if (binary) {
      out["outputs"].push_back({{"name", t.name},
                                {"datatype", gpu::dtype_kserve_name(dtype)},
                                {"shape", t.shape},
                                {"parameters", {{"binary_data_size", t.data.size()}}}});
      tail.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
      continue;
    }
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
  HttpInferReply r{out.dump(), std::nullopt};
  if (asked.all_binary || !asked.binary_outputs.empty()) {
    r.json_bytes = r.body.size();
    r.body += tail;
  }
  return r;
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

std::string render_readiness(const std::string& name, const Status& ready) {
  json body{{"name", name}, {"ready", ready.ok()}};
  if (!ready.ok()) body["error"] = ready.error().message();
  return body.dump();
}

ServerIdentity server_identity() { return {"ember", "0.1.0", {"model_repository", "binary_tensor_data"}}; }

std::string render_server_metadata() {
  const ServerIdentity id = server_identity();
  return json{{"name", id.name}, {"version", id.version}, {"extensions", id.extensions}}.dump();
}

std::string render_error(std::string_view message) { return json{{"error", std::string(message)}}.dump(); }

}  // namespace ember
