// GatewayInstruments: the metrics a gateway keeps about the requests it serves. Thread-safe; the
// gateway actor and the HTTP threads (which count requests refused before routing) write it, and
// the HTTP accept thread counts the connections it refuses (a relaxed atomic add: never blocks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "actors/model_key.hpp"
#include "metrics/metrics.hpp"

namespace ember {

class GatewayInstruments {
 public:
  GatewayInstruments();

  metrics::Registry& registry() { return registry_; }

  /// A request finished: outcome "success" or the error code's name ("invalid_argument", ...).
  void count_request(const model_key& model, const std::string& outcome, double seconds);
  void count_cold_start(const model_key& model);
  void count_retry(const model_key& model);
  /// A request sent through a pipeline of stages (a partitioned cold start) instead of a replica.
  void count_pipeline(const model_key& model);
  void set_held(uint64_t held);
  /// A connection was refused with 503: every HTTP thread was busy and gateway.http_queue full.
  void count_http_rejected();
  /// A call refused for its credentials (gateway.api_tokens_file): `protocol` http or grpc, `reason`
  /// unauthenticated (none, or malformed) or permission_denied (a token not configured).
  void count_auth_refusal(std::string_view protocol, std::string_view reason);
  /// The series one API token is counted by, under its name (gateway.api_tokens_file's name=, never
  /// the token): ember_api_calls_total{token,outcome} by outcome admitted, rate_limited,
  /// concurrency_limited, permission_denied (a scope it lacks), and ember_api_calls_in_flight{token}.
  struct TokenSeries {
    metrics::Counter* admitted = nullptr;
    metrics::Counter* rate_limited = nullptr;
    metrics::Counter* concurrency_limited = nullptr;
    metrics::Counter* permission_denied = nullptr;
    metrics::Gauge* in_flight = nullptr;
  };
  TokenSeries token_series(const std::string& token_name);
  /// A workflow request finished (outcome as count_request's), end to end.
  void count_workflow(const std::string& workflow, const std::string& outcome, double seconds);
  /// One step of a workflow request answered (or failed) after `seconds` at the gateway.
  void observe_workflow_step(const std::string& workflow, const std::string& step, double seconds);
  /// `bytes` of intermediate tensors went from one step to the next by `path`: same_device, peer,
  /// host (through this process's memory) or network.
  void count_handoff(const std::string& workflow, std::string_view path, uint64_t bytes);
  /// The HTTP front end cancelled a generation (generation_service.hpp): `reason` client_gone (the
  /// client closed its connection), slow_client (its stream was cut off: it read slower than the
  /// model generated), timeout (no chunk within gateway.request_timeout) or server_stopping.
  void count_generation_cancel(std::string_view reason);
  // -- text generation (cluster_generations.hpp), per model version --
  /// A generation ended: outcome "success" (a final chunk stop or length), "cancelled", or the
  /// error code's name (refused before any chunk, or a final error chunk after).
  void count_generation(const model_key& model, std::string_view outcome);
  /// From generate() to the first chunk with tokens.
  void observe_time_to_first_token(const model_key& model, double seconds);
  /// A later chunk with `tokens` tokens, `gap_seconds` after the previous one with tokens: each of
  /// its tokens is observed at gap / tokens.
  void observe_inter_token(const model_key& model, double gap_seconds, size_t tokens);
  /// Tokens forwarded to clients (tokens per second is rate() of this counter).
  void count_generated_tokens(const model_key& model, size_t tokens);
  /// A stream continued on another replica (its node lost or gave it up).
  void count_stream_resumed(const model_key& model);
  /// The gateway reached (true) or lost (false) the cluster manager.
  void set_manager_connected(bool connected);

 private:
  metrics::Registry registry_;
  metrics::CounterFamily& requests_;
  metrics::HistogramFamily& duration_;
  metrics::CounterFamily& cold_starts_;
  metrics::CounterFamily& retries_;
  metrics::CounterFamily& pipelined_;
  metrics::Gauge& held_;
  metrics::Counter& http_rejected_;
  metrics::CounterFamily& auth_refusals_;
  metrics::CounterFamily& api_calls_;
  metrics::GaugeFamily& api_in_flight_;
  metrics::CounterFamily& generation_cancels_;
  metrics::CounterFamily& generation_requests_;
  metrics::HistogramFamily& time_to_first_token_;
  metrics::HistogramFamily& inter_token_;
  metrics::CounterFamily& generated_tokens_;
  metrics::CounterFamily& streams_resumed_;
  metrics::Gauge& manager_connected_;
  metrics::CounterFamily& workflow_requests_;
  metrics::HistogramFamily& workflow_duration_;
  metrics::HistogramFamily& workflow_step_duration_;
  metrics::CounterFamily& handoff_bytes_;
};

}  // namespace ember
