// Decoders (text/token_decoder.hpp): each step with Hugging Face's semantics, their Sequence as Llama 2
// uses it, always-valid output, and the refusal of the kinds Ember does not run.
#include "text/token_decoder.hpp"

#include <gtest/gtest.h>

#include "tests/must.hpp"
#include "text/utf8.hpp"

namespace ember::text {
namespace token_decoder_test {

using ember::testing::must;
using Tokens = std::vector<std::string>;

TokenDecoder parse(const char* json) { return must(TokenDecoder::parse(nlohmann::json::parse(json))); }

constexpr const char* kLlama2 = R"({"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})";

TEST(TokenDecoder, ByteLevelMapsTheAlphabetBack) {
  const TokenDecoder d = parse(R"({"type": "ByteLevel"})");
  EXPECT_EQ(d.decode({"Hello", "Ġworld", "Ċ"}), "Hello world\n");
  EXPECT_EQ(d.decode({"æĹ", "¥"}), "\xE6\x97\xA5");  // 日 split across two tokens
  // An added token outside the alphabet keeps its own bytes.
  EXPECT_EQ(d.decode({"a", "<|日|>", "Ġb"}), "a<|\xE6\x97\xA5|> b");
  // A character cut short becomes U+FFFD: the output is always valid.
  EXPECT_EQ(d.decode({"æĹ"}), std::string(kReplacementChar));
  EXPECT_FALSE(d.strips_leading_space());
}

TEST(TokenDecoder, Llama2SequenceStripsOneLeadingSpace) {
  const TokenDecoder d = parse(kLlama2);
  EXPECT_TRUE(d.strips_leading_space());
  EXPECT_EQ(d.decode({"▁Hello", "▁world"}), "Hello world");
  EXPECT_EQ(d.decode({"▁", "▁Hello"}), " Hello");  // only one space is stripped
  EXPECT_EQ(d.decode({"<s>", "▁Hello"}), "<s> Hello");
  EXPECT_EQ(d.decode({"▁H", "<0xC3>", "<0xA9>"}), "H\xC3\xA9");
  // Bytes that are not valid UTF-8: one U+FFFD per byte (Hugging Face's ByteFallback).
  const std::string r(kReplacementChar);
  EXPECT_EQ(d.decode({"▁a", "<0xC3>", "<0x41>"}), "a" + r + r);
  EXPECT_EQ(d.decode({}), "");
}

TEST(TokenDecoder, StripMetaspaceAndReplaceWithARegex) {
  EXPECT_EQ(parse(R"({"type": "Strip", "content": "x", "start": 2, "stop": 1})").decode({"xxxaxx", "xx", "x"}), "xax");
  const TokenDecoder meta = parse(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"})");
  EXPECT_EQ(meta.decode({"▁Hi", "▁there"}), "Hi there");
  const TokenDecoder never = parse(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never"})");
  EXPECT_EQ(never.decode({"▁Hi"}), " Hi");
  EXPECT_EQ(parse(R"({"type": "Replace", "pattern": {"Regex": "[0-9]+"}, "content": "#"})").decode({"a12", "3b"}),
            "a##b");
}

TEST(TokenDecoder, NoDecoderJoinsWithSpaces) {
  EXPECT_EQ(must(TokenDecoder::parse(nullptr)).decode({"a", "b"}), "a b");
}

TEST(TokenDecoder, UnsupportedAndMalformedAreRefused) {
  for (const char* type : {"WordPiece", "CTC", "BPEDecoder"}) {
    auto d = TokenDecoder::parse({{"type", type}});
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.error().code(), ErrorCode::unsupported);
    EXPECT_NE(d.error().message().find(type), std::string::npos);
  }
  auto strip =
      TokenDecoder::parse(nlohmann::json::parse(R"({"type": "Strip", "content": "ab", "start": 1, "stop": 0})"));
  ASSERT_FALSE(strip.ok());
  EXPECT_EQ(strip.error().message(), "decoder.content: must be one character");
  auto neg = TokenDecoder::parse(nlohmann::json::parse(R"({"type": "Strip", "content": " ", "start": -1, "stop": 0})"));
  ASSERT_FALSE(neg.ok());
  auto seq = TokenDecoder::parse(nlohmann::json::parse(R"({"type": "Sequence", "decoders": {}})"));
  ASSERT_FALSE(seq.ok());
  EXPECT_EQ(seq.error().message(), "decoder.decoders: expected an array, got object");
}

TEST(TokenDecoder, CleanUpIsTransformersList) {
  EXPECT_EQ(clean_up_tokenization("Hi , it 's me . Do n't ! Is it ? ' x ' we 're I 'm they 've"),
            "Hi, it's me. Don't! Is it?'x'we're I'm they've");
}

}  // namespace token_decoder_test
}  // namespace ember::text
