// blob_transfer_bench: loopback throughput of the data plane for one in-memory blob.
//   default          TCP (BlobServer -> fetch_blob) at several chunk sizes: the figures behind
//                    BlobServerOptions::chunk_bytes.
//   --transports     one hop over TCP and over UCX (data_plane.hpp) with the same blob, chunk size
//                    and verification, alternating, plus the floors without frames or checksums:
//                    raw TCP, raw UCX as the data plane configures it (error mode PEER: tcp lanes),
//                    and raw UCX with error mode NONE (shared memory: what the data plane gives up
//                    for clean failure handling, ucx_worker.hpp). Prints the UCX lanes used.
//   --weights F...   one hop over TCP and over UCX of each file's bytes (a model's
//                    weights.safetensors: fp32 beside its fp16 conversion), alternating, each row's
//                    time against the first file's.
//
// Server and receiver run in this one process (one transfer thread each, plus the receiver's
// trailing SHA-256 thread), so on a small VM they share the cores as two processes on one host
// would. Every fetch is fully verified (CRC-32C per chunk, SHA-256 of the blob). The server's
// digest is memoized before timing (the first fetch of a blob also pays for hashing it; that is
// printed separately). Two receive buffers: "reused" (already faulted in, like a cache slot that
// held a previous model) and "fresh" (new anonymous memory each run, paying its page faults).
// Not a test: it prints figures.
#include <arpa/inet.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/machine.hpp"
#include "transport/data_plane.hpp"
#include "transport/tcp_blob_server.hpp"
#include "transport/tcp_fetch.hpp"
#include "transport/ucx_worker.hpp"

namespace ember::bench {
namespace {

using namespace transport;
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
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
  auto listener = listen_tcp({"127.0.0.1", 0}, 1);
  if (!listener.ok()) return 0;
  tune_socket(listener->fd(), buffer_bytes);
  const HostPort to{"127.0.0.1", local_port(listener->fd())};
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

/// The UCX floor: the same bytes as active messages with rendezvous (`chunk` bytes each, two in
/// flight, as the data plane sends them) from the blob's memory straight into `dst`, no frames, no
/// checksums, both sides busy-polling. `peer_mode`: error mode PEER on a context configured as the
/// data plane's; otherwise NONE on a context with UCX's defaults (shared memory).
/// Returns seconds (0 on failure) and the client endpoint's lanes in `lanes`.
class RawUcx {
 public:
  static double seconds(bool peer_mode, const uint8_t* src, uint8_t* dst, uint64_t bytes, uint64_t chunk,
                        std::string& lanes) {
    ucp_context_h ctx = nullptr;
    std::shared_ptr<ember::transport::ucx::Context> ember_context;  // alive until the run ends
    if (peer_mode) {
      auto c = ember::transport::ucx::Context::create();
      if (!c.ok()) return 0;
      ember_context = *c;
      ctx = ember_context->get();
    } else {
      static ucp_context_h defaults = [] {
        ucp_config_t* config = nullptr;
        ucp_context_h c = nullptr;
        if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return c;
        ucp_params_t params{};
        params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
        params.features = UCP_FEATURE_AM;
        params.mt_workers_shared = 1;
        if (ucp_init(&params, config, &c) != UCS_OK) c = nullptr;
        ucp_config_release(config);
        return c;
      }();
      ctx = defaults;
    }
    if (ctx == nullptr) return 0;
    RawUcx run(ctx, peer_mode ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE, src, dst, bytes, chunk);
    return run.go(lanes);
  }

 private:
  RawUcx(ucp_context_h ctx, ucp_err_handling_mode_t mode, const uint8_t* src, uint8_t* dst, uint64_t bytes,
         uint64_t chunk)
      : ctx_(ctx), mode_(mode), src_(src), dst_(dst), bytes_(bytes), chunk_(chunk) {}

  static ucp_worker_h worker(ucp_context_h ctx) {
    ucp_worker_params_t p{};
    p.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    p.thread_mode = UCS_THREAD_MODE_SINGLE;
    ucp_worker_h w = nullptr;
    return ucp_worker_create(ctx, &p, &w) == UCS_OK ? w : nullptr;
  }
  static void set_handler(ucp_worker_h w, unsigned id, ucp_am_recv_callback_t cb, void* arg) {
    ucp_am_handler_param_t p{};
    p.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    p.id = id;
    p.cb = cb;
    p.arg = arg;
    ucp_worker_set_am_recv_handler(w, &p);
  }
  static bool wait(ucp_worker_h w, void* request, std::chrono::seconds limit = std::chrono::seconds(10)) {
    if (request == nullptr) return true;
    if (UCS_PTR_IS_ERR(request)) return false;
    const auto until = Clock::now() + limit;
    while (ucp_request_check_status(request) == UCS_INPROGRESS && Clock::now() < until) ucp_worker_progress(w);
    const bool ok = ucp_request_check_status(request) == UCS_OK;
    ucp_request_free(request);
    return ok;
  }
  /// The receiver closes first with a flush; the sender, once the receiver is gone, forcibly.
  static void close(ucp_worker_h w, ucp_ep_h ep, bool force) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    wait(w, ucp_ep_close_nbx(ep, &p), std::chrono::seconds(2));
  }

  void serve() {
    ucp_worker_h w = worker(ctx_);
    if (w == nullptr) {
      port_.store(-1);
      return;
    }
    set_handler(
        w, 1,
        [](void* arg, const void*, size_t, void*, size_t, const ucp_am_recv_param_t*) {
          static_cast<RawUcx*>(arg)->go_ = true;
          return UCS_OK;
        },
        this);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ucp_listener_params_t lp{};
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = reinterpret_cast<sockaddr*>(&addr);
    lp.sockaddr.addrlen = sizeof(addr);
    lp.conn_handler.cb = [](ucp_conn_request_h r, void* arg) { static_cast<RawUcx*>(arg)->request_ = r; };
    lp.conn_handler.arg = this;
    ucp_listener_h listener = nullptr;
    ucp_listener_attr_t la{};
    la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    if (ucp_listener_create(w, &lp, &listener) != UCS_OK || ucp_listener_query(listener, &la) != UCS_OK) {
      port_.store(-1);
      ucp_worker_destroy(w);
      return;
    }
    port_.store(ntohs(reinterpret_cast<sockaddr_in*>(&la.sockaddr)->sin_port));
    const auto until = Clock::now() + std::chrono::seconds(10);
    while (request_ == nullptr && Clock::now() < until) ucp_worker_progress(w);
    ucp_ep_h ep = nullptr;
    ucp_ep_params_t ep_params{};
    ep_params.field_mask =
        UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep_params.conn_request = request_;
    ep_params.err_mode = mode_;
    // The receiver hanging up is how the sender learns it is done.
    ep_params.err_handler.cb = [](void* arg, ucp_ep_h, ucs_status_t) { static_cast<RawUcx*>(arg)->hung_up_ = true; };
    ep_params.err_handler.arg = this;
    if (request_ != nullptr && ucp_ep_create(w, &ep_params, &ep) == UCS_OK) {
      while (!go_ && Clock::now() < until) ucp_worker_progress(w);
      std::deque<void*> in_flight;
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_AM_SEND_FLAG_RNDV;
      for (uint64_t at = 0; at < bytes_; at += chunk_) {
        const uint64_t n = std::min(chunk_, bytes_ - at);
        void* r = ucp_am_send_nbx(ep, 2, &at, sizeof(at), src_ + at, n, &p);
        if (UCS_PTR_IS_ERR(r)) break;
        if (r != nullptr) in_flight.push_back(r);
        while (in_flight.size() >= 2) {
          ucp_worker_progress(w);
          if (ucp_request_check_status(in_flight.front()) != UCS_INPROGRESS) {
            ucp_request_free(in_flight.front());
            in_flight.pop_front();
          }
        }
      }
      for (void* r : in_flight) wait(w, r);
      // The receiver hangs up first, once it has everything.
      while (!hung_up_ && Clock::now() < until) ucp_worker_progress(w);
      close(w, ep, /*force=*/true);
    }
    ucp_listener_destroy(listener);
    ucp_worker_destroy(w);
  }

  double go(std::string& lanes) {
    std::thread server([this] { serve(); });
    while (port_.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    double seconds = 0;
    ucp_worker_h w = port_.load() > 0 ? worker(ctx_) : nullptr;
    if (w != nullptr) {
      set_handler(
          w, 2,
          [](void* arg, const void* header, size_t, void* data, size_t length,
             const ucp_am_recv_param_t* param) -> ucs_status_t {
            auto* self = static_cast<RawUcx*>(arg);
            uint64_t at = 0;
            std::memcpy(&at, header, sizeof(at));
            if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
              std::memcpy(self->dst_ + at, data, length);
              self->received_ += length;
              return UCS_OK;
            }
            ucp_request_param_t p{};
            p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
            p.cb.recv_am = [](void* request, ucs_status_t, size_t length, void* user) {
              static_cast<RawUcx*>(user)->received_ += length;
              ucp_request_free(request);
            };
            p.user_data = self;
            void* r = ucp_am_recv_data_nbx(self->worker_, data, self->dst_ + at, length, &p);
            if (r == nullptr) self->received_ += length;  // done at once: no callback
            return UCS_INPROGRESS;
          },
          this);
      worker_ = w;
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(port_.load()));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ucp_ep_params_t ep_params{};
      ep_params.field_mask =
          UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
      ep_params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
      ep_params.sockaddr.addr = reinterpret_cast<sockaddr*>(&addr);
      ep_params.sockaddr.addrlen = sizeof(addr);
      ep_params.err_mode = mode_;
      ucp_ep_h ep = nullptr;
      const auto t0 = Clock::now();
      if (ucp_ep_create(w, &ep_params, &ep) == UCS_OK) {
        ucp_request_param_t p{};
        const uint64_t token = 1;
        if (wait(w, ucp_am_send_nbx(ep, 1, &token, sizeof(token), nullptr, 0, &p))) {
          const auto until = Clock::now() + std::chrono::seconds(60);
          while (received_ < bytes_ && Clock::now() < until) ucp_worker_progress(w);
          if (received_ == bytes_) seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        }
        lanes = ember::transport::ucx::endpoint_info(ep);
        close(w, ep, /*force=*/false);
      }
    }
    server.join();
    if (w != nullptr) ucp_worker_destroy(w);
    return seconds;
  }

  ucp_context_h ctx_;
  ucp_err_handling_mode_t mode_;
  const uint8_t* src_;
  uint8_t* dst_;
  uint64_t bytes_;
  uint64_t chunk_;
  std::atomic<int> port_{0};
  ucp_conn_request_h request_ = nullptr;  // server thread
  bool hung_up_ = false;                  // server thread
  bool go_ = false;                       // server thread
  ucp_worker_h worker_ = nullptr;         // client side
  uint64_t received_ = 0;                 // client side
};

std::string cell(const std::vector<double>& v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f (%.2f-%.2f)", median(v), *std::min_element(v.begin(), v.end()),
                *std::max_element(v.begin(), v.end()));
  return buf;
}

/// Only the lane lines of ucp_ep_print_info, indented.
std::string lane_lines(const std::string& info) {
  std::string out;
  size_t at = 0;
  while (at < info.size()) {
    size_t end = info.find('\n', at);
    if (end == std::string::npos) end = info.size();
    std::string line = info.substr(at, end - at);
    if (line.find("lane[") != std::string::npos || line.find("am_send") != std::string::npos ||
        line.find("rma_bw") != std::string::npos) {
      const size_t text = line.find_first_not_of("# ");
      out += "    " + (text == std::string::npos ? line : line.substr(text)) + "\n";
    }
    at = end + 1;
  }
  return out;
}

/// --transports: one hop over each data-plane transport, same blob, same chunk, full verification.
constexpr TransportKind kBothKinds[2] = {TransportKind::tcp, TransportKind::ucx};

// One data server per transport of kBothKinds, each serving `blob` under any key; false (said on
// stderr) when one cannot start.
bool start_both(const std::shared_ptr<const MemoryBlob>& blob, const BlobServerOptions& options,
                std::unique_ptr<DataServer> (&servers)[2]) {
  auto lookup = [blob](const std::string&) -> ember::Result<std::shared_ptr<const Blob>> {
    return std::static_pointer_cast<const Blob>(blob);
  };
  for (int k = 0; k < 2; ++k) {
    auto started = start_data_server(kBothKinds[k], options, lookup);
    if (!started.ok()) {
      std::fprintf(stderr, "%s\n", started.error().to_string().c_str());
      return false;
    }
    servers[k] = std::move(*started);
  }
  return true;
}

int compare_transports(const std::shared_ptr<const MemoryBlob>& blob, uint8_t* dst, uint64_t chunk_bytes, int runs,
                       int buffer_bytes) {
  const uint64_t bytes = blob->size();
  const double gib = static_cast<double>(bytes) / (1u << 30);
  std::printf("\n## TCP vs UCX, one hop: chunk %llu KiB, %d fetches each (alternating), reused receive buffer\n",
              static_cast<unsigned long long>(chunk_bytes >> 10), runs);
  std::printf("%s\n", ember::transport::ucx::describe_config().c_str());

  BlobServerOptions options;
  options.chunk_bytes = static_cast<uint32_t>(chunk_bytes);
  options.socket_buffer_bytes = buffer_bytes;
  const auto& kinds = kBothKinds;
  std::unique_ptr<DataServer> servers[2];
  if (!start_both(blob, options, servers)) return 1;
  FetchOptions fetch;
  fetch.socket_buffer_bytes = buffer_bytes;
  std::vector<double> rate[2], cpu[2];
  for (int r = 0; r < runs; ++r) {
    for (int k = 0; k < 2; ++k) {
      BufferSink sink(dst);
      const double c0 = cpu_seconds();
      auto result = fetch_blob(kinds[k], servers[k]->endpoint(), "blob", fetch, sink);
      const double c1 = cpu_seconds();
      if (!result.ok()) {
        std::fprintf(stderr, "%s fetch failed: %s\n", std::string(to_string(kinds[k])).c_str(),
                     result.error().to_string().c_str());
        return 1;
      }
      rate[k].push_back(gbps(bytes, result->seconds));
      cpu[k].push_back((c1 - c0) / gib);
    }
  }
  std::printf(
      "\n| path (every fetch verified: CRC-32C per chunk, SHA-256 of the blob) | GB/s median (min-max) | CPU s/GiB "
      "(median) |\n");
  std::printf("|---|---|---|\n");
  for (int k = 0; k < 2; ++k) {
    std::printf("| %s data plane | %s | %.2f |\n", std::string(to_string(kinds[k])).c_str(), cell(rate[k]).c_str(),
                median(cpu[k]));
  }
  std::printf("\nucx / tcp: throughput %.2fx, CPU per GiB %.2fx\n", median(rate[1]) / median(rate[0]),
              median(cpu[1]) / median(cpu[0]));
  std::fflush(stdout);

  // Floors: the same bytes without frames or checksums.
  std::vector<double> raw_tcp, raw_tcp_cpu, peer, peer_cpu, none, none_cpu;
  std::string peer_lanes, none_lanes;
  for (int r = 0; r < runs; ++r) {
    double c0 = cpu_seconds();
    raw_tcp.push_back(gbps(bytes, raw_tcp_seconds(blob->data(), dst, bytes, chunk_bytes, buffer_bytes)));
    raw_tcp_cpu.push_back((cpu_seconds() - c0) / gib);
    c0 = cpu_seconds();
    const double p = RawUcx::seconds(true, blob->data(), dst, bytes, chunk_bytes, peer_lanes);
    peer_cpu.push_back((cpu_seconds() - c0) / gib);
    c0 = cpu_seconds();
    const double n = RawUcx::seconds(false, blob->data(), dst, bytes, chunk_bytes, none_lanes);
    none_cpu.push_back((cpu_seconds() - c0) / gib);
    if (p <= 0 || n <= 0) {
      std::fprintf(stderr, "raw UCX transfer failed\n");
      return 1;
    }
    peer.push_back(gbps(bytes, p));
    none.push_back(gbps(bytes, n));
  }
  std::printf(
      "\n| floor (no frames, no checksums; UCX rows busy-poll both sides) | GB/s median (min-max) | CPU s/GiB (median) "
      "|\n");
  std::printf("|---|---|---|\n");
  std::printf("| raw TCP, %llu KiB send/recv | %s | %.2f |\n", static_cast<unsigned long long>(chunk_bytes >> 10),
              cell(raw_tcp).c_str(), median(raw_tcp_cpu));
  std::printf("| raw UCX AM rendezvous, error mode PEER (the data plane's configuration) | %s | %.2f |\n",
              cell(peer).c_str(), median(peer_cpu));
  std::printf(
      "| raw UCX AM rendezvous, error mode NONE, UCX default transports (shared memory; not used) | %s | %.2f |\n",
      cell(none).c_str(), median(none_cpu));
  std::printf("\nUCX lanes of the data plane's endpoints (error mode PEER):\n%s", lane_lines(peer_lanes).c_str());
  std::printf("UCX lanes with error mode NONE:\n%s", lane_lines(none_lanes).c_str());
  return 0;
}
// --weights: each file's bytes as the blob, fetched over TCP and UCX (one hop, the data plane's
// default chunk), alternating; a row per file with its time against the first file's.
int compare_files(const std::vector<std::string>& files, int runs, int buffer_bytes) {
  std::printf(
      "\n| file | MiB | TCP ms median (min-max) | UCX ms median (min-max) | bytes vs first | TCP time vs first "
      "| UCX time vs first |\n|---|---|---|---|---|---|---|\n");
  double first_bytes = 0, first_ms[2] = {0, 0};
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary | std::ios::ate);
    if (!in) {
      std::fprintf(stderr, "cannot open %s\n", file.c_str());
      return 1;
    }
    const auto bytes = static_cast<uint64_t>(in.tellg());
    auto owner = std::make_shared<Buffer>(std::max<uint64_t>(bytes, 1));
    in.seekg(0);
    if (owner->data() == nullptr ||
        !in.read(reinterpret_cast<char*>(owner->data()), static_cast<std::streamsize>(bytes))) {
      std::fprintf(stderr, "cannot read %s\n", file.c_str());
      return 1;
    }
    auto blob = std::make_shared<const MemoryBlob>(owner, owner->data(), bytes);
    (void)blob->digest();  // memoized before timing, as the server's cache does
    Buffer dst(std::max<uint64_t>(bytes, 1));
    std::memset(dst.data(), 0, bytes);
    BlobServerOptions options;
    options.socket_buffer_bytes = buffer_bytes;
    const auto& kinds = kBothKinds;
    std::unique_ptr<DataServer> servers[2];
    if (!start_both(blob, options, servers)) return 1;
    FetchOptions fetch;
    fetch.socket_buffer_bytes = buffer_bytes;
    std::vector<double> ms[2];
    for (int r = 0; r < runs; ++r) {
      for (int k = 0; k < 2; ++k) {
        BufferSink sink(dst.data());
        auto result = fetch_blob(kinds[k], servers[k]->endpoint(), "blob", fetch, sink);
        if (!result.ok()) {
          std::fprintf(stderr, "%s: %s fetch failed: %s\n", file.c_str(), std::string(to_string(kinds[k])).c_str(),
                       result.error().to_string().c_str());
          return 1;
        }
        ms[k].push_back(result->seconds * 1e3);
      }
    }
    if (first_bytes == 0) {
      first_bytes = static_cast<double>(bytes);
      first_ms[0] = median(ms[0]);
      first_ms[1] = median(ms[1]);
    }
    std::printf("| %s | %.1f | %s | %s | %.2fx | %.2fx | %.2fx |\n", file.c_str(),
                static_cast<double>(bytes) / (1 << 20), cell(ms[0]).c_str(), cell(ms[1]).c_str(),
                static_cast<double>(bytes) / first_bytes, median(ms[0]) / first_ms[0], median(ms[1]) / first_ms[1]);
    std::fflush(stdout);
  }
  return 0;
}
}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  using namespace ember::bench;
  uint64_t mib = 1024;
  std::vector<uint32_t> chunks_kib = {256, 1024, 4096, 16384};
  int runs = 5;
  int buffer_bytes = 4 << 20;
  bool transports = false;
  uint32_t chunk_kib = BlobServerOptions{}.chunk_bytes >> 10;  // the data plane's default
  CLI::App app{"Loopback throughput of the data plane for one in-memory blob"};
  app.add_option("--mib", mib, "Blob size in MiB")->check(CLI::Range(1, 1 << 16));
  app.add_option("--chunks-kib", chunks_kib, "Chunk sizes to try, KiB")->check(CLI::Range(4, 65536));
  app.add_option("--runs", runs, "Timed fetches per chunk size and buffer kind")->check(CLI::Range(1, 100));
  app.add_option("--socket-buffer", buffer_bytes, "SO_SNDBUF/SO_RCVBUF bytes (0 = kernel autotuning)");
  app.add_flag("--transports", transports, "Compare TCP and UCX, one hop, at --chunk-kib, with raw floors");
  std::vector<std::string> weights;
  app.add_option("--weights", weights,
                 "Files (a model's weights.safetensors, fp32 then fp16) fetched over TCP and UCX, one hop, each "
                 "against the first")
      ->check(CLI::ExistingFile);
  app.add_option("--chunk-kib", chunk_kib, "Chunk size for --transports, KiB (default: BlobServerOptions' default)")
      ->check(CLI::Range(4, 65536));
  CLI11_PARSE(app, argc, argv);

  if (!weights.empty()) {
    utsname u{};
    ::uname(&u);
    std::printf("blob_transfer_bench --weights: %d runs each, loopback; %s, %s %s, socket buffers %d\n", runs,
                cpu_model().c_str(), u.sysname, u.release, buffer_bytes);
    return compare_files(weights, runs, buffer_bytes);
  }
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
  if (transports) return compare_transports(blob, reused.data(), uint64_t{chunk_kib} << 10, runs, buffer_bytes);
  std::printf("\nGB/s as median (min-max); CPU = user + system seconds of this process per GiB, median\n");
  std::printf(
      "| chunk | raw TCP GB/s | raw TCP CPU s/GiB | fetch_blob GB/s, reused buffer | fetch_blob GB/s, fresh buffer | "
      "fetch_blob CPU s/GiB (reused) |\n");
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
    std::printf("| %u KiB | %s | %.2f | %s | %s | %.2f |\n", chunk, cell(raw).c_str(), median(raw_cpu),
                cell(warm).c_str(), cell(fresh).c_str(), median(cpu));
    std::fflush(stdout);
  }
  return 0;
}
