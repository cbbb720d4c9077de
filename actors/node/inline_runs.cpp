#include "actors/node/inline_runs.hpp"

#include <algorithm>
#include <chrono>

#include "actors/node/engine/executor_engine.hpp"
#include "actors/node/node_instruments.hpp"
#include "actors/node/request_batch.hpp"
#include "actors/node/run_reply.hpp"
#include "actors/tensor_codec.hpp"

namespace ember {

void InlineRuns::attach(uint32_t device, std::shared_ptr<EngineGate> gate) {
  std::lock_guard lock(mu_);
  if (gates_.size() <= device) gates_.resize(device + 1);
  gates_[device] = std::move(gate);
}

void InlineRuns::suspend(bool on) {
  std::lock_guard lock(mu_);
  suspended_ = on;
}

void InlineRuns::prefer(std::vector<uint32_t> order) {
  std::lock_guard lock(mu_);
  if (order != order_) order_ = std::move(order);
}

std::vector<std::pair<uint32_t, std::shared_ptr<EngineGate>>> InlineRuns::ordered_gates() const {
  std::vector<std::pair<uint32_t, std::shared_ptr<EngineGate>>> out;
  out.reserve(gates_.size());
  std::vector<bool> taken(gates_.size(), false);
  for (uint32_t d : order_) {
    if (d >= gates_.size() || taken[d]) continue;
    taken[d] = true;
    if (gates_[d]) out.emplace_back(d, gates_[d]);
  }
  for (uint32_t d = 0; d < gates_.size(); ++d) {
    if (!taken[d] && gates_[d]) out.emplace_back(d, gates_[d]);
  }
  return out;
}

void InlineRuns::keep_records(bool on) {
  std::lock_guard lock(mu_);
  keep_ = on;
  if (!on) records_.clear();
}

std::vector<InlineRecord> InlineRuns::drain() {
  std::lock_guard lock(mu_);
  return std::exchange(records_, {});
}

uint64_t InlineRuns::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

std::optional<Result<infer_reply>> InlineRuns::run(const infer_request& req) {
  const auto arrived = std::chrono::steady_clock::now();
  std::vector<std::pair<uint32_t, std::shared_ptr<EngineGate>>> gates;
  {
    std::lock_guard lock(mu_);
    if (suspended_) return std::nullopt;
    gates = ordered_gates();
  }
  // Decoded once a device gave the run its turn, and once only (see the header).
  std::optional<Result<std::vector<gpu::HostTensor>>> inputs;
  const InlineInputs decoded = [&]() -> const std::vector<gpu::HostTensor>* {
    if (!inputs) inputs = decode_tensors(req.inputs);
    return inputs->ok() ? &**inputs : nullptr;
  };
  for (const auto& [device, g] : gates) {
    EngineGate* gate = g.get();
    if (!gate->holds(req.model)) continue;
    auto ran = gate->run_here(req.model, decoded);
    if (inputs && !inputs->ok()) return std::nullopt;  // the router's way answers it, as ever
    if (!ran) continue;
    // A fault's answer is the router's to give: it restarts the device and runs the request again.
    if (!ran->outputs.ok() && ran->outputs.error().code() == ErrorCode::device_fault) return std::nullopt;
    infer_reply skeleton;
    skeleton.model = req.model;
    skeleton.id = req.id;
    skeleton.node = node_;
    skeleton.device = gate->device();
    if (instruments_) {
      instruments_->count_dispatch("inline");
      instruments_->count_execution(req.model, 1, batch_rows(req));
      if (ran->outputs.ok()) instruments_->observe_run(req.model, 0, ran->compute_us);
    }
    Result<infer_reply> reply = build_reply(std::move(skeleton), req.outputs, *ran);
    const auto latency =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - arrived);
    std::lock_guard lock(mu_);
    record(req.model, device, latency);
    return reply;
  }
  return std::nullopt;
}

void InlineRuns::record(const model_key& model, uint32_t device, std::chrono::microseconds latency) {
  if (!keep_) return;
  if (records_.size() < kMaxRecords) {
    records_.push_back({model, device, static_cast<uint64_t>(latency.count())});
  } else {
    ++dropped_;
  }
}

std::optional<Result<infer_reply>> InlineRuns::run_workflow(const workflow_request& req) {
  const auto arrived = std::chrono::steady_clock::now();
  std::vector<std::pair<uint32_t, std::shared_ptr<EngineGate>>> gates;
  std::shared_ptr<const ParsedWorkflow> parsed;
  {
    std::lock_guard lock(mu_);
    if (suspended_) return std::nullopt;
    gates = ordered_gates();
    auto got = parsed_.get(req.name, req.json);
    if (!got.ok()) return std::nullopt;  // the router's way answers it, as ever
    parsed = std::move(*got);
  }
  if (parsed->config.steps.size() != req.models.size()) return std::nullopt;
  std::optional<Result<std::vector<gpu::HostTensor>>> inputs;  // as run()'s
  const InlineInputs decoded = [&]() -> const std::vector<gpu::HostTensor>* {
    if (!inputs) inputs = decode_tensors(req.request.inputs);
    return inputs->ok() ? &**inputs : nullptr;
  };
  for (const auto& [device, g] : gates) {
    EngineGate* gate = g.get();
    bool all = true;
    for (const auto& m : req.models) all = all && gate->holds(m);
    if (!all) continue;
    gpu::DeviceWorkflowStats stats;
    auto ran = gate->run_workflow_here(parsed->config, parsed->plan, req.models, decoded, &stats);
    if (inputs && !inputs->ok()) return std::nullopt;
    if (!ran) continue;
    if (!ran->ok() && ran->error().code() == ErrorCode::device_fault) return std::nullopt;
    if (instruments_) {
      instruments_->count_dispatch("inline");
      instruments_->count_workflow(req.name, ran->ok() ? "success" : std::string(to_string(ran->error().code())));
      if (ran->ok()) {
        instruments_->count_handoff(req.name, "same_device", stats.handoff_bytes);
        for (size_t s = 0; s < req.models.size(); ++s) {
          instruments_->observe_workflow_step(req.name, parsed->config.steps[s].name, stats.step_ms[s] / 1000.0);
        }
      }
    }
    if (!ran->ok()) return Result<infer_reply>(ran->error());
    infer_reply reply;
    reply.model = {req.name, 1};
    reply.id = req.request.id;
    reply.node = node_;
    reply.device = gate->device();
    for (auto& t : **ran) {
      if (req.request.outputs.empty() || std::count(req.request.outputs.begin(), req.request.outputs.end(), t.name)) {
        reply.outputs.push_back(encode_tensor(t));
      }
    }
    // Each step's model was used here: the router learns it as it learns of any inline run.
    const auto latency =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - arrived);
    std::lock_guard lock(mu_);
    for (const auto& m : req.models) record(m, device, latency);
    return Result<infer_reply>(std::move(reply));
  }
  return std::nullopt;
}

}  // namespace ember
