// LinkPacer: the bandwidth of one direction of an emulated link (a PCIe switch's uplink, a device's
// own PCIe lane, an NVLink), shared by every thread copying over it. SimDevice's copy engines use
// it to make copies take as long as the configured link would; nothing on a real GPU uses it.
//
// Virtual-time reservation: a sender books each chunk before moving it. The chunk starts when the
// link is next free, or now if it is idle (start = max(now, next_free)), and occupies the link for
// bytes / bytes_per_s (next_free = start + that); the sender then sleeps until the chunk's end.
// Senders that book chunk by chunk interleave, so two copies over one link each get about half.
// One departure from a plain max(now, next_free): a sender that comes back up to `catch_up` late
// (a sleep that overslept, a preempted thread) continues the link's busy period instead of
// starting a new one, so timer slack does not make a long copy slower than the link; an idle
// period longer than that is lost, as on a real link.
//
// Guarantee (what tests may rely on): one sender alone on a fresh link never finishes `bytes`
// before bytes / bytes_per_s has passed. No upper bound: a loaded host only makes copies slower.
//
// Thread-safe: anyone may call reserve/pace from any thread. Never spins; pace() sleeps.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <initializer_list>
#include <mutex>

namespace ember::gpu {

/// A lock that is granted in the order it was asked for (a ticket lock). A copy engine is one: it
/// serves copy commands in turn, never handing itself back to the same thread out of order as a
/// plain std::mutex may. A ticket may also be taken when a command is issued and redeemed when it
/// runs (take, then lock(ticket)): the engine then serves commands in issue order, as a GPU's does
/// (sim_stream.cpp). BasicLockable (std::lock_guard works).
class FifoMutex {
 public:
  void lock() { lock(take()); }
  /// A place in line, to redeem with lock(ticket) exactly once (or the line stops there).
  uint64_t take() {
    std::lock_guard lock(mu_);
    return next_++;
  }
  void lock(uint64_t ticket) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return serving_ == ticket; });
  }
  void unlock() {
    {
      std::lock_guard lock(mu_);
      ++serving_;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ = 0;     // guarded by mu_
  uint64_t serving_ = 0;  // guarded by mu_
};

class LinkPacer {
 public:
  using Clock = std::chrono::steady_clock;

  /// `bytes_per_s` <= 0 means unthrottled: reserve() returns now and books nothing.
  explicit LinkPacer(double bytes_per_s, Clock::duration catch_up = std::chrono::milliseconds(2));
  LinkPacer(const LinkPacer&) = delete;
  LinkPacer& operator=(const LinkPacer&) = delete;

  double bytes_per_s() const { return bytes_per_s_; }
  bool throttled() const { return bytes_per_s_ > 0; }

  /// Books the link for `bytes` after everything booked so far and returns when they will have
  /// crossed it. Never blocks (beyond the internal mutex).
  Clock::time_point reserve(uint64_t bytes);
  /// reserve(bytes), then sleeps until the booking ends.
  void pace(uint64_t bytes);

 private:
  const double bytes_per_s_;
  const Clock::duration catch_up_;
  std::mutex mu_;
  Clock::time_point next_free_{};  // guarded by mu_; the epoch = never used
};

/// A full-duplex link to the host: PCIe carries both directions at full rate at once, so each has
/// its own pacer. The uplink of one PCIe switch, shared (std::shared_ptr) by the devices behind it.
struct SwitchUplink {
  explicit SwitchUplink(double bytes_per_s) : to_device(bytes_per_s), to_host(bytes_per_s) {}
  LinkPacer to_device;  // host -> device
  LinkPacer to_host;    // device -> host
};

/// Largest piece a paced copy moves at once: small enough that copies sharing a link interleave,
/// large enough that booking and sleeping cost little next to the memcpy.
inline constexpr uint64_t kPacedChunkBytes = 1ull << 20;

/// memcpy of `bytes` from `src` to `dst` (not overlapping), chunk by chunk: each chunk is booked on
/// every pacer in `links` (null entries and unthrottled pacers are skipped), copied, and the caller
/// sleeps until the latest booking ends. With no throttled link it is one plain memcpy. Blocking:
/// call from a copy engine's thread, never from an actor handler.
void paced_memcpy(void* dst, const void* src, uint64_t bytes, std::initializer_list<LinkPacer*> links);

}  // namespace ember::gpu
