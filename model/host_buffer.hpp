// HostBuffer: an owned, page-aligned block of host memory holding model bytes or tensors.
//
// Anyone may create one; its bytes are written by the creator and treated as immutable once
// shared (models hold `shared_ptr<const HostBuffer>`). Large blocks come from mmap so they are
// page-aligned and returned to the OS on release; this is also the seam where pinned (page-locked)
// host memory will be registered with a CUDA device. Never throws; allocation failure is an
// out_of_memory Error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.hpp"

namespace ember::gpu {

class HostBuffer {
 public:
  /// A zero-filled block of `bytes` bytes (0 is allowed and yields an empty buffer).
  static Result<std::shared_ptr<HostBuffer>> allocate(uint64_t bytes);

  /// Reads a whole file. Errors name the path (not_found, io_error, out_of_memory).
  static Result<std::shared_ptr<HostBuffer>> read_file(const std::string& path, uint64_t max_bytes);

  ~HostBuffer();
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  HostBuffer(uint8_t* data, uint64_t size, uint64_t mapped) : data_(data), size_(size), mapped_(mapped) {}
  uint8_t* data_;
  uint64_t size_;
  uint64_t mapped_;  // bytes mapped with mmap, 0 when data_ came from operator new
};

}  // namespace ember::gpu
