// FrameSender: the sending side of the transfer protocol (fetch_request.hpp, frame.hpp) as a plain
// object: it turns one decoded FetchRequest and the server's BlobLookup into the frames of the
// answer (data frames of at most chunk_bytes from the requested offset, in order and contiguous,
// then one end frame carrying the SHA-256 of the WHOLE blob, so a resumed transfer still verifies
// end to end; for a range request, data frames up to offset + length and an end frame there carrying
// the SHA-256 of the bytes sent, hashed as they are handed out) or into one abort frame for every
// failure: a request that does not decode (transfer id 0: it was never read), a lookup error or a
// lookup without a blob, an offset or a range beyond the blob, a growing blob whose writer fails or
// stalls, a read that fails, a digest that cannot be had.
// Both servers drive one per transfer: tcp_blob_server.cpp writes each frame with sendmsg, and
// ucx_sender.cpp posts each as an active message inside its send window. Sockets, workers,
// windows, send timeouts and stop() stay in the transports; this object does no network I/O and
// reads no clock (time is a parameter of next()).
//
// What it does touch: the Blob. Blob::read() fills one of `staging_chunks` staging buffers for a
// blob without memory (a file), in turn; wait() blocks on a growing blob for at most the slice the
// transport gives; the end frame asks Blob::digest() (memoized; a blob's first transfer may hash it
// there, ~1 s per GB). The transport owns the waiting between slices, so that it can notice a stop
// or a receiver gone and keep its own worker progressing.
//
// One transfer's thread only; not thread-safe; never throws. The fault seam BlobServerOptions::
// corrupt_frame counts data frames over the server's life through the counter the server passes.
//
// Lifecycle (next() reports send, wait or done):
//   unopened ──open(request, lookup)──▶ streaming      (or ──▶ aborting: bad request, lookup, offset)
//   streaming ──next(): chunk readable──▶ streaming    [send: data frame]
//   streaming ──next(): chunk not readable yet──▶ waiting        [wait: the transport calls wait(slice)]
//   waiting ──next(): readable──▶ streaming  | ──writer failed / upstream_wait passed──▶ aborting
//   streaming ──next(): read fails──▶ aborting
//   streaming ──next(): every data frame out, digest known──▶ finished (served)   [send: end frame]
//   aborting ──next()──▶ finished (failed)                                        [send: abort frame]
//   any ──abort(error) from the transport (the server stops)──▶ finished (failed) [the abort frame]
//   finished ──next()──▶ finished                                                 [done]
//
// Invariants: a frame's payload stays valid until the frame is destroyed or, for a staging chunk,
// until staging_chunks further data frames were asked for (a transport keeps at most that many in
// flight); exactly one end or abort frame is ever produced, and nothing after it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "transport/blob.hpp"
#include "transport/fetch_request.hpp"
#include "transport/frame.hpp"
#include "transport/server_options.hpp"

namespace ember::transport {

class FrameSender {
 public:
  using Clock = std::chrono::steady_clock;

  /// One frame to put on the wire: the encoded header (length prefix included), then
  /// `payload_bytes` bytes at `payload` (none for end and abort frames).
  struct Frame {
    FrameKind kind = FrameKind::data;
    std::vector<uint8_t> header;
    const uint8_t* payload = nullptr;  // the blob's memory, a staging chunk, or `corrupted`
    uint32_t payload_bytes = 0;
    /// The corrupt_frame seam's copy of a payload with one bit flipped after its CRC-32C was taken;
    /// `payload` points into it, and moving the Frame keeps it there.
    std::vector<uint8_t> corrupted;
  };

  enum class Step : uint8_t {
    send,  // put `out` on the wire, then call next() again
    wait,  // the next chunk is not readable yet: wait (wait(slice), or the transport's own), then next()
    done,  // the end or abort frame was handed out; result() says which
  };

  /// Reads options.chunk_bytes, upstream_wait and corrupt_frame. `data_frames_sent` is the server's
  /// count of data frames over its life (the corrupt_frame seam); it must outlive the sender.
  /// `staging_chunks` (at least 1): data frames of a read() blob the transport keeps in flight.
  FrameSender(const BlobServerOptions& options, std::atomic<uint64_t>& data_frames_sent, size_t staging_chunks = 1);
  FrameSender(const FrameSender&) = delete;
  FrameSender& operator=(const FrameSender&) = delete;

  /// Opens the transfer: the request as the transport decoded it (an Error is answered with an
  /// abort frame of transfer id 0) and the server's lookup (called once, here).
  void open(Result<FetchRequest> request, const BlobLookup& lookup);

  /// The next thing to do at time `now` (which starts and checks the upstream_wait of a chunk not
  /// yet readable). On `send`, `out` holds the frame.
  Step next(Clock::time_point now, Frame& out);
  /// While next() says wait: blocks at most `slice` until the missing bytes are readable (OK) or the
  /// blob's writer fails (its error, which the next next() turns into the abort frame).
  Status wait(std::chrono::milliseconds slice);
  /// The transport gives up (its server stops): the abort frame for `error`, in the context of a
  /// forwarded blob while waiting for its bytes. The transfer is finished afterwards. Only before
  /// finished() (a transport that already sent the end or abort frame has nothing more to say).
  Frame abort(const Error& error);

  /// Every data frame was handed out: the next frame is the end frame (or the abort for a digest
  /// that cannot be had). A windowed transport lets its data frames complete first.
  bool data_done() const;
  bool finished() const { return state_ == State::finished; }
  /// Once finished: OK when the end frame was handed out, else the error the abort frame carried.
  const Status& result() const { return result_; }
  /// The request's transfer id (0 before a request decoded).
  uint64_t transfer_id() const { return transfer_id_; }

 private:
  enum class State : uint8_t { unopened, streaming, waiting, aborting, finished };

  void fail(Error error);  // -> aborting
  Frame abort_frame_for(const Error& error);
  std::string in_context(const char* what) const { return std::string(what) + " blob '" + key_ + "'"; }

  const uint32_t chunk_bytes_;
  const uint64_t corrupt_frame_;
  const std::shared_ptr<std::atomic<uint64_t>> corrupt_next_;
  const std::chrono::milliseconds upstream_wait_;
  std::atomic<uint64_t>& data_frames_sent_;
  const size_t staging_chunks_;

  State state_ = State::unopened;
  Status result_;
  std::optional<Error> abort_;  // aborting: what the abort frame carries
  uint64_t transfer_id_ = 0;
  std::string key_;
  std::shared_ptr<const Blob> blob_;
  uint64_t size_ = 0;
  uint64_t at_ = 0;      // the next data frame's offset
  uint64_t end_ = 0;     // the end of what was asked: size_, or offset + length for a range
  std::unique_ptr<Sha256> range_sha_;  // a range: the digest of the bytes handed out
  uint64_t chunks_ = 0;  // data frames handed out (selects the staging chunk)
  std::vector<std::vector<uint8_t>> staging_;
  Clock::time_point wait_deadline_{};
  std::optional<Error> writer_failed_;  // what wait() saw
};

}  // namespace ember::transport
