// HttpFrontend: the KServe v2 / Open Inference Protocol REST API of a gateway, plus /metrics.
//
//   GET  /v2                                   server metadata
//   GET  /v2/health/live, /v2/health/ready     liveness; readiness (the gateway has the routing table)
//   GET  /v2/models/{m}[/versions/{v}]         model metadata (inputs, outputs, versions)
//   GET  /v2/models/{m}[/versions/{v}]/ready   200 when a warm replica exists, 400 otherwise
//   POST /v2/models/{m}[/versions/{v}]/infer   inference with JSON tensors
//   POST /v2/repository/index                  every model version and its state
//   POST /v2/repository/models/{m}/load        load (make a replica; 400 for a model that cannot load)
//   POST /v2/repository/models/{m}/unload      unload every replica
//   POST /ember/v1/models/{m}/distribute       fill node host caches with the model's bytes (Ember's own)
//   POST /ember/v1/models/{m}/evict            drop them again
//   GET  /metrics                              Prometheus text: the gateway and every node
//
// With a GenerationService (generation_service.hpp), text generation too (generation_endpoints.hpp):
//   GET  /v1/models, POST /v1/completions, POST /v1/chat/completions      OpenAI's API
//   POST /v2/models/{m}[/versions/{v}]/generate, …/generate_stream         KServe v2's generate extension
//
// Bodies are KServe v2 JSON (kserve_json.hpp, repository_json.hpp). Every POST body but infer's is
// optional, and a POST without Content-Length or Transfer-Encoding (`curl -X POST URL`) has an
// empty body (http_request.hpp says why that needed care with cpp-httplib).
//
// Errors answer {"error": "<message>"} with 400 (bad input, model cannot load), 404 (unknown model
// or path), 413 (body over the limit), 415 (multipart body), 503 (retryable: no replica in time,
// node lost, queue full, every HTTP thread busy; with Retry-After), 504 (deadline) or 500. No error
// is a bare status: errors cpp-httplib answers itself get a message too. Under /v1/ (OpenAI's API)
// every error, a refused token or an unknown path too, is OpenAI's shape instead:
// {"error": {"message", "type", "param", "code"}} (openai_render.hpp).
//
// HTTP library: cpp-httplib (Debian's libcpp-httplib-dev). It is a small, well-kept library with a
// thread-pool server, keep-alive and body-size limits, which is all a JSON API needs; Boost.Beast
// would add Boost.Asio's machinery and a much longer compile for no feature we use. Its blocking
// model is why HTTP threads, not actors, parse requests: a thread hands each parsed request to the
// gateway through a GatewayClient (gateway_client.hpp, shared with the gRPC front end) and waits for
// the answer, so no actor ever blocks.
// gateway.http_threads threads serve one connection each; at most gateway.http_queue connections
// wait for one, and beyond that a new connection gets 503 at once (http_server.hpp), counted in
// ember_http_rejected_total.
//
// Lifecycle: start() binds and serves on background threads; stop() (or the destructor) stops
// accepting, finishes requests in progress and joins. The actor system must outlive the frontend.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/host_port.hpp"
#include "base/status.hpp"

namespace ember {

class GatewayClient;
class GatewayInstruments;
class GenerationService;
struct TlsContext;

class HttpFrontend {
 public:
  /// Binds the client's config().http (port 0: an ephemeral port, see port()) and starts serving.
  /// `instruments` (may be null) counts the connections refused at the limit.
  /// `tls` (may be null: plain HTTP) serves TLS only.
  /// `generation` (may be null: no generation routes, they are 404) serves text generation; it must
  /// outlive stop().
  static Result<std::unique_ptr<HttpFrontend>> start(std::shared_ptr<GatewayClient> client,
                                                     GatewayInstruments* instruments,
                                                     std::shared_ptr<const TlsContext> tls = nullptr,
                                                     std::shared_ptr<GenerationService> generation = nullptr);
  ~HttpFrontend();
  HttpFrontend(const HttpFrontend&) = delete;
  HttpFrontend& operator=(const HttpFrontend&) = delete;

  uint16_t port() const;
  void stop();

 private:
  struct Impl;
  explicit HttpFrontend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// gateway.metrics: GET /metrics alone, without bearer tokens, on an address of its own, for a
/// Prometheus inside the cluster (Triton's metrics port). Two threads; at most 16 connections wait
/// (beyond, 503 at once). Everything else is 404. Lifecycle as HttpFrontend's.
class MetricsEndpoint {
 public:
  static Result<std::unique_ptr<MetricsEndpoint>> start(std::shared_ptr<GatewayClient> client, const HostPort& at);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;
  uint16_t port() const;

 private:
  struct Impl;
  explicit MetricsEndpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember
