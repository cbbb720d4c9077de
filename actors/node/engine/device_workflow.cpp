#include "actors/node/engine/device_workflow.hpp"

#include <chrono>

#include "gpu/pinned_staging.hpp"

namespace ember::gpu {

Result<std::vector<HostTensor>> run_workflow_on_device(const WorkflowConfig& config, const WorkflowPlan& plan,
                                                       const std::vector<LayerExecutor*>& steps,
                                                       const std::vector<HostTensor>& inputs,
                                                       DeviceWorkflowStats* stats, Stream* given) {
  using Clock = std::chrono::steady_clock;
  if (steps.size() != config.steps.size() || steps.empty()) {
    return invalid_argument("workflow '" + config.name + "': " + std::to_string(steps.size()) + " executors for " +
                            std::to_string(config.steps.size()) + " steps");
  }
  Device& device = steps.front()->device();
  for (size_t s = 0; s < steps.size(); ++s) {
    if (&steps[s]->device() != &device) {
      return invalid_argument("workflow '" + config.name + "': step '" + config.steps[s].name + "' runs on " +
                              steps[s]->device().info().name + ", the first on " + device.info().name +
                              " (a device hand-off needs every step on one device)");
    }
  }
  DeviceWorkflowStats local;
  DeviceWorkflowStats& st = stats ? *stats : local;
  st.step_ms.assign(steps.size(), 0.0);

  std::unique_ptr<Stream> own;
  if (!given) own = device.create_stream();
  Stream* stream = given ? given : own.get();
  std::vector<NamedValue> uploaded;
  for (const HostTensor& t : inputs) {
    auto b = DeviceBuffer::allocate(device, std::max<uint64_t>(t.desc.bytes(), 1));
    if (!b.ok()) return b.error().with_context("input '" + t.name + "'");
    copy_in(*stream, steps.front()->staging(), (*b)->ptr(), t.data(), t.desc.bytes());
    st.uploaded_bytes += t.desc.bytes();
    uploaded.push_back({t.name, DeviceValue{t.desc, std::move(*b)}});
  }
  EMBER_RETURN_IF_ERROR(stream->synchronize());

  auto answer = run_workflow(config, plan, std::move(uploaded), [&](size_t s, std::vector<NamedValue> given) {
    const auto& bindings = plan.step_inputs(s);
    for (size_t i = 0; i < bindings.size(); ++i) {
      if (bindings[i].slot >= config.inputs.size()) st.handoff_bytes += given[i].value.desc.bytes();
    }
    const auto started = Clock::now();
    auto out = steps[s]->run_device(given);
    st.step_ms[s] = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
    return out;
  });
  if (!answer.ok()) return answer.error();

  std::vector<HostTensor> out;
  PinnedStaging::Downloads staged(steps.front()->staging());
  for (const NamedValue& v : *answer) {
    EMBER_ASSIGN_OR_RETURN(HostTensor t, HostTensor::allocate(v.name, v.value.desc));
    staged.copy_to_host(*stream, t.data(), v.value.buffer->ptr(), v.value.desc.bytes());
    st.downloaded_bytes += v.value.desc.bytes();
    out.push_back(std::move(t));
  }
  EMBER_RETURN_IF_ERROR(stream->synchronize());
  staged.finish();
  return out;
}

}  // namespace ember::gpu
