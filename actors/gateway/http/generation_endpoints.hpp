// GenerationEndpoints: the HTTP front end's text generation routes, over a GenerationService
// (actors/gateway/generation_service.hpp). HttpFrontend (http_frontend.hpp) registers them, behind
// its credentials check and body reader, only when it is given a service.
//
//   GET  /v1/models                                   the generative models (OpenAI's list)
//   POST /v1/completions                              OpenAI's completions (openai_json.hpp)
//   POST /v1/chat/completions                         OpenAI's chat completions
//   POST /v2/models/{m}[/versions/{v}]/generate       KServe v2's generate extension (kserve_generate_json.hpp)
//   POST /v2/models/{m}[/versions/{v}]/generate_stream  the same as server-sent events
//
// One request, on the HTTP thread that serves its connection (it blocks that thread, as /infer
// does, mostly asleep: gateway.http_threads bounds the requests and streams served at once):
//
//   parse ─ bad ─▶ 400, nothing generated
//     │
//   generate(request, sink) ─▶ wait for the first chunk ─ refusal ─▶ HTTP error (400, 404, 503 + Retry-After)
//                               │                         ─ no chunk within gateway.request_timeout ─▶ 504, cancel
//                               │                         ─ client gone ─▶ cancel
//                               ▼
//     stream false: fold every chunk, then the whole answer (an error chunk: its HTTP error)
//     stream true:  200 text/event-stream, chunked; an event per chunk as it comes; the end (an
//                   error after the first chunk is an error event)
//
// While it waits, the thread looks every kWaitSlice at the client's connection
// (HttpServer::client_gone) and at stop(): a client that closed its connection, or a write to it
// that fails, cancels the generation at once (counted, client_gone); a stream whose client reads
// slower than the model generates is cut off (GenerationCall's overflow policy; slow_client); no
// chunk within gateway.request_timeout cancels too (timeout), and so does stop() (server_stopping).
// Counts go to ember_generation_cancels_total{reason}.
//
// Request ids: "cmpl-", "chatcmpl-" or "gen-" and 24 random hex digits, unique with overwhelming
// odds (the service keys cancels by them). A request for a model without a version asks for the
// highest the service lists (models()), so a request past the front end names a real version when
// one is known.
//
// Thread-safety: the routes run on any number of HTTP threads at once; the object holds no mutable
// state of its own. It must outlive the server's threads (HttpFrontend stops them first).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <httplib.h>

#include "actors/gateway/api_access.hpp"
#include "actors/gateway/generation_service.hpp"
#include "actors/gateway/http/openai_render.hpp"

namespace ember {

class GatewayInstruments;
class GenerationCall;

class GenerationEndpoints {
 public:
  /// How often a waiting thread looks at its client's connection and at stop().
  static constexpr std::chrono::milliseconds kWaitSlice{50};

  /// `timeout`: the longest wait for a chunk (gateway.request_timeout). `stopping`: true once the
  /// server stops (a waiting thread then lets go). `instruments` may be null.
  GenerationEndpoints(std::shared_ptr<GenerationService> service, std::chrono::microseconds timeout,
                      GatewayInstruments* instruments, std::function<bool()> stopping);

  void models(const httplib::Request& req, httplib::Response& res);
  /// /v1/completions or /v1/chat/completions, by `api`. `pass`: the call's admission (api_access.hpp),
  /// asked whether its token may use the model the body names, and held until the answer ends.
  void openai(OpenAiApi api, const httplib::Request& req, httplib::Response& res, const std::string& body,
              ApiPass& pass);
  /// /generate (stream false) or /generate_stream; the model from the path's matches (admitted
  /// with the call). `pass` is held until the answer ends.
  void kserve(bool stream, const httplib::Request& req, httplib::Response& res, const std::string& body,
              ApiPass& pass);

  class AnswerFormat;

 private:
  enum class Wait { chunk, refused, overflowed, client_gone, stopping, timed_out };
  struct StreamState;

  /// Runs `request` and answers it in `format` (the request is already checked).
  /// `pass` lives until the answer's last event.
  void serve(generate_request request, std::shared_ptr<AnswerFormat> format, httplib::Response& res, ApiPass& pass);
  /// The next chunk (or why none), waiting as the header says.
  Wait await(GenerationCall& call, generate_chunk& chunk, std::optional<Error>& refusal) const;
  /// Writes a stream's next events; false when the client is gone (httplib then closes).
  bool provide(StreamState& state, httplib::DataSink& sink);
  void cancel(const std::string& id, std::string_view reason) const;
  /// `key` with version 0 resolved to the highest the service lists (unchanged when not listed).
  model_key resolve(model_key key) const;
  Error timed_out() const;

  std::shared_ptr<GenerationService> service_;
  const std::chrono::microseconds timeout_;
  GatewayInstruments* const instruments_;
  const std::function<bool()> stopping_;
};

/// A new request id: `prefix` and 24 random hex digits.
std::string make_generation_id(std::string_view prefix);

}  // namespace ember
