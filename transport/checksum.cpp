#include "transport/checksum.hpp"

#include <nmmintrin.h>
#include <openssl/evp.h>

#include <cstring>

namespace ember::transport {

namespace {

// Reflected CRC-32C table for the portable path.
struct Table {
  uint32_t t[256];
  constexpr Table() : t{} {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
      t[i] = c;
    }
  }
};
constexpr Table kTable;

uint32_t crc32c_portable(const uint8_t* p, size_t n, uint32_t crc) {
  for (size_t i = 0; i < n; ++i) crc = kTable.t[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const uint8_t* p, size_t n, uint32_t crc) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");

}  // namespace

uint32_t crc32c(const void* data, size_t bytes, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  crc = kHaveSse42 ? crc32c_sse42(p, bytes, crc) : crc32c_portable(p, bytes, crc);
  return ~crc;
}

struct Sha256::Impl {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~Impl() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) { EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr); }
Sha256::~Sha256() = default;

void Sha256::update(const void* data, size_t bytes) { EVP_DigestUpdate(impl_->ctx, data, bytes); }

Digest Sha256::finish() {
  Digest d{};
  unsigned int n = 0;
  EVP_DigestFinal_ex(impl_->ctx, d.data(), &n);
  return d;
}

Digest Sha256::of(const void* data, size_t bytes) {
  Sha256 h;
  h.update(data, bytes);
  return h.finish();
}

std::string to_hex(const Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : digest) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

}  // namespace ember::transport
