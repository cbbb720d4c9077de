// Checksums of the data plane: CRC-32C per chunk (catches corruption on a hop, cheap enough to run
// at memory speed) and SHA-256 per blob (the identity a receiver verifies before a model counts as
// resident).
//
// Pure functions and a small streaming class; anyone, any thread (one Sha256 per thread). CRC-32C
// uses the SSE4.2 instruction when the CPU has it and a table otherwise; SHA-256 is OpenSSL's
// (SHA-NI where present). Never throws.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ember::transport {

/// CRC-32C (Castagnoli, as iSCSI and ext4 use) of `bytes` bytes, continuing from `crc` (0 to start).
uint32_t crc32c(const void* data, size_t bytes, uint32_t crc = 0);

using Digest = std::array<uint8_t, 32>;

/// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t bytes);
  /// The digest of everything updated so far; the object may not be updated afterwards.
  Digest finish();

  static Digest of(const void* data, size_t bytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Lower-case hex, 64 characters.
std::string to_hex(const Digest& digest);

}  // namespace ember::transport
