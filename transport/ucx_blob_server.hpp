// UcxBlobServer: the sending side of the UCX data plane, the same service as the TCP BlobServer
// (tcp_blob_server.hpp) over UCX active messages. Receivers call ucx_fetch_blob()
// (ucx_fetch.hpp); the runtime picks a transport with start_data_server() (data_plane.hpp).
//
// Protocol, per UCX endpoint (one transfer each), the TCP protocol message for message:
//   1. The receiver connects to host:port (UCX client-server flow over a socket address) and sends
//      one active message kRequestAm whose header is the encoded FetchRequest (fetch_request.hpp).
//   2. The server looks the key up and answers with active messages kFrameAm, one per frame of
//      frame.hpp: the AM header is the encoded frame header (the same Cap'n Proto header as TCP,
//      with its 4-byte length prefix), the AM data is the payload. Data frames run from the
//      requested offset, in order and contiguous, at most chunk_bytes each, with the CRC-32C of
//      their payload; then one end frame carrying the SHA-256 of the WHOLE blob; or one abort
//      frame (unknown key, lookup error, bad offset, read failure, upstream failure, busy, stopping)
//      whose error code and reason the receiver reports.
//   3. The receiver closes the endpoint when it has the end or abort frame; the server closes only
//      then (or after send_timeout): the two sides' connection managers and data lanes are separate
//      sockets, so a server closing first could overtake its own last frame.
// Beyond max_transfers, a connection is accepted on the acceptor's worker and answered with an
// abort frame "busy" (transfer id 0: its request is never read), then closed after the receiver
// hung up or kRejectLinger.
//
// Zero copies beyond the transport's: a data frame is sent from the blob's memory (Blob::data())
// when it has any, else read() into one of kSendWindow staging chunks; payloads travel by UCX
// rendezvous (the receiver pulls them into its own buffer at their offset). kSendWindow data frames
// are in flight at once per transfer.
//
// Owns: one UCX worker and thread for the listener (the acceptor), and one worker and thread per
// transfer in progress (at most max_transfers). Every thread sleeps in poll(2) on its worker's
// event fd when there is nothing to do, so an idle server uses no CPU. Callers: whoever owns the
// server, from any thread; the BlobLookup runs on the transfer threads. Nothing here throws or
// blocks its caller (start() and stop() are prompt), or touches a device.
//
// Options (BlobServerOptions, shared with TCP): host, port, chunk_bytes, max_transfers,
// request_timeout, upstream_wait and corrupt_frame mean what they mean for TCP. send_timeout: a
// receiver that completes no send (takes no bytes) for this long is cut off. socket_buffer_bytes is
// not used (UCX sizes its own sockets: UCX_TCP_SNDBUF / UCX_TCP_RCVBUF).
// UCX configuration (error mode PEER, tcp lanes, UCX_TLS): see ucx_worker.hpp.
//
// Growing blobs (a multicast hop forwarding a blob still arriving): before a chunk goes out the
// transfer waits until blob.readable() covers it, in kUpstreamPoll slices (so stop() is prompt) for
// at most upstream_wait, then aborts with `unavailable`; a writer that fail()s aborts the transfer
// with its error.
//
// Lifecycle: start() -> serving -> stop() (idempotent; also run by the destructor). stop() closes
// the listener, force-closes every transfer's endpoint (after a best-effort abort frame
// "stopping"; its receiver sees that abort or a lost connection, io_error either way), and joins
// every thread before it returns.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "config/status.hpp"
#include "transport/blob.hpp"
#include "transport/data_server.hpp"
#include "transport/tcp_blob_server.hpp"

namespace ember::transport {

class UcxBlobServer final : public DataServer {
 public:
  /// Data frames in flight per transfer (each a rendezvous: its send completes when the receiver
  /// has pulled the payload). Two keep the pipe full on loopback; more only cost staging memory.
  static constexpr size_t kSendWindow = 2;
  /// How long a turned-away ("busy") connection is kept so that its receiver reads the abort.
  static constexpr std::chrono::milliseconds kRejectLinger{1000};
  /// Slice of the waits for a growing blob's bytes (stop() is noticed between slices).
  static constexpr std::chrono::milliseconds kUpstreamPoll{100};

  /// Creates the listener and starts the acceptor. invalid_argument for bad options; io_error when
  /// UCX is unusable (no tcp in UCX_TLS, /sys not mounted) or the address cannot be bound.
  static Result<std::unique_ptr<UcxBlobServer>> start(BlobServerOptions options, BlobLookup lookup);

  ~UcxBlobServer() override;
  UcxBlobServer(const UcxBlobServer&) = delete;
  UcxBlobServer& operator=(const UcxBlobServer&) = delete;

  uint16_t port() const override;
  Endpoint endpoint() const override;
  void stop() override;

  uint64_t bytes_sent() const override;
  uint64_t transfers_served() const override;
  uint64_t transfers_failed() const override;
  uint64_t transfers_active() const override;
  /// Connections turned away with "busy" because max_transfers were in progress.
  uint64_t connections_rejected() const;

  struct Impl;  // public only so the .cpp's callbacks can name it

 private:
  explicit UcxBlobServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::transport
