// FrameReceiver: the receiving side of the transfer protocol (fetch_request.hpp, frame.hpp) as a
// plain object: the request it opens with, the checks every frame header passes, where each
// payload lands, the verification of each payload, the trailing SHA-256 and the end frame's digest
// comparison, and the FetchResult or the protocol Error. Both receivers drive one per fetch:
// tcp_fetch.cpp (reads a header, accepts it, reads the payload where it says, verifies at once) and
// ucx_fetch.cpp (accepts several headers while their rendezvous payloads are still on their way,
// verifies each as it completes, in order). Sockets, UCX workers, timeouts and cancellation stay in
// the transports; this object does no I/O and reads no clock (the transport times the fetch).
//
// One fetch's thread only; not thread-safe; never throws. Its one helper thread is the
// TrailingHasher (trailing_hasher.hpp), started with the first frame of a fetch from offset 0 and
// joined by finish() or the destructor: after either, the sink's buffer is never read again.
//
// Lifecycle (a failed check is sticky: every later call returns the same Error):
//   unsized ──accept(first frame: size checked, sink allocates)──▶ receiving
//   receiving ──accept(data) / verify()──▶ receiving
//   receiving ──accept(end: every byte announced)──▶ ending ──verify() of the last payload──▶ complete
//   complete ──finish(): digest compared──▶ finished
//   any ──abort frame, wrong transfer, bad size/offset/CRC/digest, refused buffer──▶ failed
//
// Invariants: first byte asked <= verified() <= accepted() <= end due <= blob_bytes(); the sink hears of
// [offset, offset + length) through on_chunk only after that payload passed its CRC-32C, in
// increasing contiguous order; the hasher is advanced only over verified bytes. Error messages lack
// the fetch's context (the key, the server): the transport adds it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "transport/fetch.hpp"
#include "transport/frame.hpp"
#include "transport/trailing_hasher.hpp"

namespace ember::transport {

class FrameReceiver {
 public:
  /// Reads options.transfer_id, resume_offset, the range and expected_bytes; `sink` must outlive
  /// the receiver.
  FrameReceiver(const FetchOptions& options, BlobSink& sink);
  FrameReceiver(const FrameReceiver&) = delete;
  FrameReceiver& operator=(const FrameReceiver&) = delete;

  /// The encoded FetchRequest that opens this transfer (invalid_argument for a bad key).
  Result<std::vector<uint8_t>> request(const std::string& key) const;

  /// Where an accepted data frame's payload must be put: `bytes` bytes at `at` (in the sink's
  /// buffer). {nullptr, 0} for the end frame.
  struct Landing {
    uint8_t* at = nullptr;
    uint32_t bytes = 0;
  };
  /// The next frame header of the stream, in order. Checks, in this order: an abort for this
  /// transfer (or with id 0: the server turned the connection away before reading the request) is
  /// the server's error; a frame of another transfer is corrupt; the first frame sizes the blob
  /// (corrupt when not expected_bytes, invalid_argument when the resume offset is beyond it,
  /// out_of_memory when the sink refuses the buffer); a later frame must repeat that size, carry
  /// the offset due (everything accepted so far) and not follow the end frame (corrupt); an end
  /// frame must come after every byte, a data frame must carry at least one (corrupt).
  Result<Landing> accept(const FrameHeader& header);
  /// The payload of the oldest accepted, not yet verified data frame is in place: checks its
  /// CRC-32C (corrupt, naming the offset), advances the hasher and tells the sink (on_chunk).
  /// internal_error when nothing awaits verification.
  Status verify();
  /// The end frame was accepted and every payload verified: finish() may be called.
  bool complete() const { return !failed_ && end_.has_value() && unverified_.empty(); }
  /// Compares the SHA-256 of the whole blob with the end frame's (corrupt on mismatch; it waits
  /// for the trailing hasher) and returns the result. Its `seconds` is 0: the transport, which owns
  /// the clock, sets it once finish() returned. Call once, when complete(); internal_error otherwise.
  Result<FetchResult> finish();

  bool sized() const { return sized_; }
  uint64_t blob_bytes() const { return blob_bytes_; }
  /// End of the verified prefix (what on_chunk has reported): where a retry may resume.
  uint64_t verified() const { return verified_; }
  /// End of what accepted frames announced (verified() plus payloads still on their way).
  uint64_t accepted() const { return accepted_; }
  /// Data frames accepted whose payloads are not verified yet.
  size_t unverified() const { return unverified_.size(); }

  // How both transports word what happened to the stream, so a failure reads the same over either.
  /// " after N of M bytes" once sized, else " before the first frame".
  std::string position() const;
  /// unavailable "cancelled at offset N (the hop was given another upstream)".
  Error cancelled() const;
  /// io_error "server sent nothing for T ms (idle timeout) at offset N".
  Error idle_timeout(std::chrono::milliseconds idle) const;
  /// io_error "not complete within the total timeout of T ms, at offset N".
  Error total_timeout(std::chrono::milliseconds total) const;

 private:
  Error fail(Error e);
  Status start(uint64_t blob_bytes);

  const uint64_t transfer_id_;
  const uint64_t resume_offset_;
  const uint64_t expected_bytes_;
  const bool ranged_;          // a range fetch (FetchOptions::range_length > 0)
  const uint64_t first_byte_;  // what the request asks for first: resume_offset, or the range's start
  const uint64_t range_end_;   // a range: its end (checked against the blob once sized)
  const Ticket ticket_;        // sent in the request
  uint64_t end_at_ = 0;        // where the end frame is due: blob_bytes_, or range_end_
  BlobSink& sink_;

  std::optional<Error> failed_;
  bool sized_ = false;
  uint64_t blob_bytes_ = 0;
  uint8_t* buffer_ = nullptr;
  uint64_t accepted_ = 0;
  uint64_t verified_ = 0;
  std::deque<FrameHeader> unverified_;  // bounded by what the transport has in flight
  std::optional<Digest> end_;           // the end frame's digest, once accepted
  bool finished_ = false;
  /// Over [first_byte_, end_at_). Null for a resumed whole-blob fetch, nothing to fetch, or when no
  /// thread could be started: the bytes are then hashed once at the end.
  std::unique_ptr<TrailingHasher> hasher_;
};

}  // namespace ember::transport
