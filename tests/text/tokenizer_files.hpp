// Small hand-made tokenizer.json files for the text/ tests, built in memory: a byte-level BPE in
// GPT-2's alphabet and a SentencePiece-style BPE with byte fallback, each small enough that every
// expected id in the tests can be worked out by hand from the merges below.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "text/byte_level.hpp"

namespace ember::text::tokenizer_files {

/// Byte-level BPE: ids 0..255 are the bytes' characters (id b for byte b); merges, by rank:
///   0 "Ġ t"  -> Ġt   256      3 "l l"    -> ll    259      6 "hell o" -> hello 262
///   1 "h e"  -> he   257      4 "e ll"   -> ell   260
///   2 "Ġt he"-> Ġthe 258      5 "h ell"  -> hell  261
/// and the added token <|endoftext|> 300 (special). GPT-2's pre-tokenizer (ByteLevel with its regex),
/// ByteLevel decoder and post-processor.
inline nlohmann::json byte_level_json() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[std::string(byte_to_utf8(static_cast<uint8_t>(b)))] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {{"Ġ", "t"},  {"h", "e"},   {"Ġt", "he"}, {"l", "l"},
                                                                   {"e", "ll"}, {"h", "ell"}, {"hell", "o"}};
  nlohmann::json merge_list = nlohmann::json::array();
  int id = 256;
  for (const auto& [a, b] : merges) {
    vocab[a + b] = id++;
    merge_list.push_back(a + " " + b);
  }
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {{{"id", 300},
         {"content", "<|endoftext|>"},
         {"single_word", false},
         {"lstrip", false},
         {"rstrip", false},
         {"normalized", false},
         {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"post_processor",
       {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab", vocab},
        {"merges", merge_list}}},
  };
}

/// SentencePiece-style BPE as Llama 2's file is laid out: <unk> 0, <s> 1, </s> 2, <0x00>..<0xFF> 3..258
/// (byte b is id 3 + b), then ▁ 259, H 260, e 261, l 262, o 263, w 264, r 265, d 266, and merges by rank:
///   0 "▁ H"   -> ▁H    267     4 "▁Hell o" -> ▁Hello 271     8 "l d"     -> ld     275
///   1 "l l"   -> ll    268     5 "▁ w"     -> ▁w     272     9 "▁wor ld" -> ▁world 276
///   2 "▁H e"  -> ▁He   269     6 "o r"     -> or     273
///   3 "▁He ll"-> ▁Hell 270     7 "▁w or"   -> ▁wor   274
/// Normalizer Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer, byte_fallback, fuse_unk, the
/// template "<s> $A", and the decoder Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0).
inline nlohmann::json sentencepiece_json() {
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  int id = 259;
  for (const char* c : {"▁", "H", "e", "l", "o", "w", "r", "d"}) vocab[c] = id++;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"▁", "H"}, {"l", "l"}, {"▁H", "e"},  {"▁He", "ll"}, {"▁Hell", "o"},
      {"▁", "w"}, {"o", "r"}, {"▁w", "or"}, {"l", "d"},    {"▁wor", "ld"}};
  nlohmann::json merge_list = nlohmann::json::array();
  for (const auto& [a, b] : merges) {
    vocab[a + b] = id++;
    merge_list.push_back(a + " " + b);
  }
  auto special = [](int i, const char* content) {
    return nlohmann::json{{"id", i},         {"content", content},  {"single_word", false}, {"lstrip", false},
                          {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  return {
      {"version", "1.0"},
      {"added_tokens", {special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "▁"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair", nlohmann::json::array()},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", "<unk>"},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", true},
        {"byte_fallback", true},
        {"vocab", vocab},
        {"merges", merge_list}}},
  };
}

}  // namespace ember::text::tokenizer_files
