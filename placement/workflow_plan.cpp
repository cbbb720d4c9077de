// Slots, readers and the ready set of a workflow request (see workflow_plan.hpp).
#include "placement/workflow_plan.hpp"

#include <algorithm>
#include <map>

namespace ember {

WorkflowPlan::WorkflowPlan(const WorkflowConfig& config) : inputs_(config.steps.size()), outputs_(config.steps.size()) {
  std::map<std::pair<std::string, std::string>, size_t> slot_of;  // (step, tensor) -> slot
  for (const auto& name : config.inputs) slot_of[{std::string(), name}] = slot_of.size();
  std::map<std::string, size_t> step_index;
  for (size_t s = 0; s < config.steps.size(); ++s) step_index[config.steps[s].name] = s;
  auto slot = [&](const WorkflowSource& from) {
    auto [it, added] = slot_of.try_emplace({from.step, from.tensor}, slot_of.size());
    if (added) outputs_[step_index.at(from.step)].push_back({from.tensor, it->second});
    return it->second;
  };
  for (size_t s = 0; s < config.steps.size(); ++s) {
    for (const auto& [model_input, from] : config.steps[s].inputs) inputs_[s].push_back({model_input, slot(from)});
  }
  for (const auto& [name, from] : config.outputs) answer_.push_back({name, slot(from)});
  readers_.assign(slot_of.size(), 0);
  answered_.assign(slot_of.size(), false);
  for (const auto& bindings : inputs_) {
    std::vector<size_t> read;
    for (const auto& b : bindings) read.push_back(b.slot);
    std::sort(read.begin(), read.end());
    read.erase(std::unique(read.begin(), read.end()), read.end());
    for (size_t r : read) ++readers_[r];
  }
  for (const auto& a : answer_) answered_[a.slot] = true;
}

WorkflowProgress::WorkflowProgress(const WorkflowPlan& plan)
    : plan_(plan), filled_(plan.slots(), false), readers_left_(plan.slots(), 0), state_(plan.steps(), 0) {
  for (size_t slot = 0; slot < plan.slots(); ++slot) readers_left_[slot] = plan.readers(slot);
  for (size_t slot = 0; slot < plan.slots(); ++slot) {
    // Workflow inputs are the slots no step produces.
    bool produced = false;
    for (size_t s = 0; s < plan.steps() && !produced; ++s) {
      for (const auto& k : plan.step_outputs(s)) produced |= k.slot == slot;
    }
    filled_[slot] = !produced;
  }
}

std::vector<size_t> WorkflowProgress::take_ready() {
  std::vector<size_t> ready;
  for (size_t s = 0; s < plan_.steps(); ++s) {
    if (state_[s] != 0) continue;
    const auto& in = plan_.step_inputs(s);
    if (std::all_of(in.begin(), in.end(), [&](const WorkflowPlan::Binding& b) { return filled_[b.slot]; })) {
      state_[s] = 1;
      ready.push_back(s);
    }
  }
  return ready;
}

std::vector<size_t> WorkflowProgress::complete(size_t step) {
  std::vector<size_t> freed;
  if (step >= state_.size() || state_[step] != 1) return freed;
  state_[step] = 2;
  ++completed_;
  for (const auto& k : plan_.step_outputs(step)) filled_[k.slot] = true;
  std::vector<size_t> read;
  for (const auto& b : plan_.step_inputs(step)) read.push_back(b.slot);
  std::sort(read.begin(), read.end());
  read.erase(std::unique(read.begin(), read.end()), read.end());
  for (size_t slot : read) {
    if (--readers_left_[slot] == 0 && !plan_.answered(slot)) {
      filled_[slot] = false;
      freed.push_back(slot);
    }
  }
  return freed;
}

std::vector<size_t> WorkflowProgress::held_slots() const {
  std::vector<size_t> held;
  for (size_t slot = 0; slot < filled_.size(); ++slot) {
    if (filled_[slot]) held.push_back(slot);
  }
  return held;
}

Result<std::shared_ptr<const ParsedWorkflow>> WorkflowCache::get(const std::string& name, const std::string& json) {
  auto it = held_.find(name);
  if (it != held_.end() && it->second->json == json) return it->second;
  auto config = parse_workflow(json, name, name + "/" + kWorkflowFile);
  if (!config.ok()) {
    held_.erase(name);
    return config.error();
  }
  auto parsed = std::make_shared<const ParsedWorkflow>(json, std::move(*config));
  held_[name] = parsed;
  return parsed;
}

}  // namespace ember
