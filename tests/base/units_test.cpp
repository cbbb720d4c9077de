#include "base/units.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace units_test {

TEST(ParseBytes, BinaryAndDecimalSuffixes) {
  EXPECT_EQ(*parse_bytes("8GiB"), 8ull << 30);
  EXPECT_EQ(*parse_bytes("512MiB"), 512ull << 20);
  EXPECT_EQ(*parse_bytes("1.5KiB"), 1536u);
  EXPECT_EQ(*parse_bytes("2GB"), 2'000'000'000u);
  EXPECT_EQ(*parse_bytes("4096"), 4096u);
  EXPECT_EQ(*parse_bytes(" 16 MiB "), 16ull << 20);
  EXPECT_EQ(*parse_bytes("1G"), 1ull << 30);
}

TEST(ParseBytes, RejectsGarbageWithTheTextInTheMessage) {
  for (const char* bad : {"", "GiB", "-1GiB", "8 gibibytes", "1e3", "nan", "8GiB2"}) {
    auto r = parse_bytes(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(r.error().message().find(std::string("'") + bad + "'"), std::string::npos) << r.error().message();
  }
  EXPECT_FALSE(parse_bytes("99999999999TiB").ok());
}

TEST(ParseBandwidth, BytesAndBits) {
  EXPECT_DOUBLE_EQ(*parse_bandwidth("16GB/s"), 16e9);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("10Gbit/s"), 1.25e9);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("1gbit"), 1.25e8);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("0"), 0.0);
  EXPECT_FALSE(parse_bandwidth("fast").ok());
}

TEST(ParseDuration, Units) {
  EXPECT_EQ(*parse_duration_us("250ms"), 250'000u);
  EXPECT_EQ(*parse_duration_us("2s"), 2'000'000u);
  EXPECT_EQ(*parse_duration_us("100us"), 100u);
  EXPECT_EQ(*parse_duration_us("42"), 42u);
  EXPECT_FALSE(parse_duration_us("soon").ok());
}

TEST(FormatBytes, Readable) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(8ull << 30), "8.00 GiB");
  EXPECT_EQ(format_bytes(100ull << 20), "100 MiB");
}

}  // namespace units_test
}  // namespace ember
