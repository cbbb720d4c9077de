#include "actors/node/engine/generation_loop.hpp"

#include <span>
#include <utility>

#include "actors/node/engine/step_inputs.hpp"

namespace ember::engine {

Result<std::unique_ptr<GenerationLoop>> GenerationLoop::create(gpu::Device& device, DeviceMemory& memory,
                                                               GenerativeSpec spec,
                                                               std::shared_ptr<const text::Tokenizer> tokenizer,
                                                               GenerationLoopConfig config) {
  if (spec.vocab_size == 0 || spec.context_window == 0) {
    return invalid_argument("a generative model needs a vocabulary and a context window");
  }
  if (tokenizer && static_cast<uint64_t>(tokenizer->vocab_size()) > spec.vocab_size) {
    return invalid_argument("the tokenizer's " + std::to_string(tokenizer->vocab_size()) +
                            " ids do not fit the model's " + std::to_string(spec.vocab_size) + " logits");
  }
  std::unique_ptr<GenerationLoop> loop(new GenerationLoop(std::move(spec), std::move(tokenizer)));
  EMBER_ASSIGN_OR_RETURN(loop->kv_, KvBlocks::create(device, memory, loop->spec_.layout, config.kv));
  EMBER_ASSIGN_OR_RETURN(GenerationBatcher batcher, GenerationBatcher::create(*loop->kv_, config.batcher));
  batcher.set_costs(config.costs);
  loop->batcher_.emplace(std::move(batcher));
  return loop;
}

GenerationLoop::GenerationLoop(GenerativeSpec spec, std::shared_ptr<const text::Tokenizer> tokenizer)
    : spec_(std::move(spec)), tokenizer_(std::move(tokenizer)) {}

GenerationLoop::~GenerationLoop() = default;

Status GenerationLoop::submit(GenerationJob job, uint64_t now_us) {
  if (job.prompt.empty()) return invalid_argument("request '" + job.id + "': the prompt has no tokens");
  if (by_id_.contains(job.id)) return invalid_argument("request '" + job.id + "' is generating already");
  for (const auto* ids : {&job.prompt, &job.resumed}) {
    for (int32_t id : *ids) {
      if (id < 0 || static_cast<uint32_t>(id) >= spec_.vocab_size) {
        return invalid_argument("request '" + job.id + "': token id " + std::to_string(id) +
                                " is outside the model's vocabulary of " + std::to_string(spec_.vocab_size));
      }
    }
  }
  EMBER_ASSIGN_OR_RETURN(text::Sampler sampler, text::Sampler::create(job.sampling, spec_.vocab_size, job.fallback_seed));
  EMBER_ASSIGN_OR_RETURN(text::StopConditions stop,
                         text::StopConditions::create(job.stop, spec_.eos_ids, spec_.vocab_size, job.prompt.size(),
                                                      spec_.context_window));
  if (job.resumed.size() >= stop.max_new_tokens()) {
    return invalid_argument("request '" + job.id + "': " + std::to_string(job.resumed.size()) +
                            " tokens were sent already, as many as it may generate");
  }
  std::optional<text::StopMatcher> stops;
  if (!job.stop_strings.empty()) {
    if (!tokenizer_) return invalid_argument("model has no tokenizer: stop strings cannot be matched");
    EMBER_ASSIGN_OR_RETURN(stops, text::StopMatcher::create(job.stop_strings));
  }
  std::vector<int64_t> tokens(job.prompt.begin(), job.prompt.end());
  tokens.insert(tokens.end(), job.resumed.begin(), job.resumed.end());
  const uint64_t seq = next_seq_;
  EMBER_RETURN_IF_ERROR(batcher_->submit(seq, std::move(tokens), now_us));
  ++next_seq_;
  Stream s{std::move(job), std::move(sampler), std::move(stop), std::move(stops), std::nullopt, {}, 0, tokenizer_};
  s.counts.add_prompt(s.job.prompt);
  for (int32_t id : s.job.resumed) s.counts.add_generated(id);
  s.generated = s.job.resumed.size();
  by_id_[s.job.id] = seq;
  auto [it, inserted] = streams_.emplace(seq, std::move(s));
  if (tokenizer_) {
    std::vector<int32_t> context = it->second.job.prompt;
    context.insert(context.end(), it->second.job.resumed.begin(), it->second.job.resumed.end());
    it->second.decoder.emplace(*tokenizer_, it->second.job.skip_special_tokens, context);
  }
  return Status::OK();
}

bool GenerationLoop::cancel(const std::string& id) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  batcher_->cancel(it->second);
  streams_.erase(it->second);
  by_id_.erase(it);
  // The last stream gone: no step follows to free its blocks, so they go now (cancel runs between
  // steps, on the engine's worker).
  if (streams_.empty()) {
    batcher_->release_cancelled();
    kv_->trim();
  }
  return true;
}

bool GenerationLoop::step(uint64_t now_us) {
  if (!executor_ || streams_.empty()) return false;
  GenerationStep st = batcher_->schedule(now_us);
  for (const auto& [seq, error] : st.failed) fail(seq, error);
  if (st.empty()) return false;  // nothing could run: the next submit or attach starts again

  auto fail_step = [&](const Error& error) {
    for (const StepSequence& s : st.sequences) {
      batcher_->cancel(s.id);
      fail(s.id, error);
    }
    return busy();
  };
  auto inputs = build_step_inputs(st.sequences, kv_->block_size(), spec_.layout.dtype);
  if (!inputs.ok()) return fail_step(inputs.error());
  auto outputs = executor_->run_host(inputs->take());
  if (!outputs.ok()) return fail_step(outputs.error());
  const gpu::HostTensor* logits = nullptr;
  for (const gpu::HostTensor& t : *outputs) {
    if (t.name == "logits") logits = &t;
  }
  if (!logits || logits->desc.dtype != gpu::DType::f32 || logits->desc.shape.rank != 2 ||
      logits->desc.shape[0] != static_cast<int64_t>(st.sequences.size()) ||
      logits->desc.shape[1] != static_cast<int64_t>(spec_.vocab_size)) {
    return fail_step(internal_error("the model's logits are not float32 [" + std::to_string(st.sequences.size()) +
                                    ", " + std::to_string(spec_.vocab_size) + "]"));
  }

  std::vector<GenerationBatcher::Sampled> sampled;
  std::vector<uint64_t> finished;
  for (size_t i = 0; i < st.sequences.size(); ++i) {
    if (!st.entries[i].samples) continue;
    const uint64_t seq = st.sequences[i].id;
    auto it = streams_.find(seq);
    if (it == streams_.end()) {  // cancelled or failed meanwhile: its token is ignored
      sampled.push_back({0, true});
      continue;
    }
    const std::span<const float> row(logits->as<float>() + i * spec_.vocab_size, spec_.vocab_size);
    auto token = it->second.sampler.sample(row, it->second.counts, it->second.generated);
    if (!token.ok()) {
      sampled.push_back({0, true});
      finished.push_back(seq);
      fail(seq, token.error());
      continue;
    }
    const bool done = take(seq, it->second, *token);
    sampled.push_back({token->id, done});
    if (done) finished.push_back(seq);
  }
  if (Status s = batcher_->complete(st, sampled); !s.ok()) return fail_step(s.error());
  for (uint64_t seq : finished) {
    if (auto it = streams_.find(seq); it != streams_.end()) {
      by_id_.erase(it->second.job.id);
      streams_.erase(it);
    }
  }
  if (!busy()) kv_->trim();  // an idle loop holds no device memory (see the header)
  return busy();
}

bool GenerationLoop::take(uint64_t seq, Stream& s, const text::SampledToken& sampled) {
  ++s.generated;
  ++tokens_generated_;
  s.counts.add_generated(sampled.id);
  const text::StopConditions::Decision d = s.stop.check(sampled.id, s.generated);
  GenerationOutput out;
  text::FinishReason reason = d.reason;
  if (d.send_token) {
    out.tokens.push_back(sampled.id);
    if (s.job.sampling.logprobs) out.logprobs.push_back(sampled);
    if (s.decoder) {
      auto piece = s.decoder->push(sampled.id);
      if (!piece.ok()) {
        fail(seq, piece.error());
        return true;
      }
      std::string text = std::move(*piece);
      if (s.stops) {
        text::StopMatcher::Emit e = s.stops->push(text);
        text = std::move(e.text);
        if (e.stopped) reason = text::FinishReason::stop;
      }
      out.text = std::move(text);
    }
  }
  if (reason == text::FinishReason::none) {
    if (!out.tokens.empty() || !out.text.empty()) s.job.emit(std::move(out));
    return false;
  }
  finish(seq, s, reason, std::move(out));
  return true;
}

void GenerationLoop::finish(uint64_t, Stream& s, text::FinishReason reason, GenerationOutput out) {
  if (s.decoder && !(s.stops && s.stops->stopped())) {
    std::string tail = s.decoder->finish();
    if (s.stops) {
      text::StopMatcher::Emit e = s.stops->push(tail);
      tail = std::move(e.text);
      if (!e.stopped) tail += s.stops->flush();
    }
    out.text += tail;
  }
  out.final = true;
  out.finish = reason;
  out.prompt_tokens = static_cast<uint32_t>(s.job.prompt.size());
  out.completion_tokens = static_cast<uint32_t>(s.generated);
  s.job.emit(std::move(out));
}

void GenerationLoop::fail(uint64_t seq, const Error& error, bool resumable) {
  auto it = streams_.find(seq);
  if (it == streams_.end()) return;
  GenerationOutput out;
  out.final = true;
  out.error = error;
  out.resumable = resumable;
  out.prompt_tokens = static_cast<uint32_t>(it->second.job.prompt.size());
  out.completion_tokens = static_cast<uint32_t>(it->second.generated);
  auto emit = std::move(it->second.job.emit);
  by_id_.erase(it->second.job.id);
  streams_.erase(it);
  emit(std::move(out));
}

void GenerationLoop::fail_all(const Error& error, bool resumable) {
  while (!streams_.empty()) {
    const uint64_t seq = streams_.begin()->first;
    batcher_->cancel(seq);
    fail(seq, error, resumable);
  }
}

std::unique_ptr<ParkedStreams> GenerationLoop::park() {
  batcher_->preempt_all();
  std::vector<ParkedStream> parked;
  for (uint64_t seq : batcher_->waiting_ids()) {  // every live one waits now: queue order
    auto it = streams_.find(seq);
    auto taken = batcher_->take(seq);
    if (it == streams_.end() || !taken) {  // cancelled: it leaves now, its KV (host copy) freed
      kv_->release(seq);
      continue;
    }
    KvHostCopy kv{kv_->layout(), nullptr, 0};
    if (taken->swapped) {
      auto copy = kv_->export_host(seq);
      if (copy.ok()) {
        kv = std::move(*copy);
      } else {  // cannot happen (it is swapped); the tokens are recomputed then
        kv_->release(seq);
        taken->swapped = false;
        taken->computed = 0;
      }
    }
    by_id_.erase(it->second.job.id);
    parked.push_back(ParkedStream{std::move(it->second), std::move(*taken), std::move(kv)});
    streams_.erase(it);
  }
  // A stream the batcher no longer knew (cannot happen: each has a sequence) ends resumable.
  while (!streams_.empty()) fail(streams_.begin()->first, internal_error("a stream without a sequence"), true);
  kv_->trim();  // the model's KV chunks leave the pool with it
  if (parked.empty()) return nullptr;
  return std::make_unique<ParkedStreams>(std::move(parked));
}

size_t GenerationLoop::unpark(std::vector<ParkedStream> streams, uint64_t now_us) {
  size_t joined = 0;
  for (ParkedStream& p : streams) {
    if (by_id_.contains(p.state.job.id)) {
      fail_stream(p.state, invalid_argument("request '" + p.state.job.id + "' is generating here already"));
      continue;
    }
    const uint64_t seq = next_seq_++;
    if (p.seq.swapped) {
      Status imported = kv_->import_host(seq, std::move(p.kv));
      if (!imported.ok() && imported.error().code() != ErrorCode::out_of_memory) {
        fail_stream(p.state, imported.error());
        continue;
      }
      if (!imported.ok()) {  // no host room here: recomputed instead
        p.seq.swapped = false;
        p.seq.computed = 0;
      }
    }
    if (Status restored = batcher_->restore(seq, std::move(p.seq), now_us); !restored.ok()) {
      kv_->release(seq);
      fail_stream(p.state, restored.error());
      continue;
    }
    by_id_[p.state.job.id] = seq;
    streams_.emplace(seq, std::move(p.state));
    ++joined;
  }
  return joined;
}

Result<uint64_t> GenerationLoop::probe_swap(uint64_t blocks) {
  const uint64_t seq = ~uint64_t{0};  // never a stream's (they count up from 1)
  EMBER_RETURN_IF_ERROR(kv_->grow(seq, blocks * kv_->block_size()));
  Status out = kv_->swap_out(seq);
  Status in = out.ok() ? kv_->swap_in(seq) : out;
  kv_->release(seq);
  EMBER_RETURN_IF_ERROR(in);
  return 2 * blocks * kv_->block_bytes();
}

GenerationLoopStats GenerationLoop::stats() const {
  GenerationLoopStats st;
  st.batcher = batcher_->counters();
  st.kv = kv_->stats();
  st.costs = batcher_->costs();
  st.streams = streams_.size();
  st.tokens_generated = tokens_generated_;
  return st;
}

}  // namespace ember::engine
