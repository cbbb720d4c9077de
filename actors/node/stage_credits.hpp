// StageCredits: the flow control between a pipeline stage on this node and the stage downstream of
// it (Flashpoint's pipeline, issue 14), as a plain object. A stage sends the next request downstream
// only while it holds a credit; sending one takes it, and it comes back when the downstream took the
// request (its credit_atom names the request's seq) or answered it before saying so, whichever comes
// first, once per request. Each request sent may have left its carried tensors in the node's blob
// store under a handoff key (empty: carried inline in the message): when its credit comes back they
// are no longer needed there, and the object says so.
//
// Owner: the node's stage host (actors/node/stage_host.cpp), one per stage it serves, on its actor
// only. No I/O, no clock, no CAF; never throws.
//
//   holding (credits > 0) ──sent(handoff): seq──▶ credits - 1, seq outstanding
//   outstanding seq ──taken(seq): {handoff to drop}──▶ credits + 1 (a second taken(seq): nothing)
//
// Invariant: credits() + outstanding() == kWindow, and seqs are 1, 2, 3, ... in the order sent.
// The window is one request: a stage never sends a second request downstream before the first was
// taken, so a slow stage never hoards requests (they wait in front of it, where they can still be
// dropped or failed) and an upstream's blob store holds one handoff per downstream stage at most.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace ember {

class StageCredits {
 public:
  /// Requests in flight downstream at most.
  static constexpr uint32_t kWindow = 1;

  /// Whether the next request may go downstream now.
  bool may_send() const { return credits_ > 0; }
  /// A request goes downstream, its tensors waiting in the blob store under `handoff` (empty: inline):
  /// the credit is taken; its seq, which the downstream's credit_atom will name. Requires may_send().
  uint64_t sent(std::string handoff);
  /// The downstream took request `seq`, or answered it: its credit comes back. What the caller does:
  /// drop the handoff it names (when not empty) and send the next request. nullopt: `seq` is not
  /// outstanding (never sent, or its credit came back already): nothing to do.
  struct Taken {
    std::string drop_handoff;
  };
  std::optional<Taken> taken(uint64_t seq);

  uint32_t credits() const { return credits_; }
  size_t outstanding() const { return outstanding_.size(); }

 private:
  uint32_t credits_ = kWindow;
  std::map<uint64_t, std::string> outstanding_;  // seq -> handoff key
  uint64_t next_seq_ = 1;
};

}  // namespace ember
