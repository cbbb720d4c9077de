// UTF-8 helpers (text/utf8.hpp): validation by Unicode's Table 3-7, lossy repair with one U+FFFD per
// maximal subpart (as Rust's from_utf8_lossy), incomplete tails, whitespace sets, Python's strip.
#include "text/utf8.hpp"

#include <gtest/gtest.h>

namespace ember::text {
namespace utf8_test {

TEST(Utf8, ValidatesWellFormedText) {
  EXPECT_TRUE(valid_utf8(""));
  EXPECT_TRUE(valid_utf8("plain ASCII"));
  EXPECT_TRUE(valid_utf8("h\xC3\xA9llo \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x8E\x89"));  // héllo 日本 🎉
  EXPECT_TRUE(valid_utf8("\xF4\x8F\xBF\xBF"));                                        // U+10FFFF
}

TEST(Utf8, RefusesEveryIllFormedKind) {
  EXPECT_EQ(first_invalid_utf8("ab\x80"), 2u);                // a lone continuation byte
  EXPECT_EQ(first_invalid_utf8("\xC0\xAF"), 0u);              // overlong '/'
  EXPECT_EQ(first_invalid_utf8("\xE0\x80\xAF"), 0u);          // overlong, three bytes
  EXPECT_EQ(first_invalid_utf8("x\xED\xA0\x80"), 1u);         // a surrogate (U+D800)
  EXPECT_EQ(first_invalid_utf8("\xF4\x90\x80\x80"), 0u);      // above U+10FFFF
  EXPECT_EQ(first_invalid_utf8("\xF5\x80\x80\x80"), 0u);      // no such lead byte
  EXPECT_EQ(first_invalid_utf8("ok\xE6\x97"), 2u);            // cut short at the end
  EXPECT_EQ(first_invalid_utf8(std::string("a\0b", 3)), 3u);  // NUL is a character
}

TEST(Utf8, CodePointsRoundTrip) {
  for (char32_t cp : {U'A', U'\u00E9', U'\u65E5', U'\U0001F389', U'\U0010FFFF', U'\u0080', U'\u07FF', U'\u0800'}) {
    std::string s;
    append_utf8(s, cp);
    ASSERT_TRUE(valid_utf8(s));
    size_t i = 0;
    EXPECT_EQ(next_code_point(s, i), cp);
    EXPECT_EQ(i, s.size());
  }
}

TEST(Utf8, RepairReplacesEachMaximalSubpartOnce) {
  EXPECT_EQ(to_valid_utf8("fine"), "fine");
  const std::string r(kReplacementChar);
  // Unicode's own example (Table 3-8): 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64.
  EXPECT_EQ(to_valid_utf8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + r + r + r + "b" + r + "c" + r + r + "d");
  EXPECT_EQ(to_valid_utf8("\xE6\x97"), r);              // a cut-short sequence is one subpart
  EXPECT_EQ(to_valid_utf8("\xED\xA0\x80"), r + r + r);  // a surrogate: each byte its own
}

TEST(Utf8, IncompleteTailIsWhatAStreamHoldsBack) {
  EXPECT_EQ(incomplete_utf8_tail(""), 0u);
  EXPECT_EQ(incomplete_utf8_tail("abc"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xE6"), 1u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xE6\x97"), 2u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xE6\x97\xA5"), 0u);  // complete
  EXPECT_EQ(incomplete_utf8_tail("\xF0\x9F\x8E"), 3u);
  EXPECT_EQ(incomplete_utf8_tail("ab\x80"), 0u);      // broken, not incomplete
  EXPECT_EQ(incomplete_utf8_tail("ab\xE0\x80"), 0u);  // E0 80 can never complete
}

TEST(Utf8, WhitespaceSetsAndPythonStrip) {
  for (char32_t c : {U' ', U'\t', U'\n', U'\r', U'\v', U'\f', U'\u0085', U'\u00A0', U'\u2003', U'\u3000'}) {
    EXPECT_TRUE(is_unicode_whitespace(c)) << static_cast<uint32_t>(c);
  }
  EXPECT_FALSE(is_unicode_whitespace(U'\u200B'));  // zero-width space is not White_Space
  EXPECT_FALSE(is_unicode_whitespace(U'\x1F'));
  EXPECT_TRUE(is_python_whitespace(U'\x1F'));  // but Python's isspace() has the separators
  EXPECT_EQ(python_strip("  \t hi there\n\u3000"), "hi there");
  EXPECT_EQ(python_strip("\xC2\xA0x\xC2\xA0"), "x");
  EXPECT_EQ(python_strip("   "), "");
  EXPECT_EQ(python_strip(""), "");
  EXPECT_EQ(python_strip("\xE6\x97\xA5"), "\xE6\x97\xA5");
}

}  // namespace utf8_test
}  // namespace ember::text
