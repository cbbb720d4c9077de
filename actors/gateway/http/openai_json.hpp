// OpenAI's request bodies as the HTTP front end reads them: POST /v1/completions and POST
// /v1/chat/completions into a generate_request (actors/generation_messages.hpp). The answers'
// shapes are openai_render.hpp's.
//
// Fields (https://platform.openai.com/docs/api-reference/completions and .../chat), beside the
// sampling and stopping fields both share (generation_params_json.hpp: max_tokens, temperature,
// top_p, seed, presence_penalty, frequency_penalty, logit_bias, stop, and vLLM's top_k, min_p,
// repetition_penalty, stop_token_ids, ignore_eos):
//
//   completions  model           string, required
//                prompt          string | [string] | [int, ...] | [[int, ...]], required: one prompt, as
//                                text or token ids (a list of several prompts is refused: one per request)
//                logprobs        integer 0..20 or null: each token's log probability and that many
//                                alternatives
//                max_tokens      default 16, as OpenAI's
//   chat         model           string, required
//                messages        [{"role", "content": string | [{"type": "text", "text"}, ...] | null,
//                                "name"?}], required; text parts are joined with "\n" (vLLM's way);
//                                "name" is accepted and not used; an assistant's "tool_calls" and
//                                "refusal" only as null or empty
//                max_completion_tokens  as max_tokens (both given: they must agree); default: until
//                                the context window is full
//                logprobs        boolean; top_logprobs integer 0..20 (needs logprobs true)
//   both         n               only 1 (or null): one choice per request
//                stream          boolean
//                stream_options  {"include_usage": boolean}, only with stream true
//                user            string; accepted and ignored
//
// Refused with a clear 400 (invalid_argument), the field named in `param` as OpenAI's own errors
// do: an unknown field (OpenAI refuses unknown parameters too; a misspelt "max_token" silently
// ignored would cost a client its limit), every one named; a field of the wrong type; a documented
// OpenAI field this server does not implement, unless it carries the value that changes nothing
// (completions: echo false, suffix "" , best_of 1; chat: tools [], tool_choice "none", functions
// [], function_call "none", response_format {"type": "text"}, parallel_tool_calls, store false,
// metadata, modalities ["text"], audio, prediction, reasoning_effort, service_tier, web_search_options
// as null), then check_generate_request's ranges and bounds.
//
// The request comes back named `id` (the front end makes it unique) with model version 0 (the
// highest).
// Who may call: pure, anyone, any thread; never throws.
#pragma once

#include <string>
#include <string_view>

#include "actors/generation_messages.hpp"
#include "base/status.hpp"

namespace ember {

/// OpenAI's completions default for max_tokens.
inline constexpr uint32_t kOpenAiCompletionsDefaultMaxTokens = 16;

/// A /v1/completions body as request `id`. `param` (when given) is set to the field an error is
/// about ("" when it is about no one field, such as a body that is not JSON).
Result<generate_request> parse_openai_completion(std::string_view body, const std::string& id,
                                                 std::string* param = nullptr);

/// A /v1/chat/completions body as request `id`; `param` as parse_openai_completion's.
Result<generate_request> parse_openai_chat(std::string_view body, const std::string& id, std::string* param = nullptr);

}  // namespace ember
