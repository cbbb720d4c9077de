// Stop conditions on tokens: when a generation ends, and the finish reason the APIs report.
//
// Pure: anyone; a StopConditions is an immutable value built once per request, and check() is a
// function of (the token just sampled, how many tokens the sequence has generated), so a stream
// resumed on another replica asks the same questions with the same answers. Never blocks, no clock.
//
// The generation loop asks check() after each sampled token, in vLLM's order:
//   1. a stop token: an EOS id of the model (unless ignore_eos) or one of the request's
//      stop_token_ids -> FinishReason::stop, and the token's text is not sent (it still counts in
//      usage as a generated token, as vLLM and OpenAI count it);
//   2. the length limit: the token is the max_tokens-th, or fills the context window ->
//      FinishReason::length, its text sent;
//   3. otherwise none: go on.
// A stop string (StopMatcher) completed in the text also ends the sequence with FinishReason::stop;
// the loop sets that itself. ignore_eos turns off only the model's EOS ids (benchmarks use it to
// generate exactly max_tokens), not the request's own stop_token_ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace ember::text {

/// Why a sequence ended; OpenAI's and KServe's `finish_reason` strings are to_string's.
enum class FinishReason : uint8_t {
  none,    // still generating
  stop,    // a stop token, EOS or stop string
  length,  // max_tokens or the context window
};
/// "" for none, "stop", "length".
std::string_view to_string(FinishReason reason);

/// A request may list at most this many stop token ids (invalid_argument beyond).
inline constexpr size_t kMaxStopTokenIds = 64;

/// What a request asks (the front ends fill it from OpenAI's and KServe's fields).
struct StopParams {
  /// Tokens to generate at most, >= 1; null means as many as the context window leaves.
  std::optional<int64_t> max_tokens;
  /// Token ids that end the sequence, each in [0, vocab); at most kMaxStopTokenIds.
  std::vector<int64_t> stop_token_ids;
  /// Keep generating past the model's EOS ids.
  bool ignore_eos = false;
};

class StopConditions {
 public:
  /// The conditions for a prompt of `prompt_tokens` on a model with `context_window` positions, a
  /// vocabulary of `vocab_size` ids and end-of-sequence ids `eos_ids` (the model's config and
  /// generation_config.json; may be empty). invalid_argument with the numbers for: a prompt that
  /// leaves no room in the context window, max_tokens < 1, max_tokens beyond the room left (OpenAI
  /// and vLLM refuse it too, rather than cut it), too many stop token ids, or an id outside the
  /// vocabulary.
  static Result<StopConditions> create(const StopParams& params, std::span<const int32_t> eos_ids, size_t vocab_size,
                                       uint64_t prompt_tokens, uint64_t context_window);

  struct Decision {
    FinishReason reason = FinishReason::none;
    bool send_token = true;  // whether the token's text belongs to the output
  };
  /// After sampling `token`, the sequence's `generated`-th token (1 for the first).
  Decision check(int32_t token, uint64_t generated) const;

  /// The most tokens this request generates: max_tokens, or the room the context window leaves.
  uint64_t max_new_tokens() const { return max_new_tokens_; }
  bool is_stop_token(int32_t token) const;

 private:
  StopConditions(std::vector<int32_t> stop_ids, uint64_t max_new_tokens)
      : stop_ids_(std::move(stop_ids)), max_new_tokens_(max_new_tokens) {}

  std::vector<int32_t> stop_ids_;  // sorted, unique: the EOS ids (unless ignore_eos) and the request's
  uint64_t max_new_tokens_ = 0;
};

}  // namespace ember::text
