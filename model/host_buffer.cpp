#include "model/host_buffer.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace ember::gpu {

namespace {
constexpr uint64_t kMmapThreshold = 1ull << 20;
constexpr uint64_t kPage = 4096;
constexpr uint64_t kHugeAdviceThreshold = 8ull << 20;
}  // namespace

Result<std::shared_ptr<HostBuffer>> HostBuffer::allocate(uint64_t bytes) {
  if (bytes >= kMmapThreshold) {
    const uint64_t mapped = (bytes + kPage - 1) / kPage * kPage;
    void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return out_of_memory("cannot map " + std::to_string(bytes) + " bytes of host memory: " + std::strerror(errno));
    }
    // Model-sized buffers in 2 MiB pages where the kernel allows (THP "madvise" mode, Debian's
    // default): 512x fewer page faults when a transfer first writes them. Advice only: failure is fine.
    if (mapped >= kHugeAdviceThreshold) ::madvise(p, mapped, MADV_HUGEPAGE);
    return std::shared_ptr<HostBuffer>(new HostBuffer(static_cast<uint8_t*>(p), bytes, mapped));
  }
  auto* p = static_cast<uint8_t*>(::operator new(bytes ? bytes : 1, std::align_val_t(64), std::nothrow));
  if (!p) return out_of_memory("cannot allocate " + std::to_string(bytes) + " bytes of host memory");
  std::memset(p, 0, bytes);
  return std::shared_ptr<HostBuffer>(new HostBuffer(p, bytes, 0));
}

HostBuffer::~HostBuffer() {
  if (mapped_) ::munmap(data_, mapped_);
  else ::operator delete(data_, std::align_val_t(64));
}

Result<std::shared_ptr<HostBuffer>> HostBuffer::read_file(const std::string& path, uint64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return not_found(path + ": no such file");
    return io_error(path + ": cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return io_error(path + ": not a regular file");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    ::close(fd);
    return invalid_argument(path + ": " + std::to_string(size) + " bytes exceeds the limit of " +
                            std::to_string(max_bytes));
  }
  auto buffer = allocate(size);
  if (!buffer.ok()) {
    ::close(fd);
    return buffer.error().with_context(path);
  }
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd, (*buffer)->data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return io_error(path + ": read failed at byte " + std::to_string(done) + ": " +
                      (n == 0 ? std::string("unexpected end of file") : std::strerror(errno)));
    }
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return buffer;
}

}  // namespace ember::gpu
