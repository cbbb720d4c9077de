// The text generation conversation's words and checks (see generation_messages.hpp).
#include "actors/generation_messages.hpp"

#include <cstdio>
#include <set>

namespace ember {

namespace {

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

/// Refuses `message` about `name`, naming it in `field`.
Status refuse(std::string* field, std::string_view name, std::string message) {
  if (field) *field = std::string(name);
  return invalid_argument(std::move(message));
}

/// `v` in [lo, hi] (NaN is not); `lo_open` excludes lo.
Status in_range(std::string* field, std::string_view name, double v, double lo, double hi, bool lo_open = false) {
  const bool above = lo_open ? v > lo : v >= lo;
  if (above && v <= hi) return {};
  return refuse(field, name,
                "'" + std::string(name) + "' must be in " + (lo_open ? "(" : "[") + number(lo) + ", " + number(hi) +
                    "], not " + number(v));
}

Status token_ids(std::string* field, std::string_view name, const std::vector<int32_t>& ids, size_t most) {
  if (ids.size() > most) {
    return refuse(field, name,
                  "'" + std::string(name) + "' holds " + std::to_string(ids.size()) + " token ids; at most " +
                      std::to_string(most));
  }
  for (int32_t id : ids) {
    if (id < 0) return refuse(field, name, "'" + std::string(name) + "' holds a negative token id, " + std::to_string(id));
  }
  return {};
}

Status prompt(const generate_request& r, std::string* field) {
  switch (r.kind) {
    case PromptKind::text:
      if (r.prompt.size() > kMaxPromptBytes) {
        return refuse(field, "prompt",
                      "'prompt' is " + std::to_string(r.prompt.size()) + " bytes; at most " +
                          std::to_string(kMaxPromptBytes) + " (1 MiB)");
      }
      return {};
    case PromptKind::tokens:
      if (r.prompt_tokens.empty()) return refuse(field, "prompt", "'prompt' holds no token ids");
      return token_ids(field, "prompt", r.prompt_tokens, kMaxPromptTokens);
    case PromptKind::chat: {
      if (r.messages.empty()) return refuse(field, "messages", "'messages' must hold at least one message");
      if (r.messages.size() > kMaxChatMessages) {
        return refuse(field, "messages",
                      "'messages' holds " + std::to_string(r.messages.size()) + " messages; at most " +
                          std::to_string(kMaxChatMessages));
      }
      static const std::set<std::string, std::less<>> kRoles = {"system", "developer", "user", "assistant"};
      size_t bytes = 0;
      for (size_t i = 0; i < r.messages.size(); ++i) {
        if (!kRoles.count(r.messages[i].role)) {
          return refuse(field, "messages",
                        "messages[" + std::to_string(i) + "].role must be system, developer, user or assistant, not '" +
                            r.messages[i].role + "'");
        }
        bytes += r.messages[i].content.size();
      }
      if (bytes > kMaxPromptBytes) {
        return refuse(field, "messages",
                      "the messages' content is " + std::to_string(bytes) + " bytes; at most " +
                          std::to_string(kMaxPromptBytes) + " (1 MiB)");
      }
      return {};
    }
  }
  return refuse(field, "prompt", "the request's prompt kind is unknown");
}

Status sampling(const sampling_params& s, std::string* field) {
  EMBER_RETURN_IF_ERROR(in_range(field, "temperature", s.temperature, 0, 2));
  EMBER_RETURN_IF_ERROR(in_range(field, "top_p", s.top_p, 0, 1, /*lo_open=*/true));
  if (s.top_k < 0) return refuse(field, "top_k", "'top_k' must be -1 or 0 (off) or positive, not " + std::to_string(s.top_k));
  EMBER_RETURN_IF_ERROR(in_range(field, "min_p", s.min_p, 0, 1));
  EMBER_RETURN_IF_ERROR(in_range(field, "presence_penalty", s.presence_penalty, -2, 2));
  EMBER_RETURN_IF_ERROR(in_range(field, "frequency_penalty", s.frequency_penalty, -2, 2));
  EMBER_RETURN_IF_ERROR(in_range(field, "repetition_penalty", s.repetition_penalty, 0, 2, /*lo_open=*/true));
  if (s.logit_bias.size() > kMaxLogitBias) {
    return refuse(field, "logit_bias",
                  "'logit_bias' holds " + std::to_string(s.logit_bias.size()) + " entries; at most " +
                      std::to_string(kMaxLogitBias));
  }
  std::set<int32_t> seen;
  for (const auto& b : s.logit_bias) {
    if (b.token < 0) return refuse(field, "logit_bias", "'logit_bias' names a negative token id, " + std::to_string(b.token));
    if (!seen.insert(b.token).second) {
      return refuse(field, "logit_bias", "'logit_bias' names token " + std::to_string(b.token) + " twice");
    }
    if (!(b.bias >= -100 && b.bias <= 100)) {
      return refuse(field, "logit_bias",
                    "'logit_bias' values must be in [-100, 100], not " + number(b.bias) + " (token " +
                        std::to_string(b.token) + ")");
    }
  }
  return {};
}

}  // namespace

std::string_view to_string(PromptKind kind) {
  switch (kind) {
    case PromptKind::text:
      return "text";
    case PromptKind::chat:
      return "chat";
    case PromptKind::tokens:
      return "tokens";
  }
  return "unknown";
}

std::string_view to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::none:
      return "";
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::error:
      return "error";
  }
  return "unknown";
}

Status check_generate_request(const generate_request& r, std::string* field) {
  if (r.id.empty()) return refuse(field, "", "the generation request has no id");
  if (r.model.name.empty()) return refuse(field, "model", "'model' must name a model");
  EMBER_RETURN_IF_ERROR(prompt(r, field));
  EMBER_RETURN_IF_ERROR(sampling(r.sampling, field));
  if (r.max_tokens > kMaxGenerateTokens) {
    return refuse(field, "max_tokens",
                  "'max_tokens' must be at most " + std::to_string(kMaxGenerateTokens) + ", not " +
                      std::to_string(r.max_tokens));
  }
  if (r.stop.size() > kMaxStopStrings) {
    return refuse(field, "stop",
                  "'stop' holds " + std::to_string(r.stop.size()) + " strings; at most " +
                      std::to_string(kMaxStopStrings));
  }
  for (const auto& s : r.stop) {
    if (s.empty()) return refuse(field, "stop", "'stop' holds an empty string");
    if (s.size() > kMaxStopStringBytes) {
      return refuse(field, "stop",
                    "'stop' holds a string of " + std::to_string(s.size()) + " bytes; at most " +
                        std::to_string(kMaxStopStringBytes));
    }
  }
  EMBER_RETURN_IF_ERROR(token_ids(field, "stop_token_ids", r.stop_token_ids, kMaxStopTokenIds));
  if (r.top_logprobs > kMaxTopLogprobs) {
    return refuse(field, "top_logprobs",
                  "'top_logprobs' must be at most " + std::to_string(kMaxTopLogprobs) + ", not " +
                      std::to_string(r.top_logprobs));
  }
  if (r.top_logprobs > 0 && !r.logprobs) {
    return refuse(field, "top_logprobs", "'top_logprobs' needs 'logprobs' to be true");
  }
  return token_ids(field, "resume_tokens", r.resume_tokens, kMaxPromptTokens);
}

}  // namespace ember
