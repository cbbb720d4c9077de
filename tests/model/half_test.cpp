// model/half.hpp against the compiler's own IEEE conversions (_Float16) and known bit patterns.
#include "model/half.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

namespace ember::gpu {
namespace half_test {

TEST(Half, EveryFloat16SurvivesARoundTripThroughFloat32) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float f = f16_to_f32(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f)))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), bits) << std::hex << h;
    ASSERT_EQ(std::bit_cast<uint32_t>(f), std::bit_cast<uint32_t>(static_cast<float>(std::bit_cast<_Float16>(bits))))
        << std::hex << h;
  }
}

TEST(Half, TheMaskedWideningGivesTheSameBitsForEveryFloat16) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    ASSERT_EQ(std::bit_cast<uint32_t>(f16_to_f32_masked(bits)), std::bit_cast<uint32_t>(f16_to_f32(bits))) << std::hex << h;
  }
}

TEST(Half, Float32ToFloat16RoundsAsTheCompilerDoes) {
  // Every 65537th float32 bit pattern (all exponents, both signs), plus the boundaries below.
  for (uint64_t u = 0; u <= 0xffffffffull; u += 65537) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(u));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), std::bit_cast<uint16_t>(static_cast<_Float16>(f))) << std::hex << u;
  }
  EXPECT_EQ(f32_to_f16(1.f), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.f), 0x7c00) << "rounds up to infinity";
  EXPECT_EQ(f32_to_f16(std::ldexp(1.f, -24)), 0x0001) << "smallest subnormal";
  EXPECT_EQ(f32_to_f16(std::ldexp(1.f, -25)), 0x0000) << "a tie rounds to even (zero)";
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(f32_to_f16(0.1f), 0x2e66);
}

TEST(Half, BFloat16RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(f32_to_bf16(1.f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(0.1f), 0x3dcd);  // 0x3dcccccd rounds up
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80) << "a tie rounds to even";
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82) << "a tie rounds to even";
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::bit_cast<float>(0x7f800001u))))) << "a signalling NaN stays NaN";
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      ASSERT_EQ(f32_to_bf16(f), h) << std::hex << h;
    }
  }
}

}  // namespace half_test
}  // namespace ember::gpu
