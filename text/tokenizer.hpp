// A language model's tokenizer, read from Hugging Face's tokenizer.json (with tokenizer_config.json
// beside it when there is one): text to token ids and back, special tokens, BOS and EOS.
//
// Pure: anyone, any thread. A Tokenizer is immutable after load() or parse() except for its BPE word
// cache, which has its own mutex; share one as std::shared_ptr<const Tokenizer> between the front
// ends and the generation loop. Nothing here blocks beyond that mutex, throws, logs or touches a
// device; load() reads the two files and nothing else. Move-only.
//
// What is read (everything else is refused at load with the reason, never half-supported):
//   - model: BPE (text/bpe_model.hpp) with its vocab, merges ("a b" or ["a", "b"]), byte_fallback,
//     fuse_unk, ignore_merges, unk_token;
//   - normalizer and pre_tokenizer: what byte-level BPE (GPT-2, Llama 3, Qwen2, Mistral-Nemo: ByteLevel
//     and/or Split with a regex run by PCRE2, Qwen2's NFC) and SentencePiece-style BPE (Llama 2,
//     Mistral 7B v0.1: Prepend("▁") + Replace(" ", "▁"), or Metaspace) use (text/pre_tokenizer.hpp);
//   - added_tokens (text/added_tokens.hpp);
//   - post_processor: TemplateProcessing's single template (special tokens around $A), ByteLevel
//     (offsets only: nothing to do for ids), and a Sequence of them;
//   - decoder (text/token_decoder.hpp);
//   - tokenizer_config.json: bos_token, eos_token (a string or {"content": ...}), chat_template (a
//     string, or a list of {name, template} of which "default" is taken), clean_up_tokenization_spaces,
//     tokenizer_class, add_bos_token and add_eos_token.
//
// Encoding (Hugging Face tokenizers' TokenizerImpl::encode, which this follows):
//   1. The text must be valid UTF-8 (invalid_argument naming the byte otherwise).
//   2. Added tokens with normalized=false are cut out of the raw text.
//   3. Each remaining section is normalized; added tokens with normalized=true are cut out of it.
//   4. Each remaining part is pre-tokenized into pieces; each piece is encoded by the BPE model.
//   5. With add_special_tokens, the post-processor's template adds its special tokens around the ids
//      (Llama 2's and Llama 3's BOS <s> / <|begin_of_text|>; nothing for GPT-2). For a
//      tokenizer_class of LlamaTokenizer(Fast) or CodeLlamaTokenizer(Fast), as transformers'
//      LlamaTokenizerFast does, the template is instead BOS if add_bos_token (default true), then the
//      text, then EOS if add_eos_token (default false).
// Decoding: each id becomes its token (an added token's content first, else the vocabulary's; an id
// with neither is invalid_argument: the sampler draws from [0, vocab_size()) only), special tokens are
// dropped when asked, the decoder turns the tokens into text, and clean_up_tokenization_spaces applies
// when asked (off by default: it is lossy, and streaming never applies it). The text is valid UTF-8.
//
// BOS and EOS: tokenizer_config.json's bos_token and eos_token when given (a name that is no token is
// an error); otherwise from tokenizer.json: BOS is the template's first special token before $A, EOS
// its first after $A, else the first special added token among "</s>", "<|end_of_text|>",
// "<|endoftext|>", "<eos>". Chat models' further stop tokens (Llama 3's <|eot_id|>) come from
// generation_config.json, which the importer reads, or from the chat template's family.
//
// Cost (bench/tokenizer_bench, a 2,000-token prompt of varied prose, code and numbers, the npm files, on
// this project's shared 2-core machine at load average ~9, so upper figures): encoding warm (words in the
// cache) takes 5.5-7 us per 100 tokens for GPT-2 and Llama 3, 27 us for Llama 2 (no pre-tokenizer: the
// text is one BPE word, which the cache does not hold); the first encode after loading, every word new,
// 35-550 us per 100 tokens (median ~130). Decoding 2,000 tokens ~0.2 ms. Loading: GPT-2 0.3-0.6 s,
// Llama 2 0.1 s, Llama 3 1.4-2.6 s (JSON parsing and 280k merges). BPE costs O(n log n) in the longest
// piece: a SentencePiece-style file without a pre-tokenizer makes each section one piece, so callers
// bound the text they accept (a request's byte limit), as for any input.
//
// Bounds on untrusted files: tokenizer.json at most kMaxFileBytes, tokenizer_config.json at most
// kMaxConfigBytes, JSON nested at most kMaxJsonDepth deep; the vocabulary, merges and added tokens
// as their headers say.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace ember::text {

struct EncodeOptions {
  /// Add the special tokens the post-processor adds (BOS). Off when encoding a rendered chat
  /// template, which writes its own BOS.
  bool add_special_tokens = true;
  /// Find special tokens written in the text ("<|eot_id|>" becomes that one id), as Hugging Face does.
  /// Off: their text is encoded as ordinary text, so user text cannot inject control tokens.
  bool special_in_text = true;
};

struct DecodeOptions {
  bool skip_special_tokens = false;
  /// transformers' clean_up_tokenization (text/token_decoder.hpp); clean_up_tokenization_spaces()
  /// says what the file's config asks for.
  bool clean_up_tokenization_spaces = false;
};

/// The family of BPE a file describes, by its pre-tokenizer and decoder.
enum class TokenizerKind {
  byte_level,     // GPT-2's byte alphabet (a ByteLevel pre-tokenizer)
  sentencepiece,  // "▁" for spaces (Prepend/Replace normalizer or Metaspace), usually with byte fallback
  plain,          // neither: tokens are the text's characters as they are
};

class Tokenizer {
 public:
  static constexpr size_t kMaxFileBytes = size_t{64} << 20;
  static constexpr size_t kMaxConfigBytes = size_t{16} << 20;
  static constexpr int kMaxJsonDepth = 32;

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  /// Reads `path`: a tokenizer.json, or a folder holding one; tokenizer_config.json in the same folder
  /// is read when present. not_found / io_error for the files, invalid_argument for malformed ones,
  /// unsupported for what Ember does not read; each message starts with the file's path.
  static Result<Tokenizer> load(const std::filesystem::path& path);

  /// The same from the files' text (`tokenizer_config_json` empty: no config).
  static Result<Tokenizer> parse(std::string_view tokenizer_json, std::string_view tokenizer_config_json = {});

  /// The ids of `text`. invalid_argument when it is not valid UTF-8 or a pre-tokenizer regex gives up.
  Result<std::vector<int32_t>> encode(std::string_view text, const EncodeOptions& options = {}) const;

  /// The text of `ids`. invalid_argument naming the first id that has no token.
  Result<std::string> decode(std::span<const int32_t> ids, const DecodeOptions& options = {}) const;

  /// An added token's or the vocabulary's id for `token` (spelled as the vocabulary spells it:
  /// "Ġthe" in a byte-level file).
  std::optional<int32_t> token_to_id(std::string_view token) const;
  /// The token of `id` as the vocabulary spells it; nullopt when there is none. Valid as long as the
  /// Tokenizer lives.
  std::optional<std::string_view> id_to_token(int32_t id) const;
  /// One past the largest id (vocabulary and added tokens): the logits a model over it must have.
  int32_t vocab_size() const;
  /// Whether `id` is an added token marked special.
  bool is_special(int32_t id) const;

  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  /// The tokens' text ("<s>", "<|begin_of_text|>"), what chat templates write; empty when none.
  const std::string& bos_token() const;
  const std::string& eos_token() const;
  /// tokenizer_config.json's chat_template (Jinja source), empty when none (text/chat_template.hpp).
  const std::string& chat_template() const;
  /// tokenizer_config.json's clean_up_tokenization_spaces (transformers' default, true, when absent).
  bool clean_up_tokenization_spaces() const;
  /// tokenizer_config.json's tokenizer_class ("LlamaTokenizer"), empty when none.
  const std::string& tokenizer_class() const;
  TokenizerKind kind() const;

  /// The ids the post-processor puts before and after the text with add_special_tokens.
  std::span<const int32_t> prefix_ids() const;
  std::span<const int32_t> suffix_ids() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::text
