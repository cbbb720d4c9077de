// IEEE float16 and bfloat16 to and from float32, bit-exact: round to nearest even, infinities and
// NaNs kept (a NaN stays a quiet NaN), float16 subnormals handled. What `ember model convert`
// writes, what the CPU kernels widen half-precision weights with, and what the cast op uses.
//
// Pure inline functions (constexpr-friendly, no <cmath>), usable from any code, device code too
// when compiled as host code; anyone, any thread.
#pragma once

#include <bit>
#include <cstdint>

namespace ember::gpu {

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);  // to nearest, ties to even
  return static_cast<uint16_t>((u + rounding) >> 16);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return std::bit_cast<float>(sign);
  // Subnormal: value = mant * 2^-24, exactly representable in float32.
  const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

/// f16_to_f32 with masks instead of branches, the same bits for every input: what a loop that
/// should run in vector registers widens with (gpu/kernels_cpu_kv_attention.cpp's float16 cache).
inline float f16_to_f32_masked(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, em = h & 0x7fffu, exp = em >> 10;
  const uint32_t normal = (em << 13) + (112u << 23), special = (em << 13) | 0x7f800000u;
  const uint32_t subnormal = std::bit_cast<uint32_t>(static_cast<float>(em) * 5.9604644775390625e-8f);  // em * 2^-24
  const uint32_t is_sub = 0u - static_cast<uint32_t>(exp == 0), is_special = 0u - static_cast<uint32_t>(exp == 0x1f);
  return std::bit_cast<float>(sign | (subnormal & is_sub) | (special & is_special) | (normal & ~(is_sub | is_special)));
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a >= 0x38800000u) {  // normal in float16 (>= 2^-14)
    const uint32_t rounding = 0xfffu + ((a >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((a - 0x38000000u + rounding) >> 13));
  }
  if (a < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25): zero
  // Subnormal: shift the mantissa (with its implicit 1) right, rounding to nearest even.
  const uint32_t exp = a >> 23, mant = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - exp;  // value * 2^24 = mant * 2^(exp - 126): 14..24 here
  const uint32_t half_ulp = 1u << (shift - 1), rest = mant & ((1u << shift) - 1);
  uint32_t r = mant >> shift;
  if (rest > half_ulp || (rest == half_ulp && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

}  // namespace ember::gpu
