#include "text/stop_conditions.hpp"

#include <algorithm>
#include <cassert>
#include <string>
#include <utility>

namespace ember::text {

std::string_view to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::none: return "";
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
  }
  return "";
}

Result<StopConditions> StopConditions::create(const StopParams& params, std::span<const int32_t> eos_ids,
                                              size_t vocab_size, uint64_t prompt_tokens, uint64_t context_window) {
  if (prompt_tokens >= context_window)
    return invalid_argument("the prompt is " + std::to_string(prompt_tokens) + " tokens, the model's context window " +
                            std::to_string(context_window) + ": no room to generate");
  const uint64_t room = context_window - prompt_tokens;
  uint64_t max_new = room;
  if (params.max_tokens) {
    const int64_t asked = *params.max_tokens;
    if (asked < 1) return invalid_argument("max_tokens must be at least 1, got " + std::to_string(asked));
    if (static_cast<uint64_t>(asked) > room)
      return invalid_argument("this model's maximum context length is " + std::to_string(context_window) +
                              " tokens; the request asks for " + std::to_string(prompt_tokens + static_cast<uint64_t>(asked)) +
                              " (" + std::to_string(prompt_tokens) + " in the prompt, " + std::to_string(asked) +
                              " for the completion)");
    max_new = static_cast<uint64_t>(asked);
  }
  if (params.stop_token_ids.size() > kMaxStopTokenIds)
    return invalid_argument("stop_token_ids has " + std::to_string(params.stop_token_ids.size()) + " ids, at most " +
                            std::to_string(kMaxStopTokenIds) + " are allowed");
  std::vector<int32_t> ids;
  for (int64_t id : params.stop_token_ids) {
    if (id < 0 || static_cast<uint64_t>(id) >= vocab_size)
      return invalid_argument("stop_token_ids: " + std::to_string(id) + " is outside the vocabulary of " +
                              std::to_string(vocab_size));
    ids.push_back(static_cast<int32_t>(id));
  }
  if (!params.ignore_eos) ids.insert(ids.end(), eos_ids.begin(), eos_ids.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return StopConditions(std::move(ids), max_new);
}

bool StopConditions::is_stop_token(int32_t token) const {
  return std::binary_search(stop_ids_.begin(), stop_ids_.end(), token);
}

StopConditions::Decision StopConditions::check(int32_t token, uint64_t generated) const {
  assert(generated >= 1);
  if (is_stop_token(token)) return {FinishReason::stop, false};
  if (generated >= max_new_tokens_) return {FinishReason::length, true};
  return {};
}

}  // namespace ember::text
