// The BPE model (text/bpe_model.hpp): merges by rank, byte fallback, unk and fuse_unk, ignore_merges,
// the word cache, and the refusal of malformed or unsupported models.
#include "text/bpe_model.hpp"

#include <gtest/gtest.h>

#include "tests/must.hpp"
#include "tests/text/tokenizer_files.hpp"

namespace ember::text {
namespace bpe_model_test {

using ember::testing::must;
using Ids = std::vector<int32_t>;

Ids encode(const BpeModel& m, std::string_view piece) {
  Ids out;
  m.encode(piece, out);
  return out;
}

TEST(BpeModel, MergesByRankNotByLength) {
  const BpeModel m = must(BpeModel::parse(tokenizer_files::byte_level_json()["model"]));
  EXPECT_EQ(m.vocab_count(), 263u);
  EXPECT_EQ(m.merge_count(), 7u);
  // h e (rank 1) wins over e ll (rank 4), so "hello" is he + ll + o, never hell + o.
  EXPECT_EQ(encode(m, "hello"), (Ids{257, 259, 'o'}));
  EXPECT_EQ(encode(m, "Ġthe"), (Ids{258}));
  EXPECT_EQ(encode(m, "Ġthere"), (Ids{258, 'r', 'e'}));
  EXPECT_EQ(encode(m, "xyz"), (Ids{'x', 'y', 'z'}));
  EXPECT_EQ(*m.token_to_id("Ġthe"), 258);
  EXPECT_EQ(*m.id_to_token(257), "he");
  EXPECT_FALSE(m.id_to_token(263));
  EXPECT_FALSE(m.id_to_token(-1));
}

TEST(BpeModel, IgnoreMergesTakesAWholeWordFromTheVocabulary) {
  nlohmann::json j = tokenizer_files::byte_level_json()["model"];
  j["vocab"]["hello"] = 263;  // a token the merges cannot reach from h e l l o
  const BpeModel merging = must(BpeModel::parse(j));
  EXPECT_EQ(encode(merging, "hello"), (Ids{257, 259, 'o'}));
  j["ignore_merges"] = true;
  const BpeModel whole = must(BpeModel::parse(j));
  EXPECT_EQ(encode(whole, "hello"), (Ids{263}));
}

TEST(BpeModel, ByteFallbackUnkAndFuse) {
  nlohmann::json j = tokenizer_files::sentencepiece_json()["model"];
  const BpeModel m = must(BpeModel::parse(j));
  EXPECT_EQ(encode(m, "▁Hello▁world"), (Ids{271, 276}));
  // é is not in the vocabulary: its UTF-8 bytes C3 A9 are <0xC3> <0xA9> (ids 3 + byte).
  EXPECT_EQ(encode(m, "▁H\xC3\xA9"), (Ids{267, 3 + 0xC3, 3 + 0xA9}));
  // Without byte tokens, unknown characters become <unk>, consecutive ones fused into one.
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    j["vocab"].erase(name);
  }
  const BpeModel no_bytes = must(BpeModel::parse(j));
  EXPECT_EQ(encode(no_bytes, "H\xC3\xA9\xC3\xA9o\xC3\xA9"), (Ids{260, 0, 263, 0}));
  j["fuse_unk"] = false;
  const BpeModel unfused = must(BpeModel::parse(j));
  EXPECT_EQ(encode(unfused, "H\xC3\xA9\xC3\xA9o"), (Ids{260, 0, 0, 263}));
  j["unk_token"] = nullptr;
  const BpeModel dropping = must(BpeModel::parse(j));
  EXPECT_EQ(encode(dropping, "H\xC3\xA9o"), (Ids{260, 263}));  // no unk token: dropped, as Hugging Face does
}

TEST(BpeModel, MergesMayBePairsAndRepeatedWordsComeFromTheCache) {
  nlohmann::json j = tokenizer_files::byte_level_json()["model"];
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& m : j["merges"]) {
    const std::string s = m.get<std::string>();
    pairs.push_back({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  j["merges"] = pairs;
  const BpeModel m = must(BpeModel::parse(j));
  EXPECT_EQ(m.cached_words(), 0u);
  EXPECT_EQ(encode(m, "hello"), (Ids{257, 259, 'o'}));
  EXPECT_EQ(m.cached_words(), 1u);
  EXPECT_EQ(encode(m, "hello"), (Ids{257, 259, 'o'}));
  EXPECT_EQ(m.cached_words(), 1u);
  EXPECT_EQ(encode(m, std::string(BpeModel::kCacheWordBytes, 'h')).size(), BpeModel::kCacheWordBytes);
  EXPECT_EQ(m.cached_words(), 1u);  // too long to cache
}

TEST(BpeModel, LongWordsMergeCompletely) {
  // 20,000 characters that merge pairwise (l l) into 10,000 tokens, leftmost first; an odd one stays.
  // (The cost, O(n log n) with the queue, is measured by bench/tokenizer_bench.)
  const BpeModel m = must(BpeModel::parse(tokenizer_files::byte_level_json()["model"]));
  EXPECT_EQ(encode(m, std::string(20000, 'l')), Ids(10000, 259));
  Ids odd(10000, 259);
  odd.push_back('l');
  EXPECT_EQ(encode(m, std::string(20001, 'l')), odd);
}

TEST(BpeModel, RefusesWhatItDoesNotReadWithTheReason) {
  auto refused = [](nlohmann::json j, ErrorCode code, std::string_view needle) {
    auto m = BpeModel::parse(j);
    ASSERT_FALSE(m.ok()) << needle;
    EXPECT_EQ(m.error().code(), code) << m.error().message();
    EXPECT_NE(m.error().message().find(needle), std::string::npos) << m.error().message();
  };
  const nlohmann::json base = tokenizer_files::byte_level_json()["model"];
  for (const char* type : {"WordPiece", "Unigram", "WordLevel"}) {
    nlohmann::json j = base;
    j["type"] = type;
    refused(j, ErrorCode::unsupported, type);
  }
  nlohmann::json j = base;
  j["dropout"] = 0.1;
  refused(j, ErrorCode::unsupported, "dropout");
  j = base;
  j["end_of_word_suffix"] = "</w>";
  refused(j, ErrorCode::unsupported, "end_of_word_suffix");
  j = base;
  j["merges"].push_back("q zz");
  refused(j, ErrorCode::invalid_argument, "model.merges[7]: \"zz\" is not in the vocabulary");
  j = base;
  j["merges"].push_back("x y");  // both parts exist, "xy" does not
  refused(j, ErrorCode::invalid_argument, "\"xy\" is not in the vocabulary");
  j = base;
  j["merges"].push_back("a b c");
  refused(j, ErrorCode::invalid_argument, "is not two tokens");
  j = base;
  j["merges"].push_back(42);
  refused(j, ErrorCode::invalid_argument, "model.merges[7]: expected");
  j = base;
  j["vocab"]["dup"] = 5;
  refused(j, ErrorCode::invalid_argument, "id 5 is given to both");
  j = base;
  j["vocab"]["neg"] = -1;
  refused(j, ErrorCode::invalid_argument, "outside");
  j = base;
  j["vocab"]["huge"] = 1u << 30;
  refused(j, ErrorCode::invalid_argument, "outside");
  j = base;
  j["vocab"]["str"] = "7";
  refused(j, ErrorCode::invalid_argument, "expected an integer id");
  j = base;
  j["unk_token"] = "<nope>";
  refused(j, ErrorCode::invalid_argument, "unk_token \"<nope>\" is not in the vocabulary");
  j = base;
  j.erase("vocab");
  refused(j, ErrorCode::invalid_argument, "model.vocab: missing");
  refused(nlohmann::json::array(), ErrorCode::invalid_argument, "model: expected an object");
}

}  // namespace bpe_model_test
}  // namespace ember::text
