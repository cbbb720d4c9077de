// KServe v2's generate extension (the Open Inference Protocol's text generation API, as Triton
// serves it): POST /v2/models/{m}[/versions/{v}]/generate and /generate_stream bodies into a
// generate_request (actors/generation_messages.hpp), and the answers out.
//
// Wire shapes (kserve/open-inference-protocol, specification/protocol/generate_rest.yaml):
//   request         {"text_input": string (required), "parameters"?: {…}, "id"?: string}
//   parameters      the fields generation_params_json.hpp lists (max_tokens, default 20 as the spec
//                   says; temperature, top_p, top_k, min_p, seed, the penalties, logit_bias, stop,
//                   stop_token_ids, ignore_eos), and "stream": boolean (false or absent on /generate;
//                   true or absent on /generate_stream)
//   answer          {"model_name", "model_version", "text_output", "finish_reason": "stop" | "length",
//                   "usage": {"prompt_tokens", "completion_tokens"}, "id"? (the request's)}
//   stream event    "data: {"model_name", "model_version", "text_output", "done": false}\n\n" per chunk,
//                   the last with "done": true, "finish_reason" and "usage"; the stream then ends
//                   (no [DONE]: that is OpenAI's)
//   error           {"error": "<message>"} (an HTTP error before the first chunk, an event after it)
//
// Ember departs from the spec in two places, both on purpose: an unknown field or parameter is
// refused (the spec allows additional parameters; a misspelt "max_token" silently ignored would cost
// a client its limit, and Ember has no other parameters to pass on), and bad input is 400 (as
// /infer and Triton's generate answer it) rather than the spec's 422.
//
// Who may call: pure, anyone, any thread, one object at a time; never throws.
#pragma once

#include <string>
#include <string_view>

#include "actors/generation_messages.hpp"
#include "base/status.hpp"

namespace ember {

/// The spec's default max_tokens.
inline constexpr uint32_t kKServeDefaultMaxTokens = 20;

/// A generate body for `key` (from the path) as request `id`; `stream` says which endpoint
/// (/generate_stream). `client_id` (when given) receives the body's "id" (empty: none). Errors (invalid_argument): "the request body is empty; …", parse_json_text's,
/// "the request body must be a JSON object", "unknown field(s) …", "'text_input' is required",
/// "'text_input' must be a string", "'parameters' must be an object", "unknown parameter(s) …",
/// "'stream' must be false on /generate (use /generate_stream)" and its converse, the shared
/// fields' type errors and check_generate_request's.
Result<generate_request> parse_kserve_generate(std::string_view body, const model_key& key, const std::string& id,
                                               bool stream, std::string* client_id = nullptr);

/// The answer's identity: the model as the path named it, the version that serves (as a string),
/// and the client's id (empty: none).
struct KServeGenerateAnswer {
  std::string model_name;
  std::string model_version;
  std::string client_id;
};

/// A whole answer (/generate): chunks folded, rendered after the final one.
class KServeGenerateCompletion {
 public:
  explicit KServeGenerateCompletion(KServeGenerateAnswer answer) : answer_(std::move(answer)) {}
  void add(const generate_chunk& chunk);
  bool done() const { return finish_ != FinishReason::none; }
  std::string render() const;

 private:
  KServeGenerateAnswer answer_;
  std::string text_;
  FinishReason finish_ = FinishReason::none;
  generation_usage usage_;
};

/// A streamed answer (/generate_stream): the events of each chunk.
class KServeGenerateStream {
 public:
  explicit KServeGenerateStream(KServeGenerateAnswer answer) : answer_(std::move(answer)) {}
  /// One event per chunk (the final one done, with finish_reason and usage); an error chunk is an
  /// error event. Empty after the end.
  std::string add(const generate_chunk& chunk);
  /// The error event (empty after the end).
  std::string fail(const Error& e);
  bool ended() const { return ended_; }

 private:
  KServeGenerateAnswer answer_;
  bool ended_ = false;
};

}  // namespace ember
