#include "actors/gateway/gateway_instruments.hpp"

#include "actors/workflow_metrics.hpp"

namespace ember {

GatewayInstruments::GatewayInstruments()
    : requests_(
          registry_.counter("ember_requests_total", "Inference requests by outcome", {"model", "version", "outcome"})),
      duration_(registry_.histogram("ember_request_duration_seconds",
                                    "Inference request time at the gateway, from arrival to answer",
                                    {"model", "version"})),
      cold_starts_(registry_.counter("ember_cold_starts_total",
                                     "Requests that found no warm replica and triggered or joined a load",
                                     {"model", "version"})),
      retries_(registry_.counter("ember_request_retries_total",
                                 "Requests re-sent to another replica after their node was lost or refused",
                                 {"model", "version"})),
      pipelined_(registry_.counter("ember_pipeline_requests_total",
                                   "Requests sent through a pipeline of stages while no full replica was ready "
                                   "(a partitioned cold start)",
                                   {"model", "version"})),
      held_(registry_.gauge("ember_held_requests", "Requests waiting for a replica to become ready")
                .with(std::vector<std::string>{})),
      http_rejected_(registry_
                         .counter("ember_http_rejected_total",
                                  "HTTP connections answered 503 at once because every HTTP thread was busy and "
                                  "gateway.http_queue connections already waited")
                         .with(std::vector<std::string>{})),
      auth_refusals_(registry_.counter("ember_auth_refusals_total",
                                       "API calls refused for their credentials (gateway.api_tokens_file), by "
                                       "protocol and reason (unauthenticated: none or malformed; permission_denied: "
                                       "an unknown token)",
                                       {"protocol", "reason"})),
      api_calls_(registry_.counter("ember_api_calls_total",
                                   "API calls by token (its name in gateway.api_tokens_file) and outcome (admitted; "
                                   "rate_limited, concurrency_limited: answered 429 / RESOURCE_EXHAUSTED; "
                                   "permission_denied: a scope the token lacks)",
                                   {"token", "outcome"})),
      api_in_flight_(registry_.gauge("ember_api_calls_in_flight", "API calls admitted and not yet answered, by token",
                                     {"token"})),
      generation_cancels_(registry_.counter("ember_generation_cancels_total",
                                            "Generations the HTTP front end cancelled, by reason (client_gone: the "
                                            "client closed its connection; slow_client: its stream was cut off, "
                                            "read slower than the model generated; timeout: no chunk within "
                                            "gateway.request_timeout; server_stopping)",
                                            {"reason"})),
      generation_requests_(registry_.counter("ember_generation_requests_total",
                                             "Text generations by outcome (success: ended stop or length; cancelled; "
                                             "else the error's code, before or after the first token)",
                                             {"model", "version", "outcome"})),
      time_to_first_token_(registry_.histogram("ember_generation_time_to_first_token_seconds",
                                               "Time at the gateway from a generation's arrival to its first chunk "
                                               "with tokens (a cold start included)",
                                               {"model", "version"})),
      inter_token_(registry_.histogram("ember_generation_inter_token_seconds",
                                       "Time between tokens of a stream after the first: each chunk's gap since the "
                                       "previous one, divided by its tokens",
                                       {"model", "version"},
                                       {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5})),
      generated_tokens_(registry_.counter("ember_generation_tokens_total",
                                          "Generated tokens sent to clients (tokens per second: rate() of it)",
                                          {"model", "version"})),
      streams_resumed_(registry_.counter("ember_generation_resumed_total",
                                         "Streams continued on another replica from the tokens already sent (their "
                                         "node was lost or gave them up)",
                                         {"model", "version"})),
      manager_connected_(registry_
                             .gauge("ember_gateway_manager_connected",
                                    "1 while the gateway holds a live connection to the cluster manager; 0 while it "
                                    "serves warm requests from its last routing table without one")
                             .with(std::vector<std::string>{})),
      workflow_requests_(
          registry_.counter("ember_workflow_requests_total", "Workflow requests by outcome", {"workflow", "outcome"})),
      workflow_duration_(registry_.histogram("ember_workflow_duration_seconds",
                                             "Workflow request time at the gateway, from arrival to answer",
                                             {"workflow"})),
      workflow_step_duration_(
          registry_.histogram(workflow_metrics::kStep, workflow_metrics::kStepHelp, {"workflow", "step"})),
      handoff_bytes_(
          registry_.counter(workflow_metrics::kHandoff, workflow_metrics::kHandoffHelp, {"workflow", "path"})) {
  manager_connected_.set(1);
}

void GatewayInstruments::count_workflow(const std::string& workflow, const std::string& outcome, double seconds) {
  workflow_requests_.with({workflow, outcome}).inc();
  workflow_duration_.with({workflow}).observe(seconds);
}

void GatewayInstruments::observe_workflow_step(const std::string& workflow, const std::string& step, double seconds) {
  workflow_step_duration_.with({workflow, step}).observe(seconds);
}

void GatewayInstruments::count_handoff(const std::string& workflow, std::string_view path, uint64_t bytes) {
  handoff_bytes_.with({workflow, path}).inc(static_cast<double>(bytes));
}

void GatewayInstruments::count_request(const model_key& model, const std::string& outcome, double seconds) {
  const std::string version = std::to_string(model.version);
  requests_.with({model.name, version, outcome}).inc();
  duration_.with({model.name, version}).observe(seconds);
}

void GatewayInstruments::count_cold_start(const model_key& model) {
  cold_starts_.with({model.name, std::to_string(model.version)}).inc();
}

void GatewayInstruments::count_retry(const model_key& model) {
  retries_.with({model.name, std::to_string(model.version)}).inc();
}

void GatewayInstruments::count_pipeline(const model_key& model) {
  pipelined_.with({model.name, std::to_string(model.version)}).inc();
}

void GatewayInstruments::set_held(uint64_t held) { held_.set(static_cast<double>(held)); }

void GatewayInstruments::count_http_rejected() { http_rejected_.inc(); }

void GatewayInstruments::count_auth_refusal(std::string_view protocol, std::string_view reason) {
  auth_refusals_.with({protocol, reason}).inc();
}
GatewayInstruments::TokenSeries GatewayInstruments::token_series(const std::string& token_name) {
  TokenSeries s;
  s.admitted = &api_calls_.with({token_name, "admitted"});
  s.rate_limited = &api_calls_.with({token_name, "rate_limited"});
  s.concurrency_limited = &api_calls_.with({token_name, "concurrency_limited"});
  s.permission_denied = &api_calls_.with({token_name, "permission_denied"});
  s.in_flight = &api_in_flight_.with({token_name});
  return s;
}
void GatewayInstruments::count_generation_cancel(std::string_view reason) { generation_cancels_.with({reason}).inc(); }
void GatewayInstruments::count_generation(const model_key& model, std::string_view outcome) {
  generation_requests_.with({model.name, std::to_string(model.version), std::string(outcome)}).inc();
}
void GatewayInstruments::observe_time_to_first_token(const model_key& model, double seconds) {
  time_to_first_token_.with({model.name, std::to_string(model.version)}).observe(seconds);
}
void GatewayInstruments::observe_inter_token(const model_key& model, double gap_seconds, size_t tokens) {
  if (tokens == 0) return;
  auto& h = inter_token_.with({model.name, std::to_string(model.version)});
  const double each = gap_seconds / static_cast<double>(tokens);
  for (size_t i = 0; i < tokens; ++i) h.observe(each);
}
void GatewayInstruments::count_generated_tokens(const model_key& model, size_t tokens) {
  generated_tokens_.with({model.name, std::to_string(model.version)}).inc(static_cast<double>(tokens));
}
void GatewayInstruments::count_stream_resumed(const model_key& model) {
  streams_resumed_.with({model.name, std::to_string(model.version)}).inc();
}
void GatewayInstruments::set_manager_connected(bool connected) { manager_connected_.set(connected ? 1 : 0); }

}  // namespace ember
