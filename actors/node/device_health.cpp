#include "actors/node/device_health.hpp"

#include <algorithm>

namespace ember {

bool DeviceHealth::begin_restart() {
  if (restarting_) return false;
  restarting_ = true;
  return true;
}

void DeviceHealth::restarted() {
  failures_ = 0;
  restarting_ = false;
}

std::chrono::seconds DeviceHealth::failed() {
  restarting_ = false;
  const auto wait = std::min<std::chrono::seconds>(kRetryFirst * (1 << std::min(failures_, 6u)), kRetryMax);
  ++failures_;
  return wait;
}

}  // namespace ember
