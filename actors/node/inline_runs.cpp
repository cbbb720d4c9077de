#include "actors/node/inline_runs.hpp"

#include <chrono>

#include "actors/node/executor_engine.hpp"
#include "actors/node/node_instruments.hpp"
#include "actors/node/request_batch.hpp"
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
  std::vector<std::shared_ptr<EngineGate>> gates;
  {
    std::lock_guard lock(mu_);
    if (suspended_) return std::nullopt;
    gates = gates_;
  }
  std::optional<Result<std::vector<gpu::HostTensor>>> inputs;  // decoded once a device holds the model
  for (uint32_t device = 0; device < gates.size(); ++device) {
    EngineGate* gate = gates[device].get();
    if (!gate || !gate->holds(req.model)) continue;
    if (!inputs) {
      inputs = decode_tensors(req.inputs);
      if (!inputs->ok()) return std::nullopt;  // the router's way answers it, as ever
    }
    auto ran = gate->run_here(req.model, **inputs);
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
    if (keep_) {
      if (records_.size() < kMaxRecords) {
        records_.push_back({req.model, device, static_cast<uint64_t>(latency.count())});
      } else {
        ++dropped_;
      }
    }
    return reply;
  }
  return std::nullopt;
}

}  // namespace ember
