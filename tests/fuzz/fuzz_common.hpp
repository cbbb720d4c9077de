// Shared by the libFuzzer targets in this folder: reading the little-endian framing some targets
// put in front of their input, and EMBER_FUZZ_CHECK, which traps when an invariant that every
// successful parse promises does not hold.
//
// Fuzz targets only: each LLVMFuzzerTestOneInput calls one parser and checks what its success
// guarantees. A parser that fails returns an Error and that is a pass; a crash, a sanitizer report,
// an uncaught exception, a hang or a broken promise (__builtin_trap) is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string_view>

namespace ember::fuzz {

/// Consumes a 4-byte little-endian number from the front of [data, data + size); 0 when fewer
/// than 4 bytes remain (all of them are then consumed).
inline uint32_t take_u32(const uint8_t*& data, size_t& size) {
  if (size < 4) {
    data += size;
    size = 0;
    return 0;
  }
  const uint32_t v = uint32_t{data[0]} | uint32_t{data[1]} << 8 | uint32_t{data[2]} << 16 | uint32_t{data[3]} << 24;
  data += 4;
  size -= 4;
  return v;
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace ember::fuzz

/// A promise of the parser's contract was broken: stop here so libFuzzer saves the input.
#define EMBER_FUZZ_CHECK(cond)                                                        \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: invariant does not hold: %s\n", __FILE__, __LINE__, #cond); \
      __builtin_trap();                                                               \
    }                                                                                 \
  } while (0)
