// Streaming detokenization: ids arrive one at a time from the generation loop, and each call answers
// the text that is complete so far, as every LLM server's detokenizer does (vLLM's
// detokenize_incrementally, TGI's decode_token; the same two-offset method).
//
// One per generated sequence, used by one thread at a time (the loop that samples it); it reads the
// Tokenizer, which must outlive it, and never blocks, throws or touches a device.
//
// The method: of the ids so far, [prefix, read) were the context of the last text emitted and
// [read, end) are new. Each push decodes [prefix, end) and [prefix, read); when the first is longer
// and does not end in U+FFFD (a byte-level or byte-fallback character still missing bytes), the
// difference is emitted and the window moves on (prefix = read, read = end). Decoding with the
// previous tokens as context is what keeps SentencePiece's leading space right: "▁world" alone
// decodes to "world" (the decoder strips the first space), after "▁Hello" to " world". Seeding the
// context with the prompt's last ids (kPromptContext of them) does the same for the first generated
// token.
//
// Invariants: every piece returned is valid UTF-8 and never splits a character; the concatenation of
// all pieces and finish() equals decode(prompt tail + generated)'s text after decode(prompt tail), for
// tokenizers whose decoding of a prefix is a prefix of the decoding (all BPE files read here). A run
// of tokens that decode to nothing (skipped special tokens) emits nothing. clean_up_tokenization_spaces
// never applies while streaming.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "text/tokenizer.hpp"

namespace ember::text {

class IncrementalDecoder {
 public:
  /// Prompt ids kept as context (vLLM's INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET).
  static constexpr size_t kPromptContext = 5;

  /// `prompt_ids`: the prompt (its last kPromptContext ids are kept as context, never emitted).
  IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens, std::span<const int32_t> prompt_ids = {});

  /// The text `id` completes (often empty: a partial character, a skipped special token).
  /// invalid_argument when the id has no token; the decoder is unchanged then.
  Result<std::string> push(int32_t id);

  /// What is still held back (an incomplete character at the end comes out as U+FFFD). Call once, at
  /// the end of the sequence; later pushes start from an empty window.
  std::string finish();

  /// Ids pushed so far.
  size_t generated() const { return generated_; }

 private:
  Result<std::string> decode_range(size_t from, size_t to) const;

  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  std::vector<int32_t> ids_;  // the window's ids; older ones are dropped
  size_t prefix_ = 0;
  size_t read_ = 0;
  size_t generated_ = 0;
};

}  // namespace ember::text
