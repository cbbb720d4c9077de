// GPT-2's byte alphabet (text/byte_level.hpp): a bijection of the 256 bytes onto printable characters.
#include "text/byte_level.hpp"

#include <gtest/gtest.h>

#include <set>

namespace ember::text {
namespace byte_level_test {

TEST(ByteLevel, IsGpt2sBytesToUnicode) {
  EXPECT_EQ(byte_to_char('A'), U'A');
  EXPECT_EQ(byte_to_char('!'), U'!');
  EXPECT_EQ(byte_to_char(' '), U'\u0120');   // Ġ
  EXPECT_EQ(byte_to_char('\n'), U'\u010A');  // Ċ
  EXPECT_EQ(byte_to_char(0), U'\u0100');
  EXPECT_EQ(byte_to_char(0xAD), U'\u0143');  // the soft hyphen is not printable: the 68th remapped byte
  EXPECT_EQ(byte_to_char(0xA9), U'\u00A9');
  EXPECT_EQ(byte_to_utf8(' '), "\xC4\xA0");
}

TEST(ByteLevel, EveryByteRoundTripsAndNoTwoShareACharacter) {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = byte_to_char(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(c).second);
    EXPECT_EQ(char_to_byte(c), b);
  }
  EXPECT_EQ(char_to_byte(U'\u00AD'), -1);  // the soft hyphen itself is not in the alphabet
  EXPECT_EQ(char_to_byte(U' '), -1);
  EXPECT_EQ(char_to_byte(U'\u65E5'), -1);
}

TEST(ByteLevel, SpellsBytes) {
  std::string out;
  append_byte_level(out, "a b\n\xE6\x97\xA5");
  EXPECT_EQ(out,
            "a\xC4\xA0"
            "b\xC4\x8A\xC3\xA6\xC4\xB9\xC2\xA5");  // aĠbĊ then æĹ¥, GPT-2's 日
}

}  // namespace byte_level_test
}  // namespace ember::text
