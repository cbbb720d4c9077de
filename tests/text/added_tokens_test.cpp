// Added tokens (text/added_tokens.hpp): leftmost-longest matching, the two passes, special_in_text,
// lstrip/rstrip and single_word, and malformed entries.
#include "text/added_tokens.hpp"

#include <gtest/gtest.h>

#include "tests/must.hpp"

namespace ember::text {
namespace added_tokens_test {

using ember::testing::must;

nlohmann::json token(int id, const char* content, bool special = true) {
  return {{"id", id},        {"content", content},   {"special", special}, {"lstrip", false},
          {"rstrip", false}, {"single_word", false}, {"normalized", false}};
}

/// The sections as "text" or "#id".
std::vector<std::string> sections(const AddedTokens& a, std::string_view text, bool normalized = false,
                                  bool special_in_text = true) {
  std::vector<TextSection> out;
  a.split(text, normalized, special_in_text, out);
  std::vector<std::string> s;
  for (const TextSection& t : out) {
    s.push_back(t.id >= 0 ? "#" + std::to_string(t.id) : std::string(text.substr(t.begin, t.end - t.begin)));
  }
  return s;
}

TEST(AddedTokens, LongestMatchWinsLeftToRight) {
  const auto a = must(AddedTokens::parse({token(10, "<|a|>"), token(11, "<|a|><|b|>"), token(12, "<|b|>")}, 100));
  EXPECT_EQ(sections(a, "x<|a|><|b|>y<|b|><|a|>"), (std::vector<std::string>{"x", "#11", "y", "#12", "#10"}));
  EXPECT_EQ(sections(a, "<|a|"), (std::vector<std::string>{"<|a|"}));
  EXPECT_EQ(sections(a, ""), (std::vector<std::string>{}));
  EXPECT_EQ(a.find_content("<|b|>")->id, 12);
  EXPECT_EQ(a.find_id(11)->content, "<|a|><|b|>");
  EXPECT_EQ(a.find_id(13), nullptr);
}

TEST(AddedTokens, SpecialOnesAreIgnoredWhenAskedAndPassesAreSeparate) {
  nlohmann::json plain = token(20, "<tool>", /*special=*/false);
  plain["normalized"] = true;
  const auto a = must(AddedTokens::parse({token(10, "<s>"), plain}, 100));
  EXPECT_EQ(sections(a, "a<s>b", false, /*special_in_text=*/false), (std::vector<std::string>{"a<s>b"}));
  EXPECT_EQ(sections(a, "a<tool>b", /*normalized=*/false), (std::vector<std::string>{"a<tool>b"}));
  EXPECT_EQ(sections(a, "a<tool>b", /*normalized=*/true), (std::vector<std::string>{"a", "#20", "b"}));
  EXPECT_EQ(sections(a, "a<tool>b", true, /*special_in_text=*/false), (std::vector<std::string>{"a", "#20", "b"}));
}

TEST(AddedTokens, StripsTakeTheWhitespaceAround) {
  nlohmann::json t = token(5, "<mask>");
  t["lstrip"] = true;
  t["rstrip"] = true;
  const auto a = must(AddedTokens::parse(nlohmann::json::array({t}), 100));
  EXPECT_EQ(sections(a, "a \u00A0<mask>\n b"), (std::vector<std::string>{"a", "#5", "b"}));
  EXPECT_EQ(sections(a, "  <mask>"), (std::vector<std::string>{"#5"}));
}

TEST(AddedTokens, SingleWordMatchesOnlyAWholeWord) {
  nlohmann::json t = token(5, "hi", false);
  t["single_word"] = true;
  const auto a = must(AddedTokens::parse(nlohmann::json::array({t}), 100));
  EXPECT_EQ(sections(a, "hi there"), (std::vector<std::string>{"#5", " there"}));
  EXPECT_EQ(sections(a, "this"), (std::vector<std::string>{"this"}));
  EXPECT_EQ(sections(a, "\xC3\xA9hi"), (std::vector<std::string>{"\xC3\xA9hi"}));  // é is a letter
  EXPECT_EQ(sections(a, "(hi)"), (std::vector<std::string>{"(", "#5", ")"}));
}

TEST(AddedTokens, MalformedEntriesAreNamed) {
  auto err = [](nlohmann::json j, std::string_view needle) {
    auto a = AddedTokens::parse(j, 100);
    ASSERT_FALSE(a.ok()) << needle;
    EXPECT_NE(a.error().message().find(needle), std::string::npos) << a.error().message();
  };
  err({token(100, "<x>")}, "added_tokens[0].id: 100 is outside [0, 99]");
  err({token(1, "")}, "added_tokens[0].content: empty");
  err({token(1, "<x>"), token(2, "<x>")}, "added_tokens[1]: \"<x>\" added twice");
  err({token(1, "<x>"), token(1, "<y>")}, "added_tokens[1]: id 1 added twice");
  nlohmann::json bad = token(1, "<x>");
  bad["special"] = "yes";
  err({bad}, "added_tokens[0].special: expected a boolean");
  err(nlohmann::json::object(), "added_tokens: expected an array");
  EXPECT_TRUE(must(AddedTokens::parse(nullptr, 10)).tokens().empty());
}

}  // namespace added_tokens_test
}  // namespace ember::text
