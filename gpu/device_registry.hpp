// Opens the devices a process serves with: CUDA devices through the CUDA plugin when the config
// allows and a GPU answers, otherwise SimDevices.
//
// The CUDA code lives in a separate shared object (libember_cuda.so, built when nvcc is found)
// loaded with dlopen, so one `ember` binary starts on machines without the CUDA toolkit or driver.
// With kind=auto, failing to find a GPU is said once, in one log line, and sim devices are used.
// open_devices is for startup code, not meant for concurrent use; the reopen factory it returns
// may be called from any thread.
//
// Topology (DevicesConfig: pcie_switch, links, switch_bandwidth) reaches sim devices here: each
// gets its row of the link matrix as SimDeviceConfig::peer_bytes_per_s, and the devices behind one
// switch id share one SwitchUplink (link_pacer.hpp). CUDA devices have the real topology.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/device_config.hpp"
#include "base/status.hpp"
#include "gpu/device.hpp"

namespace ember::gpu {

/// Builds a fresh device for `ordinal`; see OpenedDevices::reopen.
using DeviceFactory = std::function<Result<std::unique_ptr<Device>>(uint32_t ordinal)>;

struct OpenedDevices {
  /// devices[i] has ordinal i.
  std::vector<std::unique_ptr<Device>> devices;
  /// Why CUDA was not used, when it was not ("" when CUDA devices were opened).
  std::string cuda_unavailable_reason;
  /// Rebuilds device `ordinal` after a fault (an executor restart): a new device of the same kind,
  /// ordinal and settings, owned by the caller; the old one keeps working (or failing) until its
  /// owner destroys it. Sim: a fresh SimDevice with the same per-device config, sharing the same
  /// switch uplink as before, so it still competes with its neighbours' copies. CUDA: the plugin's
  /// create_device. Destroy the faulted CudaDevice first: the new one reserves a share of the memory
  /// free at that moment, and after a sticky CUDA error (a dead context) creation fails, since the
  /// plugin ABI has no cudaDeviceReset. Errors: invalid_argument for an ordinal outside
  /// 0..count-1, otherwise as creating the device. Never empty after a successful open_devices;
  /// thread-safe (holds only immutable state); may outlive the OpenedDevices it came with.
  DeviceFactory reopen;
};

Result<OpenedDevices> open_devices(const DevicesConfig& config);

/// The SimDeviceConfig of sim device `ordinal`: config.sim with peer_bytes_per_s = row `ordinal`
/// of config.link_bytes_per_s (empty when there is no link matrix). Pure.
SimDeviceConfig sim_device_config(const DevicesConfig& config, uint32_t ordinal);

/// Where the CUDA plugin is looked for: $EMBER_CUDA_PLUGIN, then beside the executable, then
/// ../lib/ember/ relative to it. Empty when this build has no plugin.
std::vector<std::string> cuda_plugin_candidates();

}  // namespace ember::gpu
