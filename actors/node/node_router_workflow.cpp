// node_router: workflow requests run on the node (issue 18, StreamBox §3), over WorkflowRuns
// (actors/node/workflow_runs.hpp), which decides; this file carries out its orders: each step a
// late-binding request of its model (Held of kind workflow_step), kept values released on their
// devices, the run's answer delivered to the client.
#include <spdlog/spdlog.h>

#include "actors/errors.hpp"
#include "actors/node/node_router_state.hpp"

namespace ember {

namespace {

/// Carries out `orders`: kept values dropped on their devices (one message per device), then the
/// steps submitted (a step of a run that failed meanwhile is not: it fails at once).
void carry_out(router_pointer self, WorkflowRuns::Orders orders) {
  auto& st = self->state;
  for (auto& r : orders.release) {
    if (r.device < st.devices.size()) self->send(st.devices[r.device].actor, release_atom_v, std::move(r.handles));
  }
  for (auto& step : orders.submit) {
    if (st.workflows->failed(step.run)) {
      carry_out(self, st.workflows->step_failed(step.run, step.step, unavailable("the request failed")));
      continue;
    }
    Held held;
    held.kind = HeldKind::workflow_step;
    held.request = step.request;
    held.workflow = step.run;
    held.step = step.step;
    held.device_inputs = std::move(step.device_inputs);
    held.keep = std::move(step.keep);
    if (Status s = late_submit(self, step.request->model, std::move(held), step.prefer); !s.ok()) {
      carry_out(self, st.workflows->step_failed(step.run, step.step, s.error()));
    }
  }
}

}  // namespace

caf::result<infer_reply> workflow_take(router_pointer self, workflow_request& req) {
  auto& st = self->state;
  if (!st.swap) {
    return to_caf(unavailable("node " + st.config.name +
                              " binds its models pinned and runs no workflow itself; run the steps one by one"));
  }
  auto parsed = st.workflows->parse(req.name, req.json);
  if (!parsed.ok()) return to_caf(parsed.error());
  const WorkflowConfig& config = (*parsed)->config;
  if (req.models.size() != config.steps.size()) {
    return to_caf(invalid_argument("workflow '" + req.name + "': " + std::to_string(req.models.size()) +
                                   " models for " + std::to_string(config.steps.size()) + " steps"));
  }
  for (size_t s = 0; s < req.models.size(); ++s) {
    auto r = st.replicas.find(req.models[s]);
    if (r == st.replicas.end() || !r->second.ready || r->second.stage) {
      return to_caf(unavailable("node " + st.config.name + " has no ready replica of " + req.models[s].to_string() +
                                " (step '" + config.steps[s].name + "')"));
    }
  }
  auto rp = self->make_response_promise<infer_reply>();
  auto answer = [rp](Result<infer_reply> r) mutable {
    if (!rp.pending()) return;
    r.ok() ? rp.deliver(std::move(*r)) : rp.deliver(to_caf(r.error()));
  };
  auto orders = st.workflows->start(std::move(*parsed), std::move(req.models), std::move(req.request),
                                    std::move(answer), now_us(self));
  if (!orders.ok()) {
    rp.deliver(to_caf(orders.error()));  // the promise took the request's answer
    return rp;
  }
  carry_out(self, std::move(*orders));
  late_pump(self);
  return rp;
}

void workflow_step_done(router_pointer self, const Held& held, WorkflowRuns::StepAnswer answer, uint32_t device) {
  auto& st = self->state;
  carry_out(self, st.workflows->step_done(held.workflow, held.step, device, std::move(answer), now_us(self)));
}

void workflow_step_failed(router_pointer self, const Held& held, const Error& e) {
  carry_out(self, self->state.workflows->step_failed(held.workflow, held.step, e));
}

}  // namespace ember
