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

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

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

}  // namespace ember
