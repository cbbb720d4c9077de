#include "gpu/device_registry.hpp"

#include <dlfcn.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "gpu/cuda/cuda_plugin_abi.hpp"
#include "gpu/sim_device.hpp"

namespace ember::gpu {

std::vector<std::string> cuda_plugin_candidates() {
  const std::string plugin = EMBER_CUDA_PLUGIN_NAME;
  if (plugin.empty()) return {};
  std::vector<std::string> out;
  if (const char* env = std::getenv("EMBER_CUDA_PLUGIN"); env && *env) out.emplace_back(env);
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path() / plugin).string());
    out.push_back((exe.parent_path() / ".." / "lib" / "ember" / plugin).string());
  }
  return out;
}

namespace {

struct CudaPlugin {
  void* handle = nullptr;
  CudaPluginApi api{};
};

// Loads the plugin once per process; the handle is never closed (devices point into it).
Result<CudaPlugin> load_plugin() {
  const auto candidates = cuda_plugin_candidates();
  if (candidates.empty()) return unsupported("this build has no CUDA support (configured without nvcc)");
  std::string errors;
  for (const auto& path : candidates) {
    if (!std::filesystem::exists(path)) continue;
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      errors += std::string(" ") + ::dlerror() + ";";
      continue;
    }
    auto get_api = reinterpret_cast<GetCudaPluginApi>(::dlsym(h, kCudaPluginEntry));
    if (!get_api) {
      errors += " " + path + " has no " + kCudaPluginEntry + ";";
      continue;
    }
    CudaPlugin p{h, get_api()};
    if (p.api.abi_version != kCudaPluginAbiVersion) {
      errors += " " + path + " speaks ABI " + std::to_string(p.api.abi_version) + ";";
      continue;
    }
    return p;
  }
  return unsupported("CUDA plugin not loadable:" + (errors.empty() ? std::string(" not found") : errors));
}

Result<std::vector<std::unique_ptr<Device>>> open_cuda(const DevicesConfig& config) {
  static Result<CudaPlugin> plugin = load_plugin();
  if (!plugin.ok()) return plugin.error();
  char err[512] = {0};
  const int present = plugin->api.device_count(err, sizeof(err));
  if (present <= 0) return unsupported(present < 0 ? std::string(err) : "no CUDA device present");
  if (config.count > static_cast<uint32_t>(present)) {
    return invalid_argument("devices.count is " + std::to_string(config.count) + " but only " +
                            std::to_string(present) + " CUDA device(s) are present");
  }
  std::vector<std::unique_ptr<Device>> out;
  for (uint32_t i = 0; i < config.count; ++i) {
    Device* d = plugin->api.create_device(i, err, sizeof(err));
    if (!d) return device_fault("cuda:" + std::to_string(i) + ": " + err);
    out.emplace_back(d);
  }
  return out;
}

}  // namespace

Result<OpenedDevices> open_devices(const DevicesConfig& config) {
  EMBER_RETURN_IF_ERROR(validate(config, "devices"));
  OpenedDevices opened;
  if (config.kind != DeviceKind::sim) {
    auto cuda = open_cuda(config);
    if (cuda.ok()) {
      opened.devices = std::move(*cuda);
      return opened;
    }
    if (config.kind == DeviceKind::cuda) return cuda.error().with_context("devices.kind is cuda");
    opened.cuda_unavailable_reason = cuda.error().message();
    static bool said = false;
    if (!said) {
      said = true;
      spdlog::info("no usable GPU ({}); using simulated devices", opened.cuda_unavailable_reason);
    }
  }
  for (uint32_t i = 0; i < config.count; ++i) {
    EMBER_ASSIGN_OR_RETURN(auto d, SimDevice::create(config.sim, i));
    opened.devices.push_back(std::move(d));
  }
  return opened;
}

}  // namespace ember::gpu
