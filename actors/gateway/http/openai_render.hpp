// OpenAI's answers as the HTTP front end writes them: the model list, a whole completion or chat
// completion from a generation's chunks (actors/generation_messages.hpp), the same as server-sent
// events, and errors. The request bodies are openai_json.hpp's.
//
// Shapes (https://platform.openai.com/docs/api-reference):
//   models        {"object": "list", "data": [{"id", "object": "model", "created", "owned_by": "ember",
//                 "max_model_len"? (vLLM's, when known)}]}
//   completion    {"id": "cmpl-…", "object": "text_completion", "created", "model", "choices": [{"index": 0,
//                 "text", "logprobs": null | {"tokens", "token_logprobs", "top_logprobs", "text_offset"},
//                 "finish_reason": "stop" | "length"}], "usage": {"prompt_tokens", "completion_tokens",
//                 "total_tokens"}}
//   chat          {"id": "chatcmpl-…", "object": "chat.completion", …, "choices": [{"index": 0, "message":
//                 {"role": "assistant", "content"}, "logprobs": null | {"content": [{"token", "logprob",
//                 "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}, "finish_reason"}], "usage"}
//   stream        "data: {chunk}\n\n" per event, then "data: [DONE]\n\n". A chunk is the answer's shape
//                 with "object" "text_completion" (completions) or "chat.completion.chunk" (chat, whose
//                 choices carry a "delta" instead of a "message"): chat's first event carries the role
//                 ({"role": "assistant", "content": ""}); each generate_chunk with text or tokens is one
//                 event; the final one's finish_reason is an event of its own (text "" / an empty
//                 delta); with include_usage every event has "usage": null and one more event before
//                 [DONE] has "choices": [] and the usage.
//   error         {"error": {"message", "type", "param", "code"}}; type invalid_request_error (400,
//                 404), authentication_error (401), permission_error (403) or server_error (5xx); code
//                 the ErrorCode's name ("model_not_found" for not_found). After the first event an
//                 error is the event `data: {"error": {...}}` then [DONE].
//
// Text that is not valid UTF-8 is written with U+FFFD in place of the bad bytes, never refused.
// Who may call: pure, anyone, any thread, one object at a time; never throws.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/gateway/generation_service.hpp"
#include "actors/generation_messages.hpp"
#include "base/status.hpp"

namespace ember {

/// GET /v1/models.
std::string render_openai_models(const std::vector<GenerativeModel>& models);

/// The error body for `e` (its status is http_status(e.code())); `param` the field it is about, or
/// empty (null).
std::string render_openai_error(const Error& e, std::string_view param = {});

/// An error body for an HTTP `status` the front end answers without an ErrorCode (a body over the
/// limit, no such endpoint): "param" and "code" null.
std::string render_openai_error(int status, std::string_view message);

/// Which endpoint answers.
enum class OpenAiApi : uint8_t { completions, chat };

/// What every answer of one request says about itself.
struct OpenAiAnswer {
  OpenAiApi api = OpenAiApi::completions;
  /// The request's id ("cmpl-…", "chatcmpl-…"), its model as the client named it, and when it was
  /// made (Unix seconds).
  std::string id;
  std::string model;
  uint64_t created = 0;
  /// The request asked for log probabilities (and how many alternatives), and for usage in a stream.
  bool logprobs = false;
  uint32_t top_logprobs = 0;
  bool include_usage = false;
};

/// A whole answer (stream false): the chunks folded as they come, rendered once the final one came.
class OpenAiCompletion {
 public:
  explicit OpenAiCompletion(OpenAiAnswer answer) : answer_(std::move(answer)) {}
  /// Folds a chunk in; chunks after the final one are ignored.
  void add(const generate_chunk& chunk);
  bool done() const { return finish_ != FinishReason::none; }
  /// The body (after the final chunk; an error chunk is the front end's to answer as an HTTP error).
  std::string render() const;

 private:
  OpenAiAnswer answer_;
  std::string text_;
  std::vector<token_logprobs> logprobs_;
  FinishReason finish_ = FinishReason::none;
  generation_usage usage_;
};

/// A streamed answer (stream true): each call gives the bytes to write, whole events.
class OpenAiStream {
 public:
  explicit OpenAiStream(OpenAiAnswer answer) : answer_(std::move(answer)) {}
  /// What goes before the first chunk: chat's role event; nothing for completions.
  std::string start();
  /// The events of one chunk; for the final chunk also the finish event, the usage event (when
  /// asked) and [DONE]; for an error chunk the error event and [DONE]. Empty after the end.
  std::string add(const generate_chunk& chunk);
  /// Ends the stream with `e` as an error event and [DONE] (empty after the end).
  std::string fail(const Error& e);
  bool ended() const { return ended_; }

 private:
  std::string event(const std::string& json_text) const;
  std::string content_event(const generate_chunk& chunk);
  std::string finish_event(FinishReason finish) const;
  std::string usage_event(const generation_usage& usage) const;

  OpenAiAnswer answer_;
  /// Bytes of text sent so far (the completions logprobs' text_offset).
  size_t text_bytes_ = 0;
  bool ended_ = false;
};

}  // namespace ember
