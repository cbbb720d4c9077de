// PCRE2 behind the pre-tokenizers (text/regex.hpp): Unicode classes, the GPT-2 and Llama 3 patterns,
// empty matches, and the limits that stop untrusted patterns.
#include "text/regex.hpp"

#include <gtest/gtest.h>

#include "tests/must.hpp"
#include "text/pre_tokenizer.hpp"

namespace ember::text {
namespace regex_test {

using ember::testing::must;

std::vector<std::string> matches(const Regex& re, std::string_view text) {
  std::vector<Span> spans;
  must(re.find_all(text, spans));
  std::vector<std::string> out;
  for (const Span& s : spans) out.emplace_back(text.substr(s.begin, s.end - s.begin));
  return out;
}

TEST(Regex, Gpt2PatternSplitsAsGpt2Does) {
  const Regex re = must(Regex::compile(kGpt2Pattern));
  EXPECT_EQ(matches(re, "Hello world, it's 2024!"),
            (std::vector<std::string>{"Hello", " world", ",", " it", "'s", " 2024", "!"}));
  // \s+(?!\S): of a run of spaces before a word, the last space goes with the word.
  EXPECT_EQ(matches(re, "a   b\n\n c"), (std::vector<std::string>{"a", "  ", " b", "\n\n", " c"}));
  EXPECT_EQ(matches(re, "h\xC3\xA9llo \xE6\x97\xA5\xE6\x9C\xAC"),
            (std::vector<std::string>{"h\xC3\xA9llo", " \xE6\x97\xA5\xE6\x9C\xAC"}));  // letters beyond ASCII
}

TEST(Regex, Llama3PatternWithCaseInsensitiveGroupAndDigitRuns) {
  const Regex re = must(Regex::compile(
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"));
  EXPECT_EQ(matches(re, "I'LL pay 1234567"), (std::vector<std::string>{"I", "'LL", " pay", " ", "123", "456", "7"}));
}

TEST(Regex, EmptyMatchesAdvanceAndAreNotReported) {
  const Regex re = must(Regex::compile("x*"));
  EXPECT_EQ(matches(re, "axxb\xE6\x97\xA5x"), (std::vector<std::string>{"xx", "x"}));
  EXPECT_TRUE(matches(re, "").empty());
}

TEST(Regex, LiteralMatchesMetacharactersAsText) {
  const Regex re = must(Regex::literal("a.b"));
  EXPECT_EQ(matches(re, "a.b axb a.b"), (std::vector<std::string>{"a.b", "a.b"}));
}

TEST(Regex, MatchesAtIsAnchored) {
  const Regex re = must(Regex::compile(R"(\p{L})"));
  EXPECT_TRUE(must(re.matches_at("1a", 1)));
  EXPECT_FALSE(must(re.matches_at("1a", 0)));
}

TEST(Regex, BadPatternsAreClearErrors) {
  auto bad = Regex::compile("(unclosed");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(bad.error().message().find("does not compile at offset"), std::string::npos) << bad.error().message();
  auto long_one = Regex::compile(std::string(Regex::kMaxPatternBytes + 1, 'a'));
  ASSERT_FALSE(long_one.ok());
  EXPECT_NE(long_one.error().message().find("at most 4096"), std::string::npos);
}

TEST(Regex, CatastrophicBacktrackingIsAnErrorNotAHang) {
  const Regex re = must(Regex::compile("(a+)+$"));
  std::string text(40, 'a');
  text += "!";
  std::vector<Span> spans;
  const Status s = re.find_all(text, spans);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("gave up"), std::string::npos) << s.error().message();
}

}  // namespace regex_test
}  // namespace ember::text
