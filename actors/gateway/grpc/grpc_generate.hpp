// Text generation over KServe v2 gRPC: Triton's convention for LLMs on ModelStreamInfer (decoupled
// responses), as Triton's vLLM backend names it (triton-inference-server/vllm_backend) with
// TensorRT-LLM's max_tokens input (tensorrtllm_backend). A ModelInferRequest in becomes a
// generate_request (actors/generation_messages.hpp); each generate_chunk out becomes a
// ModelStreamInferResponse. The gRPC front end (grpc_frontend.cpp) runs it over a GenerationService.
// Field names are from those projects' documentation as remembered, not checked against their source.
//
// Request (ModelInferRequest):
//   model_name, model_version   the model ("" version: the highest)
//   id                          the client's id, echoed in every response (Ember makes its own "gen-…")
//   inputs (one element each, shape [1] or [1, 1]; data in `contents` or raw_input_contents, raw
//   BYTES being Triton's 4-byte little-endian length then the bytes):
//     text_input               BYTES, required       the prompt (text)
//     stream                   BOOL, default false   true: a response per chunk; false: one response
//     sampling_parameters      BYTES, JSON object    generation_params_json.hpp's fields; a string
//                                                    value that reads as a JSON number or boolean is
//                                                    taken as one (vLLM's clients send "0.1")
//     exclude_input_in_output  BOOL, default false   false: a non-streamed answer starts with the
//                                                    prompt (vLLM's default); streamed text never does
//     max_tokens               INT32 / INT64 / UINT32   tokens to generate (default kTritonDefaultMaxTokens)
//   parameters                  the same fields as sampling_parameters, typed (bool, int64, double,
//                               uint64, string); triton_enable_empty_final_response is accepted and
//                               changes nothing (Ember always flags the final response)
//   Later sources win: parameters, then sampling_parameters, then the max_tokens input.
//   Anything else (another input, an output other than text_output, another parameter) is refused.
//
// Response (ModelStreamInferResponse.infer_response): model_name, model_version (the version that
// serves), id (the client's), output text_output (BYTES [1], raw) with the chunk's new text, and
// parameter triton_final_response (bool): false on every response but the last. The last also
// carries finish_reason ("stop" | "length", string), prompt_tokens and completion_tokens (int64).
// A streamed chunk with no new text (a character or stop string held back) sends nothing.
// An error (a refusal before the first response, a failure after it): error_message set, and
// infer_response naming the model and id with triton_final_response true; the stream then takes
// the next request.
//
// Who may call: pure, anyone, any thread, one object at a time; never throws on input.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/gateway/grpc/grpc_service.pb.h"
#include "actors/generation_messages.hpp"
#include "base/status.hpp"

namespace ember {

/// max_tokens when a request names none (vLLM's SamplingParams default).
inline constexpr uint32_t kTritonDefaultMaxTokens = 16;

/// A ModelInferRequest decoded for generation, and how its answer goes out.
struct GrpcGenerateRequest {
  generate_request request;
  /// The request's `id` (echoed) and model name as it named it.
  std::string client_id;
  std::string model_name;
  /// A response per chunk (true) or one at the end.
  bool stream = false;
  /// The non-streamed answer leaves the prompt out.
  bool exclude_input = false;
};

/// Decodes `in` as generation request `id`. Errors (invalid_argument), each naming the input or
/// parameter: "model_name is empty", parse_model_version's, "'text_input' is required", "unknown
/// input(s) …", "'<input>' must be <type>, not <datatype>", "'<input>' must hold one element …",
/// "raw_input_contents has N entries for M inputs", "'sampling_parameters' must be a JSON object",
/// "unknown parameter(s) …", "only the output 'text_output' exists, not '<name>'", the shared
/// fields' type errors and check_generate_request's.
Result<GrpcGenerateRequest> decode_generate_request(const inference::ModelInferRequest& in, const std::string& id);

/// The responses of one request, chunk by chunk.
class GrpcGenerateAnswer {
 public:
  /// `model_version`: the version that serves ("" when unknown).
  GrpcGenerateAnswer(const GrpcGenerateRequest& request, std::string model_version);

  /// The response `chunk` makes, if any (an error chunk: an error response). None after the end.
  std::optional<inference::ModelStreamInferResponse> add(const generate_chunk& chunk);
  /// The error response that ends the request (none after the end).
  std::optional<inference::ModelStreamInferResponse> fail(const Error& e);
  bool ended() const { return ended_; }

 private:
  inference::ModelStreamInferResponse response(std::string_view text, bool final) const;

  std::string client_id_;
  std::string model_name_;
  std::string model_version_;
  bool stream_;
  std::string text_;  // the non-streamed answer so far
  bool ended_ = false;
};

/// An error response for a request that never started (bad input): error_message, and the model
/// and id it named, final.
inference::ModelStreamInferResponse generate_error_response(const inference::ModelInferRequest& in, const Error& e);

}  // namespace ember
