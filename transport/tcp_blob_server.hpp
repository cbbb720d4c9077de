// BlobServer: the sending side of the TCP data plane. It serves blobs (model weights in a node's
// cache, files in the cluster manager's repository) to receivers that call fetch_blob().
//
// Protocol, per connection: the receiver sends one FetchRequest (transport/fetch_request.hpp); the
// server answers with the frames a FrameSender (frame_sender.hpp, the protocol shared with UCX)
// hands out: data frames from the requested offset, in order and contiguous, of at most chunk_bytes
// each, then one end frame carrying the SHA-256 of the WHOLE blob (so a resumed transfer still
// verifies end to end); or one abort frame (unknown key, lookup error, bad offset, read failure,
// upstream failure) whose error code and reason the receiver reports. One transfer per
// connection; the server closes it afterwards.
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
// Chunk size: BlobServerOptions::chunk_bytes (server_options.hpp) holds the measurements behind the
// 1 MiB default, taken with this server.
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
#include "transport/server_options.hpp"
#include "transport/tcp_socket.hpp"
#include "transport/transfer_threads.hpp"

namespace ember::transport {

class BlobServer final : public DataServer {
 public:
  /// Binds, listens and starts the acceptor. invalid_argument for bad options; io_error when the
  /// address cannot be bound. `lookup` must outlive nothing: the server keeps its own copy.
  static Result<std::unique_ptr<BlobServer>> start(BlobServerOptions options, BlobLookup lookup);

  ~BlobServer() override;
  BlobServer(const BlobServer&) = delete;
  BlobServer& operator=(const BlobServer&) = delete;

  /// The port actually bound (the ephemeral one when options.listen.port was 0).
  uint16_t port() const override { return port_; }
  /// host:port to hand to receivers (the listen host, so "0.0.0.0" is not useful to a peer).
  HostPort endpoint() const override { return {options_.listen.host, port_}; }

  /// Stops accepting, cuts every transfer off, joins every thread. Idempotent; any thread except
  /// the server's own (never from inside a BlobLookup).
  void stop() override;

 protected:
  const ServerCounters& counters() const override { return counters_; }

 private:
  struct Connection;
  struct Lingering;

  BlobServer(BlobServerOptions options, BlobLookup lookup, Socket listener, int wake_read, int wake_write);
  void accept_loop();
  void admit(Socket socket);
  void reject(Socket socket, std::list<Lingering>& lingering);
  void wake();
  /// Runs one transfer on its own thread; true when the end frame went out.
  bool serve(int fd);
  /// Slice of the waits for a growing blob's bytes (stop() is noticed between slices); at most
  /// options_.upstream_wait in all per chunk.
  static constexpr std::chrono::milliseconds kUpstreamPoll{100};

  const BlobServerOptions options_;
  const BlobLookup lookup_;
  Socket listener_;
  uint16_t port_ = 0;
  int wake_read_ = -1;   // self-pipe: stop() and finished transfers wake the acceptor's poll
  int wake_write_ = -1;
  std::thread acceptor_;

  TransferThreads<Connection> connections_;
  std::atomic<bool> stopping_{false};
  std::mutex stop_mutex_;  // serializes stop() calls
  bool stopped_ = false;   // under stop_mutex_: stop() ran to the end

  ServerCounters counters_;
};

}  // namespace ember::transport
