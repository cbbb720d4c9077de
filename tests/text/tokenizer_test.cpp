// The tokenizer (text/tokenizer.hpp) on hand-made tokenizer.json files: the whole encode and decode
// paths of byte-level and SentencePiece-style BPE, special tokens, BOS/EOS from the file and the
// config, loading from disk, and every kind of malformed or unsupported file refused clearly.
#include "text/tokenizer.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "tests/must.hpp"
#include "tests/text/tokenizer_files.hpp"

namespace ember::text {
namespace tokenizer_test {

using ember::testing::must;
using Ids = std::vector<int32_t>;

Tokenizer byte_level() { return must(Tokenizer::parse(tokenizer_files::byte_level_json().dump())); }
Tokenizer sentencepiece(std::string config = {}) {
  return must(Tokenizer::parse(tokenizer_files::sentencepiece_json().dump(), config));
}

Ids encode(const Tokenizer& t, std::string_view text, EncodeOptions o = {}) { return must(t.encode(text, o)); }
std::string decode(const Tokenizer& t, const Ids& ids, DecodeOptions o = {}) { return must(t.decode(ids, o)); }

TEST(Tokenizer, ByteLevelEncodesWordByWord) {
  const Tokenizer t = byte_level();
  EXPECT_EQ(t.kind(), TokenizerKind::byte_level);
  EXPECT_EQ(t.vocab_size(), 301);
  // "hello" -> he ll o; " the" -> Ġthe; " there" -> Ġthe r e.
  EXPECT_EQ(encode(t, "hello the there"), (Ids{257, 259, 'o', 258, 258, 'r', 'e'}));
  EXPECT_EQ(encode(t, ""), Ids{});
  // GPT-2's post-processor adds nothing.
  EXPECT_EQ(encode(t, "hi", {.add_special_tokens = true}), encode(t, "hi", {.add_special_tokens = false}));
}

TEST(Tokenizer, ByteLevelRoundTripsAnyText) {
  const Tokenizer t = byte_level();
  for (std::string_view s : std::initializer_list<std::string_view>{
           "hello the there", "  two  spaces\n\nand\ttabs ", "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC",
           "\xF0\x9F\x8E\x89 emoji", "it's 2024!", std::string_view("nul\0byte", 8)}) {
    EXPECT_EQ(decode(t, encode(t, s)), s);
  }
}

TEST(Tokenizer, SpecialTokensInTheTextAreOneIdUnlessAskedOtherwise) {
  const Tokenizer t = byte_level();
  EXPECT_EQ(encode(t, "hello<|endoftext|>the"), (Ids{257, 259, 'o', 300, 't', 257}));
  const Ids as_text = encode(t, "<|endoftext|>", {.special_in_text = false});
  EXPECT_EQ(std::count(as_text.begin(), as_text.end(), 300), 0);
  EXPECT_EQ(decode(t, as_text), "<|endoftext|>");
  EXPECT_EQ(decode(t, {257, 300, 258}), "he<|endoftext|> the");
  EXPECT_EQ(decode(t, {257, 300, 258}, {.skip_special_tokens = true}), "he the");
  EXPECT_TRUE(t.is_special(300));
  EXPECT_FALSE(t.is_special(257));
  EXPECT_EQ(*t.token_to_id("<|endoftext|>"), 300);
  EXPECT_EQ(*t.token_to_id("Ġthe"), 258);
  EXPECT_EQ(*t.id_to_token(258), "Ġthe");
  EXPECT_EQ(*t.id_to_token(300), "<|endoftext|>");
  EXPECT_FALSE(t.id_to_token(299));
  // No config and no template: EOS from the added token's well-known name, no BOS.
  EXPECT_EQ(t.eos_id(), 300);
  EXPECT_EQ(t.eos_token(), "<|endoftext|>");
  EXPECT_FALSE(t.bos_id());
}

TEST(Tokenizer, ByteLevelWithATemplateAddsBosAsMetasLlama3FileDoes) {
  // Meta's Llama 3 tokenizer.json: a Sequence of ByteLevel (offsets only) and TemplateProcessing.
  nlohmann::json j = tokenizer_files::byte_level_json();
  j["added_tokens"].push_back({{"id", 301}, {"content", "<|begin_of_text|>"}, {"special", true}});
  j["post_processor"] = nlohmann::json::parse(R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
       "pair": [],
       "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [301], "tokens": ["<|begin_of_text|>"]}}}]})");
  const Tokenizer t = must(Tokenizer::parse(j.dump()));
  EXPECT_EQ(encode(t, "the"), (Ids{301, 't', 257}));
  EXPECT_EQ(encode(t, "the", {.add_special_tokens = false}), (Ids{'t', 257}));
  EXPECT_EQ(encode(t, ""), (Ids{301}));
  EXPECT_EQ(t.bos_id(), 301);
  EXPECT_EQ(t.bos_token(), "<|begin_of_text|>");
  EXPECT_EQ(t.vocab_size(), 302);
  EXPECT_EQ(decode(t, encode(t, "the"), {.skip_special_tokens = true}), "the");
}

TEST(Tokenizer, NfcNormalizerAsQwen2sFileHasIt) {
  nlohmann::json j = tokenizer_files::byte_level_json();
  j["normalizer"] = {{"type", "NFC"}};
  const Tokenizer t = must(Tokenizer::parse(j.dump()));
  EXPECT_EQ(encode(t,
                   "caf"
                   "e\xCC\x81"),
            encode(t, "caf\xC3\xA9"));  // decomposed é is composed first
  EXPECT_EQ(decode(t, encode(t,
                             "caf"
                             "e\xCC\x81")),
            "caf\xC3\xA9");
}

TEST(Tokenizer, SentencePieceEncodesWithBosAndByteFallback) {
  const Tokenizer t = sentencepiece();
  EXPECT_EQ(t.kind(), TokenizerKind::sentencepiece);
  EXPECT_EQ(encode(t, "Hello world"), (Ids{1, 271, 276}));
  EXPECT_EQ(encode(t, "Hello world", {.add_special_tokens = false}), (Ids{271, 276}));
  EXPECT_EQ(encode(t, "H\xC3\xA9"), (Ids{1, 267, 3 + 0xC3, 3 + 0xA9}));
  // Leading spaces are ▁s of their own: "  Hello" is ▁▁▁Hello -> ▁ ▁ ▁Hello.
  EXPECT_EQ(encode(t, "  Hello", {.add_special_tokens = false}), (Ids{259, 259, 271}));
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.bos_token(), "<s>");
  EXPECT_EQ(t.eos_token(), "</s>");
  EXPECT_EQ(t.prefix_ids().size(), 1u);
}

TEST(Tokenizer, SentencePieceSectionsAfterASpecialTokenGetTheirOwnPrefix) {
  const Tokenizer t = sentencepiece();
  // As Hugging Face's (legacy) Llama tokenizer: each section between added tokens is normalized alone,
  // so "world" after </s> is ▁world.
  EXPECT_EQ(encode(t, "Hello</s>world", {.add_special_tokens = false}), (Ids{271, 2, 276}));
  EXPECT_EQ(decode(t, {1, 271, 2, 276}), "<s> Hello</s> world");
  EXPECT_EQ(decode(t, {1, 271, 2, 276}, {.skip_special_tokens = true}), "Hello world");
}

TEST(Tokenizer, SentencePieceRoundTrips) {
  const Tokenizer t = sentencepiece();
  for (std::string_view s :
       {"Hello world", " Hello", "Hello  world ", "\xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x8E\x89", "line\nbreak", ""}) {
    EXPECT_EQ(decode(t, encode(t, s), {.skip_special_tokens = true}), s);
  }
}

TEST(Tokenizer, ConfigNamesBosEosTemplateAndLlamaClassRewritesTheTemplate) {
  const std::string config = R"({"bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>",
      "chat_template": "{{ messages }}", "clean_up_tokenization_spaces": false,
      "tokenizer_class": "LlamaTokenizer", "add_bos_token": false, "add_eos_token": true})";
  const Tokenizer t = sentencepiece(config);
  EXPECT_EQ(t.chat_template(), "{{ messages }}");
  EXPECT_FALSE(t.clean_up_tokenization_spaces());
  EXPECT_EQ(t.tokenizer_class(), "LlamaTokenizer");
  EXPECT_EQ(encode(t, "Hello"), (Ids{271, 2}));  // as transformers' LlamaTokenizerFast would
  // A chat_template list: "default" is taken.
  const Tokenizer list = sentencepiece(R"({"chat_template": [{"name": "tool_use", "template": "x"},
      {"name": "default", "template": "y"}]})");
  EXPECT_EQ(list.chat_template(), "y");
  EXPECT_TRUE(list.clean_up_tokenization_spaces());  // transformers' default
  // Another class keeps the file's template.
  EXPECT_EQ(encode(sentencepiece(R"({"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": false})"), "Hello"),
            (Ids{1, 271}));
}

TEST(Tokenizer, DecodeRefusesIdsWithoutATokenAndCleansUpOnlyWhenAsked) {
  const Tokenizer t = byte_level();
  for (int32_t id : {-1, 263, 299, 301, 1 << 30}) {
    auto r = t.decode(Ids{'a', id});
    ASSERT_FALSE(r.ok()) << id;
    EXPECT_EQ(r.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(r.error().message().find("token id " + std::to_string(id) + " has no token"), std::string::npos);
  }
  const Ids ids = encode(t, "it 's ok .");
  EXPECT_EQ(decode(t, ids), "it 's ok .");
  EXPECT_EQ(decode(t, ids, {.clean_up_tokenization_spaces = true}), "it's ok.");
}

TEST(Tokenizer, InvalidUtf8TextIsAnError) {
  auto r = byte_level().encode("ok\xC3(");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(r.error().message(), "text is not valid UTF-8 (at byte 2)");
}

/// parse() of `json` must fail with `code` and a message containing `needle`.
void refused(const std::string& json, ErrorCode code, std::string_view needle, const std::string& config = {}) {
  auto t = Tokenizer::parse(json, config);
  ASSERT_FALSE(t.ok()) << needle;
  EXPECT_EQ(t.error().code(), code) << t.error().message();
  EXPECT_NE(t.error().message().find(needle), std::string::npos) << t.error().message();
}

TEST(Tokenizer, MalformedFilesAreClearErrors) {
  refused("", ErrorCode::invalid_argument, "tokenizer.json: not valid JSON");
  refused("{\"model\": ", ErrorCode::invalid_argument, "tokenizer.json: not valid JSON");
  refused("[1, 2]", ErrorCode::invalid_argument, "tokenizer.json: root: expected an object, got array");
  refused("{}", ErrorCode::invalid_argument, "tokenizer.json: model: missing");
  nlohmann::json j = tokenizer_files::byte_level_json();
  j["added_tokens"][0]["id"] = "300";
  refused(j.dump(), ErrorCode::invalid_argument, "tokenizer.json: added_tokens[0].id: expected an integer, got string");
  j = tokenizer_files::sentencepiece_json();
  j["post_processor"]["single"][0]["SpecialToken"]["id"] = "<bos>";
  refused(j.dump(), ErrorCode::invalid_argument, "\"<bos>\" is not in special_tokens");
  j = tokenizer_files::sentencepiece_json();
  j["post_processor"]["special_tokens"]["<s>"]["ids"] = {5000};
  refused(j.dump(), ErrorCode::invalid_argument, "special token id 5000 is not a token");
  j = tokenizer_files::sentencepiece_json();
  j["post_processor"]["single"] = nlohmann::json::array();
  refused(j.dump(), ErrorCode::invalid_argument, "no sequence A");
  // tokenizer_config.json's own errors say which file.
  const std::string ok = tokenizer_files::sentencepiece_json().dump();
  refused(ok, ErrorCode::invalid_argument, "tokenizer_config.json: not valid JSON", "{");
  refused(ok, ErrorCode::invalid_argument, "tokenizer_config.json: bos_token: \"<bos>\" is not a token",
          R"({"bos_token": "<bos>"})");
  refused(ok, ErrorCode::invalid_argument, "tokenizer_config.json: chat_template: expected", R"({"chat_template": 3})");
  refused(ok, ErrorCode::invalid_argument, "tokenizer_config.json: eos_token: expected", R"({"eos_token": 2})");
}

TEST(Tokenizer, UnsupportedFilesSayWhat) {
  nlohmann::json j = tokenizer_files::byte_level_json();
  j["model"]["type"] = "WordPiece";
  refused(j.dump(), ErrorCode::unsupported, "model.type \"WordPiece\" is not supported");
  j = tokenizer_files::byte_level_json();
  j["normalizer"] = {{"type", "Lowercase"}};
  refused(j.dump(), ErrorCode::unsupported, "normalizer: type \"Lowercase\" is not supported");
  j = tokenizer_files::byte_level_json();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  refused(j.dump(), ErrorCode::unsupported, "pre_tokenizer: type \"Whitespace\" is not supported");
  j = tokenizer_files::byte_level_json();
  j["post_processor"] = {{"type", "RobertaProcessing"}};
  refused(j.dump(), ErrorCode::unsupported, "post_processor: type \"RobertaProcessing\" is not supported");
  j = tokenizer_files::byte_level_json();
  j["decoder"] = {{"type", "WordPiece"}};
  refused(j.dump(), ErrorCode::unsupported, "decoder: type \"WordPiece\" is not supported");
}

TEST(Tokenizer, SizeAndDepthAreBounded) {
  refused(std::string(Tokenizer::kMaxFileBytes + 1, ' '), ErrorCode::invalid_argument, "bytes (at most 67108864)");
  refused(tokenizer_files::byte_level_json().dump(), ErrorCode::invalid_argument,
          "tokenizer_config.json: ", std::string(Tokenizer::kMaxConfigBytes + 1, ' '));
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  refused(deep, ErrorCode::invalid_argument, "nested deeper than 32 levels");
  nlohmann::json j = tokenizer_files::byte_level_json();
  nlohmann::json nest = 1;
  for (int i = 0; i < 40; ++i) nest = nlohmann::json::array({nest});
  j["extra"] = nest;  // an unread field is still bounded
  refused(j.dump(), ErrorCode::invalid_argument, "nested deeper");
}

/// A temporary folder with a tokenizer.json (and optionally tokenizer_config.json), removed at the end.
class Folder {
 public:
  Folder() {
    char name[] = "/tmp/ember-tokenizer-XXXXXX";
    path_ = ::mkdtemp(name);
  }
  ~Folder() { std::filesystem::remove_all(path_); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

TEST(Tokenizer, LoadsAFolderOrAFileWithItsConfigBeside) {
  Folder f;
  f.write("tokenizer.json", tokenizer_files::sentencepiece_json().dump());
  f.write("tokenizer_config.json", R"({"chat_template": "t"})");
  const Tokenizer from_folder = must(Tokenizer::load(f.path()));
  EXPECT_EQ(from_folder.chat_template(), "t");
  const Tokenizer from_file = must(Tokenizer::load(f.path() / "tokenizer.json"));
  EXPECT_EQ(from_file.chat_template(), "t");
  EXPECT_EQ(encode(from_file, "Hello"), (Ids{1, 271}));

  auto missing = Tokenizer::load(f.path() / "nope.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ErrorCode::not_found);
  EXPECT_NE(missing.error().message().find("nope.json: no such file"), std::string::npos);
  f.write("tokenizer_config.json", "{oops");
  auto bad = Tokenizer::load(f.path());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), f.path().string() + ": tokenizer_config.json: not valid JSON");
}

}  // namespace tokenizer_test
}  // namespace ember::text
