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
      generation_cancels_(registry_.counter("ember_generation_cancels_total",
                                            "Generations the HTTP front end cancelled, by reason (client_gone: the "
                                            "client closed its connection; slow_client: its stream was cut off, "
                                            "read slower than the model generated; timeout: no chunk within "
                                            "gateway.request_timeout; server_stopping)",
                                            {"reason"})),
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
void GatewayInstruments::count_generation_cancel(std::string_view reason) { generation_cancels_.with({reason}).inc(); }
void GatewayInstruments::set_manager_connected(bool connected) { manager_connected_.set(connected ? 1 : 0); }

}  // namespace ember
