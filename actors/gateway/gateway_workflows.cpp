// Workflows at the gateway (gateway_client.hpp's "workflows" section): parsing a workflow once per
// change (WorkflowView::of), its readiness and signature from the routing snapshot, and a request run
// step by step through GatewayClient::infer with the host hand-off of placement/workflow_plan.hpp.
#include <algorithm>
#include <chrono>

#include "actors/gateway/gateway_client.hpp"
#include "actors/gateway/gateway_instruments.hpp"

namespace ember {

std::shared_ptr<const WorkflowView> WorkflowView::of(workflow_entry e) {
  auto v = std::make_shared<WorkflowView>();
  if (e.error.empty()) {
    auto parsed = parse_workflow(e.json, e.name, e.name + "/" + kWorkflowFile);
    if (parsed.ok()) {
      v->config = std::move(*parsed);
      v->plan.emplace(*v->config);
    } else {
      e.error = parsed.error().message();
    }
  }
  v->entry = std::move(e);
  return v;
}

namespace {

using Clock = std::chrono::steady_clock;

std::string named(const WorkflowStep& step) {
  return step.version == 0 ? step.model : step.model + " version " + std::to_string(step.version);
}

std::string joined(const std::vector<std::pair<std::string, WorkflowSource>>& tensors) {
  std::string out;
  for (const auto& [name, source] : tensors) out += (out.empty() ? "" : ", ") + name;
  return out;
}

/// The steps' models the snapshot does not have, as an error (OK when it has them all).
Status check_models(const WorkflowConfig& config, const RoutingSnapshot& snap) {
  for (const auto& step : config.steps) {
    if (!snap.find(step.model, step.version)) {
      return invalid_argument("workflow '" + config.name + "' cannot run: step '" + step.name + "' names model " +
                              named(step) + ", which the repository does not have");
    }
  }
  return Status::OK();
}

/// The spec of tensor `tensor` among `specs`, or null.
const gpu::TensorSpec* spec_named(const std::vector<gpu::TensorSpec>& specs, const std::string& tensor) {
  auto it = std::find_if(specs.begin(), specs.end(), [&](const gpu::TensorSpec& s) { return s.name == tensor; });
  return it == specs.end() ? nullptr : &*it;
}

}  // namespace

Result<std::shared_ptr<const WorkflowView>> GatewayClient::workflow(const std::string& name) const {
  auto snap = view_->snapshot();
  auto it = snap->workflows.find(name);
  if (it == snap->workflows.end()) return not_found("unknown workflow '" + name + "'");
  return it->second;
}

Status GatewayClient::workflow_ready(const WorkflowView& w) const {
  if (!w.config) return invalid_argument("workflow '" + w.entry.name + "' cannot run: " + w.entry.error);
  auto snap = view_->snapshot();
  EMBER_RETURN_IF_ERROR(check_models(*w.config, *snap));
  for (const auto& step : w.config->steps) {
    const ModelView* m = snap->find(step.model, step.version);
    if (!m->ready) {
      return unavailable("step '" + step.name + "': model " + named(step) + " has no ready replica" +
                         (m->state.reason.empty() ? "" : " (" + m->state.reason + ")"));
    }
  }
  return Status::OK();
}

ModelSignature GatewayClient::workflow_signature(const WorkflowView& w) const {
  ModelSignature out;
  if (!w.config) return out;
  auto snap = view_->snapshot();
  auto signature_of = [&](const WorkflowStep& step) -> const ModelSignature* {
    const ModelView* m = snap->find(step.model, step.version);
    return m && m->signature ? m->signature.get() : nullptr;
  };
  // A workflow input is typed as the first model input it feeds.
  for (const auto& input : w.config->inputs) {
    for (const auto& step : w.config->steps) {
      const ModelSignature* sig = signature_of(step);
      auto reads = std::find_if(step.inputs.begin(), step.inputs.end(),
                                [&](const auto& in) { return in.second.step.empty() && in.second.tensor == input; });
      const gpu::TensorSpec* spec = sig && reads != step.inputs.end() ? spec_named(sig->inputs, reads->first) : nullptr;
      if (!spec) continue;
      out.inputs.push_back(*spec);
      out.inputs.back().name = input;
      break;
    }
  }
  // An output is typed as the model output it is.
  for (const auto& [name, source] : w.config->outputs) {
    auto step = std::find_if(w.config->steps.begin(), w.config->steps.end(),
                             [&](const WorkflowStep& s) { return s.name == source.step; });
    const ModelSignature* sig = step == w.config->steps.end() ? nullptr : signature_of(*step);
    const gpu::TensorSpec* spec = sig ? spec_named(sig->outputs, source.tensor) : nullptr;
    if (!spec) continue;
    out.outputs.push_back(*spec);
    out.outputs.back().name = name;
  }
  return out;
}

Result<infer_reply> GatewayClient::infer_workflow(const std::string& name, infer_request req,
                                                  std::optional<std::chrono::microseconds> within) {
  const auto started = Clock::now();
  auto w = workflow(name);
  Result<infer_reply> out = w.ok() ? run_workflow_request(**w, std::move(req), within) : Result<infer_reply>(w.error());
  if (instruments_ && w.ok()) {
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    instruments_->count_workflow(name, out.ok() ? "success" : std::string(to_string(out.error().code())), seconds);
  }
  return out;
}

void GatewayClient::count_invalid_workflow(const std::string& name) {
  if (instruments_ && view_->snapshot()->workflows.count(name))
    instruments_->count_workflow(name, "invalid_argument", 0);
}

Result<infer_reply> GatewayClient::run_workflow_request(const WorkflowView& w, infer_request req,
                                                        std::optional<std::chrono::microseconds> within) {
  if (!w.config) return invalid_argument("workflow '" + w.entry.name + "' cannot run: " + w.entry.error);
  const WorkflowConfig& config = *w.config;
  const WorkflowPlan& plan = *w.plan;
  for (const auto& asked : req.outputs) {
    if (std::none_of(config.outputs.begin(), config.outputs.end(), [&](const auto& o) { return o.first == asked; })) {
      return invalid_argument("workflow '" + config.name + "' has no output '" + asked +
                              "' (it gives: " + joined(config.outputs) + ")");
    }
  }
  auto snap = view_->snapshot();
  EMBER_RETURN_IF_ERROR(check_models(config, *snap));
  const auto deadline = within ? Clock::now() + *within : Clock::time_point::max();
  // A node of this process holding every step's model runs them itself, handing on its devices.
  {
    const auto wait = within ? std::min(*within, std::chrono::microseconds(config_.request_timeout_us))
                             : std::chrono::microseconds(config_.request_timeout_us);
    if (auto ran = workflow_on_node(w, *snap, req, wait)) return std::move(*ran);  // the outputs asked only
  }

  // Which step fills each slot (inputs: none), and where each step's answer came from: in this
  // process (a node of `ember serve`) or over the network.
  std::vector<size_t> producer(plan.slots(), plan.steps());
  for (size_t s = 0; s < plan.steps(); ++s) {
    for (const auto& kept : plan.step_outputs(s)) producer[kept.slot] = s;
  }
  std::vector<const char*> came_by(plan.steps(), "host");
  auto local_node = [&](const std::string& node) {
    auto now = view_->snapshot();  // a step's cold start may have added its node's replica
    for (const auto& [model, versions] : now->models) {
      for (const auto& [v, view] : versions) {
        for (const auto& r : view.replicas) {
          if (r.node == node) return r.router.node() == sys_.node();
        }
      }
    }
    return false;
  };

  infer_reply answer;
  answer.model = {config.name, 1};
  answer.id = req.id;
  auto ran = run_workflow(config, plan, std::move(req.inputs), [&](size_t s, std::vector<tensor_msg> given) {
    const WorkflowStep& step = config.steps[s];
    const auto& bindings = plan.step_inputs(s);
    for (size_t i = 0; i < bindings.size() && instruments_; ++i) {
      const size_t from = producer[bindings[i].slot];
      if (from < plan.steps()) instruments_->count_handoff(config.name, came_by[from], given[i].data.size());
    }
    infer_request r;
    r.model = {step.model, step.version};
    r.id = answer.id;
    r.inputs = std::move(given);
    for (const auto& kept : plan.step_outputs(s)) r.outputs.push_back(kept.tensor);
    std::optional<std::chrono::microseconds> left;
    const auto sent = Clock::now();
    if (within) {
      left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - sent);
      if (left->count() <= 0) {
        return Result<std::vector<tensor_msg>>(deadline_exceeded("the client's deadline passed before the step ran"));
      }
    }
    auto reply = infer(std::move(r), left);
    if (instruments_) {
      instruments_->observe_workflow_step(config.name, step.name,
                                          std::chrono::duration<double>(Clock::now() - sent).count());
    }
    if (!reply.ok()) return Result<std::vector<tensor_msg>>(reply.error());
    answer.queue_us += reply->queue_us;
    answer.compute_us += reply->compute_us;
    came_by[s] = local_node(reply->node) ? "host" : "network";
    return Result<std::vector<tensor_msg>>(std::move(reply->outputs));
  });
  if (!ran.ok()) return ran.error();
  for (auto& t : *ran) {
    if (req.outputs.empty() || std::count(req.outputs.begin(), req.outputs.end(), t.name)) {
      answer.outputs.push_back(std::move(t));
    }
  }
  return answer;
}

}  // namespace ember
