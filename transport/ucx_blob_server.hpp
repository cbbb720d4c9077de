// UcxBlobServer: the sending side of the UCX data plane, the same service as the TCP BlobServer
// (tcp_blob_server.hpp) over UCX active messages. Receivers call ucx_fetch_blob()
// (ucx_fetch.hpp); the runtime picks a transport with start_data_server() (data_plane.hpp).
//
// Protocol, per UCX endpoint (one transfer each), the TCP protocol message for message (the frames
// come from the same FrameSender, frame_sender.hpp):
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
// hung up or kRejectLinger (server_options.hpp).
//
// Zero copies beyond the transport's: a data frame is sent from the blob's memory (Blob::data())
// when it has any, else read() into one of kSendWindow staging chunks; payloads travel by UCX
// rendezvous straight into the receiver's buffer at their offset (over tcp lanes: sendmsg from the
// blob's memory, recv into the sink's buffer, as TCP). kSendWindow data frames are in flight at
// once per transfer.
//
// Owns: a UCX context, one worker and thread for the listener (the acceptor), and one worker and
// thread per transfer in progress (at most max_transfers). Every thread sleeps in poll(2) on its
// worker's event fd when there is nothing to do, so an idle server uses no CPU. When a transfer's
// worker cannot be created (a network device the context listed is gone), that connection is
// refused and the acceptor rebuilds context, worker and listener on the same port; transfers in
// progress keep the old context until they end. Callers: whoever owns the server, from any
// thread; the BlobLookup runs on the transfer threads. Nothing here throws or blocks its caller
// (start() and stop() are prompt), or touches a device.
//
// Throughput, measured with bench/blob_transfer_bench --transports: a 1 GiB in-memory blob over
// loopback, server and receiver in one process on the 2-vCPU VM of dependencies.md §7 (Xeon,
// SHA-NI; one core hashes SHA-256 at 1.05-1.17 GB/s), every fetch fully verified, median of 5
// fetches; GB/s (CPU s/GiB), two runs at 4 MiB chunks and one at 1 MiB:
//   path                                        4 MiB                    1 MiB
//   tcp data plane (BlobServer, fetch_blob)     1.08 (1.64), 1.10 (1.61)  0.97 (1.68)
//   ucx data plane (this, ucx_fetch_blob)       1.11 (1.63), 1.06 (1.65)  0.97 (1.80)
//   raw TCP, no frames or checksums             2.81, 2.78                3.17
//   raw UCX AM rendezvous, PEER (tcp lanes)     3.43, 3.36                3.18
//   raw UCX AM rendezvous, NONE (sysv + cma)    3.99, 3.80                3.89
// Both transports run at the receiver's SHA-256 rate: the one sequential hash of the whole blob is
// the ceiling, not the transport, and shared memory (error mode NONE) would not raise it. The raw
// UCX rows busy-poll both sides; with other work on the cores they collapse (0.5 GB/s seen while
// two compilers ran) while the data plane, which sleeps on event fds, keeps pace with TCP.

// Options (BlobServerOptions, server_options.hpp, shared with TCP): host, port, chunk_bytes, max_transfers,
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

#include "base/status.hpp"
#include "transport/blob.hpp"
#include "transport/data_server.hpp"
#include "transport/server_options.hpp"

namespace ember::transport {

class UcxBlobServer final : public DataServer {
 public:
  /// Data frames in flight per transfer (each a rendezvous: its send completes when the receiver
  /// has pulled the payload): one on the wire while the next is announced. More would cost staging
  /// memory for read() blobs and cannot beat the receiver's hash (figures above).
  static constexpr size_t kSendWindow = 2;
  /// Slice of the waits for a growing blob's bytes (stop() is noticed between slices).
  static constexpr std::chrono::milliseconds kUpstreamPoll{100};

  /// Creates the listener and starts the acceptor. invalid_argument for bad options; io_error when
  /// UCX is unusable (no tcp in UCX_TLS, /sys not mounted) or the address cannot be bound.
  static Result<std::unique_ptr<UcxBlobServer>> start(BlobServerOptions options, BlobLookup lookup);

  ~UcxBlobServer() override;
  UcxBlobServer(const UcxBlobServer&) = delete;
  UcxBlobServer& operator=(const UcxBlobServer&) = delete;

  uint16_t port() const override;
  HostPort endpoint() const override;
  void stop() override;

  struct Impl;  // public only so the .cpp's callbacks can name it

 protected:
  const ServerCounters& counters() const override;

 private:
  explicit UcxBlobServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::transport
