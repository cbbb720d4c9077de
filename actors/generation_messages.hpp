// The text generation conversation (issue 35): a generate_request in, a stream of generate_chunks
// out. A front end (actors/gateway/http/: OpenAI's and KServe's generate APIs) decodes a client's
// body into a generate_request and hands it to the gateway's GenerationService
// (actors/gateway/generation_service.hpp); whoever generates (the node's generation loop, planned in
// docs/design/generation.md) answers with chunks, in order, the last one final. Prompts and
// generated text ride these messages; model bytes and KV blocks never do.
//
// A stream of chunks, for one request:
//
//   chunk(tokens…) ─▶ chunk(tokens…) ─▶ … ─▶ final chunk: finish stop | length, with usage
//                                        └─▶ final chunk: finish error, with `error` (a failure after
//                                            the first chunk: the front end sends an error event)
//
// A failure before the first chunk is no chunk at all but an Error (GenerationService's sink), which
// the front end answers as an HTTP error.
//
// Token ids are int32 in [0, vocabulary size) (the model's; the node checks them, since only it
// knows the vocabulary). Text is UTF-8; a chunk's `text` holds whole characters only (a character
// whose bytes span tokens goes out with the token that completes it).
//
// Bounds: a request that passes check_generate_request() asks for at most the limits below, so a
// body cannot make the gateway or a node hold more than they name. Each front end refuses a body
// past them with a clear error naming the field, before anything is generated.
//
// Pure data with CAF `inspect`, registered in actors/type_ids.hpp; anyone may build and read them on
// any thread. check_generate_request() is pure.
#pragma once

#include <caf/meta/type_name.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/wire_inspect.hpp"
#include "base/status.hpp"

namespace ember {

// -- limits: what one request may ask (named, so that the docs and errors can cite them) --

/// Stop strings per request (OpenAI allows 4; vLLM has no bound; 16 covers chat templates' stops).
inline constexpr size_t kMaxStopStrings = 16;
/// Bytes of one stop string.
inline constexpr size_t kMaxStopStringBytes = 256;
/// Stop token ids per request.
inline constexpr size_t kMaxStopTokenIds = 64;
/// Bytes of prompt text: a text prompt, or every chat message's content together. 1 MiB is far
/// past any context window this runtime serves (a 128k-token context is about 512 KB of text); the
/// node refuses a prompt over its model's context window in tokens.
inline constexpr size_t kMaxPromptBytes = 1u << 20;
/// Token ids in a prompt given as ids (and in resume_tokens).
inline constexpr size_t kMaxPromptTokens = 1u << 18;
/// Chat messages per request.
inline constexpr size_t kMaxChatMessages = 4096;
/// logit_bias entries (OpenAI's own bound).
inline constexpr size_t kMaxLogitBias = 300;
/// Alternatives per token when log probabilities are asked (OpenAI's chat bound).
inline constexpr uint32_t kMaxTopLogprobs = 20;
/// Tokens one request may ask to generate.
inline constexpr uint32_t kMaxGenerateTokens = 1u << 20;

/// One message of a chat: its role ("system", "developer", "user", "assistant") and its text.
struct chat_message {
  std::string role;
  std::string content;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chat_message& x) {
  return f(caf::meta::type_name("chat_message"), x.role, x.content);
}

/// A bias added to one token's logit before sampling (OpenAI's logit_bias), in [-100, 100].
struct token_bias {
  int32_t token = 0;
  float bias = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, token_bias& x) {
  return f(caf::meta::type_name("token_bias"), x.token, x.bias);
}

/// How the next token is drawn, as OpenAI and vLLM name the knobs. The defaults change nothing:
/// plain sampling at temperature 1 from the whole distribution.
struct sampling_params {
  /// 0: greedy (the most likely token, no randomness). [0, 2].
  float temperature = 1.0f;
  /// Nucleus sampling: the smallest set of tokens whose probability reaches top_p. (0, 1].
  float top_p = 1.0f;
  /// Only the top_k most likely tokens; 0: all (vLLM's -1 arrives here as 0). >= 0.
  int32_t top_k = 0;
  /// Only tokens at least min_p times as likely as the most likely one. [0, 1].
  float min_p = 0.0f;
  /// A seed makes sampling repeatable: the same seed, request and model give the same tokens.
  bool has_seed = false;
  uint64_t seed = 0;
  /// OpenAI's penalties on tokens already generated: presence once, frequency per occurrence. [-2, 2].
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  /// vLLM's (CTRL's) multiplicative penalty on tokens in the prompt or output; 1: none. (0, 2].
  float repetition_penalty = 1.0f;
  /// At most kMaxLogitBias entries, each token at most once.
  std::vector<token_bias> logit_bias;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sampling_params& x) {
  return f(caf::meta::type_name("sampling_params"), x.temperature, x.top_p, x.top_k, x.min_p, x.has_seed, x.seed,
           x.presence_penalty, x.frequency_penalty, x.repetition_penalty, x.logit_bias);
}

/// What a prompt is given as; exactly one of generate_request's prompt fields is used.
enum class PromptKind : uint8_t {
  text,    // `prompt`: tokenized by the model's tokenizer
  chat,    // `messages`: rendered by the model's chat template, then tokenized
  tokens,  // `prompt_tokens`: ids, no tokenizer needed
};
std::string_view to_string(PromptKind kind);

/// A generation request: gateway -> node (through the GenerationService).
struct generate_request {
  /// Names the request in its chunks and in a cancel; unique among the gateway's requests in
  /// flight (the front end makes it: "cmpl-…", "chatcmpl-…", "gen-…").
  std::string id;
  /// Version 0: the highest.
  model_key model;
  PromptKind kind = PromptKind::text;
  std::string prompt;
  std::vector<chat_message> messages;
  std::vector<int32_t> prompt_tokens;
  sampling_params sampling;
  /// Tokens to generate at most; 0: until the model's context window is full.
  uint32_t max_tokens = 0;
  /// Generation stops before a stop string (which is not sent) or after a stop token.
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  /// Keep generating past the model's end-of-sequence token (vLLM's ignore_eos; benchmarks).
  bool ignore_eos = false;
  /// Send each generated token's log probability, with the top_logprobs most likely alternatives.
  bool logprobs = false;
  uint32_t top_logprobs = 0;
  /// The client asked for a stream (chunks as they come) rather than one answer at the end; the
  /// service sends chunks either way.
  bool stream = false;
  /// Usage (prompt and completion tokens) on the final chunk is always set; this says whether a
  /// streaming client asked to receive it (OpenAI's stream_options.include_usage).
  bool include_usage = false;
  /// Token ids already sent to the client by a replica that was lost mid-stream: the replica that
  /// continues prefills prompt + resume_tokens and sends only what follows them, so that the client
  /// sees no token twice and none skipped. Empty for a new request; counted in completion_tokens.
  std::vector<int32_t> resume_tokens;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generate_request& x) {
  return f(caf::meta::type_name("generate_request"), x.id, x.model, x.kind, x.prompt, x.messages, x.prompt_tokens,
           x.sampling, x.max_tokens, x.stop, x.stop_token_ids, x.ignore_eos, x.logprobs, x.top_logprobs, x.stream,
           x.include_usage, x.resume_tokens);
}

/// Why a stream ended; none on every chunk but the last. Words (OpenAI's finish_reason): "", "stop"
/// (the model's end of sequence, a stop string or a stop token), "length" (max_tokens or the
/// context window), "error" (see generate_chunk::error).
enum class FinishReason : uint8_t { none, stop, length, error };
std::string_view to_string(FinishReason reason);

/// One token's log probability, with its text.
struct logprob_entry {
  int32_t token = 0;
  std::string text;
  float logprob = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, logprob_entry& x) {
  return f(caf::meta::type_name("logprob_entry"), x.token, x.text, x.logprob);
}

/// A generated token's log probability and the most likely alternatives at its position (at most
/// the request's top_logprobs, most likely first).
struct token_logprobs {
  logprob_entry chosen;
  std::vector<logprob_entry> top;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, token_logprobs& x) {
  return f(caf::meta::type_name("token_logprobs"), x.chosen, x.top);
}

/// Tokens a request used: its prompt's (after the chat template) and those generated (with
/// resume_tokens), on the final chunk.
struct generation_usage {
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generation_usage& x) {
  return f(caf::meta::type_name("generation_usage"), x.prompt_tokens, x.completion_tokens);
}

/// A failure after the first chunk (a node lost with no replica to continue on, a device fault):
/// the code decides what the client may do (unavailable: retry), the message says why.
struct generation_error {
  ErrorCode code = ErrorCode::internal;
  std::string message;
  /// Node -> gateway only: the replica gave the stream up unfinished (its device broke, its model was
  /// unloaded), it did not refuse it. The gateway continues it on another replica with
  /// resume_tokens (every token it sent so far) and the client never sees this chunk; with no
  /// replica to continue on, the client gets the error.
  bool resume = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generation_error& x) {
  return f(caf::meta::type_name("generation_error"), x.code, x.message, x.resume);
}

/// Part of a generation's answer: node -> gateway -> front end.
struct generate_chunk {
  /// The request's id.
  std::string id;
  /// New tokens since the last chunk, and their text (whole UTF-8 characters; possibly empty while a
  /// character or a possible stop string is held back).
  std::vector<int32_t> tokens;
  std::string text;
  /// One per token in `tokens` when the request asked for logprobs; empty otherwise.
  std::vector<token_logprobs> logprobs;
  FinishReason finish = FinishReason::none;
  /// Set on the final chunk (finish != none).
  generation_usage usage;
  /// Set when finish is error.
  generation_error error;

  bool is_final() const { return finish != FinishReason::none; }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generate_chunk& x) {
  return f(caf::meta::type_name("generate_chunk"), x.id, x.tokens, x.text, x.logprobs, x.finish, x.usage, x.error);
}

/// Whether `r` stays within the ranges and limits above. invalid_argument naming the field as the
/// OpenAI API names it ("'temperature' must be in [0, 2], not 3"); `field`, when given, is set to
/// that name (OpenAI's error "param"). Checks what a front end cannot express wrongly too (an empty
/// id, an empty model name, a chat with no messages), so a request built by code is held to the
/// same rules. Token ids are checked only for being >= 0 (the vocabulary is the node's).
Status check_generate_request(const generate_request& r, std::string* field = nullptr);

}  // namespace ember
