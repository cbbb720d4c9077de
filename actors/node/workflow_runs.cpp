#include "actors/node/workflow_runs.hpp"

#include <algorithm>

#include "actors/node/node_instruments.hpp"

namespace ember {

/// A workflow request running here: its steps are late-binding requests of their models, its
/// intermediates kept on the devices that computed them.
struct WorkflowRuns::Run {
  Run(std::shared_ptr<const ParsedWorkflow> p, std::vector<model_key> m, Answer a)
      : parsed(std::move(p)),
        config(parsed->config),
        plan(parsed->plan),
        progress(plan),
        models(std::move(m)),
        answer(std::move(a)),
        slots(plan.slots()),
        submitted_us(plan.steps(), 0) {}
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  std::shared_ptr<const ParsedWorkflow> parsed;  // shared with the cache and other runs
  const WorkflowConfig& config;
  const WorkflowPlan& plan;
  WorkflowProgress progress;      // reads plan: never moved (held by pointer)
  std::vector<model_key> models;  // per step
  Answer answer;
  std::string id;                  // the client's request id
  std::vector<std::string> asked;  // outputs asked (empty: all)
  /// A slot holds a host tensor (a request input, or an output the answer reads) and/or a value
  /// kept on device `device` (an output a later step reads).
  struct Slot {
    std::optional<tensor_msg> host;
    std::optional<gpu::KeptValue> kept;
    uint32_t device = 0;
  };
  std::vector<Slot> slots;
  size_t running = 0;                 // steps submitted and not answered
  std::vector<int64_t> submitted_us;  // per step, when it was submitted
  bool failed = false;
  uint64_t queue_us = 0, compute_us = 0;
};

std::string WorkflowRuns::step_what(const Run& run, size_t s) {
  const WorkflowStep& step = run.config.steps[s];
  return "step '" + step.name + "' (model " + step.model +
         (step.version ? " version " + std::to_string(step.version) : std::string()) + ")";
}

void WorkflowRuns::release(std::vector<std::pair<uint32_t, uint64_t>> values, Orders& out) {
  std::map<uint32_t, std::vector<uint64_t>> by_device;
  for (const auto& [device, handle] : values) by_device[device].push_back(handle);
  for (auto& [device, handles] : by_device) out.release.push_back({device, std::move(handles)});
}

void WorkflowRuns::release_all(Run& run, Orders& out) {
  std::vector<std::pair<uint32_t, uint64_t>> values;
  for (auto& slot : run.slots) {
    if (slot.kept) values.emplace_back(slot.device, slot.kept->handle);
    slot.kept.reset();
    slot.host.reset();
  }
  release(std::move(values), out);
}

void WorkflowRuns::fail(uint64_t id, Run& run, const Error& e, Orders& out) {
  if (run.failed) return;
  run.failed = true;
  release_all(run, out);
  if (instruments_) instruments_->count_workflow(run.config.name, std::string(to_string(e.code())));
  run.answer(e);
  if (run.running == 0) runs_.erase(id);
}

void WorkflowRuns::answer(uint64_t id, Run& run, Orders& out) {
  infer_reply reply;
  reply.model = {run.config.name, 1};
  reply.id = run.id;
  reply.node = node_;
  reply.queue_us = run.queue_us;
  reply.compute_us = run.compute_us;
  for (const auto& a : run.plan.answer()) {
    if (!run.asked.empty() && std::find(run.asked.begin(), run.asked.end(), a.tensor) == run.asked.end()) continue;
    auto& slot = run.slots[a.slot];
    if (!slot.host) return fail(id, run, internal_error("output '" + a.tensor + "' did not come back"), out);
    reply.outputs.push_back(*slot.host);
    reply.outputs.back().name = a.tensor;
  }
  release_all(run, out);
  if (instruments_) instruments_->count_workflow(run.config.name, "success");
  run.answer(std::move(reply));
  runs_.erase(id);
}

void WorkflowRuns::submit_ready(uint64_t id, Run& run, int64_t now_us, Orders& out) {
  for (size_t s : run.progress.take_ready()) {
    Step step;
    step.run = id;
    step.step = s;
    infer_request req;
    req.model = run.models[s];
    req.id = run.id;
    for (const auto& b : run.plan.step_inputs(s)) {
      const auto& slot = run.slots[b.slot];
      if (slot.kept) {
        step.device_inputs.push_back({b.model_input, *slot.kept, slot.device});
      } else if (slot.host) {
        req.inputs.push_back(*slot.host);
        req.inputs.back().name = b.model_input;
      }
    }
    // Outputs a later step reads stay on the device; those the answer reads come back.
    for (const auto& kept : run.plan.step_outputs(s)) {
      if (run.plan.readers(kept.slot) > 0) step.keep.push_back(kept.tensor);
      if (run.plan.answered(kept.slot)) req.outputs.push_back(kept.tensor);
    }
    step.request = std::make_shared<const infer_request>(std::move(req));
    run.submitted_us[s] = now_us;
    ++run.running;
    // It would rather run where most of its kept inputs are (no copy there).
    std::map<uint32_t, uint64_t> bytes_on;
    for (const auto& in : step.device_inputs) bytes_on[in.device] += in.value.desc.bytes();
    for (const auto& [device, bytes] : bytes_on) {
      if (!step.prefer || bytes > bytes_on[*step.prefer]) step.prefer = device;
    }
    out.submit.push_back(std::move(step));
  }
}

Result<WorkflowRuns::Orders> WorkflowRuns::start(std::shared_ptr<const ParsedWorkflow> workflow,
                                                 std::vector<model_key> models, infer_request request, Answer answer,
                                                 int64_t now_us) {
  const WorkflowConfig& config = workflow->config;
  if (models.size() != config.steps.size()) {
    return invalid_argument("workflow '" + config.name + "': " + std::to_string(models.size()) + " models for " +
                            std::to_string(config.steps.size()) + " steps");
  }
  auto run = std::make_shared<Run>(std::move(workflow), std::move(models), std::move(answer));
  run->id = request.id;
  run->asked = request.outputs;
  // The request's tensors fill the input slots (each once, named as the workflow's inputs).
  std::string takes;
  for (const auto& n : config.inputs) takes += (takes.empty() ? "" : ", ") + n;
  for (auto& t : request.inputs) {
    auto at = std::find(config.inputs.begin(), config.inputs.end(), t.name);
    if (at == config.inputs.end()) {
      return invalid_argument("input '" + t.name + "' is not one of workflow '" + config.name +
                              "''s (it takes: " + takes + ")");
    }
    auto& slot = run->slots[static_cast<size_t>(at - config.inputs.begin())];
    if (slot.host) return invalid_argument("input '" + t.name + "' is given twice");
    slot.host = std::move(t);
  }
  for (size_t i = 0; i < config.inputs.size(); ++i) {
    if (!run->slots[i].host) {
      return invalid_argument("workflow '" + config.name + "' takes input '" + config.inputs[i] +
                              "', which the request does not give");
    }
  }
  const uint64_t id = next_run_++;
  Orders out;
  submit_ready(id, *runs_.emplace(id, std::move(run)).first->second, now_us, out);
  return out;
}

WorkflowRuns::Orders WorkflowRuns::step_done(uint64_t id, size_t s, uint32_t device, StepAnswer r, int64_t now_us) {
  Orders out;
  std::vector<std::pair<uint32_t, uint64_t>> orphans;
  for (const auto& k : r.kept) orphans.emplace_back(device, k.handle);
  auto it = runs_.find(id);
  if (it == runs_.end()) {
    release(std::move(orphans), out);
    return out;
  }
  auto run = it->second;  // keeps it alive while it may leave the map
  --run->running;
  if (run->failed) {
    release(std::move(orphans), out);
    if (run->running == 0) runs_.erase(id);
    return out;
  }
  // Kept before the run failed on (a download, say): nobody reads them.
  if (!r.reply) release(std::move(orphans), out);
  if (instruments_) {
    instruments_->observe_workflow_step(run->config.name, run->config.steps[s].name,
                                        static_cast<double>(now_us - run->submitted_us[s]) / 1e6);
  }
  if (!r.reply) {
    Error e = r.error ? *r.error : internal_error("the executor gave no answer");
    fail(id, *run, e.with_context(step_what(*run, s)), out);
    return out;
  }
  run->queue_us += r.reply->queue_us;
  run->compute_us += r.reply->compute_us;
  for (const auto& kept : run->plan.step_outputs(s)) {
    auto& slot = run->slots[kept.slot];
    auto k = std::find_if(r.kept.begin(), r.kept.end(), [&](const gpu::KeptValue& v) { return v.name == kept.tensor; });
    if (k != r.kept.end()) {
      slot.kept = *k;
      slot.device = device;
    }
    auto h = std::find_if(r.reply->outputs.begin(), r.reply->outputs.end(),
                          [&](const tensor_msg& t) { return t.name == kept.tensor; });
    if (h != r.reply->outputs.end()) slot.host = std::move(*h);
  }
  std::vector<std::pair<uint32_t, uint64_t>> freed;
  for (size_t slot : run->progress.complete(s)) {
    auto& held = run->slots[slot];
    if (held.kept) freed.emplace_back(held.device, held.kept->handle);
    held.kept.reset();
    held.host.reset();
  }
  release(std::move(freed), out);
  if (run->progress.done()) {
    answer(id, *run, out);
  } else {
    submit_ready(id, *run, now_us, out);
  }
  return out;
}

WorkflowRuns::Orders WorkflowRuns::step_failed(uint64_t id, size_t s, const Error& e) {
  Orders out;
  auto it = runs_.find(id);
  if (it == runs_.end()) return out;
  auto run = it->second;
  --run->running;
  fail(id, *run, e.with_context(step_what(*run, s)), out);
  if (run->failed && run->running == 0) runs_.erase(id);
  return out;
}

WorkflowRuns::Orders WorkflowRuns::fail_all(const Error& e) {
  Orders out;
  auto runs = std::move(runs_);
  runs_.clear();
  for (auto& [id, run] : runs) {
    if (run->failed) continue;
    run->failed = true;
    release_all(*run, out);
    run->answer(e);
  }
  return out;
}

bool WorkflowRuns::failed(uint64_t id) const {
  auto it = runs_.find(id);
  return it == runs_.end() || it->second->failed;
}

std::string WorkflowRuns::workflow_of(uint64_t id) const {
  auto it = runs_.find(id);
  return it == runs_.end() ? std::string() : it->second->config.name;
}

}  // namespace ember
