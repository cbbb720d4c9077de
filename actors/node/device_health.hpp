// DeviceHealth: whether a device of a late-binding node is being restarted after a fault, and how
// long its next restart waits when restarts keep failing. The router restarts an executor that
// faulted (a device fault, a run past its timeout) or that its supervisor replaced; the device's
// models come back from host memory on demand. A restart that fails leaves the device out of
// service and is tried again after 1 s, then 2, 4, ... at most kRetryMax apart; one that answers
// forgets the failures.
//
// Owner: the node_router (one per device, in router_state::Device; node_router_restore.cpp's
// restart_device), on its actor only. Plain C++: no CAF, no clock (the router schedules the retry
// on its actor clock with the wait failed() returns).
//
//   serving ──begin_restart──▶ restarting ──restarted──▶ serving (failures forgotten)
//                                 ├──failed: wait──▶ waiting ──begin_restart (after the wait)──▶ restarting
//                                 └──replaced (a new executor: the restart sent to the dead one is
//                                    moot)──▶ serving (failures kept) ──begin_restart──▶ restarting
// begin_restart refuses while a restart is out (a fault and the supervisor's replacement may both
// ask for one).
#pragma once

#include <chrono>
#include <cstdint>

namespace ember {

class DeviceHealth {
 public:
  static constexpr std::chrono::seconds kRetryFirst{1};
  static constexpr std::chrono::seconds kRetryMax{60};

  /// A restart starts now; false (nothing changes) while one is out already.
  bool begin_restart();
  /// The restarted executor serves: its failures are forgotten.
  void restarted();
  /// The restart failed: the device stays out of service; the next try waits kRetryFirst x 2^n (n:
  /// the failures before this one, at most 6 doublings), at most kRetryMax.
  std::chrono::seconds failed();
  /// The device's executor was replaced by its supervisor: a restart sent to the dead one is moot.
  void replaced() { restarting_ = false; }

  bool restarting() const { return restarting_; }
  /// Failed restarts in a row.
  uint32_t failures() const { return failures_; }

 private:
  uint32_t failures_ = 0;
  bool restarting_ = false;
};

}  // namespace ember
