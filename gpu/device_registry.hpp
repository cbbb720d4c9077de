// Opens the devices a process serves with: CUDA devices through the CUDA plugin when the config
// allows and a GPU answers, otherwise SimDevices.
//
// The CUDA code lives in a separate shared object (libember_cuda.so, built when nvcc is found)
// loaded with dlopen, so one `ember` binary starts on machines without the CUDA toolkit or driver.
// With kind=auto, failing to find a GPU is said once, in one log line, and sim devices are used.
// Call from startup code; not meant for concurrent use.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/device_config.hpp"
#include "config/status.hpp"
#include "gpu/device.hpp"

namespace ember::gpu {

struct OpenedDevices {
  std::vector<std::unique_ptr<Device>> devices;
  /// Why CUDA was not used, when it was not ("" when CUDA devices were opened).
  std::string cuda_unavailable_reason;
};

Result<OpenedDevices> open_devices(const DevicesConfig& config);

/// Where the CUDA plugin is looked for: $EMBER_CUDA_PLUGIN, then beside the executable, then
/// ../lib/ember/ relative to it. Empty when this build has no plugin.
std::vector<std::string> cuda_plugin_candidates();

}  // namespace ember::gpu
