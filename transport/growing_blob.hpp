// GrowingBlob: a blob whose bytes are still arriving. A hop of a multicast chain receives a model
// into one buffer and, while it does, serves the verified prefix to the next hop (cut-through
// forwarding): the BlobServer streams [offset, readable()) at once and waits for the rest.
//
// Owns nothing but a view of the receiving buffer (kept alive by `owner`). One writer, the thread
// that receives (it calls advance(), complete() or fail()); any number of readers (server
// transfer threads). Thread-safe; never throws; never touches the network.
//
// Lifecycle:  growing ──advance()*──▶ growing ──complete(digest)──▶ complete
//                 └──────────────fail(error)─────────────────────▶ failed
// complete and failed are final: a later advance(), complete() or fail() is ignored.
//
// Invariants:
//   - readable() only grows, and bytes below it never change (the writer verified them before
//     advancing and never writes below the watermark again; a resumed transfer writes above it).
//   - digest() waits for complete or failed (bounded by kDigestWait) and answers the digest the
//     writer verified over the whole blob, or the failure.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>

#include "transport/blob.hpp"

namespace ember::transport {

class GrowingBlob final : public Blob {
 public:
  /// How long digest() waits for the writer to finish: a downstream hop is sent the end frame
  /// only once its upstream verified the whole blob.
  static constexpr std::chrono::seconds kDigestWait{120};

  /// `data` holds `bytes` bytes, of which none is verified yet; `owner` keeps them alive.
  GrowingBlob(std::shared_ptr<const void> owner, const uint8_t* data, uint64_t bytes);

  uint64_t size() const override { return bytes_; }
  /// The base of the buffer: only [0, readable()) may be read.
  const uint8_t* data() const override { return data_; }
  Status read(uint64_t offset, void* dst, uint64_t bytes) const override;
  uint64_t readable() const override;
  Status wait_readable(uint64_t end, std::chrono::milliseconds timeout) const override;

  // -- the writer ----------------------------------------------------------------------------
  /// [0, end) is verified (chunk checksums) and will not change.
  void advance(uint64_t end);
  /// Every byte arrived and the whole blob's SHA-256 is `digest` (verified by the writer).
  void complete(const Digest& digest);
  /// The writer gives the blob up for good; readers get `error`.
  void fail(Error error);

  bool is_complete() const;

 protected:
  Result<Digest> compute_digest() const override;

 private:
  std::shared_ptr<const void> owner_;
  const uint8_t* data_;
  uint64_t bytes_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  uint64_t readable_ = 0;                 // guarded by mu_
  std::optional<Digest> complete_;        // guarded by mu_
  std::optional<Error> failed_;           // guarded by mu_
};

}  // namespace ember::transport
