// KServe v2 (Open Inference Protocol) JSON as the gateway speaks it: inference request bodies in;
// inference replies, model metadata, readiness, server metadata and error bodies out. The HTTP
// front end (http_frontend.cpp) parses and renders through these; the gateway actor builds model
// metadata once per model version with them (model_catalog.hpp).
//
// Who may call: pure, anyone, any thread. Never throws and never aborts on input: bodies go
// through parse_json_text (base/json_text.hpp), which refuses deep nesting; a bad body is an
// invalid_argument (or unsupported) whose message names the field, and that message is what the
// client reads in {"error": "..."}. Nothing here touches an actor, a socket or a device.
//
// Wire shapes (https://kserve.github.io/website/latest/modelserving/data_plane/v2_protocol/):
//   infer request  {"id"?: str, "inputs": [tensor, ...] (non-empty), "outputs"?: [{"name": str}, ...]}
//   tensor         {"name": str, "datatype": "FP32"|"INT64"|"INT32"|"UINT8", "shape": [int], "data": [...]}
//   infer reply    {"model_name", "model_version": "<n>", "id"? (when the request had one),
//                   "outputs": [{"name", "datatype", "shape", "data": [numbers, row-major]}]}
//   model metadata {"name", "versions": ["1", ...], "platform": "ember", "inputs": [..], "outputs": [..]}
//   readiness      {"name", "ready": bool, "error"?: why not}
//   error          {"error": "<message>"}
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/inference_messages.hpp"
#include "actors/model_messages.hpp"
#include "base/status.hpp"
#include "model/manifest.hpp"

namespace ember {

/// What a model version takes and gives, as its model.json declares it.
struct ModelSignature {
  std::vector<gpu::TensorSpec> inputs;
  std::vector<gpu::TensorSpec> outputs;
};

/// The inputs and outputs of model.json text; the manifest parser's error otherwise (`source`
/// names the file in it).
Result<ModelSignature> parse_model_signature(std::string_view manifest_json, std::string_view source);

/// The model metadata body of one version of `name`; `versions` are every version of the model
/// the gateway knows, ascending. A version whose manifest does not parse is rendered with an empty
/// signature (empty inputs and outputs), as a model that cannot load still has metadata. A workflow's
/// platform is "ensemble" (Triton's name for a DAG of models, which its clients know).
std::string render_model_metadata(const std::string& name, const std::vector<uint32_t>& versions,
                                  const ModelSignature& signature, std::string_view platform = "ember");

/// An inference request over HTTP: the request, and which outputs the client wants as raw bytes
/// (the binary tensor data extension, Triton's).
struct HttpInferRequest {
  infer_request request;
  /// parameters.binary_data_output: every output as raw bytes.
  bool all_binary = false;
  /// outputs[i].parameters.binary_data: these outputs as raw bytes.
  std::vector<std::string> binary_outputs;
};

/// An inference request body for `key` (from the path). When `json_bytes` is set (the request's
/// Inference-Header-Content-Length), the body is that many bytes of JSON followed by the raw bytes
/// of every input whose parameters.binary_data_size is set, in input order. Errors
/// (invalid_argument unless noted):
///   "the request body is empty; an inference request is a JSON object with 'inputs'"
///   "not valid JSON ..." / "JSON nested deeper than 64 levels"   (parse_json_text)
///   "the request body must be a JSON object"
///   "field 'id' must be a string"
///   "field 'inputs' must be a non-empty list of tensors"
///   "inputs[i] ...: ..."                                          (gpu::tensor_from_kserve_json; FP16
///                                                                  and BF16 are unsupported in JSON)
///   "field 'outputs' must be a list"
///   "field 'outputs' must hold objects with a 'name'"
/// and for binary data: the header's length beyond the body ("... but the body has only N
/// bytes"), an input with binary_data_size but no binary section, a size that is not the tensor's
/// ("... needs N"), too few bytes left, bytes left over after the inputs.
/// For bodies of `scan_from` bytes or more, the inputs' data lists are read from the text rather than
/// by the JSON parser (kserve_data_scan.hpp), with the same values and errors (tests and the fuzzer
/// compare the two ways: 0 always, SIZE_MAX never).
Result<HttpInferRequest> parse_infer_http(std::string_view body, std::optional<uint64_t> json_bytes,
                                          const model_key& key, size_t scan_from = 4096);

/// The reply for `asked`: JSON alone (json_bytes unset), or, when any output goes as raw bytes,
/// the JSON header (those outputs with parameters.binary_data_size and no data) followed by their
/// bytes in output order, json_bytes being the header's length (the reply's
/// Inference-Header-Content-Length). Errors: unsupported "output '<name>' has datatype
/// FP16|BF16, which the JSON API does not carry" (for an output asked as JSON), internal for a
/// dtype code that is no gpu::DType.
struct HttpInferReply {
  std::string body;
  std::optional<uint64_t> json_bytes;
};
Result<HttpInferReply> render_infer_http(const infer_reply& reply, const HttpInferRequest& asked);

/// The readiness body of a model version; `ready` false explains why from `state`.
std::string render_model_readiness(const std::string& name, bool ready, const model_state& state);

/// The readiness body of anything else (a workflow): not ready says `ready`'s error.
std::string render_readiness(const std::string& name, const Status& ready);

/// What the server metadata says, over HTTP and gRPC alike.
struct ServerIdentity {
  std::string name;
  std::string version;
  std::vector<std::string> extensions;
};
/// {"ember", "0.1.0", {"model_repository", "binary_tensor_data"}}.
ServerIdentity server_identity();

/// GET /v2: server_identity() as {"name", "version", "extensions"}.
std::string render_server_metadata();

/// {"error": message}, with the message escaped as JSON.
std::string render_error(std::string_view message);

}  // namespace ember
