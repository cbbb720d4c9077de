#include "actors/node/generation_runs.hpp"

#include <caf/send.hpp>
#include <span>

#include "text/chat_template.hpp"
#include "text/tokenizer.hpp"

namespace ember {

namespace {

Status needs_tokenizer(const text::Tokenizer* tokenizer, const char* field) {
  if (tokenizer) return Status::OK();
  return invalid_argument(std::string("'") + field + "': the model has no tokenizer; give the prompt as token ids");
}

Result<std::vector<int32_t>> prompt_of(const generate_request& r, const text::Tokenizer* tokenizer) {
  switch (r.kind) {
    case PromptKind::tokens:
      return r.prompt_tokens;
    case PromptKind::text: {
      EMBER_RETURN_IF_ERROR(needs_tokenizer(tokenizer, "prompt"));
      // User text never becomes control tokens (EncodeOptions::special_in_text off).
      return tokenizer->encode(r.prompt, text::EncodeOptions{true, false});
    }
    case PromptKind::chat: {
      EMBER_RETURN_IF_ERROR(needs_tokenizer(tokenizer, "messages"));
      EMBER_ASSIGN_OR_RETURN(text::ChatTemplate chat, text::ChatTemplate::for_tokenizer(*tokenizer));
      std::vector<text::ChatMessage> messages;
      messages.reserve(r.messages.size());
      for (const auto& m : r.messages) messages.push_back({m.role, m.content});
      EMBER_ASSIGN_OR_RETURN(std::string rendered, chat.render(messages, /*add_generation_prompt=*/true));
      // The template writes BOS and its control tokens itself.
      return tokenizer->encode(rendered, text::EncodeOptions{false, true});
    }
  }
  return invalid_argument("unknown prompt kind");
}

std::string token_text(const text::Tokenizer* tokenizer, int32_t id) {
  if (!tokenizer) return {};
  auto t = tokenizer->decode(std::span<const int32_t>(&id, 1));
  return t.ok() ? *t : std::string{};
}

FinishReason finish_of(const GenerationOutput& out) {
  if (out.error) return FinishReason::error;
  switch (out.finish) {
    case text::FinishReason::stop:
      return FinishReason::stop;
    case text::FinishReason::length:
      return FinishReason::length;
    case text::FinishReason::none:
      break;
  }
  // A final output must say why it ended: one that does not is a stop (the loop ended it).
  return out.final ? FinishReason::stop : FinishReason::none;
}

}  // namespace

Result<GenerationJob> make_generation_job(const generate_request& r, const text::Tokenizer* tokenizer,
                                          std::function<void(GenerationOutput)> emit, uint64_t fallback_seed) {
  if (!r.stop.empty()) EMBER_RETURN_IF_ERROR(needs_tokenizer(tokenizer, "stop"));
  GenerationJob job;
  job.id = r.id;
  Result<std::vector<int32_t>> prompt = prompt_of(r, tokenizer);
  if (!prompt.ok()) return prompt.error().with_context("request '" + r.id + "'");
  job.prompt = std::move(*prompt);
  if (job.prompt.empty()) {
    return invalid_argument(std::string("'") + (r.kind == PromptKind::tokens ? "prompt" : to_string(r.kind).data()) +
                            "': the prompt has no tokens");
  }
  job.resumed = r.resume_tokens;
  const sampling_params& s = r.sampling;
  job.sampling.temperature = s.temperature;
  job.sampling.top_k = s.top_k;
  job.sampling.top_p = s.top_p;
  job.sampling.min_p = s.min_p;
  if (s.has_seed) job.sampling.seed = s.seed;
  job.sampling.repetition_penalty = s.repetition_penalty;
  job.sampling.presence_penalty = s.presence_penalty;
  job.sampling.frequency_penalty = s.frequency_penalty;
  for (const auto& b : s.logit_bias) job.sampling.logit_bias[b.token] = b.bias;
  job.sampling.logprobs = r.logprobs;
  job.sampling.top_logprobs = r.logprobs ? r.top_logprobs : 0;
  job.fallback_seed = fallback_seed;
  if (r.max_tokens > 0) job.stop.max_tokens = r.max_tokens;
  job.stop.stop_token_ids.assign(r.stop_token_ids.begin(), r.stop_token_ids.end());
  job.stop.ignore_eos = r.ignore_eos;
  job.stop_strings = r.stop;
  job.emit = std::move(emit);
  return job;
}

generate_chunk to_chunk(const std::string& id, const GenerationOutput& out, const text::Tokenizer* tokenizer) {
  generate_chunk c;
  c.id = id;
  c.tokens = out.tokens;
  c.text = out.text;
  c.logprobs.reserve(out.logprobs.size());
  for (const auto& t : out.logprobs) {
    token_logprobs l;
    l.chosen = {t.id, token_text(tokenizer, t.id), t.logprob.value_or(0.0f)};
    for (const auto& alt : t.top) l.top.push_back({alt.id, token_text(tokenizer, alt.id), alt.logprob});
    c.logprobs.push_back(std::move(l));
  }
  c.finish = finish_of(out);
  if (out.final) c.usage = {out.prompt_tokens, out.completion_tokens};
  if (out.error) {
    c.error.code = out.error->code();
    c.error.message = out.error->message();
    c.error.resume = out.resumable;
  }
  return c;
}

MakeGeneration make_generation(std::shared_ptr<const generation_order> order, uint64_t fallback_seed) {
  return [order = std::move(order), fallback_seed](const text::Tokenizer* tokenizer) -> Result<GenerationJob> {
    auto emit = [sink = order->sink, id = order->request.id, tokenizer](GenerationOutput out) {
      caf::anon_send(sink, to_chunk(id, out, tokenizer));
    };
    return make_generation_job(order->request, tokenizer, std::move(emit), fallback_seed);
  };
}

}  // namespace ember
