// DataServer: a running blob server of either data-plane transport, so the runtime holds one
// whatever `transport: tcp|ucx` says. BlobServer (tcp_blob_server.hpp) and UcxBlobServer
// (ucx_blob_server.hpp) derive from it; start one with start_data_server() (data_plane.hpp).
//
// Every method is thread-safe and prompt; stop() is idempotent, joins every thread of the server
// and must not be called from inside a BlobLookup. The destructor stops the server.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/host_port.hpp"

namespace ember::transport {

/// What a server counts, kept by its transfer threads and its acceptor: relaxed atomics, read at
/// any time through DataServer.
struct ServerCounters {
  std::atomic<uint64_t> bytes_sent{0};   // payload bytes (TCP: handed to the kernel; UCX: sends completed)
  std::atomic<uint64_t> served{0};       // transfers whose end frame went out
  std::atomic<uint64_t> failed{0};       // transfers that ended otherwise
  std::atomic<uint64_t> active{0};       // transfers in progress
  std::atomic<uint64_t> rejected{0};     // connections turned away "busy"
  std::atomic<uint64_t> data_frames{0};  // data frames over the server's life: the corrupt_frame seam
};

class DataServer {
 public:
  virtual ~DataServer() = default;

  /// The port actually bound (the ephemeral one when the options asked for port 0).
  virtual uint16_t port() const = 0;
  /// host:port to hand to receivers; the same addressing for both transports.
  virtual HostPort endpoint() const = 0;
  /// Stops accepting, cuts every transfer off, joins every thread. Idempotent.
  virtual void stop() = 0;

  // Counters: read at any time (metrics export comes later).
  /// Payload bytes sent (TCP: handed to the kernel; UCX: sends completed), over all transfers.
  uint64_t bytes_sent() const { return counters().bytes_sent.load(std::memory_order_relaxed); }
  /// Transfers whose end frame went out.
  uint64_t transfers_served() const { return counters().served.load(std::memory_order_relaxed); }
  /// Transfers that ended otherwise (abort sent, receiver gone, stopped); rejections not included.
  uint64_t transfers_failed() const { return counters().failed.load(std::memory_order_relaxed); }
  /// Transfers in progress now.
  uint64_t transfers_active() const { return counters().active.load(std::memory_order_relaxed); }
  /// Connections turned away with "busy" because max_transfers were in progress.
  uint64_t connections_rejected() const { return counters().rejected.load(std::memory_order_relaxed); }

 protected:
  virtual const ServerCounters& counters() const = 0;
};

}  // namespace ember::transport
