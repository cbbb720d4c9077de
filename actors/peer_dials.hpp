// PeerDials: the direct connections a process keeps to other processes' published handles: a
// standalone gateway to every member node, a node to every other member node (issue 37). CAF 0.17
// routes a message to an actor of another process over that process's own connection when there is
// one, and otherwise through whichever process first named the actor (the manager that sent a
// pipeline's hops, the gateway that sent a stage request): a dial makes the route direct, so it no
// longer passes through, or dies with, a third process.
//
// Per peer:  wanted ──due()──▶ dialing ──connected()──▶ connected (the handle is kept: it holds the
//                                 │                          │     connection's proxy)
//                                 └──failed()──▶ wanted ◀────┘ forget() (its connection is gone),
//                                    (the caller waits           or want() without it / elsewhere
//                                     before the next due())
//
// Plain C++: owned by one actor's state and called by it only (not thread-safe); `dial_peers` below
// runs the dials for an actor on a WorkQueue (a dial blocks up to CAF's connect timeout) and brings
// each outcome back to the actor.
#pragma once

#include <caf/actor.hpp>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "actors/actor_system.hpp"
#include "actors/node_report_messages.hpp"
#include "actors/offload.hpp"
#include "base/status.hpp"
#include "base/work_queue.hpp"

namespace ember {

class PeerDials {
 public:
  struct Dial {
    std::string peer;
    HostPort at;
  };

  /// The peers wanted from now on (a port of 0: not published, never dialed). A peer no longer
  /// wanted, or wanted at another endpoint, is forgotten (its handle dropped) and, if wanted
  /// elsewhere, due again.
  void want(const std::vector<peer_endpoint>& peers);
  /// The wanted peers neither connected nor being dialed: they are being dialed from now on.
  std::vector<Dial> due();
  /// A dial reached its peer: the handle is kept. False (and the handle dropped) when the peer is no
  /// longer wanted at that endpoint.
  bool connected(const Dial& dial, caf::actor handle);
  /// A dial failed: the peer is due again (the caller waits before asking due()).
  void failed(const Dial& dial);
  /// The peer's connection is gone (its process restarted): due again.
  void forget(const std::string& peer);

  /// Whether a connection to `peer` is held.
  bool reached(const std::string& peer) const { return connected_.count(peer) != 0; }
  size_t reached_count() const { return connected_.size(); }
  bool wanted(const std::string& peer) const { return wanted_.count(peer) != 0; }

 private:
  std::map<std::string, HostPort> wanted_;
  std::map<std::string, HostPort> dialing_;
  struct Held {
    HostPort at;
    caf::actor handle;
  };
  std::map<std::string, Held> connected_;
};

/// How an actor dials: its PeerDials, the queue the dials block on, how long after a failed dial it
/// tries again, and the words its log lines use ("gateway" dialing a "node", "node n1" a "peer"),
/// with what a message to a peer not reached does meanwhile.
struct PeerDialing {
  PeerDials dials;
  WorkQueue* queue = nullptr;  // null: no dials are made (a process whose peers are its own actors)
  std::chrono::microseconds retry{std::chrono::seconds(1)};
  std::string who;
  std::string peer_word;
  std::string meanwhile;
};

/// Logs a dial's outcome (info when connected, warn when not, saying when it is tried again).
void log_dial(const PeerDialing& d, const PeerDials::Dial& dial, const Result<caf::actor>& got);

/// Starts the dials due on `get(self)`'s queue; each outcome comes back to the actor (it handles
/// offload_done), a failed one is due again after `retry`. `get(self)` returns the actor's
/// PeerDialing (looked up again on each continuation: the actor's state outlives none of them).
template <class Self, class Get>
void dial_peers(Self* self, Get get) {
  PeerDialing& d = get(self);
  if (!d.queue) return;
  for (auto& dial : d.dials.due()) {
    caf::actor_system* sys = &self->system();
    const bool taken = offload(
        self, *d.queue, [sys, at = dial.at]() -> Result<caf::actor> { return connect_remote(*sys, at.host, at.port); },
        [self, get, dial](Result<caf::actor>& got) {
          PeerDialing& d = get(self);
          log_dial(d, dial, got);
          if (got.ok()) {
            d.dials.connected(dial, std::move(*got));
            return;
          }
          self->delayed_send(self, d.retry, offload_done{[self, get, dial] {
                               get(self).dials.failed(dial);
                               dial_peers(self, get);
                             }});
        });
    if (!taken) d.dials.failed(dial);  // the queue is full or stopping: due again with the next change
  }
}

}  // namespace ember
