// Blob: the bytes a data-plane server can send (a weights file, a model held in a node's cache).
//
// Owns nothing but a view: a MemoryBlob keeps its bytes alive through the owner handle it was
// given (the node's cache passes its buffer's shared_ptr, so an evicted model stays readable until
// the last transfer of it ends); a FileBlob owns an open file descriptor.
//
// Callers: BlobServer's connection threads, several at once on the same blob, and anyone holding a
// shared_ptr<const Blob>. Every method is thread-safe and const. Nothing here throws, and nothing
// touches the network or a device.
//
// Invariants:
//   - size() never changes. A FileBlob whose file changed size since it was opened reports
//     `corrupt` from read() and digest(), and keeps reporting it (the failure is sticky).
//   - data() is either the whole blob in memory (size() readable bytes, for zero-copy sends) or
//     nullptr; then read() is the only way to the bytes.
//   - digest() is the SHA-256 of all size() bytes, computed at most once and memoized (a failure
//     too); concurrent first callers wait for the one computation instead of repeating it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "transport/checksum.hpp"

namespace ember::transport {

class Blob {
 public:
  virtual ~Blob() = default;

  /// Bytes in the blob.
  virtual uint64_t size() const = 0;
  /// The whole blob in memory, or nullptr when it must be read().
  virtual const uint8_t* data() const { return nullptr; }
  /// Copies `bytes` bytes at `offset` into `dst`. invalid_argument when the range runs past size();
  /// io_error or corrupt when the backing store fails.
  virtual Status read(uint64_t offset, void* dst, uint64_t bytes) const = 0;

  /// Bytes [0, readable()) can be read now. A complete blob: size(). A GrowingBlob (a multicast
  /// hop still receiving) less, and more later.
  virtual uint64_t readable() const { return size(); }
  /// Waits at most `timeout` until [0, end) is readable. OK; deadline_exceeded when the time ran
  /// out first (ask again); the writer's error when it gave the blob up (sticky; any other code).
  virtual Status wait_readable(uint64_t /*end*/, std::chrono::milliseconds /*timeout*/) const { return Status::OK(); }

  /// SHA-256 of the whole blob; memoized (see the invariants above).
  Result<Digest> digest() const;

 protected:
  /// `known`: a digest already known (a cache that verified the bytes on receipt), so digest()
  /// costs nothing.
  explicit Blob(std::optional<Digest> known = std::nullopt) {
    if (known) digest_.emplace(*known);
  }
  /// Computes the digest; called once, under the memo's lock. The default reads in 4 MiB pieces.
  virtual Result<Digest> compute_digest() const;

 private:
  mutable std::mutex digest_mutex_;
  mutable std::optional<Result<Digest>> digest_;
};

/// Bytes in memory, owned elsewhere and kept alive by `owner` for the blob's lifetime.
class MemoryBlob final : public Blob {
 public:
  /// `data` must stay readable and unchanged while `owner` lives. `known_digest`, when given, is
  /// trusted as the SHA-256 of the bytes (the receiver verifies it end to end anyway).
  MemoryBlob(std::shared_ptr<const void> owner, const void* data, uint64_t bytes,
             std::optional<Digest> known_digest = std::nullopt);

  /// A blob owning a copy-free move of `bytes` (tests, small blobs).
  static std::shared_ptr<const MemoryBlob> of(std::vector<uint8_t> bytes);

  uint64_t size() const override { return bytes_; }
  const uint8_t* data() const override { return data_; }
  Status read(uint64_t offset, void* dst, uint64_t bytes) const override;

 protected:
  Result<Digest> compute_digest() const override;

 private:
  std::shared_ptr<const void> owner_;
  const uint8_t* data_;
  uint64_t bytes_;
};

/// A file on disk, read with pread. The size is taken at open; a file that grows or shrinks later
/// is an error, not a different blob. A file rewritten in place at the same size is not detected
/// here: the receiver's digest check catches it.
class FileBlob final : public Blob {
 public:
  /// not_found when the file does not exist, io_error when it cannot be opened or is not a file.
  /// `known_digest` (from a manifest) spares the first transfer hashing the file before its end
  /// frame, a silence of about 1 s per GB that a receiver's idle timeout must otherwise cover.
  static Result<std::shared_ptr<const FileBlob>> open(const std::string& path,
                                                      std::optional<Digest> known_digest = std::nullopt);
  ~FileBlob() override;
  FileBlob(const FileBlob&) = delete;
  FileBlob& operator=(const FileBlob&) = delete;

  uint64_t size() const override { return bytes_; }
  Status read(uint64_t offset, void* dst, uint64_t bytes) const override;
  const std::string& path() const { return path_; }

 private:
  FileBlob(int fd, std::string path, uint64_t bytes, std::optional<Digest> known)
      : Blob(known), fd_(fd), path_(std::move(path)), bytes_(bytes) {}
  Status check_unchanged() const;

  int fd_;
  std::string path_;
  uint64_t bytes_;
  mutable std::mutex sticky_mutex_;
  mutable std::optional<Error> sticky_;  // set once the file is seen changed; reported forever
};

/// How a server finds the blob for a request's key. Called on a server connection thread, possibly
/// on several at once: must be thread-safe and must not block for long. not_found for an unknown
/// key; any other Error is passed to the receiver as is.
using BlobLookup = std::function<Result<std::shared_ptr<const Blob>>(const std::string& key)>;

}  // namespace ember::transport
