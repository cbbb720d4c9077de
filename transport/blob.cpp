#include "transport/blob.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ember::transport {

namespace {
constexpr uint64_t kDigestPieceBytes = 4u << 20;

Status check_range(uint64_t offset, uint64_t bytes, uint64_t size) {
  if (offset > size || bytes > size - offset) {
    return invalid_argument("read of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                            " runs past the blob's " + std::to_string(size) + " bytes");
  }
  return Status::OK();
}
}  // namespace

// ---------------------------------------------------------------- Blob

Result<Digest> Blob::digest() const {
  std::lock_guard lock(digest_mutex_);
  if (!digest_) digest_.emplace(compute_digest());
  return *digest_;
}

Result<Digest> Blob::compute_digest() const {
  std::vector<uint8_t> piece(static_cast<size_t>(std::min(kDigestPieceBytes, size())));
  Sha256 sha;
  for (uint64_t off = 0; off < size(); off += piece.size()) {
    const uint64_t n = std::min<uint64_t>(piece.size(), size() - off);
    EMBER_RETURN_IF_ERROR(read(off, piece.data(), n));
    sha.update(piece.data(), n);
  }
  return sha.finish();
}

// ---------------------------------------------------------------- MemoryBlob

MemoryBlob::MemoryBlob(std::shared_ptr<const void> owner, const void* data, uint64_t bytes,
                       std::optional<Digest> known_digest)
    : Blob(known_digest), owner_(std::move(owner)), data_(static_cast<const uint8_t*>(data)), bytes_(bytes) {}

std::shared_ptr<const MemoryBlob> MemoryBlob::of(std::vector<uint8_t> bytes) {
  auto owner = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  const uint8_t* p = owner->data();
  const uint64_t n = owner->size();
  return std::make_shared<const MemoryBlob>(std::move(owner), p, n);
}

Status MemoryBlob::read(uint64_t offset, void* dst, uint64_t bytes) const {
  EMBER_RETURN_IF_ERROR(check_range(offset, bytes, bytes_));
  if (bytes > 0) std::memcpy(dst, data_ + offset, bytes);
  return Status::OK();
}

Result<Digest> MemoryBlob::compute_digest() const { return Sha256::of(data_, bytes_); }

// ---------------------------------------------------------------- FileBlob

Result<std::shared_ptr<const FileBlob>> FileBlob::open(const std::string& path, std::optional<Digest> known_digest) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return not_found("blob file " + path + " does not exist");
    return io_error("cannot open blob file " + path + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return io_error("blob file " + path + " is not a regular file");
  }
  // Tell the kernel the reads are sequential: larger readahead for the page cache misses.
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return std::shared_ptr<const FileBlob>(new FileBlob(fd, path, static_cast<uint64_t>(st.st_size), known_digest));
}

FileBlob::~FileBlob() { ::close(fd_); }

Status FileBlob::check_unchanged() const {
  std::lock_guard lock(sticky_mutex_);
  if (sticky_) return *sticky_;
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return io_error("cannot stat blob file " + path_ + ": " + std::strerror(errno));
  if (static_cast<uint64_t>(st.st_size) != bytes_) {
    sticky_ = corrupt("blob file " + path_ + " changed size since it was opened: " + std::to_string(bytes_) +
                      " bytes then, " + std::to_string(st.st_size) + " now");
    return *sticky_;
  }
  return Status::OK();
}

Status FileBlob::read(uint64_t offset, void* dst, uint64_t bytes) const {
  EMBER_RETURN_IF_ERROR(check_range(offset, bytes, bytes_));
  // One fstat per read (a chunk of MiBs) is noise next to the copy, and catches a file truncated
  // or appended to under a transfer before its bytes go out.
  EMBER_RETURN_IF_ERROR(check_unchanged());
  auto* out = static_cast<uint8_t*>(dst);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, out, static_cast<size_t>(std::min<uint64_t>(bytes, 1u << 30)),
                              static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot read blob file " + path_ + " at offset " + std::to_string(offset) + ": " +
                      std::strerror(errno));
    }
    if (n == 0) {
      // The file ended early: it shrank between the fstat and here.
      EMBER_RETURN_IF_ERROR(check_unchanged());
      return corrupt("blob file " + path_ + " ended at offset " + std::to_string(offset) + " before its " +
                     std::to_string(bytes_) + " bytes");
    }
    out += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<uint64_t>(n);
  }
  return Status::OK();
}

}  // namespace ember::transport
