#include "transport/growing_blob.hpp"

#include <cstring>

namespace ember::transport {

GrowingBlob::GrowingBlob(std::shared_ptr<const void> owner, const uint8_t* data, uint64_t bytes)
    : owner_(std::move(owner)), data_(data), bytes_(bytes) {}

Status GrowingBlob::read(uint64_t offset, void* dst, uint64_t bytes) const {
  const uint64_t ready = readable();
  if (offset > ready || bytes > ready - offset) {
    return invalid_argument("read of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                            " runs past the " + std::to_string(ready) + " bytes received so far");
  }
  if (bytes > 0) std::memcpy(dst, data_ + offset, bytes);
  return Status::OK();
}

uint64_t GrowingBlob::readable() const {
  std::lock_guard lock(mu_);
  return readable_;
}

Status GrowingBlob::wait_readable(uint64_t end, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  const bool ready = cv_.wait_for(lock, timeout, [&] { return readable_ >= end || failed_.has_value(); });
  if (failed_) return *failed_;
  if (!ready) {
    return deadline_exceeded("bytes up to " + std::to_string(end) + " not received yet (" +
                             std::to_string(readable_) + " so far)");
  }
  return Status::OK();
}

void GrowingBlob::advance(uint64_t end) {
  {
    std::lock_guard lock(mu_);
    if (complete_ || failed_ || end <= readable_) return;
    readable_ = std::min(end, bytes_);
  }
  cv_.notify_all();
}

void GrowingBlob::complete(const Digest& digest) {
  {
    std::lock_guard lock(mu_);
    if (complete_ || failed_) return;
    readable_ = bytes_;
    complete_ = digest;
  }
  cv_.notify_all();
}

void GrowingBlob::fail(Error error) {
  {
    std::lock_guard lock(mu_);
    if (complete_ || failed_) return;
    failed_ = std::move(error);
  }
  cv_.notify_all();
}

bool GrowingBlob::is_complete() const {
  std::lock_guard lock(mu_);
  return complete_.has_value();
}

Result<Digest> GrowingBlob::compute_digest() const {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, kDigestWait, [&] { return complete_.has_value() || failed_.has_value(); })) {
    // Blob::digest() memoizes this answer. Servers ask only once every byte is readable, when the
    // writer is a hash away from complete(), so this fires only for a writer stuck for minutes.
    return unavailable("the upstream hop did not finish verifying the blob within " +
                       std::to_string(kDigestWait.count()) + " s");
  }
  if (failed_) return *failed_;
  return *complete_;
}

}  // namespace ember::transport
