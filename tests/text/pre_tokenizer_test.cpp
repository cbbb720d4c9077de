// Normalizers and pre-tokenizers (text/pre_tokenizer.hpp) with Hugging Face's semantics, and the
// refusal of the kinds Ember does not run.
#include "text/pre_tokenizer.hpp"

#include <gtest/gtest.h>

#include "tests/must.hpp"

namespace ember::text {
namespace pre_tokenizer_test {

using ember::testing::must;
using Pieces = std::vector<std::string>;

Pieces run(const PreTokenizer& p, std::string_view text, bool at_start = true) {
  Pieces out;
  must(p.split(text, at_start, out));
  return out;
}

TEST(Normalizer, PrependThenReplaceIsLlama2s) {
  const auto n = must(Normalizer::parse(nlohmann::json::parse(R"({"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "▁"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})")));
  EXPECT_EQ(must(n.apply("Hello world")), "▁Hello▁world");
  EXPECT_EQ(must(n.apply(" x")), "▁▁x");
  EXPECT_EQ(must(n.apply("")), "");  // nothing is prepended to nothing
  EXPECT_TRUE(must(Normalizer::parse(nullptr)).empty());
}

TEST(Normalizer, ReplaceWithARegex) {
  const auto n = must(
      Normalizer::parse(nlohmann::json::parse(R"({"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "})")));
  EXPECT_EQ(must(n.apply("a \t\n b")), "a b");
}

TEST(Normalizer, UnicodeFormsAsPythonsUnicodedataGivesThem) {
  auto form = [](const char* type, std::string_view text) {
    return must(must(Normalizer::parse({{"type", type}})).apply(text));
  };
  // Expected values: Python's unicodedata.normalize(form, text).
  EXPECT_EQ(form("NFC", "e\xCC\x81"), "\xC3\xA9");  // e + U+0301 -> é
  EXPECT_EQ(form("NFD", "\xC3\xA9"), "e\xCC\x81");
  EXPECT_EQ(form("NFC", "\xEF\xAC\x81"), "\xEF\xAC\x81");                // ﬁ stays in NFC
  EXPECT_EQ(form("NFKC", "\xEF\xAC\x81 \xE2\x91\xA0"), "fi 1");          // ﬁ ① -> fi 1
  EXPECT_EQ(form("NFKD", "\xE1\xBA\x9B\xCC\xA3"), "s\xCC\xA3\xCC\x87");  // ẛ̣ -> s + dots
  EXPECT_EQ(form("NFD", "A\xCC\x8A\xCC\xA7 \xEA\xB0\x80"),
            "A\xCC\xA7\xCC\x8A \xE1\x84\x80\xE1\x85\xA1");  // reordered; Hangul
  EXPECT_EQ(form("NFC", std::string("x\0y", 3)), std::string("x\0y", 3));
  EXPECT_EQ(form("NFC", "plain ASCII"), "plain ASCII");
}

TEST(Normalizer, UnsupportedKindsAreRefusedByName) {
  for (const char* type : {"Lowercase", "BertNormalizer", "Precompiled", "StripAccents", "Strip"}) {
    auto n = Normalizer::parse({{"type", type}});
    ASSERT_FALSE(n.ok()) << type;
    EXPECT_EQ(n.error().code(), ErrorCode::unsupported);
    EXPECT_NE(n.error().message().find(type), std::string::npos) << n.error().message();
  }
  auto bad = Normalizer::parse(nlohmann::json::parse(R"({"type": "Replace", "content": "x"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "normalizer.pattern: missing");
}

TEST(PreTokenizer, ByteLevelSplitsWithGpt2sPatternAndSpellsBytes) {
  const auto p = must(PreTokenizer::parse(
      nlohmann::json::parse(R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})")));
  EXPECT_TRUE(p.byte_level());
  EXPECT_EQ(run(p, "Hi  there\n"), (Pieces{"Hi", "Ġ", "Ġthere", "Ċ"}));
  const auto prefixed = must(PreTokenizer::parse(nlohmann::json::parse(R"({"type": "ByteLevel"})")));
  EXPECT_EQ(run(prefixed, "Hi"), (Pieces{"ĠHi"}));  // add_prefix_space defaults to true
}

TEST(PreTokenizer, SplitThenByteLevelIsLlama3s) {
  const auto p = must(PreTokenizer::parse(nlohmann::json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}| ?\\p{L}+|\\s+"}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})")));
  EXPECT_EQ(run(p, "ab 12345"), (Pieces{"ab", "Ġ", "123", "45"}));
}

TEST(PreTokenizer, SplitBehavioursAsHuggingFaceDefinesThem) {
  // "a-b--c" split on "-": segments a | - | b | - | - | c
  const std::vector<std::pair<Span, bool>> segs = {{{0, 1}, false}, {{1, 2}, true}, {{2, 3}, false},
                                                   {{3, 4}, true},  {{4, 5}, true}, {{5, 6}, false}};
  auto text = [](const std::vector<Span>& spans) {
    const std::string s = "a-b--c";
    Pieces out;
    for (const Span& sp : spans) out.push_back(s.substr(sp.begin, sp.end - sp.begin));
    return out;
  };
  EXPECT_EQ(text(split_segments(segs, SplitBehavior::removed)), (Pieces{"a", "b", "c"}));
  EXPECT_EQ(text(split_segments(segs, SplitBehavior::isolated)), (Pieces{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(text(split_segments(segs, SplitBehavior::merged_with_previous)), (Pieces{"a-", "b-", "-", "c"}));
  EXPECT_EQ(text(split_segments(segs, SplitBehavior::merged_with_next)), (Pieces{"a", "-b", "-", "-c"}));
  EXPECT_EQ(text(split_segments(segs, SplitBehavior::contiguous)), (Pieces{"a", "-", "b", "--", "c"}));
}

TEST(PreTokenizer, InvertKeepsTheMatches) {
  const auto p = must(PreTokenizer::parse(nlohmann::json::parse(
      R"({"type": "Split", "pattern": {"Regex": "\\d+"}, "behavior": "Removed", "invert": true})")));
  EXPECT_EQ(run(p, "a12b345"), (Pieces{"12", "345"}));
}

TEST(PreTokenizer, MetaspacePrependSchemes) {
  const auto always = must(PreTokenizer::parse(nlohmann::json::parse(
      R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": false})")));
  EXPECT_EQ(run(always, "Hi there"), (Pieces{"▁Hi▁there"}));
  EXPECT_EQ(run(always, "Hi", /*at_start=*/false), (Pieces{"▁Hi"}));
  const auto first = must(PreTokenizer::parse(
      nlohmann::json::parse(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true})")));
  EXPECT_EQ(run(first, "Hi there"), (Pieces{"▁Hi", "▁there"}));
  EXPECT_EQ(run(first, "Hi there", /*at_start=*/false), (Pieces{"Hi", "▁there"}));
  const auto legacy = must(PreTokenizer::parse(
      nlohmann::json::parse(R"({"type": "Metaspace", "replacement": "▁", "add_prefix_space": true})")));
  EXPECT_EQ(run(legacy, "a b"), (Pieces{"▁a", "▁b"}));  // split defaults to true
  EXPECT_EQ(run(legacy, " a"), (Pieces{"▁a"}));         // already starts with ▁: nothing prepended
}

TEST(PreTokenizer, UnsupportedAndMalformedAreRefused) {
  for (const char* type : {"Whitespace", "WhitespaceSplit", "BertPreTokenizer", "Digits", "Punctuation"}) {
    auto p = PreTokenizer::parse({{"type", type}});
    ASSERT_FALSE(p.ok()) << type;
    EXPECT_EQ(p.error().code(), ErrorCode::unsupported);
  }
  auto bad_regex = PreTokenizer::parse(
      nlohmann::json::parse(R"({"type": "Split", "pattern": {"Regex": "(("}, "behavior": "Isolated"})"));
  ASSERT_FALSE(bad_regex.ok());
  EXPECT_NE(bad_regex.error().message().find("pre_tokenizer.pattern"), std::string::npos)
      << bad_regex.error().message();
  auto bad_behavior = PreTokenizer::parse(
      nlohmann::json::parse(R"({"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways"})"));
  ASSERT_FALSE(bad_behavior.ok());
  EXPECT_EQ(bad_behavior.error().message(), "pre_tokenizer.behavior: unknown \"Sideways\"");
  auto wide = PreTokenizer::parse(nlohmann::json::parse(R"({"type": "Metaspace", "replacement": "ab"})"));
  ASSERT_FALSE(wide.ok());
  // Sequences nested past the bound.
  nlohmann::json deep = {{"type", "ByteLevel"}};
  for (int i = 0; i < 6; ++i) deep = {{"type", "Sequence"}, {"pretokenizers", {deep}}};
  auto too_deep = PreTokenizer::parse(deep);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_NE(too_deep.error().message().find("nested too deep"), std::string::npos);
}

}  // namespace pre_tokenizer_test
}  // namespace ember::text
