// PendingAnswers: the promises an actor has handed to work outside it (an engine job, a restart on
// a queue) and not kept yet, so that none is dropped silently when the actor dies. The actor adds
// each such promise and settles it when the work's continuation comes back; when the actor dies
// first (killed by a fault, or its state destroyed while work is out: the continuation then never
// runs), the destructor answers every promise still open as `unavailable`, so the requester learns
// at once, not at its timeout, that it may retry. Kept in the actor's state; the actor's thread only.
#pragma once

#include <caf/typed_response_promise.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "actors/errors.hpp"

namespace ember {

class PendingAnswers {
 public:
  /// `who` names the actor in the error ("executor sim:0 on node n1").
  explicit PendingAnswers(std::string who = "the actor") : who_(std::move(who)) {}
  PendingAnswers(const PendingAnswers&) = delete;
  PendingAnswers& operator=(const PendingAnswers&) = delete;
  ~PendingAnswers() {
    const caf::error err = to_caf(unavailable(who_ + " died before answering; retry"));
    for (auto& [id, fail] : open_) fail(err);
  }

  void set_who(std::string who) { who_ = std::move(who); }

  /// Records `rp` (a copy: the work keeps its own and answers through it); the id settles it.
  template <class T>
  uint64_t add(caf::typed_response_promise<T> rp) {
    const uint64_t id = next_++;
    open_.emplace(id, [rp](const caf::error& e) mutable {
      if (rp.pending()) rp.deliver(e);
    });
    return id;
  }
  /// The work came back: its continuation answers.
  void settle(uint64_t id) { open_.erase(id); }
  size_t size() const { return open_.size(); }

 private:
  std::string who_;
  uint64_t next_ = 1;
  std::map<uint64_t, std::function<void(const caf::error&)>> open_;
};

}  // namespace ember
