// GenerationService: what the front ends (the HTTP front end's OpenAI and KServe generate endpoints,
// actors/gateway/http/generation_endpoints.hpp) ask of a gateway for text generation. The front ends
// decode a client's body into a generate_request (actors/generation_messages.hpp), hand it here and
// write what comes back to the client; where it runs (a node's generation loop, a replica chosen,
// a stream continued on another replica with resume_tokens) is the implementation's. The gateway's
// implementation over the cluster is not built yet (docs/design/generation.md, "Serving"); the
// tests drive the front ends with a scripted one (tests/actors/gateway/scripted_generation.hpp).
//
// One generation, as the sink sees it:
//
//   generate(request, sink) ──▶ sink(Error)                          refused before any chunk: the front
//                          │                                          end answers an HTTP error (its code
//                          │                                          decides the status: 400, 404, 503…)
//                          └─▶ sink(chunk) … sink(chunk, final)      finish stop | length | error
//
// Exactly one final call ends every generation: an Error (only as the first and only call) or a chunk
// with finish != none. Nothing follows it.
//
// Threading contract (the implementation's promises):
//   - generate() and cancel() may be called by any number of front-end threads at once; neither
//     blocks on the model, a node or the network (generate() starts the work and returns; a refusal
//     it can tell at once, such as an unknown model, may be the sink's first call before it returns,
//     on the calling thread).
//   - The sink is called on any thread (an actor's, a network thread's), for one generation never
//     twice at once and always in order. The front end's sink never blocks and never calls back into
//     the service: it appends to a bounded buffer (see below) and returns, so it is safe to call
//     while holding a lock or from inside an actor.
//   - cancel(id): the client went away (it closed the connection, or read too slowly and was cut
//     off). The generation stops at its next step and frees its KV blocks (issue 35); the service
//     ends it with its final call as usual, which the front end ignores. A cancel for an id that
//     already ended, or never existed, does nothing.
//   - The service drops (destroys) each sink after its final call, so that the front end's state for
//     the request is freed; the sink holds no reference to the service.
//
// The front end's side (actors/gateway/http/generation_call.hpp): a request's chunks wait in a
// buffer of at most GenerationCall::kMaxQueuedChunks for the HTTP thread that writes them; a client
// that reads slower than that is cut off (overflow policy: cut the slow client; the generation is
// cancelled and the stream ends with an error event; counted in
// ember_generation_cancels_total{reason="slow_client"}). No chunk for gateway.request_timeout ends
// the request (504 before the first chunk, an error event after it) and cancels it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "actors/generation_messages.hpp"
#include "base/status.hpp"

namespace ember {

/// A model that generates text, as /v1/models lists it.
struct GenerativeModel {
  std::string name;
  /// The highest version (what a request for the name gets).
  uint32_t version = 1;
  /// When the model was added, Unix seconds (OpenAI's `created`); 0 when unknown.
  uint64_t created_unix_s = 0;
  /// Tokens of context (prompt plus output); 0 when unknown.
  uint32_t context_tokens = 0;
};

class GenerationService {
 public:
  /// A generation's chunks, or its refusal before the first one (see the header).
  using Sink = std::function<void(Result<generate_chunk>)>;

  virtual ~GenerationService() = default;

  /// The models that generate text, by name. unavailable when the gateway cannot tell yet (it has
  /// no routing table). Never blocks on the cluster.
  virtual Result<std::vector<GenerativeModel>> models() = 0;

  /// Starts generating `request` (already checked by check_generate_request: the front end never
  /// passes one that fails it; its model, prompt length and token ids are the service's to check).
  /// Every outcome reaches `sink` (see the header). Refusals before the first chunk: not_found
  /// "unknown model '<name>'" (404), invalid_argument (400: a model that does not generate, a
  /// tokenizer-less model asked for text, a prompt over the context window), unavailable (503, with
  /// Retry-After: no replica in time, queue full).
  virtual void generate(generate_request request, Sink sink) = 0;

  /// Stops generation `request_id` at its next step (see the header). Never blocks.
  virtual void cancel(const std::string& request_id) = 0;
};

}  // namespace ember
