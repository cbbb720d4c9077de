// BlobServer: the sending side of the TCP data plane. It serves blobs (model weights in a node's
// cache, files in the cluster manager's repository) to receivers that call fetch_blob().
//
// Protocol, per connection: the receiver sends one FetchRequest (transport/fetch_request.hpp); the
// server looks the key up and answers with data frames from the requested offset, in order and
// contiguous, of at most chunk_bytes each, then one end frame carrying the SHA-256 of the WHOLE
// blob (so a resumed transfer still verifies end to end); or with one abort frame (unknown key,
// lookup error, bad offset, read failure, too many transfers) whose error code and reason the
// receiver reports. One transfer per connection; the server closes it afterwards.
//
// Owns: the listening socket, one acceptor thread, and one thread per transfer in progress (at
// most max_transfers; a connection beyond that gets an abort frame "busy" at once, with transfer
// id 0 because its request was never read). Callers: whoever owns the server (the node's cache, the
// cluster manager's repository), from any thread; the BlobLookup runs on the transfer threads.
// Nothing here throws, blocks its caller (start() and stop() are prompt), or touches a device.
// A receiver that disconnects or stops reading for send_timeout ends its transfer only.
//
// The end frame needs the blob's digest: memoized in the Blob, or given to it (MemoryBlob and
// FileBlob take a known digest). Otherwise the first transfer of a Blob object hashes it after the
// last data frame, a silence of about 1 s per GB (SHA-256 at ~1 GB/s here) that the receiver's idle
// timeout must cover; a lookup that builds a new Blob per request pays that on every transfer.
//
// Sends gather the frame header and the payload in one sendmsg; an in-memory blob's bytes go from
// its buffer straight to the socket (no copy in user space), a file's through one chunk buffer per
// transfer.
//
// Chunk size, measured with bench/blob_transfer_bench: a 1 GiB in-memory blob over loopback, server
// and receiver in one process on the 2-vCPU VM of dependencies.md §7 (Xeon, 2.0 GHz, SHA-NI),
// every fetch fully verified; median of 5 fetches (the 16 MiB row from a second run: the first was
// disturbed by other builds on the VM). CPU = user + system seconds of the process per GiB.
//   chunk     fetch_blob GB/s    fresh-buffer GB/s   CPU s/GiB   raw TCP GB/s (CPU s/GiB)
//   256 KiB   1.04               0.82                1.68        3.23 (0.55)
//   1 MiB     1.05               0.83                1.71        3.04 (0.53)
//   4 MiB     1.02               0.79                1.67        2.58 (0.56)
//   16 MiB    1.02               0.83                1.79        2.49
// One core hashes SHA-256 at 1.07 GB/s here, and the receiver's SHA-256 is the ceiling: every
// chunk size from 256 KiB to 16 MiB gives the same rate and the same CPU per byte (per-chunk costs,
// a header and a few syscalls, are noise at these sizes). So the default is chosen on other
// grounds: a hop of a multicast chain forwards a chunk only once it holds all of it, so each hop
// adds one chunk's transfer time to the chain. bench/multicast.py, 1.5 GiB to 4 receivers over
// 1 Gbit/s links (netns, MTU 9000): 1 MiB chunks 1.031x the ideal time, 4 MiB chunks 1.062x
// (N = 3: 1.030x vs 1.048x). Hence 1 MiB: ~8 ms per hop at 1 Gbit/s, and a failed fetch loses at
// most one unverified MiB. "Fresh buffer": a receive buffer never touched before; its page faults
// cost about 20% (model buffers now ask for 2 MiB pages, gpu/host_buffer.cpp).
//
// Lifecycle: start() -> serving -> stop() (idempotent; also run by the destructor). stop() closes
// the listening socket, shuts every transfer's socket down (its receiver sees a truncated stream),
// and joins every thread before it returns.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.hpp"
#include "transport/blob.hpp"
#include "transport/data_server.hpp"
#include "transport/tcp_socket.hpp"

namespace ember::transport {

struct BlobServerOptions {
  /// Address to listen on. Loopback by default: the data plane has no authentication, so serving
  /// beyond the host is a decision the caller makes ("0.0.0.0" or an interface address).
  std::string host = "127.0.0.1";
  /// TCP port; 0 = an ephemeral port, read back with BlobServer::port().
  uint16_t port = 0;
  /// Payload bytes per data frame, 4 KiB .. kMaxChunkBytes. Default 1 MiB, chosen by measurement
  /// (above). Smaller costs a syscall and a header per chunk; larger delays the first forwarded
  /// chunk of a multicast chain and the granularity of resume.
  uint32_t chunk_bytes = 1u << 20;
  /// Transfers in progress at once (one thread each), at least 1. Beyond it: abort "busy".
  uint32_t max_transfers = 8;
  /// SO_SNDBUF/SO_RCVBUF in bytes (0 = kernel autotuning). 4 MiB matches the measured figures.
  int socket_buffer_bytes = 4 << 20;
  /// A connection must deliver its request within this; otherwise it is closed.
  std::chrono::milliseconds request_timeout{5000};
  /// A receiver that accepts no bytes for this long is cut off (SO_SNDTIMEO).
  std::chrono::milliseconds send_timeout{30000};
  /// A blob still arriving (Blob::readable() < size(): this node is a multicast hop) is forwarded
  /// as its bytes come; when none come for this long the transfer is aborted with `unavailable`
  /// and the receiver asks its controller for another upstream.
  std::chrono::milliseconds upstream_wait{30000};
  /// Fault seam (tests, drills): flip one bit in the payload of the Nth data frame this server
  /// sends (1-based, over its life) after its CRC-32C was computed. 0 = never.
  uint64_t corrupt_frame = 0;
};

class BlobServer final : public DataServer {
 public:
  /// Binds, listens and starts the acceptor. invalid_argument for bad options; io_error when the
  /// address cannot be bound. `lookup` must outlive nothing: the server keeps its own copy.
  static Result<std::unique_ptr<BlobServer>> start(BlobServerOptions options, BlobLookup lookup);

  ~BlobServer() override;
  BlobServer(const BlobServer&) = delete;
  BlobServer& operator=(const BlobServer&) = delete;

  /// The port actually bound (the ephemeral one when options.port was 0).
  uint16_t port() const override { return port_; }
  /// host:port to hand to receivers (the listen host, so "0.0.0.0" is not useful to a peer).
  Endpoint endpoint() const override { return {options_.host, port_}; }

  /// Stops accepting, cuts every transfer off, joins every thread. Idempotent; any thread except
  /// the server's own (never from inside a BlobLookup).
  void stop() override;

  // Counters: plain atomics, read at any time (metrics export comes later).
  /// Payload bytes handed to the kernel, over all transfers.
  uint64_t bytes_sent() const override { return bytes_sent_.load(std::memory_order_relaxed); }
  /// Transfers that sent their end frame.
  uint64_t transfers_served() const override { return served_.load(std::memory_order_relaxed); }
  /// Transfers that ended otherwise (abort sent, receiver gone, stopped); rejections not included.
  uint64_t transfers_failed() const override { return failed_.load(std::memory_order_relaxed); }
  /// Transfers in progress now.
  uint64_t transfers_active() const override { return active_.load(std::memory_order_relaxed); }
  /// Connections turned away with "busy" because max_transfers were in progress.
  uint64_t connections_rejected() const { return rejected_.load(std::memory_order_relaxed); }

 private:
  struct Connection;
  struct Lingering;

  BlobServer(BlobServerOptions options, BlobLookup lookup, Socket listener, int wake_read, int wake_write);
  void accept_loop();
  void admit(Socket socket);
  void reject(Socket socket, std::list<Lingering>& lingering);
  void reap(bool all);
  void wake();
  /// Runs one transfer on its own thread; true when the end frame went out.
  bool serve(int fd);
  Status stream(int fd, uint64_t transfer_id, const std::string& key, const Blob& blob, uint64_t offset);
  /// Waits until [0, end) of a growing blob is readable, in kUpstreamPoll slices (so stop() is
  /// prompt), at most options_.upstream_wait.
  Status wait_for_bytes(const Blob& blob, uint64_t end);
  static constexpr std::chrono::milliseconds kUpstreamPoll{100};

  const BlobServerOptions options_;
  const BlobLookup lookup_;
  Socket listener_;
  uint16_t port_ = 0;
  int wake_read_ = -1;   // self-pipe: stop() and finished transfers wake the acceptor's poll
  int wake_write_ = -1;
  std::thread acceptor_;

  std::mutex mutex_;  // guards connections_
  std::list<std::unique_ptr<Connection>> connections_;
  std::atomic<bool> stopping_{false};
  std::mutex stop_mutex_;  // serializes stop() calls
  bool stopped_ = false;   // under stop_mutex_: stop() ran to the end

  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> served_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> active_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> frames_sent_{0};
};

}  // namespace ember::transport
