// Helpers shared by the data-plane transfer tests: random bytes, a sink over a vector, a blob that
// must be read (and may read wrong or fail), a lookup over a map, a bounded wait, and a raw
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
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "transport/blob.hpp"
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

/// A blob without memory: every byte goes through read(), as a file's. read() flips the byte at
/// `flip_at` (what a failing disk or a bad DIMM would send: the CRC is computed over the wrong
/// bytes, so only the end-to-end digest can catch it) and fails with io_error from `fail_at` on.
class ReadBlob final : public Blob {
 public:
  explicit ReadBlob(std::vector<uint8_t> bytes, uint64_t flip_at = UINT64_MAX, uint64_t fail_at = UINT64_MAX)
      : bytes_(std::move(bytes)), flip_at_(flip_at), fail_at_(fail_at) {}
  uint64_t size() const override { return bytes_.size(); }
  Status read(uint64_t offset, void* dst, uint64_t n) const override {
    if (offset + n > fail_at_) return io_error("disk sector unreadable");
    std::memcpy(dst, bytes_.data() + offset, n);
    if (flip_at_ >= offset && flip_at_ < offset + n) static_cast<uint8_t*>(dst)[flip_at_ - offset] ^= 0x01;
    return Status::OK();
  }

 protected:
  Result<Digest> compute_digest() const override { return Sha256::of(bytes_.data(), bytes_.size()); }

 private:
  std::vector<uint8_t> bytes_;
  uint64_t flip_at_;
  uint64_t fail_at_;
};

/// A lookup over a fixed map of blobs; not_found "no blob 'key'" otherwise.
inline BlobLookup lookup_of(std::map<std::string, std::shared_ptr<const Blob>> blobs) {
  return [blobs = std::move(blobs)](const std::string& key) -> Result<std::shared_ptr<const Blob>> {
    auto it = blobs.find(key);
    if (it == blobs.end()) return not_found("no blob '" + key + "'");
    return it->second;
  };
}

/// Polls `done` for up to `limit` (server counters settle after the receiver returns).
inline bool eventually(const std::function<bool()>& done,
                       std::chrono::milliseconds limit = std::chrono::milliseconds(2000)) {
  for (auto until = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(std::chrono::milliseconds(1))) {
    if (done()) return true;
  }
  return done();
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
