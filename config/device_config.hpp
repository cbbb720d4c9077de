// Device settings of a node: which kind of device to open, how many, and how the simulated
// device behaves. Read from the `devices:` section of a node's YAML config, with command-line
// overrides applied by the caller.
//
// Pure data plus parsing; anyone may call it, on any thread. Parsing never throws: every bad
// value is an invalid_argument Error naming the file and the key ("node.yaml: devices.memory:
// ..."), and unknown keys are errors too, so a typo never silently becomes a default.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace YAML {
class Node;
}  // namespace YAML

namespace ember {

enum class DeviceKind : uint8_t {
  /// CUDA when the plugin loads and a GPU answers, otherwise the simulated device (said once).
  automatic,
  /// Always the simulated device.
  sim,
  /// CUDA or fail.
  cuda,
};

std::string_view to_string(DeviceKind kind);
Result<DeviceKind> parse_device_kind(std::string_view text);

/// How a SimDevice behaves. Compute is real (CPU kernels); copies can be throttled to emulate a link.
struct SimDeviceConfig {
  /// Capacity of the device-memory arena, bytes. Allocations beyond it fail with out_of_memory.
  /// Default 8 GiB. The arena is reserved lazily (MAP_NORESERVE): only touched pages cost host RAM.
  uint64_t memory_bytes = 8ull << 30;
  /// Host<->device copy bandwidth, bytes/s, emulating PCIe. 0 = as fast as memcpy (default).
  /// Raising it above the host's memcpy speed has no effect.
  double pcie_bytes_per_s = 0;
  /// Host<->device bandwidth for pageable (unregistered) host memory, bytes/s: real drivers stage
  /// such copies through a bounce buffer and reach about half the pinned rate. 0 = half of
  /// pcie_bytes_per_s (as fast as memcpy when that is 0 too).
  double pageable_bytes_per_s = 0;
  /// Device -> device bandwidth to each peer by ordinal (the node's link matrix row), bytes/s; an
  /// entry of 0, or a peer beyond the vector, means no direct link: copies then go through host
  /// memory at the PCIe rate of both ends (the slower), as CUDA does without peer access.
  std::vector<double> peer_bytes_per_s;
  /// Map every page of the arena up front (MAP_POPULATE) instead of on first touch. A GPU has no
  /// page faults; the first write to each page of a lazily mapped arena costs one (on this class of
  /// VM about 0.3 ms per MiB), which would be charged to swaps. Costs host RAM equal to memory_bytes,
  /// so it is off by default and set by benchmarks that measure swaps.
  bool populate = false;
  /// Threads the compute stream's kernels use (OpenMP and OpenBLAS). 0 = all online cores (default).
  uint32_t compute_threads = 0;
  /// `devices.compute_dilation`: 0 (the default) = a kernel takes the wall time it takes on the
  /// host. k > 0 (at least 1) = it keeps the device busy for k times the host CPU time it used, so
  /// each device computes like an independent processor 1/k as fast as one host core (see
  /// gpu/compute_clock.hpp). For emulating more devices than the host has cores without the devices
  /// slowing each other: k of about devices / cores or more; scale pcie_bandwidth down by as much to
  /// keep the copy/compute ratio of the hardware meant. Results stay exact; only time is modelled.
  double compute_dilation = 0;
  /// Fixed cost of each host copy, seconds: the time a copy holds its copy engine before its bytes
  /// move (a real engine's command fetch and DMA setup, a few microseconds on PCIe). With it, small
  /// copies reach less of the link's rate, so the copy-size curve has the elbow real devices show.
  /// 0 (the default): none. Set by tests and benchmarks; not a config-file key.
  double copy_setup_s = 0;
  /// Fixed cost of a stream's synchronize(), seconds, paid after the work is done (a real host
  /// thread's wake-up, tens of microseconds for a blocking sync). 0 (the default): none. Set by
  /// tests and benchmarks; not a config-file key.
  double synchronize_s = 0;
};

struct DevicesConfig {
  DeviceKind kind = DeviceKind::automatic;
  /// Number of devices to open. Default 1. For CUDA, at most the number present.
  uint32_t count = 1;
  SimDeviceConfig sim;
  /// The node's topology (Torpor Fig. 5), read by the swap scheduler and, for sim devices, by the
  /// copy engines. `devices.pcie_switch`: one id per device; devices with the same id sit behind
  /// one PCIe switch and share its uplink to the host. Empty (the default) = every device its own
  /// switch. When given, exactly `count` entries.
  std::vector<uint32_t> pcie_switch;
  /// `devices.links`: direct device-to-device bandwidth (NVLink, or PCIe P2P), a count x count
  /// matrix of bandwidths ("50GB/s", 0 = no direct link), symmetric with a zero diagonal. Empty
  /// (the default) = no direct links: device-to-device swaps are never chosen.
  std::vector<std::vector<double>> link_bytes_per_s;
  /// `devices.switch_bandwidth`: bandwidth of one PCIe switch's uplink, shared by the devices
  /// behind it (sim devices pace concurrent host copies of neighbours through it). 0 (the default)
  /// = pcie_bandwidth: two neighbours swapping at once each get half.
  double switch_bytes_per_s = 0;
};

/// Checks ranges (count in 1..64, memory at least 1 MiB, bandwidths finite and not negative) and
/// the topology: pcie_switch empty or `count` ids; links empty or a count x count matrix, symmetric
/// with a zero diagonal. Messages name the key and indices ("devices.links[0][1]"). `source`
/// prefixes messages.
Status validate(const DevicesConfig& config, std::string_view source);

/// Parses the `devices:` mapping of a YAML document held in `yaml_text`. A document without it
/// yields the defaults. `source` is the file name used in messages.
Result<DevicesConfig> parse_devices_config(std::string_view yaml_text, std::string_view source);

/// The same from an already-parsed document (the whole document, not its `devices:` node), so that
/// parse_cluster_config reads the section without parsing the text twice. For config/'s parsers.
Result<DevicesConfig> parse_devices_section(const YAML::Node& document, std::string_view source);

}  // namespace ember
