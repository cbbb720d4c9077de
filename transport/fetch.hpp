// The receiving side's contract, the same for both data-plane transports: where the bytes go
// (BlobSink), what a fetch may take (FetchOptions) and what it reports (FetchResult). The transports
// (fetch_blob in tcp_fetch.hpp, ucx_fetch_blob in ucx_fetch.hpp, or either through data_plane.hpp)
// take these and drive one FrameReceiver (frame_receiver.hpp), which keeps the promises below.
//
// A fetch pulls one blob (model weights) from a blob server (a peer node's cache, the cluster
// manager's repository) into memory the caller owns, verifying every chunk's CRC-32C before the
// caller hears of it and the whole blob's SHA-256 before it returns success. It blocks its calling
// thread until the blob is complete or the transfer fails, never longer than the connect timeout
// plus, per silent gap, the idle timeout (and never beyond total_timeout); it never throws; it keeps
// no state between calls (a retry is a new call with resume_offset).
//
// Memory: BlobSink::allocate() is called once, when the blob's size is known (from the first
// frame), and returns the caller's buffer; payloads are received straight into it at their offsets
// (no intermediate copy). The caller owns the buffer after success and after failure. Bytes in it
// are trustworthy only where on_chunk() said so; the end of the last chunk reported is where a
// retry may resume (FetchOptions::resume_offset), with the same buffer holding the bytes before it.
//
// Hashing: when the transfer starts at offset 0, SHA-256 runs on a helper thread that trails the
// receiver over the verified prefix (trailing_hasher.hpp: hashing overlaps receiving; on this VM's
// CPU SHA-256 is the slowest stage, about 1 GB/s per core); for a resumed transfer, or when no
// thread can be started, the whole buffer is hashed once at the end. Either way the result is
// compared with the end frame's digest, which the server computes over the WHOLE blob.
//
// Errors of a fetch (each message names the key and the server's host:port):
//   io_error          cannot connect (refused, timed out, unresolvable), connection lost or
//                     truncated stream, idle or total timeout, server busy or stopping
//   not_found         the server has no blob `key`
//   corrupt           a chunk failed its CRC-32C (the message names the offset), the digest does
//                     not match, the size is not expected_bytes, or the stream breaks the protocol
//   out_of_memory     the sink refused the allocation
//   invalid_argument  an empty or over-long key; a resume offset beyond the blob
//   unavailable       cancelled through FetchOptions::cancel ("cancelled at offset N ...")
//   other codes       whatever the server's lookup reported, passed through
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "transport/checksum.hpp"
#include "transport/fetch_cancel.hpp"
#include "transport/ticket.hpp"
#include "transport/tls_stream.hpp"

namespace ember::transport {

/// Where the bytes go. Implemented by the caller; called on the fetch's thread only; must not throw.
class BlobSink {
 public:
  virtual ~BlobSink() = default;
  /// Called once, when the blob's size is known. Returns `blob_bytes` writable bytes that stay
  /// valid until the fetch returns (and that hold the blob's first resume_offset bytes already,
  /// for a resumed transfer); nullptr refuses (the fetch fails with out_of_memory). For an empty
  /// blob it may return nullptr.
  virtual uint8_t* allocate(uint64_t blob_bytes) = 0;
  /// Called after bytes [offset, offset + length) have arrived and passed their CRC-32C, in
  /// increasing, contiguous order. The bytes must not be modified before the fetch returns (they
  /// are still being hashed); reading them (forwarding to the next hop) is fine. A slow on_chunk
  /// slows the transfer: the server's send timeout bounds how slow.
  virtual void on_chunk(uint64_t offset, uint64_t length) = 0;
};

struct FetchOptions {
  /// Budget for the connect (all of a host's addresses together; UCX: until the request is sent).
  std::chrono::milliseconds connect_timeout{3000};
  /// A server that sends nothing for this long fails the fetch (so nothing ever hangs).
  std::chrono::milliseconds idle_timeout{10000};
  /// The whole fetch, connect included, must finish within this; 0 = no limit beyond the idle
  /// timeout. Cuts off a server that trickles bytes just often enough to stay under idle_timeout.
  std::chrono::milliseconds total_timeout{0};
  /// First byte wanted; the sink's buffer already holds [0, resume_offset) (for a range:
  /// [range_offset, resume_offset), when resume_offset is inside the range).
  uint64_t resume_offset = 0;
  /// A range fetch (one stage's layer range): only bytes [range_offset, range_offset +
  /// range_length) are fetched; range_length 0 fetches the whole blob (range_offset is then
  /// ignored). The sink still allocates the whole blob's size and the range lands at its blob
  /// offsets; on_chunk reports from the range's start (or resume_offset) on; the end frame's digest,
  /// checked before success, is the SHA-256 of exactly the bytes this call received, taken by the
  /// server as it read them: it covers the way from the server's memory or disk to the sink, not
  /// the source itself (the caller checks the range against the model's per-layer digests, as a
  /// whole blob's digest would). A range past the blob is invalid_argument.
  uint64_t range_offset = 0;
  uint64_t range_length = 0;
  /// Echoed in every frame; lets logs and a multicast chain tell transfers apart.
  uint64_t transfer_id = 0;
  /// The blob's size when known (from a manifest); 0 = unknown. A different size is `corrupt`.
  uint64_t expected_bytes = 0;
  /// SO_RCVBUF/SO_SNDBUF in bytes (0 = kernel autotuning). TCP only (UCX: UCX_TCP_RCVBUF).
  int socket_buffer_bytes = 4 << 20;
  /// The data-plane ticket for this blob (transport/ticket.hpp), sent in the request; empty: none.
  Ticket ticket;
  /// Set: the connection is TLS (transport/tls_stream.hpp; TCP only). The server must be too.
  std::shared_ptr<const DataTls> tls;
  /// Lets another thread stop the fetch (nullptr: nobody can). A cancelled fetch returns
  /// `unavailable` naming the cancellation; the sink's verified prefix stays valid for a resume.
  std::shared_ptr<FetchCancel> cancel;

  /// The connect's budget: connect_timeout, cut to total_timeout when that is shorter.
  std::chrono::milliseconds connect_budget() const {
    return total_timeout.count() > 0 && total_timeout < connect_timeout ? total_timeout : connect_timeout;
  }
  /// When the whole fetch started at `start` must be done (time_point::max() without a total timeout).
  std::chrono::steady_clock::time_point deadline_from(std::chrono::steady_clock::time_point start) const {
    return total_timeout.count() > 0 ? start + total_timeout : std::chrono::steady_clock::time_point::max();
  }
};

struct FetchResult {
  uint64_t blob_bytes = 0;      // size of the whole blob
  uint64_t bytes_received = 0;  // payload bytes this call received (blob_bytes - resume_offset; a range's end - start)
  double seconds = 0;           // from connect to verified digest
  Digest digest{};              // SHA-256 of the whole blob, verified (a range: of the bytes received)
};

}  // namespace ember::transport
