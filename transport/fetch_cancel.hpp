// FetchCancel: stops a fetch in progress from another thread. A multicast hop uses it when the
// chain controller re-points it at another upstream (the current one is slow or spliced out): the
// blocked fetch returns at once with ErrorCode::unavailable ("cancelled") and the hop resumes from
// the bytes it already verified.
//
// One canceller (any thread), one fetch at a time attached (its own thread). Thread-safe; never
// throws; cancel() never blocks beyond the interrupt callback (a shutdown(2) of the fetch's
// socket for TCP), which must be prompt and must not call back into the FetchCancel. A FetchCancel is sticky: once cancelled, every fetch attached later returns at
// once; use a new one per attempt.
#pragma once

#include <functional>
#include <mutex>

namespace ember::transport {

class FetchCancel {
 public:
  /// Cancels the attached fetch (or the next one to attach). Idempotent.
  void cancel() {
    std::lock_guard lock(mu_);
    if (cancelled_) return;
    cancelled_ = true;
    // Under the lock: the fetch cannot detach and close its socket (whose descriptor number could
    // then be reused) while the interrupt runs.
    if (interrupt_) interrupt_();
  }
  bool cancelled() const {
    std::lock_guard lock(mu_);
    return cancelled_;
  }

  // -- the fetch's side --------------------------------------------------------------------------
  /// Registers how to wake the fetch (kept until detach()); false when already cancelled (the
  /// fetch should return at once).
  bool attach(std::function<void()> interrupt) {
    std::lock_guard lock(mu_);
    if (cancelled_) return false;
    interrupt_ = std::move(interrupt);
    return true;
  }
  /// After detach() returns, the interrupt is never called again.
  void detach() {
    std::lock_guard lock(mu_);
    interrupt_ = nullptr;
  }

 private:
  mutable std::mutex mu_;  // also held while the interrupt runs
  bool cancelled_ = false;
  std::function<void()> interrupt_;
};

}  // namespace ember::transport
