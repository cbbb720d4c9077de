// One request through a workflow (config/workflow_config.hpp) with every step on one device and the
// intermediate tensors left there: StreamBox's zero-copy hand-off between the functions of a
// workflow. The request's tensors are uploaded once (an input several steps read is one buffer),
// each step runs on device values (LayerExecutor::run_device: the consumer reads the producer's
// buffer, no copy), each intermediate is freed as soon as its last reader ran (WorkflowProgress's
// count of readers), and only the answer is copied to the host.
//
// Steps run one at a time on the calling thread, in dependency order (placement/workflow_plan.hpp's
// run_workflow); each run blocks until the device finished it, so a next step never reads a value
// before it is complete. Errors as run_workflow's (the step named with its model), plus
// invalid_argument when the steps' executors are not all on one device.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.hpp"
#include "config/workflow_config.hpp"
#include "gpu/executor.hpp"
#include "model/host_tensor.hpp"
#include "placement/workflow_plan.hpp"

namespace ember::gpu {

struct DeviceWorkflowStats {
  /// Bytes of intermediates one step handed another on the device (counted per reading step).
  uint64_t handoff_bytes = 0;
  /// Bytes uploaded (the request's tensors) and downloaded (the answer).
  uint64_t uploaded_bytes = 0;
  uint64_t downloaded_bytes = 0;
  /// Per step (config order): wall time of its run, milliseconds.
  std::vector<double> step_ms;
};

/// `steps[i]` runs step i of `config` (one executor may serve several steps of the same model).
/// `stream` (a stream of the steps' device, used by nobody else meanwhile) carries the uploads and
/// downloads; null: one made for the call.
Result<std::vector<HostTensor>> run_workflow_on_device(const WorkflowConfig& config, const WorkflowPlan& plan,
                                                       const std::vector<LayerExecutor*>& steps,
                                                       const std::vector<HostTensor>& inputs,
                                                       DeviceWorkflowStats* stats = nullptr, Stream* stream = nullptr);

}  // namespace ember::gpu
