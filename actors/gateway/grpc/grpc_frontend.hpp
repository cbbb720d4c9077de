// GrpcFrontend: the KServe v2 gRPC service of a gateway (inference.GRPCInferenceService, in
// Triton's layout: grpc_service.proto), and the standard gRPC health service (grpc.health.v1).
//
//   ServerLive, ServerReady                 liveness; readiness (the gateway has the routing table)
//   ServerMetadata, ModelMetadata           {name, version, extensions}; a model's inputs and outputs
//   ModelReady                              ready when a warm replica exists
//   ModelInfer                              inference, raw or typed tensor contents (kserve_grpc.hpp)
//   RepositoryIndex                         every model version and its state (READY, LOADING, UNAVAILABLE)
//   RepositoryModelLoad, RepositoryModelUnload
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
// Lifecycle: start() binds and serves; stop() (or the destructor) stops accepting, finishes the
// calls in progress and joins. The actor system behind the client must outlive the frontend.
#pragma once

#include <cstdint>
#include <memory>

#include "base/status.hpp"

namespace ember {

class GatewayClient;
struct TlsContext;

class GrpcFrontend {
 public:
  /// Binds the client's config().grpc (port 0: an ephemeral port, see port()) and starts serving;
  /// over TLS with `tls` (gRPC's SSL credentials from the same files as HTTP's), else in the clear.
  static Result<std::unique_ptr<GrpcFrontend>> start(std::shared_ptr<GatewayClient> client,
                                                     std::shared_ptr<const TlsContext> tls = nullptr);
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
