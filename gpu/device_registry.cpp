#include "gpu/device_registry.hpp"

#include <dlfcn.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "gpu/cuda_plugin_abi.hpp"
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

// The plugin, loaded on first use; later calls (reopen) get the same one.
const Result<CudaPlugin>& cuda_plugin() {
  static const Result<CudaPlugin> plugin = load_plugin();
  return plugin;
}

Result<std::unique_ptr<Device>> create_cuda(uint32_t ordinal) {
  const auto& plugin = cuda_plugin();
  if (!plugin.ok()) return plugin.error();
  char err[512] = {0};
  Device* d = plugin->api.create_device(ordinal, err, sizeof(err));
  if (!d) return device_fault("cuda:" + std::to_string(ordinal) + ": " + err);
  return std::unique_ptr<Device>(d);
}

Result<std::vector<std::unique_ptr<Device>>> open_cuda(const DevicesConfig& config) {
  const auto& plugin = cuda_plugin();
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
    EMBER_ASSIGN_OR_RETURN(auto d, create_cuda(i));
    out.push_back(std::move(d));
  }
  return out;
}

// One uplink per device: the same object for devices with the same pcie_switch id, a fresh one
// for each device when no switches are configured.
std::vector<std::shared_ptr<SwitchUplink>> switch_uplinks(const DevicesConfig& config) {
  const double rate = config.switch_bytes_per_s > 0 ? config.switch_bytes_per_s : config.sim.pcie_bytes_per_s;
  std::map<uint32_t, std::shared_ptr<SwitchUplink>> by_switch;
  std::vector<std::shared_ptr<SwitchUplink>> out;
  for (uint32_t i = 0; i < config.count; ++i) {
    if (config.pcie_switch.empty()) {
      out.push_back(std::make_shared<SwitchUplink>(rate));
      continue;
    }
    auto& uplink = by_switch[config.pcie_switch[i]];
    if (!uplink) uplink = std::make_shared<SwitchUplink>(rate);
    out.push_back(uplink);
  }
  return out;
}

DeviceFactory out_of_range_guard(uint32_t count, DeviceFactory create) {
  return [count, create = std::move(create)](uint32_t ordinal) -> Result<std::unique_ptr<Device>> {
    if (ordinal >= count) {
      return invalid_argument("cannot reopen device " + std::to_string(ordinal) + ": only " + std::to_string(count) +
                              " device(s) were opened");
    }
    return create(ordinal);
  };
}

}  // namespace

SimDeviceConfig sim_device_config(const DevicesConfig& config, uint32_t ordinal) {
  SimDeviceConfig sim = config.sim;
  sim.peer_bytes_per_s =
      ordinal < config.link_bytes_per_s.size() ? config.link_bytes_per_s[ordinal] : std::vector<double>{};
  return sim;
}

Result<OpenedDevices> open_devices(const DevicesConfig& config) {
  EMBER_RETURN_IF_ERROR(validate(config, "devices"));
  OpenedDevices opened;
  if (config.kind != DeviceKind::sim) {
    auto cuda = open_cuda(config);
    if (cuda.ok()) {
      opened.devices = std::move(*cuda);
      opened.reopen = out_of_range_guard(config.count, create_cuda);
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
  auto create_sim = [config, uplinks = switch_uplinks(config)](uint32_t ordinal) -> Result<std::unique_ptr<Device>> {
    EMBER_ASSIGN_OR_RETURN(auto d, SimDevice::create(sim_device_config(config, ordinal), ordinal, uplinks[ordinal]));
    return std::unique_ptr<Device>(std::move(d));
  };
  opened.reopen = out_of_range_guard(config.count, std::move(create_sim));
  for (uint32_t i = 0; i < config.count; ++i) {
    EMBER_ASSIGN_OR_RETURN(auto d, opened.reopen(i));
    opened.devices.push_back(std::move(d));
  }
  return opened;
}

}  // namespace ember::gpu
