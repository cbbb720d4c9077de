// TrailingHasher: SHA-256 over a receive buffer's verified prefix, on a helper thread that trails
// the receiver, so hashing (the slowest stage of a fetch on this CPU, about 1 GB/s per core)
// overlaps receiving. Used by both data-plane receivers (tcp_fetch.cpp, ucx_fetch.cpp).
//
// One owner thread (the fetch's) calls advance() and finish(); the helper thread only reads the
// buffer below the published watermark, so nothing is queued or copied and the lag is bounded by
// the blob. The helper is joined by finish() or the destructor: after either returns, the buffer
// is never read again (the caller may free it). The constructor throws std::system_error when no
// thread can be started (callers then hash the whole buffer at the end instead); nothing else
// throws.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "transport/checksum.hpp"

namespace ember::transport {

class TrailingHasher {
 public:
  /// `base` is the start of the blob in the receive buffer; it must stay readable until finish()
  /// or the destructor returns.
  explicit TrailingHasher(const uint8_t* base) : base_(base), thread_([this] { run(); }) {}
  ~TrailingHasher() {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
      abandon_ = !finished_;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }
  TrailingHasher(const TrailingHasher&) = delete;
  TrailingHasher& operator=(const TrailingHasher&) = delete;

  /// Bytes [0, upto) are verified and may be hashed.
  void advance(uint64_t upto) {
    {
      std::lock_guard lock(mutex_);
      ready_ = upto;
    }
    cv_.notify_one();
  }

  /// Waits until everything advanced to is hashed; the digest of [0, ready). Call at most once.
  Digest finish() {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
      finished_ = true;
    }
    cv_.notify_one();
    thread_.join();
    return sha_.finish();
  }

 private:
  // Hash in pieces so an abandoned fetch stops within one piece.
  static constexpr uint64_t kPieceBytes = 4u << 20;

  void run() {
    uint64_t hashed = 0;
    while (true) {
      uint64_t target;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return ready_ > hashed || closing_; });
        if (abandon_ || (closing_ && ready_ == hashed)) return;
        target = ready_;
      }
      while (hashed < target) {
        const uint64_t n = std::min(kPieceBytes, target - hashed);
        sha_.update(base_ + hashed, n);
        hashed += n;
        std::lock_guard lock(mutex_);
        if (abandon_) return;
      }
    }
  }

  const uint8_t* base_;
  Sha256 sha_;
  std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t ready_ = 0;
  bool closing_ = false;
  bool finished_ = false;
  bool abandon_ = false;
  std::thread thread_;  // last: starts after every member it reads is built
};

}  // namespace ember::transport
