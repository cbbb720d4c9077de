// WorkflowRuns: the workflow requests a late-binding node runs itself (issue 18, StreamBox §3), as
// a plain class beside the router. Every step is a late-binding request of its model, which the
// router submits to its SwapController like any other (so steps of one request on different models
// may run at once on different devices, and a step waits for its device as a request does),
// preferring the device holding most of its kept inputs (SwapController::submit's `prefer`). What
// a later step reads stays on the device that computed it (the executor keeps it by handle), and
// the step reads it there without a copy when it runs on that device; on another device of the node
// the router copies it over the devices' link first (node_router_late.cpp's lease_then_launch).
// Only what the answer reads comes back to the host. A value is released on its device as soon as
// the last step reading it answered (WorkflowProgress); a failed request releases everything it
// holds, and steps still running release what they keep when they answer.
//
// Owner: the node_router (node_router_workflow.cpp), on its actor only. Plain C++: no CAF, no clock
// (now_us is the router's, passed in). Calls come in as events (a request, a step's answer, a step
// that could not run); out come orders, values the router carries out: steps to submit, kept
// values to release per device. A run's end (its answer or its error) goes to the Answer it was
// started with, exactly once, and counts in the node's workflow metrics.
//
// A run:  start ──▶ running (steps submitted as they become ready) ──last step answered──▶ answered
//                         └──a step failed, or could not run──▶ failed (answered with the error) ──▶
//                             gone once its steps still running have answered (their kept values released)
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/inference_messages.hpp"
#include "base/status.hpp"
#include "gpu/executor.hpp"
#include "placement/workflow_plan.hpp"

namespace ember {

class NodeInstruments;

class WorkflowRuns {
 public:
  /// An input a step reads where an earlier step kept it: named as the step model's input.
  struct KeptInput {
    std::string name;
    gpu::KeptValue value;
    uint32_t device = 0;
  };
  /// A step to submit now, as a late-binding request of its model.
  struct Step {
    uint64_t run = 0;
    size_t step = 0;
    /// The step's model, the inputs that come from the host, the outputs the answer reads back.
    std::shared_ptr<const infer_request> request;
    std::vector<KeptInput> device_inputs;
    /// Outputs to keep on the device for later steps.
    std::vector<std::string> keep;
    /// The device holding most of its kept inputs' bytes.
    std::optional<uint32_t> prefer;
  };
  /// Kept values to drop on one device.
  struct Release {
    uint32_t device = 0;
    std::vector<uint64_t> handles;
  };
  struct Orders {
    std::vector<Step> submit;
    std::vector<Release> release;  // one per device, by device
  };
  /// What a step's executor answered: the model's reply or why it failed, and what it kept.
  struct StepAnswer {
    std::optional<infer_reply> reply;
    std::optional<Error> error;
    std::vector<gpu::KeptValue> kept;
  };
  /// Hears a run's end once: its answer, or its error.
  using Answer = std::function<void(Result<infer_reply>)>;

  /// `node` names the node in answers; `instruments` (may be null) outlives this object.
  WorkflowRuns(std::string node, NodeInstruments* instruments) : node_(std::move(node)), instruments_(instruments) {}

  /// The workflow `name`'s `json`, parsed once while its text stays the same (parse_workflow's errors).
  Result<std::shared_ptr<const ParsedWorkflow>> parse(const std::string& name, const std::string& json) {
    return parsed_.get(name, json);
  }
  /// A request of `workflow` (its steps' models in `models`, one per step, ready on the node: the
  /// router checked) with `request`'s inputs, named as the workflow's: each of its inputs once, and
  /// no other. invalid_argument otherwise, and `answer` is not called. The steps ready at once.
  Result<Orders> start(std::shared_ptr<const ParsedWorkflow> workflow, std::vector<model_key> models,
                       infer_request request, Answer answer, int64_t now_us);
  /// Step `step` of run `run` answered (or failed: answer.error) on `device`.
  Orders step_done(uint64_t run, size_t step, uint32_t device, StepAnswer answer, int64_t now_us);
  /// Step `step` of run `run` could not run (refused at submission, its model unloaded, the device
  /// holding its inputs faulted): the run fails with `e`, in the step's words.
  Orders step_failed(uint64_t run, size_t step, const Error& e);
  /// Every run fails with `e` (the router is going away).
  Orders fail_all(const Error& e);

  /// Whether run `run` failed already (or is gone): its ready steps are not submitted.
  bool failed(uint64_t run) const;
  /// The workflow run `run` is a request of ("" when gone): the hand-off metrics' label.
  std::string workflow_of(uint64_t run) const;
  size_t size() const { return runs_.size(); }

 private:
  struct Run;
  /// Submits every step of `run` that became ready.
  void submit_ready(uint64_t id, Run& run, int64_t now_us, Orders& out);
  void fail(uint64_t id, Run& run, const Error& e, Orders& out);
  void answer(uint64_t id, Run& run, Orders& out);
  /// Everything the run still keeps on devices, released.
  void release_all(Run& run, Orders& out);
  static void release(std::vector<std::pair<uint32_t, uint64_t>> values, Orders& out);
  static std::string step_what(const Run& run, size_t s);

  const std::string node_;
  NodeInstruments* const instruments_;
  WorkflowCache parsed_;
  std::map<uint64_t, std::shared_ptr<Run>> runs_;
  uint64_t next_run_ = 1;
};

}  // namespace ember
