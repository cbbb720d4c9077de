// WorkflowPlan and WorkflowProgress (issue 18): how one request moves through a workflow
// (config/workflow_config.hpp), without running anything. Pure, like the rest of placement/: the
// caller (a gateway or a node) runs the steps, keeps the tensors and frees them when told.
//
// Tensors live in numbered slots: slot i < inputs.size() is workflow input i; after those, one slot
// for each step output that something reads (a later step or the workflow's answer). A step output
// nobody reads gets no slot: the caller drops it as it arrives.
//
// WorkflowProgress keeps one request's state. Steps become ready once every slot they read is
// filled, so independent steps (a fan-out) are ready together and may run at once. Each slot
// counts its readers; when the last reading step completes, complete() returns the slot to free,
// so an intermediate lives exactly as long as a step still needs it (a workflow output lives to the
// end). A failed step fails the request: the caller frees every slot it holds (held_slots()).
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.hpp"
#include "config/workflow_config.hpp"

namespace ember {

class WorkflowPlan {
 public:
  /// One model input of a step and the slot it reads.
  struct Binding {
    std::string model_input;
    size_t slot = 0;
  };
  /// One tensor the plan keeps: its name where it comes from (a step's output, or the workflow's).
  struct Kept {
    std::string tensor;
    size_t slot = 0;
  };

  /// `config` as parse_workflow returns it (validated, steps in dependency order).
  explicit WorkflowPlan(const WorkflowConfig& config);

  size_t slots() const { return readers_.size(); }
  size_t steps() const { return inputs_.size(); }
  const std::vector<Binding>& step_inputs(size_t step) const { return inputs_[step]; }
  /// The outputs of `step` that something reads, and their slots.
  const std::vector<Kept>& step_outputs(size_t step) const { return outputs_[step]; }
  /// The answer: each workflow output's name and the slot holding it.
  const std::vector<Kept>& answer() const { return answer_; }
  /// Steps reading `slot` (each once, however many of its inputs read it).
  size_t readers(size_t slot) const { return readers_[slot]; }
  /// Whether the answer reads `slot` (then it is never freed before the end).
  bool answered(size_t slot) const { return answered_[slot]; }

 private:
  std::vector<std::vector<Binding>> inputs_;
  std::vector<std::vector<Kept>> outputs_;
  std::vector<Kept> answer_;
  std::vector<size_t> readers_;
  std::vector<bool> answered_;
};

class WorkflowProgress {
 public:
  /// The workflow inputs' slots are filled (the request brought them).
  explicit WorkflowProgress(const WorkflowPlan& plan);

  /// Steps ready to run and not yet taken, in plan order; they count as running from now on.
  std::vector<size_t> take_ready();
  /// Step `step` (running) answered: its kept outputs fill their slots. Returns the slots that no
  /// step still to complete reads and the answer does not read: free them now.
  std::vector<size_t> complete(size_t step);
  /// Every step completed: the answer's slots are filled.
  bool done() const { return completed_ == plan_.steps(); }
  /// Slots filled and not yet freed (what a failed request must free).
  std::vector<size_t> held_slots() const;

 private:
  const WorkflowPlan& plan_;
  std::vector<bool> filled_;
  std::vector<size_t> readers_left_;
  std::vector<int> state_;  // per step: 0 waiting, 1 running, 2 completed
  size_t completed_ = 0;
};

/// A workflow's text, parsed and planned once.
struct ParsedWorkflow {
  explicit ParsedWorkflow(std::string text, WorkflowConfig c)
      : json(std::move(text)), config(std::move(c)), plan(config) {}
  ParsedWorkflow(const ParsedWorkflow&) = delete;
  ParsedWorkflow& operator=(const ParsedWorkflow&) = delete;
  const std::string json;
  const WorkflowConfig config;
  const WorkflowPlan plan;  // reads config: never moved (held by pointer)
};

/// Each workflow's last text parsed, by name, so that requests repeating a workflow's text (a node
/// gets it with every request) parse and plan it once. One owner (not thread-safe); bounded by the
/// repository's workflow names.
class WorkflowCache {
 public:
  /// The parsed `json` of workflow `name`: the one held while the text is the same, else parsed now
  /// (parse_workflow's errors).
  Result<std::shared_ptr<const ParsedWorkflow>> get(const std::string& name, const std::string& json);

 private:
  std::map<std::string, std::shared_ptr<const ParsedWorkflow>> held_;
};

/// One request through a workflow on the calling thread, a step at a time in ready order (the
/// host hand-off: every intermediate is a host tensor; device-resident hand-off is the server's).
/// `inputs` are the request's tensors by name, each workflow input exactly once. `run_step(step,
/// inputs)` runs step `step`'s model on `inputs` (named as the model's inputs) and returns its
/// outputs by name. Each intermediate is dropped once its last reader has run. Returns the answer,
/// named as the workflow's outputs. Errors name the input, or the step and its model: a missing or
/// unknown input, an output the model does not give, or the step's own error. Tensor: any type with
/// a std::string member `name`, copyable (host tensors share their buffers).
template <class Tensor, class RunStep>
Result<std::vector<Tensor>> run_workflow(const WorkflowConfig& config, const WorkflowPlan& plan,
                                         std::vector<Tensor> inputs, RunStep&& run_step) {
  std::vector<std::optional<Tensor>> slots(plan.slots());
  std::string takes;
  for (const auto& name : config.inputs) takes += (takes.empty() ? "" : ", ") + name;
  for (auto& t : inputs) {
    const auto at = std::find(config.inputs.begin(), config.inputs.end(), t.name);
    if (at == config.inputs.end()) {
      return invalid_argument("input '" + t.name + "' is not one of workflow '" + config.name +
                              "''s (it takes: " + takes + ")");
    }
    auto& slot = slots[static_cast<size_t>(at - config.inputs.begin())];
    if (slot) return invalid_argument("input '" + t.name + "' is given twice");
    slot = std::move(t);
  }
  for (size_t i = 0; i < config.inputs.size(); ++i) {
    if (!slots[i]) {
      return invalid_argument("workflow '" + config.name + "' takes input '" + config.inputs[i] +
                              "', which the request does not give");
    }
  }
  WorkflowProgress progress(plan);
  while (!progress.done()) {
    const std::vector<size_t> ready = progress.take_ready();
    if (ready.empty())
      return internal_error("workflow '" + config.name + "': no step can run");  // parse_workflow forbids it
    for (size_t s : ready) {
      const WorkflowStep& step = config.steps[s];
      const std::string what = "step '" + step.name + "' (model " + step.model +
                               (step.version ? " version " + std::to_string(step.version) : "") + ")";
      std::vector<Tensor> given;
      for (const auto& b : plan.step_inputs(s)) {
        Tensor t = *slots[b.slot];
        t.name = b.model_input;
        given.push_back(std::move(t));
      }
      Result<std::vector<Tensor>> out = run_step(s, std::move(given));
      if (!out.ok()) return out.error().with_context(what);
      for (const auto& kept : plan.step_outputs(s)) {
        auto it = std::find_if(out->begin(), out->end(), [&](const Tensor& t) { return t.name == kept.tensor; });
        if (it == out->end()) {
          std::string gives;
          for (const auto& t : *out) gives += (gives.empty() ? "" : ", ") + t.name;
          return invalid_argument(what + ": the model gives no output '" + kept.tensor + "' (it gives: " + gives + ")");
        }
        slots[kept.slot] = std::move(*it);
      }
      for (size_t freed : progress.complete(s)) slots[freed].reset();
    }
  }
  std::vector<Tensor> answer;
  for (const auto& a : plan.answer()) {
    Tensor t = *slots[a.slot];
    t.name = a.tensor;
    answer.push_back(std::move(t));
  }
  return answer;
}

}  // namespace ember
