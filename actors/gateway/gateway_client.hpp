// GatewayClient: what the HTTP and gRPC front ends ask of a gateway, in one place. Both protocols
// are thin adapters: they decode a request into the gateway's messages, ask through this class and
// encode the answer. Routing, holding cold requests, retries and every error are the gateway
// actor's (gateway_interface.hpp); metadata and readiness are read from the RoutingView snapshot
// without a message to any actor.
//
// The warm path: a request for a model version the snapshot shows with ready replicas on a node in
// this process (`ember serve`, or nodes joined locally) goes from the calling thread straight to the
// least-loaded such replica's node router, skipping the gateway actor's two hops (in and out).
// Remote nodes are reached through the gateway actor, which monitors them: CAF never fails a
// request to a remote actor whose node dies (it waits out its timeout), so only the actor can
// re-send such a request elsewhere at once. On a node that offers it (LocalNode: `ember serve`),
// the request first runs on the calling thread itself when its model is resident on an idle device
// (actors/inline_runner.hpp): no actor, no other thread; the node declines otherwise, and the
// request goes to its router as above. It is counted where the gateway counts its own (metrics, the
// autoscaler's load reports through DirectTraffic, the one in-flight count per node that the
// ReplicaChooser picks by, for this path and the gateway actor alike: replica_chooser.hpp). When that node cannot
// serve it (unavailable: its queue is full, the replica went, the node was lost), the request
// takes the gateway's way, which retries elsewhere or holds it for a cold start; every other
// answer, errors included, is final, exactly as the gateway would give it.
//
// Threads: any number of front-end threads call it at once. A call that needs the actor blocks the
// calling thread (never an actor) on a scoped actor of its own, one per thread and actor system,
// made again every kCallerCalls calls (caller_actor.hpp: CAF 0.17 keeps fired request timeouts). The actor system must outlive the client.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/gateway/api_access.hpp"
#include "actors/gateway/http/kserve_json.hpp"
#include "actors/gateway/routing_view.hpp"
#include "actors/gateway_interface.hpp"
#include "actors/inline_runner.hpp"
#include "base/status.hpp"
#include "base/token_file.hpp"
#include "config/cluster_config.hpp"

namespace caf {
class actor_system;
}

namespace ember {

class GatewayInstruments;

/// A node in this process that runs warm requests on the caller's thread: its router's (its
/// supervisor's) actor id, as replica_ref::router names it, and its runner.
struct LocalNode {
  uint64_t router = 0;
  std::shared_ptr<InlineRunner> runner;
};

class GatewayClient {
 public:
  GatewayClient(caf::actor_system& sys, GatewayConfig config, gateway_actor gateway, std::shared_ptr<RoutingView> view,
                GatewayInstruments* instruments, std::vector<LocalNode> local = {},
                std::vector<ApiToken> api_tokens = {});

  const GatewayConfig& config() const { return config_; }

  /// Who may call the API and how much (gateway.api_tokens_file): both front ends admit every
  /// call but the health checks through it (api_access.hpp).
  const ApiAccess& access() const { return *access_; }
  std::shared_ptr<const RoutingSnapshot> snapshot() const { return view_->snapshot(); }

  /// OK when the gateway holds the manager's routing table (what /v2/health/ready reports);
  /// unavailable otherwise.
  Status ready() const;
  /// The model version `key` names (version 0: the highest), or not_found "unknown model '<name>'"
  /// (with " version <v>" when one was named).
  Result<ModelView> model(const model_key& key) const;

  /// An inference: routed, held or retried by the gateway; its error otherwise. `within` (a
  /// client's deadline) shortens the wait for the answer: deadline_exceeded when it passes first.
  Result<infer_reply> infer(infer_request req, std::optional<std::chrono::microseconds> within = std::nullopt);
  /// A request that never reached the gateway because it did not decode: counted with the
  /// gateway's requests, as invalid_argument.
  void count_invalid(const model_key& key);
  /// A generation a front end cancelled, by why (ember_generation_cancels_total{reason}: client_gone,
  /// slow_client, timeout, server_stopping); for front ends that hold no instruments of their own.
  void count_generation_cancel(std::string_view reason);

  // -- workflows (gateway_workflows.cpp) --
  // A workflow (config/workflow_config.hpp) is served here, by the gateway: its steps go through
  // infer() one at a time in dependency order, each asking its model for only the outputs later
  // steps or the answer read, and every intermediate tensor comes back to this process between
  // steps (counted as host or network hand-off). Device-resident hand-off between the steps of one
  // request is the nodes' (not built yet).

  /// The workflow `name`, or not_found "unknown workflow '<name>'".
  Result<std::shared_ptr<const WorkflowView>> workflow(const std::string& name) const;
  /// OK when the workflow parsed and every step's model has a ready replica; otherwise why not
  /// (invalid_argument for a workflow that cannot run at all, unavailable for a model not warm).
  Status workflow_ready(const WorkflowView& w) const;
  /// What the workflow takes and gives, typed as its steps' models declare the tensors they read
  /// and give (a tensor whose model the gateway does not know is left out).
  ModelSignature workflow_signature(const WorkflowView& w) const;
  /// A request to workflow `name`: its inputs named as the workflow's, `req.outputs` (optional)
  /// among the workflow's outputs. The answer names the workflow (version 1) and its outputs.
  /// Errors: not_found (unknown workflow), invalid_argument (the workflow cannot run: it did not
  /// parse or a step's model is not in the repository; an input or output it does not have), or
  /// the failing step's error prefixed "step '<s>' (model <m>): ". `within` bounds the whole request.
  Result<infer_reply> infer_workflow(const std::string& name, infer_request req,
                                     std::optional<std::chrono::microseconds> within = std::nullopt);
  /// A workflow request that never reached infer_workflow because it did not decode.
  void count_invalid_workflow(const std::string& name);

  Result<std::vector<model_state>> index();
  Result<model_state> load(model_command cmd);
  Result<model_state> unload(model_command cmd);
  Result<distribute_result> distribute(distribute_request req);
  Result<distribute_result> evict(distribute_request req);
  /// The Prometheus text of the gateway and every node.
  Result<std::string> metrics();

 private:
  /// The gateway enforces the request timeout itself; this only guards against a lost answer.
  std::chrono::microseconds timeout() const;
  /// The warm path (see the file comment): the answer, or nullopt to take the gateway's way.
  std::optional<Result<infer_reply>> infer_direct(const infer_request& req, std::chrono::microseconds wait);
  Result<infer_reply> run_workflow_request(const WorkflowView& w, infer_request req,
                                           std::optional<std::chrono::microseconds> within);
  /// A workflow request sent whole to a node holding a ready replica of every step's model (the
  /// least loaded such node of this process, else one elsewhere through the gateway actor, which
  /// watches it): the node runs the steps with the intermediates on its devices. nullopt when no
  /// node holds them all, or the node declined or was lost (unavailable: the steps run through
  /// the gateway then); its answer or error otherwise.
  std::optional<Result<infer_reply>> workflow_on_node(const WorkflowView& w, const RoutingSnapshot& snap,
                                                      const infer_request& req, std::chrono::microseconds wait);

  caf::actor_system& sys_;
  GatewayConfig config_;
  gateway_actor gateway_;
  std::shared_ptr<RoutingView> view_;
  GatewayInstruments* instruments_;
  const std::vector<LocalNode> local_;
  const std::unique_ptr<ApiAccess> access_;
};

}  // namespace ember
