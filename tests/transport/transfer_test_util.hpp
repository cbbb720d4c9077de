// Helpers shared by the data-plane transfer tests: random bytes, a sink over a vector, and a raw
// one-connection server whose script the test writes (to send what a real BlobServer never would).
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "transport/fetch.hpp"
#include "transport/fetch_request.hpp"
#include "transport/frame.hpp"
#include "transport/tcp_socket.hpp"

namespace ember::transport::testing {

inline std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(seed);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t x = rng();
    std::memcpy(v.data() + i, &x, 8);
  }
  for (; i < n; ++i) v[i] = static_cast<uint8_t>(rng());
  return v;
}

/// Receives into a vector; records the chunks; optional hook runs inside on_chunk.
class VectorSink : public BlobSink {
 public:
  uint8_t* allocate(uint64_t blob_bytes) override {
    ++allocations;
    if (refuse) return nullptr;
    bytes.resize(blob_bytes);  // a resume keeps the prefix the test put there
    return bytes.data();
  }
  void on_chunk(uint64_t offset, uint64_t length) override {
    // Contiguous and increasing, as the contract says.
    if (!chunks.empty()) {
      EXPECT_EQ(offset, chunks.back().first + chunks.back().second);
    }
    chunks.emplace_back(offset, length);
    if (hook) hook(offset, length);
  }

  std::vector<uint8_t> bytes;
  std::vector<std::pair<uint64_t, uint64_t>> chunks;
  std::function<void(uint64_t, uint64_t)> hook;
  int allocations = 0;
  bool refuse = false;
};

/// Waits until a flag is set by another thread (bounded: tests never hang on it).
class Latch {
 public:
  void open() {
    std::lock_guard lock(m_);
    open_ = true;
    cv_.notify_all();
  }
  bool wait(std::chrono::milliseconds limit = std::chrono::milliseconds(10000)) {
    std::unique_lock lock(m_);
    return cv_.wait_for(lock, limit, [&] { return open_; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool open_ = false;
};

/// One connection on loopback, served by `script(fd, request)` on a thread of its own. `release`
/// lets a script that stalls finish once the test has what it wants.
class ScriptedServer {
 public:
  using Script = std::function<void(int fd, const FetchRequest& request, Latch& release)>;

  explicit ScriptedServer(Script script) {
    auto l = listen_tcp({"127.0.0.1", 0}, 4);
    EXPECT_TRUE(l.ok());
    listener_ = std::move(*l);
    port_ = local_port(listener_.fd());
    thread_ = std::thread([this, script = std::move(script)] {
      pollfd p{listener_.fd(), POLLIN, 0};
      if (::poll(&p, 1, 10000) <= 0) return;
      Socket s(::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!s.valid()) return;
      std::vector<uint8_t> buf(4 + kMaxFetchRequestBytes);
      size_t have = 0, want = 4;
      while (true) {
        size_t got = 0;
        std::string text;
        if (recv_exact(s.fd(), buf.data() + have, want - have, std::chrono::milliseconds(5000), got, text) !=
            RecvEnd::done) {
          return;
        }
        have += got;
        auto r = decode_fetch_request(buf.data(), have, want);
        if (r.ok()) {
          script(s.fd(), *r, release_);
          return;
        }
        if (r.error().code() != ErrorCode::not_found) return;
      }
    });
  }
  ~ScriptedServer() {
    release_.open();
    thread_.join();
  }
  HostPort endpoint() const { return {"127.0.0.1", port_}; }

 private:
  Socket listener_;
  uint16_t port_ = 0;
  Latch release_;
  std::thread thread_;
};

/// Sends a header and `n` payload bytes; false when the peer is gone.
inline bool send_frame(int fd, const FrameHeader& h, const void* payload, size_t n) {
  auto header = encode_frame_header(h);
  iovec iov[2] = {{header.data(), header.size()}, {const_cast<void*>(payload), n}};
  return send_all(fd, iov, n > 0 ? 2 : 1).ok();
}

}  // namespace ember::transport::testing
