#include "actors/node/held_request.hpp"

namespace ember {

AnswerOutcome classify_answer(const swap_reply& r, const SwapDispatch& d, const Held& lead) {
  if (r.result.fault) return AnswerOutcome::fault;
  // A run beside others that found no memory for its activations runs again, alone, once.
  if (d.beside && r.error && r.error->code() == ErrorCode::out_of_memory && !retried_alone(lead.retry)) {
    return AnswerOutcome::retry_alone;
  }
  if (!d.batch.empty()) return r.reply ? AnswerOutcome::batch : AnswerOutcome::retry_members;
  switch (lead.kind) {
    case HeldKind::workflow_step:
      return AnswerOutcome::workflow_step;
    case HeldKind::stage_warmup:
    case HeldKind::member_warmup:
      return AnswerOutcome::warmed;
    case HeldKind::profile:
      return AnswerOutcome::profiled;
    case HeldKind::client:
    case HeldKind::generation:
    case HeldKind::resume:
      break;
  }
  return r.reply ? AnswerOutcome::answered : AnswerOutcome::failed;
}

std::optional<Held> HeldRequests::take(uint64_t id) {
  auto it = held_.find(id);
  if (it == held_.end()) return std::nullopt;
  Held h = std::move(it->second);
  held_.erase(it);
  return h;
}

std::vector<SwapDispatch> HeldRequests::overdue(int64_t now_us, int64_t limit_us) const {
  std::vector<SwapDispatch> out;
  for (const auto& [id, run] : running_) {
    if (now_us - run.second >= limit_us) out.push_back(run.first);
  }
  return out;
}

}  // namespace ember
