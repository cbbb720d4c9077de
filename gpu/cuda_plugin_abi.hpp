// The boundary between ember_gpu and the CUDA plugin (libember_cuda.so), which ember_gpu loads
// with dlopen (device_registry.cpp). Both sides are built by the same compiler from the same tree,
// so C++ objects (gpu::Device) may cross it; the version number guards against a stale plugin.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::gpu {

class Device;

inline constexpr uint32_t kCudaPluginAbiVersion = 1;
inline constexpr const char* kCudaPluginEntry = "ember_cuda_plugin_api";

struct CudaPluginApi {
  uint32_t abi_version;
  /// Number of usable CUDA devices, or -1 with a message in `err` (no driver, driver too old, ...).
  int (*device_count)(char* err, size_t err_len);
  /// A new device for `ordinal` (owned by the caller), or nullptr with a message in `err`.
  Device* (*create_device)(uint32_t ordinal, char* err, size_t err_len);
};

using GetCudaPluginApi = CudaPluginApi (*)();

}  // namespace ember::gpu
