#include "actors/node/engine/engine_gate.hpp"

#include "actors/node/engine/executor_engine.hpp"

namespace ember {

EngineGate::Entry::Entry(EngineGate* gate) : gate_(gate), engine_(gate ? gate->enter() : nullptr) {}

EngineGate::Entry::~Entry() {
  if (engine_) gate_->leave();
}

ExecutorEngine* EngineGate::enter() {
  std::lock_guard lock(mu_);
  if (engine_) ++inside_;
  return engine_;
}

void EngineGate::leave() {
  bool last = false;
  {
    std::lock_guard lock(mu_);
    last = --inside_ == 0 && !engine_;
  }
  if (last) left_.notify_all();
}

void EngineGate::close() {
  std::unique_lock lock(mu_);
  engine_ = nullptr;
  left_.wait(lock, [&] { return inside_ == 0; });
}

bool EngineGate::open() const {
  std::lock_guard lock(mu_);
  return engine_ != nullptr;
}

std::optional<InferResult> EngineGate::run_here(const model_key& key, const InlineInputs& inputs) {
  Entry engine(this);
  if (!engine) return std::nullopt;
  return engine->run_here(key, inputs);
}

std::optional<Result<std::vector<gpu::HostTensor>>> EngineGate::run_workflow_here(
    const WorkflowConfig& config, const WorkflowPlan& plan, const std::vector<model_key>& models,
    const InlineInputs& inputs, gpu::DeviceWorkflowStats* stats) {
  Entry engine(this);
  if (!engine) return std::nullopt;
  return engine->run_workflow_here(config, plan, models, inputs, stats);
}

bool EngineGate::holds(const model_key& key) {
  Entry engine(this);
  return engine && engine->holds(key);
}

std::optional<EngineMemory> EngineGate::memory_use() {
  Entry engine(this);
  if (!engine) return std::nullopt;
  return engine->memory_use();
}

std::optional<engine::GenerationsStats> EngineGate::generation_stats() {
  Entry engine(this);
  if (!engine) return std::nullopt;
  return engine->generation_stats();
}

void NodeEngines::attach(uint32_t ordinal, std::shared_ptr<EngineGate> gate) {
  std::lock_guard lock(mu_);
  gates_[ordinal] = std::move(gate);
}

std::vector<std::shared_ptr<EngineGate>> NodeEngines::others(const EngineGate* self) const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<EngineGate>> out;
  for (const auto& [ordinal, gate] : gates_) {
    if (gate.get() != self) out.push_back(gate);
  }
  return out;
}

}  // namespace ember
