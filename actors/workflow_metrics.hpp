// The workflow metric families a gateway and a node both report (issue 18): /metrics merges them by
// name into one exposition, which takes the same help, type and labels from every process, so both
// register them from here.
#pragma once

namespace ember::workflow_metrics {

inline constexpr const char* kHandoff = "ember_workflow_handoff_bytes_total";
inline constexpr const char* kHandoffHelp =
    "Bytes of intermediate tensors handed from one workflow step to the next, by path (same_device, peer, host, "
    "network)";
inline constexpr const char* kStep = "ember_workflow_step_duration_seconds";
inline constexpr const char* kStepHelp =
    "Time of one step of a workflow request, from sending its inputs to its answer";

}  // namespace ember::workflow_metrics
