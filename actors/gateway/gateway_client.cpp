// The front ends' way into the gateway (see gateway_client.hpp).
#include "actors/gateway/gateway_client.hpp"

#include <algorithm>
#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/errors.hpp"
#include "actors/gateway/caller_actor.hpp"
#include "actors/gateway/gateway_instruments.hpp"
#include "base/token_file.hpp"

namespace ember {

namespace {

/// Sends `msg...` to the gateway and waits for the answer of type T.
template <class T, class... Ts>
Result<T> ask(caf::actor_system& sys, const gateway_actor& gateway, std::chrono::microseconds timeout, Ts&&... msg) {
  Result<T> out = internal_error("no answer from the gateway");
  caller_actor(sys)
      ->request(gateway, timeout, std::forward<Ts>(msg)...)
      .receive([&](T& x) { out = std::move(x); }, [&](caf::error& err) { out = from_caf(err); });
  return out;
}

}  // namespace

GatewayClient::GatewayClient(caf::actor_system& sys, GatewayConfig config, gateway_actor gateway,
                             std::shared_ptr<RoutingView> view, GatewayInstruments* instruments,
                             std::vector<LocalNode> local, std::vector<ApiToken> api_tokens)
    : sys_(sys),
      config_(std::move(config)),
      gateway_(std::move(gateway)),
      view_(std::move(view)),
      instruments_(instruments),
      local_(std::move(local)),
      access_(std::make_unique<ApiAccess>(std::move(api_tokens), instruments)) {}

std::chrono::microseconds GatewayClient::timeout() const {
  return std::chrono::microseconds(config_.request_timeout_us + config_.cold_start_timeout_us + 5'000'000);
}

Status GatewayClient::ready() const {
  if (view_->snapshot()->subscribed) return Status::OK();
  return unavailable("the gateway has not received the routing table from the manager yet");
}

Result<ModelView> GatewayClient::model(const model_key& key) const {
  auto snap = view_->snapshot();
  const ModelView* m = snap->find(key.name, key.version);
  if (!m) {
    return not_found("unknown model '" + key.name + "'" +
                     (key.version ? " version " + std::to_string(key.version) : std::string()));
  }
  return *m;
}

Result<infer_reply> GatewayClient::infer(infer_request req, std::optional<std::chrono::microseconds> within) {
  const auto wait = within ? std::min(*within, timeout()) : timeout();
  if (wait.count() <= 0) return deadline_exceeded("the client's deadline passed before the request was sent");
  if (auto direct = infer_direct(req, std::min(wait, std::chrono::microseconds(config_.request_timeout_us)))) {
    return std::move(*direct);
  }
  return ask<infer_reply>(sys_, gateway_, wait, std::move(req));
}

std::optional<Result<infer_reply>> GatewayClient::infer_direct(const infer_request& req,
                                                               std::chrono::microseconds wait) {
  auto snap = view_->snapshot();
  if (!snap->subscribed) return std::nullopt;
  const ModelView* m = snap->find(req.model.name, req.model.version);
  if (!m || m->replicas.empty() || m->state.explicitly_unloaded || m->state.state == ModelReadiness::failed) {
    return std::nullopt;
  }
  // Only a node in this process: a request to a remote node that dies is never failed by CAF (it
  // waits out its timeout), while the gateway actor watches its nodes and re-sends.
  ReplicaChooser& chooser = view_->chooser();
  const replica_ref* target =
      chooser.choose_and_start(m->replicas, [&](const replica_ref& r) { return r.router.node() == sys_.node(); });
  if (!target) return std::nullopt;
  const model_key key = m->state.model;
  const auto started = std::chrono::steady_clock::now();
  DirectTraffic& traffic = view_->direct();
  traffic.started(key, target->node_id);
  Result<infer_reply> out = internal_error("no answer from node " + target->node);
  std::optional<Result<infer_reply>> ran;
  const auto local =
      std::find_if(local_.begin(), local_.end(), [&](const LocalNode& n) { return n.router == target->router.id(); });
  if (local != local_.end() && local->runner) {
    if (req.model == key) {
      ran = local->runner->run(req);
    } else {
      infer_request named = req;  // the version the snapshot chose, as the node names it
      named.model = key;
      ran = local->runner->run(named);
    }
  }
  if (ran) {
    out = std::move(*ran);
  } else {
    infer_request sent = req;  // the gateway's way still needs `req` when this node cannot serve it
    sent.model = key;
    caller_actor(sys_)
        ->request(target->for_requests(), wait, std::move(sent))
        .receive([&](infer_reply& x) { out = std::move(x); }, [&](caf::error& err) { out = from_caf(err); });
  }
  const bool handed_on = !out.ok() && out.error().code() == ErrorCode::unavailable;
  traffic.finished(key, target->node_id, out.ok(), out.ok() ? out->compute_us : 0, handed_on);
  chooser.finished(target->node_id);
  if (handed_on) return std::nullopt;
  if (instruments_) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    instruments_->count_request(key, out.ok() ? "success" : std::string(to_string(out.error().code())), seconds);
  }
  if (out.ok()) out->model = key;
  return out;
}

std::optional<Result<infer_reply>> GatewayClient::workflow_on_node(const WorkflowView& w, const RoutingSnapshot& snap,
                                                                   const infer_request& req,
                                                                   std::chrono::microseconds wait) {
  if (!w.config || w.config->steps.empty()) return std::nullopt;
  workflow_request msg;
  std::vector<const ModelView*> views;
  for (const auto& step : w.config->steps) {
    const ModelView* m = snap.find(step.model, step.version);
    if (!m || m->replicas.empty()) return std::nullopt;
    views.push_back(m);
    msg.models.push_back(m->state.model);
  }
  // The least loaded node of this process holding every step's model; else one elsewhere, through
  // the gateway actor, which watches it (and chooses there by the same rule).
  auto holds_all = [&](const replica_ref& r) {
    return std::all_of(views.begin(), views.end(), [&](const ModelView* m) {
      return std::any_of(m->replicas.begin(), m->replicas.end(),
                         [&](const replica_ref& o) { return o.node_id == r.node_id; });
    });
  };
  const bool remote = std::any_of(views.front()->replicas.begin(), views.front()->replicas.end(),
                                  [&](const replica_ref& r) { return r.router.node() != sys_.node() && holds_all(r); });
  ReplicaChooser& chooser = view_->chooser();
  const replica_ref* target = chooser.choose_and_start(
      views.front()->replicas, [&](const replica_ref& r) { return r.router.node() == sys_.node() && holds_all(r); });
  if (!target && !remote) return std::nullopt;
  msg.name = w.entry.name;
  msg.json = w.entry.json;
  msg.request = req;
  Result<infer_reply> out = internal_error("no answer from the node");
  if (target) {
    // A node of this process first offers to run it on this thread (one device holding every
    // step's model, idle), as it does single requests (InlineRunner).
    const auto local =
        std::find_if(local_.begin(), local_.end(), [&](const LocalNode& n) { return n.router == target->router.id(); });
    std::optional<Result<infer_reply>> ran;
    if (local != local_.end() && local->runner) ran = local->runner->run_workflow(msg);
    if (ran) {
      out = std::move(*ran);
    } else {
      caller_actor(sys_)
          ->request(target->for_requests(), wait, std::move(msg))
          .receive([&](infer_reply& x) { out = std::move(x); }, [&](caf::error& err) { out = from_caf(err); });
    }
    chooser.finished(target->node_id);
  } else {
    out = ask<infer_reply>(sys_, gateway_, wait, std::move(msg));
  }
  if (!out.ok() && out.error().code() == ErrorCode::unavailable) return std::nullopt;
  return out;
}

void GatewayClient::count_invalid(const model_key& key) {
  if (instruments_) instruments_->count_request(key, "invalid_argument", 0);
}

void GatewayClient::count_generation_cancel(std::string_view reason) {
  if (instruments_) instruments_->count_generation_cancel(reason);
}

Result<std::vector<model_state>> GatewayClient::index() {
  return ask<std::vector<model_state>>(sys_, gateway_, timeout(), index_atom_v);
}

Result<model_state> GatewayClient::load(model_command cmd) {
  return ask<model_state>(sys_, gateway_, timeout(), load_atom_v, std::move(cmd));
}

Result<model_state> GatewayClient::unload(model_command cmd) {
  return ask<model_state>(sys_, gateway_, timeout(), unload_atom_v, std::move(cmd));
}

Result<distribute_result> GatewayClient::distribute(distribute_request req) {
  return ask<distribute_result>(sys_, gateway_, timeout(), distribute_atom_v, std::move(req));
}

Result<distribute_result> GatewayClient::evict(distribute_request req) {
  return ask<distribute_result>(sys_, gateway_, timeout(), evict_atom_v, std::move(req));
}

Result<std::string> GatewayClient::metrics() {
  return ask<std::string>(sys_, gateway_, std::chrono::seconds(10), metrics_atom_v);
}

}  // namespace ember
