// blob_transfer_bench: loopback throughput of the TCP data plane (BlobServer -> fetch_blob) for one
// in-memory blob at several chunk sizes; the figures behind BlobServerOptions::chunk_bytes.
//
// Server and receiver run in this one process (one transfer thread each, plus the receiver's
// trailing SHA-256 thread), so on a small VM they share the cores as two processes on one host
// would. Every fetch is fully verified (CRC-32C per chunk, SHA-256 of the blob). The server's
// digest is memoized before timing (the first fetch of a blob also pays for hashing it; that is
// printed separately). Two receive buffers: "reused" (already faulted in, like a cache slot that
// held a previous model) and "fresh" (new anonymous memory each run, paying its page faults).
// Not a test: it prints figures.
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>

#include "transport/tcp_blob_server.hpp"
#include "transport/tcp_fetch.hpp"

namespace ember::bench {
namespace {

using namespace transport;
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

/// Anonymous memory: munmap'd on destruction, so a "fresh" buffer really is fresh each run.
class Buffer {
 public:
  explicit Buffer(uint64_t bytes) : bytes_(bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  }
  ~Buffer() {
    if (data_ != nullptr) ::munmap(data_, bytes_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint8_t* data() const { return data_; }

 private:
  uint64_t bytes_;
  uint8_t* data_;
};

class BufferSink final : public BlobSink {
 public:
  explicit BufferSink(uint8_t* buffer) : buffer_(buffer) {}
  uint8_t* allocate(uint64_t) override { return buffer_; }
  void on_chunk(uint64_t, uint64_t) override {}

 private:
  uint8_t* buffer_;
};

double gbps(uint64_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / 1e9; }

/// CPU seconds (user + system) this process has used: less noisy than wall time on a shared VM.
double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/// The floor: the same bytes over a plain loopback connection in `chunk`-byte send/recv calls, no
/// frames, no checksums (the setup of dependencies.md §7). Returns seconds.
double raw_tcp_seconds(const uint8_t* src, uint8_t* dst, uint64_t bytes, uint64_t chunk, int buffer_bytes) {
  auto listener = listen_tcp("127.0.0.1", 0, 1);
  if (!listener.ok()) return 0;
  tune_socket(listener->fd(), buffer_bytes);
  const Endpoint to{"127.0.0.1", local_port(listener->fd())};
  std::thread sender([&] {
    pollfd p{listener->fd(), POLLIN, 0};
    ::poll(&p, 1, 5000);
    Socket s(::accept(listener->fd(), nullptr, nullptr));
    tune_socket(s.fd(), buffer_bytes);
    for (uint64_t at = 0; at < bytes; at += chunk) {
      iovec iov{const_cast<uint8_t*>(src) + at, static_cast<size_t>(std::min(chunk, bytes - at))};
      if (!send_all(s.fd(), &iov, 1).ok()) return;
    }
  });
  const auto t0 = Clock::now();
  auto s = connect_tcp(to, std::chrono::milliseconds(5000), buffer_bytes);
  for (uint64_t at = 0; s.ok() && at < bytes;) {
    const ssize_t n = ::recv(s->fd(), dst + at, static_cast<size_t>(std::min(chunk, bytes - at)), MSG_WAITALL);
    if (n <= 0) break;
    at += static_cast<uint64_t>(n);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  sender.join();
  return seconds;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  using namespace ember::bench;
  uint64_t mib = 1024;
  std::vector<uint32_t> chunks_kib = {256, 1024, 4096, 16384};
  int runs = 5;
  int buffer_bytes = 4 << 20;
  CLI::App app{"Loopback throughput of BlobServer -> fetch_blob for one in-memory blob"};
  app.add_option("--mib", mib, "Blob size in MiB")->check(CLI::Range(1, 1 << 16));
  app.add_option("--chunks-kib", chunks_kib, "Chunk sizes to try, KiB")->check(CLI::Range(4, 65536));
  app.add_option("--runs", runs, "Timed fetches per chunk size and buffer kind")->check(CLI::Range(1, 100));
  app.add_option("--socket-buffer", buffer_bytes, "SO_SNDBUF/SO_RCVBUF bytes (0 = kernel autotuning)");
  CLI11_PARSE(app, argc, argv);

  const uint64_t bytes = mib << 20;
  utsname u{};
  ::uname(&u);
  std::printf("blob_transfer_bench: %llu MiB in-memory blob, loopback, %d runs each; %s, %s %s, socket buffers %d\n",
              static_cast<unsigned long long>(mib), runs, cpu_model().c_str(), u.sysname, u.release, buffer_bytes);

  // The blob: pseudo-random bytes (xorshift), so nothing downstream can shortcut on zeros.
  auto owner = std::make_shared<Buffer>(bytes);
  if (owner->data() == nullptr) {
    std::fprintf(stderr, "cannot map %llu bytes\n", static_cast<unsigned long long>(bytes));
    return 1;
  }
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (uint64_t i = 0; i + 8 <= bytes; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(owner->data() + i, &x, 8);
  }
  auto blob = std::make_shared<const MemoryBlob>(owner, owner->data(), bytes);

  // Context: what one core does alone on these bytes.
  {
    const auto t0 = Clock::now();
    auto d = blob->digest();  // memoizes the server's digest before any timed fetch
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    uint32_t crc = 0;
    const auto t1 = Clock::now();
    crc = crc32c(owner->data(), bytes, crc);
    const double c = std::chrono::duration<double>(Clock::now() - t1).count();
    std::printf("one core: SHA-256 %.2f GB/s, CRC-32C %.2f GB/s (crc %08x, digest %s...)\n", gbps(bytes, s),
                gbps(bytes, c), crc, d.ok() ? to_hex(*d).substr(0, 12).c_str() : "error");
  }

  Buffer reused(bytes);
  std::memset(reused.data(), 0, bytes);  // fault it in once
  std::printf("\nGB/s as median (min-max); CPU = user + system seconds of this process per GiB, median\n");
  std::printf("| chunk | raw TCP GB/s | raw TCP CPU s/GiB | fetch_blob GB/s, reused buffer | fetch_blob GB/s, fresh buffer | fetch_blob CPU s/GiB (reused) |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (uint32_t chunk : chunks_kib) {
    const uint64_t chunk_bytes = uint64_t{chunk} << 10;
    std::vector<double> raw, raw_cpu;
    for (int r = 0; r < runs; ++r) {
      const double c0 = cpu_seconds();
      raw.push_back(gbps(bytes, raw_tcp_seconds(owner->data(), reused.data(), bytes, chunk_bytes, buffer_bytes)));
      raw_cpu.push_back((cpu_seconds() - c0) / (static_cast<double>(bytes) / (1u << 30)));
    }

    BlobServerOptions options;
    options.chunk_bytes = static_cast<uint32_t>(chunk_bytes);
    options.socket_buffer_bytes = buffer_bytes;
    auto server = BlobServer::start(options, [&](const std::string&) -> ember::Result<std::shared_ptr<const Blob>> {
      return std::static_pointer_cast<const Blob>(blob);
    });
    if (!server.ok()) {
      std::fprintf(stderr, "%s\n", server.error().to_string().c_str());
      return 1;
    }
    FetchOptions fetch;
    fetch.socket_buffer_bytes = buffer_bytes;
    std::vector<double> warm, fresh, cpu;
    for (int r = 0; r < runs; ++r) {
      for (int kind = 0; kind < 2; ++kind) {
        std::unique_ptr<Buffer> own;
        uint8_t* dst = reused.data();
        if (kind == 1) {
          own = std::make_unique<Buffer>(bytes);
          dst = own->data();
        }
        BufferSink sink(dst);
        const double c0 = cpu_seconds();
        auto result = fetch_blob((*server)->endpoint(), "blob", fetch, sink);
        const double c1 = cpu_seconds();
        if (!result.ok()) {
          std::fprintf(stderr, "fetch failed: %s\n", result.error().to_string().c_str());
          return 1;
        }
        (kind == 0 ? warm : fresh).push_back(gbps(bytes, result->seconds));
        if (kind == 0) cpu.push_back((c1 - c0) / (static_cast<double>(bytes) / (1u << 30)));
      }
    }
    auto cell = [](const std::vector<double>& v) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.2f (%.2f-%.2f)", median(v), *std::min_element(v.begin(), v.end()),
                    *std::max_element(v.begin(), v.end()));
      return std::string(buf);
    };
    std::printf("| %u KiB | %s | %.2f | %s | %s | %.2f |\n", chunk, cell(raw).c_str(), median(raw_cpu), cell(warm).c_str(),
                cell(fresh).c_str(), median(cpu));
    std::fflush(stdout);
  }
  return 0;
}
