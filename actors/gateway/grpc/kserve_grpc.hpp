// KServe v2 gRPC messages (grpc_service.proto, Triton's layout) as the gateway speaks them:
// inference requests in, inference replies and model metadata out. The gRPC front end
// (grpc_frontend.cpp) decodes and encodes through these; the fuzz target feeds them arbitrary bytes.
//
// Who may call: pure, anyone, any thread; never throws on input. Nothing here touches an actor, a
// socket or a device: only the protobuf messages and the gateway's own message types.
//
// Tensor data travels one of two ways, as in Triton: every input's bytes in raw_input_contents
// (one entry per input, in order; FP16 and BF16 only this way), or every input's elements in its
// typed `contents` (FP32 fp32_contents, INT64 int64_contents, INT32 int_contents, UINT8
// uint_contents). The reply mirrors the request: raw outputs for a raw request (Triton always
// answers raw), typed contents for a typed one, raw again when an output's datatype has no typed
// field (FP16, BF16), since a reply cannot mix the two.
#pragma once

#include <string>
#include <vector>

#include "actors/gateway/grpc/grpc_service.pb.h"
#include "actors/gateway/http/kserve_json.hpp"
#include "actors/inference_messages.hpp"
#include "base/status.hpp"

namespace ember {

/// A gRPC inference request decoded, and how its answer travels.
struct GrpcInferRequest {
  infer_request request;
  /// The answer's outputs go in typed contents (the request's inputs did).
  bool typed_reply = false;
};

/// A version string of the protocol ("" the highest, else decimal digits) as Ember's number (0 the
/// highest). Error: invalid_argument "<field> must be a version number, not '<text>'".
Result<uint32_t> parse_model_version(const std::string& text, const char* field);

/// Decodes a ModelInferRequest. Errors (invalid_argument unless noted), each naming the field:
///   "model_name is empty"; "model_version must be a version number, not '...'"
///   "inputs is empty; an inference request needs at least one input tensor"
///   "inputs[i] (name): ..."  datatype unknown (unsupported), shape negative or too deep, the data
///                            not the shape's size, data in the wrong typed field, a UINT8 value
///                            above 255, FP16/BF16 without raw contents
///   "raw_input_contents has N entries for M inputs"
///   "raw_input_contents and inputs[i].contents are both set; send each input's data one way"
///   "outputs[i] has no name"
Result<GrpcInferRequest> decode_infer_request(const inference::ModelInferRequest& in);

/// Fills `out` with `reply` as `asked` wants it (see the file comment). Error: internal for a dtype
/// code that is no gpu::DType.
Status encode_infer_reply(const infer_reply& reply, const GrpcInferRequest& asked, inference::ModelInferResponse& out);

/// A model version's metadata: `versions` every version of the model the gateway knows.
void encode_model_metadata(const std::string& name, const std::vector<uint32_t>& versions,
                           const ModelSignature& signature, inference::ModelMetadataResponse& out,
                           std::string_view platform = "ember");

/// Replicas to keep from RepositoryModelLoad's parameters: int64_param "replicas" in 1..1024, 0
/// (the manager's "at least one") when absent. Errors: "parameter 'replicas' must be an int64_param in
/// 1..1024", "unknown load parameter '<name>' (Ember reads 'replicas')".
Result<uint32_t> decode_load_parameters(
    const google::protobuf::Map<std::string, inference::ModelRepositoryParameter>& parameters);

}  // namespace ember
