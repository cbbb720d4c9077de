// GrpcFrontend: the KServe v2 gRPC service of a gateway (inference.GRPCInferenceService, in
// Triton's layout: grpc_service.proto), and the standard gRPC health service (grpc.health.v1).
//
//   ServerLive, ServerReady                 liveness; readiness (the gateway has the routing table)
//   ServerMetadata, ModelMetadata           {name, version, extensions}; a model's inputs and outputs
//   ModelReady                              ready when a warm replica exists
//   ModelInfer                              inference, raw or typed tensor contents (kserve_grpc.hpp)
//   RepositoryIndex                         every model version and its state (READY, LOADING, UNAVAILABLE)
//   RepositoryModelLoad, RepositoryModelUnload
//   ModelStreamInfer                        text generation, Triton's LLM convention (grpc_generate.hpp),
//                                           over a GenerationService; UNIMPLEMENTED without one
//   grpc.health.v1.Health/Check, Watch      SERVING exactly when ServerReady says ready, for the
//                                           service "" and "inference.GRPCInferenceService"; Ember's
//                                           own (health.proto), at most 8 watches at once
//
// A thin adapter: every call decodes into the gateway's messages and asks through the same
// GatewayClient as HTTP, so routing, holding cold requests, retries and errors are decided in one
// place. Errors map one to one onto HTTP's: invalid argument (400), NOT_FOUND (404), UNAVAILABLE
// (503), DEADLINE_EXCEEDED (504), RESOURCE_EXHAUSTED (out of memory, 503 over HTTP), PERMISSION_DENIED
// (403), INTERNAL (500), each with the message the HTTP error body carries. A message larger than
// gateway.max_body is refused by gRPC with RESOURCE_EXHAUSTED before it is decoded. A client's
// deadline shortens the wait for the answer (the gateway's own request_timeout still bounds it).
//
// gRPC library: Debian's gRPC 1.51 synchronous server. Its threads block on the answer as HTTP
// threads do; at most gateway.grpc_threads serve calls at once (a gRPC resource quota), and a call
// beyond them is refused at once with RESOURCE_EXHAUSTED (gRPC's "Server Threadpool Exhausted"): there
// is no queue, so the default is generous (128 threads, mostly asleep waiting for answers).
//
// ModelStreamInfer, one call (a bidirectional stream) on one server thread: its requests are served
// one after another (Triton serves them at once; a client wanting parallel generations opens more
// streams). For each: decode (bad input: an error response, the stream goes on), generate through
// the GenerationService, and write its responses as its chunks come (GenerationCall between the
// service's threads and the call's). Every request's answer ends with a response flagged
// triton_final_response. While waiting, the thread looks every 50 ms at the call:
//   - the client cancelled the call or went away, or a write failed: the generation is cancelled
//     (GenerationService::cancel) and the call ends;
//   - the client reads slower than the model generates: more than max_queued_chunks wait, and the
//     call is cut off at once (its gRPC context is cancelled from the sink, which unblocks a write
//     stuck on flow control), the generation cancelled; the client sees CANCELLED;
//   - no chunk within gateway.request_timeout: the generation is cancelled and the request ends with
//     an error response (deadline exceeded); the stream takes the next request;
//   - stop(): the calls are cancelled when the server's shutdown grace (5 s) ends, as above.
// Errors before the stream starts (credentials) are the call's gRPC status; everything about one
// request is an error response within the stream (Triton's way: error_message).
//
// Lifecycle: start() binds and serves; stop() (or the destructor) stops accepting, finishes the
// calls in progress and joins. The actor system behind the client must outlive the frontend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/status.hpp"

namespace ember {

class GatewayClient;
class GenerationService;
struct TlsContext;

class GrpcFrontend {
 public:
  /// Binds the client's config().grpc (port 0: an ephemeral port, see port()) and starts serving;
  /// over TLS with `tls` (gRPC's SSL credentials from the same files as HTTP's), else in the clear.
  /// ModelStreamInfer serves `generation` when given; `max_queued_chunks` bounds what waits per
  /// request for a slow reader (GenerationCall::kMaxQueuedChunks; tests make it small).
  static Result<std::unique_ptr<GrpcFrontend>> start(std::shared_ptr<GatewayClient> client,
                                                     std::shared_ptr<const TlsContext> tls = nullptr,
                                                     std::shared_ptr<GenerationService> generation = nullptr,
                                                     size_t max_queued_chunks = 4096);
  ~GrpcFrontend();
  GrpcFrontend(const GrpcFrontend&) = delete;
  GrpcFrontend& operator=(const GrpcFrontend&) = delete;

  uint16_t port() const;
  void stop();

 private:
  struct Impl;
  explicit GrpcFrontend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember
