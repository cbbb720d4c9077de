// Workflow requests run on a node (issue 18, StreamBox §3): every step is a late-binding request of
// its model, dispatched by the SwapController like any other (so steps of one request on different
// models may run at once on different devices, and a step waits for its device as a request
// does), preferring the device that holds its inputs when its model is resident and idle there
// (SwapController::submit's `prefer`). What a later step reads stays on the device that computed
// it (the executor keeps it by handle: ExecutorEngine's SwapRun::keep), and the step reads it there
// without a copy when it is dispatched to that device; on another device of the node it is copied
// over the devices' link first (node_router_late.cpp's lease_then_launch). Only what the answer
// reads comes back to the host. A value is released on its device as soon as the last step
// reading it answered
// (WorkflowProgress); a failed request releases everything it holds, and steps still running
// release what they keep when they answer.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "actors/errors.hpp"
#include "actors/node/node_instruments.hpp"
#include "actors/node/node_router_state.hpp"

namespace ember {

namespace {

using Run = router_state::WorkflowRun;

std::string step_what(const Run& run, size_t s) {
  const WorkflowStep& step = run.config.steps[s];
  return "step '" + step.name + "' (model " + step.model +
         (step.version ? " version " + std::to_string(step.version) : std::string()) + ")";
}

/// Drops kept values on their devices, one message per device.
void release(router_pointer self, const std::vector<std::pair<uint32_t, uint64_t>>& values) {
  auto& st = self->state;
  std::map<uint32_t, std::vector<uint64_t>> by_device;
  for (const auto& [device, handle] : values) by_device[device].push_back(handle);
  for (auto& [device, handles] : by_device) {
    if (device < st.devices.size()) self->send(st.devices[device].actor, release_atom_v, std::move(handles));
  }
}

/// Everything the run still keeps on devices.
void release_all(router_pointer self, Run& run) {
  std::vector<std::pair<uint32_t, uint64_t>> values;
  for (auto& slot : run.slots) {
    if (slot.kept) values.emplace_back(slot.device, slot.kept->handle);
    slot.kept.reset();
    slot.host.reset();
  }
  release(self, values);
}

void fail_run(router_pointer self, uint64_t id, Run& run, const Error& e) {
  if (run.failed) return;
  run.failed = true;
  release_all(self, run);
  if (self->state.instruments)
    self->state.instruments->count_workflow(run.config.name, std::string(to_string(e.code())));
  if (run.promise.pending()) run.promise.deliver(to_caf(e));
  if (run.running == 0) self->state.workflows.erase(id);
}

/// The answer, once every step answered.
void answer(router_pointer self, uint64_t id, Run& run) {
  infer_reply reply;
  reply.model = {run.config.name, 1};
  reply.id = run.id;
  reply.node = self->state.config.name;
  reply.queue_us = run.queue_us;
  reply.compute_us = run.compute_us;
  for (const auto& a : run.plan.answer()) {
    if (!run.asked.empty() && std::find(run.asked.begin(), run.asked.end(), a.tensor) == run.asked.end()) continue;
    auto& slot = run.slots[a.slot];
    if (!slot.host) return fail_run(self, id, run, internal_error("output '" + a.tensor + "' did not come back"));
    reply.outputs.push_back(*slot.host);
    reply.outputs.back().name = a.tensor;
  }
  release_all(self, run);
  if (self->state.instruments) self->state.instruments->count_workflow(run.config.name, "success");
  run.promise.deliver(std::move(reply));
  self->state.workflows.erase(id);
}

/// Submits every step that became ready.
void submit_ready(router_pointer self, uint64_t id, Run& run) {
  for (size_t s : run.progress.take_ready()) {
    router_state::Held held;
    held.workflow = id;
    held.step = s;
    infer_request req;
    req.model = run.models[s];
    req.id = run.id;
    for (const auto& b : run.plan.step_inputs(s)) {
      const auto& slot = run.slots[b.slot];
      if (slot.kept) {
        held.device_inputs.push_back({b.model_input, *slot.kept, slot.device});
      } else if (slot.host) {
        req.inputs.push_back(*slot.host);
        req.inputs.back().name = b.model_input;
      }
    }
    // Outputs a later step reads stay on the device; those the answer reads come back.
    for (const auto& kept : run.plan.step_outputs(s)) {
      if (run.plan.readers(kept.slot) > 0) held.keep.push_back(kept.tensor);
      if (run.plan.answered(kept.slot)) req.outputs.push_back(kept.tensor);
    }
    held.request = std::make_shared<const infer_request>(std::move(req));
    run.submitted_us[s] = now_us(self);
    ++run.running;
    // It would rather run where most of its kept inputs are (no copy there).
    std::map<uint32_t, uint64_t> bytes_on;
    for (const auto& in : held.device_inputs) bytes_on[in.device] += in.value.desc.bytes();
    std::optional<uint32_t> prefer;
    for (const auto& [device, bytes] : bytes_on) {
      if (!prefer || bytes > bytes_on[*prefer]) prefer = device;
    }
    if (Status s_ok = late_submit(self, run.models[s], std::move(held), prefer); !s_ok.ok()) {
      --run.running;
      return fail_run(self, id, run, s_ok.error().with_context(step_what(run, s)));
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
  auto parsed = st.parsed_workflows.get(req.name, req.json);
  if (!parsed.ok()) return to_caf(parsed.error());
  const WorkflowConfig* config = &(*parsed)->config;
  if (req.models.size() != config->steps.size()) {
    return to_caf(invalid_argument("workflow '" + req.name + "': " + std::to_string(req.models.size()) +
                                   " models for " + std::to_string(config->steps.size()) + " steps"));
  }
  for (size_t s = 0; s < req.models.size(); ++s) {
    auto r = st.replicas.find(req.models[s]);
    if (r == st.replicas.end() || !r->second.ready || st.stages.count(req.models[s])) {
      return to_caf(unavailable("node " + st.config.name + " has no ready replica of " + req.models[s].to_string() +
                                " (step '" + config->steps[s].name + "')"));
    }
  }
  const uint64_t id = st.next_workflow++;
  auto run = std::make_shared<Run>(std::move(*parsed), std::move(req.models));
  run->id = req.request.id;
  run->asked = req.request.outputs;
  // The request's tensors fill the input slots (each once, named as the workflow's inputs).
  std::string takes;
  for (const auto& n : run->config.inputs) takes += (takes.empty() ? "" : ", ") + n;
  for (auto& t : req.request.inputs) {
    auto at = std::find(run->config.inputs.begin(), run->config.inputs.end(), t.name);
    if (at == run->config.inputs.end()) {
      return to_caf(invalid_argument("input '" + t.name + "' is not one of workflow '" + run->config.name +
                                     "''s (it takes: " + takes + ")"));
    }
    auto& slot = run->slots[static_cast<size_t>(at - run->config.inputs.begin())];
    if (slot.host) return to_caf(invalid_argument("input '" + t.name + "' is given twice"));
    slot.host = std::move(t);
  }
  for (size_t i = 0; i < run->config.inputs.size(); ++i) {
    if (!run->slots[i].host) {
      return to_caf(invalid_argument("workflow '" + run->config.name + "' takes input '" + run->config.inputs[i] +
                                     "', which the request does not give"));
    }
  }
  run->promise = self->make_response_promise<infer_reply>();
  auto rp = run->promise;
  st.workflows.emplace(id, run);
  submit_ready(self, id, *run);
  late_pump(self);
  return rp;
}

void workflow_step_done(router_pointer self, router_state::Held& held, swap_reply& r, uint32_t device) {
  auto& st = self->state;
  auto it = st.workflows.find(held.workflow);
  if (it == st.workflows.end()) {
    std::vector<std::pair<uint32_t, uint64_t>> orphans;
    for (const auto& k : r.result.kept) orphans.emplace_back(device, k.handle);
    return release(self, orphans);
  }
  const uint64_t id = it->first;
  auto run = it->second;  // keeps it alive while it may leave the map
  --run->running;
  if (run->failed) {
    std::vector<std::pair<uint32_t, uint64_t>> orphans;
    for (const auto& k : r.result.kept) orphans.emplace_back(device, k.handle);
    release(self, orphans);
    if (run->running == 0) st.workflows.erase(id);
    return;
  }
  const size_t s = held.step;
  if (!r.reply && !r.result.kept.empty()) {  // kept before the run failed on (a download, say): nobody reads them
    std::vector<std::pair<uint32_t, uint64_t>> orphans;
    for (const auto& k : r.result.kept) orphans.emplace_back(device, k.handle);
    release(self, orphans);
  }
  if (st.instruments) {
    st.instruments->observe_workflow_step(run->config.name, run->config.steps[s].name,
                                          static_cast<double>(now_us(self) - run->submitted_us[s]) / 1e6);
  }
  if (!r.reply) {
    Error e = r.error ? *r.error : internal_error("the executor gave no answer");
    return fail_run(self, id, *run, e.with_context(step_what(*run, s)));
  }
  run->queue_us += r.reply->queue_us;
  run->compute_us += r.reply->compute_us;
  for (const auto& kept : run->plan.step_outputs(s)) {
    auto& slot = run->slots[kept.slot];
    auto k = std::find_if(r.result.kept.begin(), r.result.kept.end(),
                          [&](const gpu::KeptValue& v) { return v.name == kept.tensor; });
    if (k != r.result.kept.end()) {
      slot.kept = *k;
      slot.device = device;
    }
    auto h = std::find_if(r.reply->outputs.begin(), r.reply->outputs.end(),
                          [&](const tensor_msg& t) { return t.name == kept.tensor; });
    if (h != r.reply->outputs.end()) slot.host = std::move(*h);
  }
  std::vector<std::pair<uint32_t, uint64_t>> freed;
  for (size_t slot : run->progress.complete(s)) {
    auto& held_slot = run->slots[slot];
    if (held_slot.kept) freed.emplace_back(held_slot.device, held_slot.kept->handle);
    held_slot.kept.reset();
    held_slot.host.reset();
  }
  release(self, freed);
  if (run->progress.done()) return answer(self, id, *run);
  submit_ready(self, id, *run);
}

void workflow_step_failed(router_pointer self, router_state::Held& held, const Error& e) {
  auto& st = self->state;
  auto it = st.workflows.find(held.workflow);
  if (it == st.workflows.end()) return;
  auto run = it->second;
  --run->running;
  fail_run(self, it->first, *run, e.with_context(step_what(*run, held.step)));
  if (run->failed && run->running == 0) st.workflows.erase(held.workflow);
}

}  // namespace ember
