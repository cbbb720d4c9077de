#include "actors/node/stage_credits.hpp"

#include <cassert>
#include <utility>

namespace ember {

uint64_t StageCredits::sent(std::string handoff) {
  assert(may_send());
  const uint64_t seq = next_seq_++;
  --credits_;
  outstanding_.emplace(seq, std::move(handoff));
  return seq;
}

std::optional<StageCredits::Taken> StageCredits::taken(uint64_t seq) {
  auto it = outstanding_.find(seq);
  if (it == outstanding_.end()) return std::nullopt;
  Taken out{std::move(it->second)};
  outstanding_.erase(it);
  ++credits_;
  return out;
}

}  // namespace ember
