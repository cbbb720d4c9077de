// Streaming detokenization (text/incremental_decoder.hpp): pieces never split a character, keep
// SentencePiece's spaces right, and add up to the full decoding.
#include "text/incremental_decoder.hpp"

#include <gtest/gtest.h>

#include "tests/must.hpp"
#include "tests/text/tokenizer_files.hpp"
#include "text/utf8.hpp"

namespace ember::text {
namespace incremental_decoder_test {

using ember::testing::must;
using Ids = std::vector<int32_t>;

/// The pieces streaming `ids` gives, after a prompt of `prompt` ids; finish()'s text last.
std::vector<std::string> stream(const Tokenizer& t, const Ids& ids, const Ids& prompt = {}, bool skip = false) {
  IncrementalDecoder d(t, skip, prompt);
  std::vector<std::string> pieces;
  for (const int32_t id : ids) pieces.push_back(must(d.push(id)));
  pieces.push_back(d.finish());
  return pieces;
}

std::string joined(const std::vector<std::string>& pieces) {
  std::string s;
  for (const auto& p : pieces) s += p;
  return s;
}

TEST(IncrementalDecoder, HoldsBackAPartialCharacterAndNeverSplitsOne) {
  const Tokenizer t = must(Tokenizer::parse(tokenizer_files::byte_level_json().dump()));
  // 日 is E6 97 A5: three byte tokens; nothing comes out until the third.
  const Ids ids =
      must(t.encode("a\xE6\x97\xA5"
                    "b"));
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_EQ(stream(t, ids), (std::vector<std::string>{"a", "", "", "\xE6\x97\xA5", "b", ""}));
}

TEST(IncrementalDecoder, KeepsSentencePieceSpacesAcrossPieces) {
  const Tokenizer t = must(Tokenizer::parse(tokenizer_files::sentencepiece_json().dump()));
  const Ids ids = must(t.encode("Hello world", {.add_special_tokens = false}));  // ▁Hello ▁world
  // Decoded alone, "▁world" would lose its space; with its context it keeps it.
  EXPECT_EQ(must(t.decode(Ids{276})), "world");
  EXPECT_EQ(stream(t, ids), (std::vector<std::string>{"Hello", " world", ""}));
  // After a prompt, the first generated token keeps its space too.
  const Ids prompt = must(t.encode("Hello"));  // <s> ▁Hello
  EXPECT_EQ(stream(t, {276}, prompt), (std::vector<std::string>{" world", ""}));
  // Skipped special tokens emit nothing and do not disturb the spaces around them.
  EXPECT_EQ(stream(t, {271, 2, 276}, {}, /*skip=*/true), (std::vector<std::string>{"Hello", "", " world", ""}));
  EXPECT_EQ(stream(t, {271, 2, 276}), (std::vector<std::string>{"Hello", "</s>", " world", ""}));
}

TEST(IncrementalDecoder, PiecesAddUpToTheDecodingAndAreValid) {
  const Tokenizer bl = must(Tokenizer::parse(tokenizer_files::byte_level_json().dump()));
  const Tokenizer sp = must(Tokenizer::parse(tokenizer_files::sentencepiece_json().dump()));
  for (const Tokenizer* t : {&bl, &sp}) {
    for (std::string_view text : {"Hello world", "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\xF0\x9F\x8E\x89!", "  Hello\n",
                                  "\xF0\x9F\x8E\x89\xF0\x9F\x8E\x89"}) {
      const Ids ids = must(t->encode(text, {.add_special_tokens = false}));
      const auto pieces = stream(*t, ids);
      for (const auto& p : pieces) EXPECT_TRUE(valid_utf8(p));
      EXPECT_EQ(joined(pieces), must(t->decode(ids))) << text;
    }
  }
}

TEST(IncrementalDecoder, ABrokenSequenceEndsAsReplacementAndBadIdsAreRefused) {
  const Tokenizer t = must(Tokenizer::parse(tokenizer_files::byte_level_json().dump()));
  IncrementalDecoder d(t, false);
  EXPECT_EQ(must(d.push(0xE6)), "");  // a lead byte whose character never completes
  auto bad = d.push(5000);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("token id 5000 has no token"), std::string::npos);
  EXPECT_EQ(d.generated(), 1u);
  EXPECT_EQ(d.finish(), std::string(kReplacementChar));
  // Once a later character arrives, the broken one is emitted with it.
  IncrementalDecoder e(t, false);
  EXPECT_EQ(must(e.push(0xE6)), "");
  EXPECT_EQ(must(e.push('x')), std::string(kReplacementChar) + "x");
}

TEST(IncrementalDecoder, LongStreamsKeepASmallWindow) {
  const Tokenizer t = must(Tokenizer::parse(tokenizer_files::byte_level_json().dump()));
  IncrementalDecoder d(t, false);
  std::string all;
  for (int i = 0; i < 5000; ++i) all += must(d.push('a' + i % 26));
  all += d.finish();
  EXPECT_EQ(all.size(), 5000u);
  EXPECT_EQ(d.generated(), 5000u);
}

}  // namespace incremental_decoder_test
}  // namespace ember::text
