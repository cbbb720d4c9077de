// DataServer: a running blob server of either data-plane transport, so the runtime holds one
// whatever `transport: tcp|ucx` says. BlobServer (tcp_blob_server.hpp) and UcxBlobServer
// (ucx_blob_server.hpp) derive from it; start one with start_data_server() (data_plane.hpp).
//
// Every method is thread-safe and prompt; stop() is idempotent, joins every thread of the server
// and must not be called from inside a BlobLookup. The destructor stops the server.
#pragma once

#include <cstdint>

#include "transport/tcp_socket.hpp"

namespace ember::transport {

class DataServer {
 public:
  virtual ~DataServer() = default;

  /// The port actually bound (the ephemeral one when the options asked for port 0).
  virtual uint16_t port() const = 0;
  /// host:port to hand to receivers; the same addressing for both transports.
  virtual Endpoint endpoint() const = 0;
  /// Stops accepting, cuts every transfer off, joins every thread. Idempotent.
  virtual void stop() = 0;

  // Counters: read at any time.
  /// Payload bytes sent (TCP: handed to the kernel; UCX: sends completed), over all transfers.
  virtual uint64_t bytes_sent() const = 0;
  /// Transfers whose end frame went out.
  virtual uint64_t transfers_served() const = 0;
  /// Transfers that ended otherwise (abort sent, receiver gone, stopped); rejections not included.
  virtual uint64_t transfers_failed() const = 0;
  /// Transfers in progress now.
  virtual uint64_t transfers_active() const = 0;
};

}  // namespace ember::transport
