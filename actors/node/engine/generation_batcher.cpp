#include "actors/node/engine/generation_batcher.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace ember::engine {

Result<GenerationBatcher> GenerationBatcher::create(KvSpace& kv, GenerationBatcherConfig config) {
  if (config.max_num_seqs == 0) return invalid_argument("generation: max_num_seqs must be at least 1");
  if (config.max_num_batched_tokens < config.max_num_seqs) {
    return invalid_argument("generation: max_num_batched_tokens (" + std::to_string(config.max_num_batched_tokens) +
                            ") must be at least max_num_seqs (" + std::to_string(config.max_num_seqs) +
                            "), so that every running sequence's decode fits in a step");
  }
  if (config.max_waiting == 0) return invalid_argument("generation: max_waiting must be at least 1");
  if (!(config.preemption_margin >= 0)) return invalid_argument("generation: preemption_margin must be 0 or more");
  return GenerationBatcher(kv, config);
}

Status GenerationBatcher::submit(uint64_t seq, std::vector<int64_t> prompt, uint64_t now_us) {
  if (seqs_.count(seq)) return invalid_argument("sequence " + std::to_string(seq) + " is already queued or running");
  if (prompt.empty()) return invalid_argument("sequence " + std::to_string(seq) + " has an empty prompt");
  const uint64_t blocks = (prompt.size() + kv_->block_size() - 1) / kv_->block_size();
  if (blocks > kv_->capacity_blocks()) {
    return invalid_argument("sequence " + std::to_string(seq) + "'s prompt of " + std::to_string(prompt.size()) +
                            " tokens needs " + std::to_string(blocks) + " KV blocks; the cache holds at most " +
                            std::to_string(kv_->capacity_blocks()));
  }
  if (submitted_waiting_ >= config_.max_waiting) {
    ++counters_.rejected;
    return unavailable("the generation queue is full: " + std::to_string(config_.max_waiting) +
                       " request(s) already wait for this model (generation.max_waiting); try again later");
  }
  Seq s;
  s.tokens = std::move(prompt);
  s.submitted_us = now_us;
  seqs_.emplace(seq, std::move(s));
  waiting_.push_back(seq);
  ++submitted_waiting_;
  ++counters_.submitted;
  return Status::OK();
}

bool GenerationBatcher::cancel(uint64_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return false;
  it->second.cancelled = true;
  return true;
}

const std::vector<int64_t>* GenerationBatcher::tokens(uint64_t seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second.tokens;
}

GenerationCounters GenerationBatcher::counters() const {
  GenerationCounters c = counters_;
  c.blocks_in_use = kv_->blocks_in_use();
  return c;
}

void GenerationBatcher::forget(uint64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  if (it->second.running) {
    running_.erase(std::find(running_.begin(), running_.end(), id));
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), id));
    if (!it->second.ever_admitted) --submitted_waiting_;
  }
  kv_->release(id);
  seqs_.erase(it);
}

void GenerationBatcher::add_entry(GenerationStep& step, uint64_t id, uint64_t n, bool admitted,
                                  std::optional<uint64_t> queued_us) {
  Seq& s = seqs_.at(id);
  StepSequence q;
  q.id = id;
  q.start = s.computed;
  q.tokens.assign(s.tokens.begin() + static_cast<std::ptrdiff_t>(s.computed),
                  s.tokens.begin() + static_cast<std::ptrdiff_t>(s.computed + n));
  step.sequences.push_back(std::move(q));  // the table is filled once the step is settled
  step.entries.push_back({s.computed + n == s.tokens.size(), admitted, queued_us});
  step.tokens += n;
}

void GenerationBatcher::preempt(uint64_t id, GenerationStep& step) {
  Seq& s = seqs_.at(id);
  s.running = false;
  placement::KvPreemptionInput in;
  in.blocks = kv_->blocks_of(id);
  in.bytes = in.blocks * kv_->block_bytes();
  in.tokens = s.computed;
  in.host_bytes_per_s = costs_.host_bytes_per_s;
  in.copy_fixed_us = costs_.copy_fixed_us;
  in.prefill_us_per_token = costs_.prefill_us_per_token;
  in.host_room = kv_->host_room(in.bytes);
  const auto choice = placement::choose_kv_preemption(in, last_choice_, config_.preemption_margin);
  last_choice_ = choice.how;
  bool swapped = false;
  if (choice.how == placement::KvPreemption::swap) {
    swapped = kv_->swap_out(id).ok();
    if (!swapped) ++counters_.swap_fallbacks;
  }
  if (!swapped) {
    kv_->release(id);
    s.computed = 0;
  }
  s.swapped = swapped;
  waiting_.push_front(id);
  (swapped ? step.swapped : step.recomputed).push_back(id);
  ++(swapped ? counters_.preempted_swap : counters_.preempted_recompute);
}

bool GenerationBatcher::admit(uint64_t now_us, uint64_t& budget, GenerationStep& step) {
  const uint64_t id = waiting_.front();
  Seq& s = seqs_.at(id);
  // The cache cannot give the blocks: wait for running sequences to free theirs, or, when none
  // runs, fail (nothing will free any).
  auto refused = [&](const Error& e) {
    if (e.code() == ErrorCode::out_of_memory && !running_.empty()) return false;
    step.failed.emplace_back(id, e);
    ++counters_.failed;
    forget(id);
    return true;
  };
  if (s.swapped) {
    Status in = kv_->swap_in(id);
    if (!in.ok() && in.error().code() == ErrorCode::out_of_memory) return refused(in.error());
    if (!in.ok()) {  // the copy failed: the host copy is dropped and the tokens recomputed
      kv_->release(id);
      s.computed = 0;
      ++counters_.swap_fallbacks;
    }
    s.swapped = false;
  }
  if (Status grown = kv_->grow(id, s.tokens.size()); !grown.ok()) {
    // Swapped in but one block short (its last token crosses a boundary): back to host memory, so
    // that a waiting sequence holds no device blocks; recomputed when even that fails.
    if (kv_->blocks_of(id) > 0) {
      if (kv_->swap_out(id).ok()) {
        s.swapped = true;
      } else {
        kv_->release(id);
        s.computed = 0;
      }
    }
    return refused(grown.error());
  }
  const uint64_t n = std::min<uint64_t>(s.tokens.size() - s.computed, budget);
  waiting_.pop_front();
  std::optional<uint64_t> queued;
  if (!s.ever_admitted) {
    --submitted_waiting_;
    queued = now_us >= s.submitted_us ? now_us - s.submitted_us : 0;
  }
  s.ever_admitted = true;
  s.running = true;
  running_.push_back(id);
  add_entry(step, id, n, true, queued);
  budget -= n;
  ++counters_.admitted;
  return true;
}

std::vector<uint64_t> GenerationBatcher::release_cancelled() {
  std::vector<uint64_t> gone;
  for (const auto& [id, s] : seqs_) {
    if (s.cancelled) gone.push_back(id);
  }
  for (uint64_t id : gone) {
    forget(id);
    ++counters_.cancelled;
  }
  return gone;
}

GenerationStep GenerationBatcher::schedule(uint64_t now_us) {
  GenerationStep step;
  // 0. Cancelled sequences leave.
  step.cancelled = release_cancelled();
  uint64_t budget = config_.max_num_batched_tokens;
  bool preempted = false;
  // 1. Decodes, oldest first; the newest running sequence makes room when the blocks run out.
  for (size_t i = 0; i < running_.size();) {
    const uint64_t id = running_[i];
    Seq& s = seqs_.at(id);
    if (s.tokens.size() - s.computed != 1) {
      ++i;
      continue;
    }
    Status grown = kv_->grow(id, s.computed + 1);
    if (grown.ok()) {
      add_entry(step, id, 1, false, std::nullopt);
      --budget;
      ++i;
    } else if (grown.error().code() != ErrorCode::out_of_memory) {
      step.failed.emplace_back(id, grown.error());  // not the blocks: the cache refused the move itself
      ++counters_.failed;
      forget(id);  // running_[i] is the next one now
    } else {
      const uint64_t victim = running_.back();  // possibly `id` itself: then the loop ends
      running_.pop_back();
      preempt(victim, step);
      preempted = true;
    }
  }
  // 2. Prefills under way, oldest first, within the budget (their blocks were taken at admission).
  for (uint64_t id : running_) {
    Seq& s = seqs_.at(id);
    const uint64_t rest = s.tokens.size() - s.computed;
    if (rest <= 1 || budget == 0) continue;
    const uint64_t n = std::min(rest, budget);
    if (!kv_->grow(id, s.computed + n).ok()) continue;  // cannot happen: the blocks are there
    add_entry(step, id, n, false, std::nullopt);
    budget -= n;
  }
  // 3. Admissions, first come first served, unless this step had to preempt.
  while (!preempted && !waiting_.empty() && running_.size() < config_.max_num_seqs && budget > 0) {
    if (!admit(now_us, budget, step)) break;
  }
  for (StepSequence& q : step.sequences) q.table = kv_->table(q.id);
  if (!step.empty()) {
    ++counters_.steps;
    counters_.tokens += step.tokens;
    counters_.last_step_tokens = step.tokens;
    counters_.max_step_tokens = std::max(counters_.max_step_tokens, step.tokens);
  }
  return step;
}

Status GenerationBatcher::complete(const GenerationStep& step, const std::vector<Sampled>& sampled) {
  const size_t want = static_cast<size_t>(
      std::count_if(step.entries.begin(), step.entries.end(), [](const GenerationStep::Entry& e) { return e.samples; }));
  if (sampled.size() != want || step.entries.size() != step.sequences.size()) {
    return invalid_argument("a generation step with " + std::to_string(want) + " sampling sequences completed with " +
                            std::to_string(sampled.size()) + " tokens");
  }
  size_t k = 0;
  for (size_t i = 0; i < step.sequences.size(); ++i) {
    const StepSequence& q = step.sequences[i];
    const Sampled* token = step.entries[i].samples ? &sampled[k++] : nullptr;
    auto it = seqs_.find(q.id);
    // Gone, cancelled, preempted or fed since: the step's tokens are not where it stands.
    if (it == seqs_.end() || it->second.cancelled || !it->second.running || it->second.computed != q.start) continue;
    Seq& s = it->second;
    s.computed += q.tokens.size();
    if (token == nullptr) continue;
    s.tokens.push_back(token->token);
    if (token->finished) {
      forget(q.id);
      ++counters_.finished;
    }
  }
  return Status::OK();
}

std::optional<GenerationBatcher::Taken> GenerationBatcher::take(uint64_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end() || it->second.running) return std::nullopt;
  Seq& s = it->second;
  Taken t{std::move(s.tokens), s.computed, s.swapped, s.ever_admitted};
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(), seq));
  if (!s.ever_admitted) --submitted_waiting_;
  seqs_.erase(it);
  return t;
}

Status GenerationBatcher::restore(uint64_t seq, Taken taken, uint64_t now_us) {
  if (seqs_.count(seq)) return invalid_argument("sequence " + std::to_string(seq) + " is already queued or running");
  if (taken.tokens.empty() || taken.computed > taken.tokens.size()) {
    return invalid_argument("sequence " + std::to_string(seq) + " restored without tokens");
  }
  Seq s;
  s.tokens = std::move(taken.tokens);
  s.computed = taken.swapped ? taken.computed : 0;
  s.swapped = taken.swapped;
  s.submitted_us = now_us;
  s.ever_admitted = taken.ever_admitted;
  seqs_.emplace(seq, std::move(s));
  waiting_.push_back(seq);
  if (!taken.ever_admitted) ++submitted_waiting_;
  return Status::OK();
}

size_t GenerationBatcher::preempt_all() {
  GenerationStep ignored;
  size_t n = 0;
  while (!running_.empty()) {
    const uint64_t id = running_.back();
    running_.pop_back();
    preempt(id, ignored);
    ++n;
  }
  return n;
}

}  // namespace ember::engine
