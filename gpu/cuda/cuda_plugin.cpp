// The CUDA plugin's one exported symbol, ember_cuda_plugin_api (cuda_plugin_abi.hpp), which
// device_registry.cpp finds with dlsym. Everything else in libember_cuda.so is hidden.
//
// Nothing crosses this boundary as an exception: failures come back as -1 / nullptr with a message.
// Device memory can be set for every device the plugin opens with EMBER_CUDA_MEMORY, either a
// share of the memory free at creation ("85%"; default 90%) or a size ("20GiB"); see
// CudaDeviceConfig. EMBER_CUDA_WAIT=block|spin chooses how a host thread waits for the GPU
// (CudaDeviceConfig::spin_waits; default block). The ABI has no config argument, hence
// environment variables.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/units.hpp"
#include "gpu/cuda/cuda_device.hpp"
#include "gpu/cuda_plugin_abi.hpp"

namespace ember::gpu::cuda {

namespace {

void write_error(char* err, size_t len, const std::string& message) {
  if (err && len) std::snprintf(err, len, "%s", message.c_str());
}

// 13000 -> "13.0", as CUDA encodes versions (1000 * major + 10 * minor).
std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

Result<CudaDeviceConfig> config_from_env() {
  CudaDeviceConfig config;
  if (const char* wait = std::getenv("EMBER_CUDA_WAIT"); wait && *wait) {
    const std::string_view mode(wait);
    if (mode != "block" && mode != "spin") {
      return invalid_argument("EMBER_CUDA_WAIT: '" + std::string(mode) + "' is neither block nor spin");
    }
    config.spin_waits = mode == "spin";
  }
  const char* value = std::getenv("EMBER_CUDA_MEMORY");
  if (!value || !*value) return config;
  const std::string text(value);
  if (text.back() == '%') {
    char* end = nullptr;
    const double percent = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() - 1 || !(percent > 0 && percent <= 100)) {
      return invalid_argument("EMBER_CUDA_MEMORY: '" + text + "' is not a percentage in (0%, 100%]");
    }
    config.memory_fraction = percent / 100;
    return config;
  }
  auto bytes = parse_bytes(text);
  if (!bytes.ok()) return bytes.error().with_context("EMBER_CUDA_MEMORY");
  if (*bytes == 0) return invalid_argument("EMBER_CUDA_MEMORY: '" + text + "' is zero bytes");
  config.memory_bytes = *bytes;
  return config;
}

int device_count(char* err, size_t len) noexcept {
  try {
    int count = 0;  // not written when the call fails (../shared/dependencies.md §6)
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaSuccess) return count;
    int driver = 0, runtime = 0;
    (void)cudaDriverGetVersion(&driver);
    (void)cudaRuntimeGetVersion(&runtime);
    (void)cudaGetLastError();
    const std::string driver_text =
        driver == 0 ? std::string("no NVIDIA driver found") : "driver supports CUDA " + version_text(driver);
    write_error(err, len,
                cuda_error_text("cudaGetDeviceCount", e) + "; " + driver_text + ", plugin built for CUDA runtime " +
                    version_text(runtime));
    return -1;
  } catch (const std::exception& ex) {
    write_error(err, len, std::string("CUDA plugin: ") + ex.what());
    return -1;
  }
}

Device* create_device(uint32_t ordinal, char* err, size_t len) noexcept {
  try {
    auto config = config_from_env();
    if (!config.ok()) {
      write_error(err, len, config.error().message());
      return nullptr;
    }
    auto device = CudaDevice::create(*config, ordinal);
    if (!device.ok()) {
      write_error(err, len, device.error().message());
      return nullptr;
    }
    return device->release();  // owned by the caller from here on
  } catch (const std::exception& ex) {
    write_error(err, len, std::string("CUDA plugin: ") + ex.what());
    return nullptr;
  }
}

}  // namespace

}  // namespace ember::gpu::cuda

extern "C" __attribute__((visibility("default"))) ember::gpu::CudaPluginApi ember_cuda_plugin_api() {
  return {ember::gpu::kCudaPluginAbiVersion, &ember::gpu::cuda::device_count, &ember::gpu::cuda::create_device};
}

static_assert(std::is_same_v<decltype(&ember_cuda_plugin_api), ember::gpu::GetCudaPluginApi>,
              "the entry point must match what device_registry.cpp casts dlsym's result to");
