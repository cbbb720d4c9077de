// A workflow (issue 18; StreamBox's serverless inference workflow): a named DAG of models whose
// requests go in together and come back as one answer. It lives in the model repository beside the
// models, as <repository>/<name>/workflow.json:
//
//   {
//     "inputs":  ["image"],                                  // tensors a request brings
//     "steps": [
//       {"name": "detect", "model": "detector", "version": 1, // version: optional, 0 or absent = the newest
//        "inputs": {"input": "image"}},                      // the model's input <- a workflow input
//       {"name": "left",  "model": "classifier", "inputs": {"input": "detect.features"}},  // <- step.output
//       {"name": "right", "model": "classifier", "inputs": {"input": "detect.features"}},
//       {"name": "join",  "model": "merger", "inputs": {"a": "left.logits", "b": "right.logits"}}
//     ],
//     "outputs": {"label": "join.out", "features": "detect.features"}  // the answer's tensors
//   }
//
// Fan-out (one output read by several steps) and fan-in (a step reading several) are allowed; a
// cycle is not. Steps may be written in any order: parse_workflow orders them so that each comes
// after every step it reads (file order among independent ones). Every step must feed an output,
// directly or through later steps (a step nobody reads would only cost a device). Which model inputs
// and outputs exist is checked against the models themselves when the workflow is loaded, not here.
//
// Pure parsing and validation, like the rest of config/: anyone, any thread, never throws. Every
// error is invalid_argument naming the file and the field ("traffic/workflow.json: steps[1].inputs.input:
// ...").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.hpp"

namespace ember {

/// Where a tensor comes from: a workflow input (step empty) or output `tensor` of step `step`.
struct WorkflowSource {
  std::string step;  // empty: the workflow input named `tensor`
  std::string tensor;

  std::string to_string() const { return step.empty() ? tensor : step + "." + tensor; }
  friend bool operator==(const WorkflowSource& a, const WorkflowSource& b) {
    return a.step == b.step && a.tensor == b.tensor;
  }
};

struct WorkflowStep {
  std::string name;
  std::string model;
  uint32_t version = 0;  // 0: the newest version
  /// The model's input name and where it comes from, by name (a JSON object has no order).
  std::vector<std::pair<std::string, WorkflowSource>> inputs;
  /// Indices (into WorkflowConfig::steps) of the steps this one reads, ascending.
  std::vector<size_t> after;
};

struct WorkflowConfig {
  std::string name;
  std::vector<std::string> inputs;
  /// In an order where every step comes after the steps it reads.
  std::vector<WorkflowStep> steps;
  /// The answer's tensor names and where each comes from, by name.
  std::vector<std::pair<std::string, WorkflowSource>> outputs;
};

/// The file that makes a repository folder a workflow.
inline constexpr const char* kWorkflowFile = "workflow.json";

/// Bounds: a workflow is a handful of models, not a program.
inline constexpr size_t kMaxWorkflowSteps = 64;
inline constexpr size_t kMaxWorkflowTensors = 256;  // inputs, outputs, and inputs of one step

/// Parses and checks workflow.json's text; `name` is the workflow's (its directory's) name,
/// `source` names the file in errors.
Result<WorkflowConfig> parse_workflow(std::string_view text, std::string_view name, std::string_view source);

}  // namespace ember
