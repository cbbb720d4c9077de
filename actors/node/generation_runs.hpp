// Generation runs: what a gpu_executor makes of a generate_request (actors/generation_messages.hpp)
// for its engine, and what it sends back of each GenerationOutput (actors/engine_run.hpp).
//
//   generate_request ──make_generation_job (engine's thread, with the model's tokenizer)──▶ GenerationJob
//   GenerationOutput ──to_chunk──▶ generate_chunk ──caf::anon_send──▶ the sink actor
//
// The prompt: `text` is tokenized (with the tokenizer's special tokens, BOS); `chat` is rendered by
// the tokenizer's chat template (text/chat_template.hpp) and tokenized without added special tokens
// (the template writes BOS); `tokens` are taken as they are (no tokenizer needed). A tokenizer-less
// model asked for text, chat or stop strings is invalid_argument naming the field. Token ids against
// the vocabulary and the prompt against the context window are the generation loop's checks
// (GenerationLoop::submit), which answer invalid_argument before anything is generated.
//
// Callers: make_generation_job and to_chunk are pure (anyone, any thread); make_generation's
// MakeGeneration runs on the engine's thread and its emit on whichever thread the engine steps on,
// sending to the sink without blocking. Nothing here touches device memory.
//
// Assumption on the engine (stated for the engine part): `emit` keeps the tokenizer pointer the
// job was made with; the engine keeps that tokenizer alive for as long as it may call `emit`
// (a resumed stream keeps its model's tokenizer; the model's tokenizer is the same one on any
// device it binds to).
#pragma once

#include <caf/actor.hpp>
#include <functional>
#include <memory>
#include <string>

#include "actors/engine_run.hpp"
#include "actors/generation_messages.hpp"
#include "actors/gpu_executor_interface.hpp"
#include "base/status.hpp"

namespace ember {

namespace text {
class Tokenizer;
}

/// The job for `r` on a model with `tokenizer` (null: none), its outputs to `emit`.
/// invalid_argument naming the field: a text or chat prompt or stop strings without a tokenizer, a
/// chat the model's template cannot render, a prompt that tokenizes to nothing.
Result<GenerationJob> make_generation_job(const generate_request& r, const text::Tokenizer* tokenizer,
                                          std::function<void(GenerationOutput)> emit, uint64_t fallback_seed);

/// The chunk request `id` sends for `out`: tokens, text, logprobs (each token's text from
/// `tokenizer`, empty without one), finish (text's stop/length; error when `out.error`), usage on
/// the final chunk, the error with `resume` = out.resumable.
generate_chunk to_chunk(const std::string& id, const GenerationOutput& out, const text::Tokenizer* tokenizer);

/// The MakeGeneration for `order`: makes its job on the engine's thread, each output sent to the
/// sink as to_chunk's chunk. The fallback seed (requests without one) comes from `fallback_seed`.
MakeGeneration make_generation(std::shared_ptr<const generation_order> order, uint64_t fallback_seed);

}  // namespace ember
