// transfer_peer: one hop of a multicast chain (Flashpoint's TCP chaining, DESIGN.md). Spawned by a
// node's model_cache when the cluster manager's chain controller makes the node a receiver of a
// chain. It pulls the blob from its upstream (the previous hop, or the chain's source: a node
// holding the bytes, or the repository) into one host buffer, and publishes the verified prefix in
// the node's BlobStore as a GrowingBlob so the next hop pulls it while it is still arriving
// (cut-through: the next hop is at most one chunk behind). It owns nothing global and decides
// nothing: the controller tells it where to pull from.
//
// Pull, not push (the thesis pushes): a receiver knows exactly which bytes it holds, so after a
// failure it resumes from its own verified offset from whatever upstream it is given, and a splice
// is one message to the hop after the failed one. The window between hops is the TCP socket
// buffers plus one chunk: a slow hop delays only the hops behind it, and memory never grows
// beyond the blob's own buffer, which the cache needs anyway.
//
// Hop lifecycle:  receiving ──verified digest──▶ done (bytes go to the cache: resident)
//                    │  ▲
//   upstream lost,   │  │ new upstream (chain_splice, or the controller's answer),
//   corrupt chunk,   ▼  │ resume from the verified offset
//   stalled        resuming ──no upstream left / too many attempts──▶ failed (the cache's
//                                                                     waiters get the error)
// Messages: it reports chain_progress to the controller every progress interval and at the end;
// it asks chain_upstream_request when its upstream fails; it obeys chain_splice at any time (a
// splice to the upstream it already uses is ignored), and chain_handover from its cache when a new
// controller's chain names it for the same blob. Handlers never block: each fetch attempt
// runs on the node's hop queue and comes back as an offload_done (actors/offload.hpp).
#pragma once

#include <caf/actor.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/loading_messages.hpp"
#include "actors/offload.hpp"
#include "placement/chain_plan.hpp"

namespace ember {

/// Hop -> controller: where the hop stands. Sent every progress interval (receiving), and once with
/// `state` done or failed at the end (never spliced_out: that is the controller's word). `peer` is the hop's own handle, for chain_splice.
struct chain_progress {
  uint64_t transfer_id = 0;
  std::string node;
  /// The name of the upstream it pulls from now ("manager" for the repository).
  std::string upstream;
  /// Bytes [0, offset) are verified.
  uint64_t offset = 0;
  uint64_t blob_bytes = 0;
  placement::HopState state = placement::HopState::receiving;
  std::string error;
  caf::actor peer;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chain_progress& x) {
  return f(caf::meta::type_name("chain_progress"), x.transfer_id, x.node, x.upstream, x.offset, x.blob_bytes, x.state,
           x.error, x.peer);
}

/// Hop -> controller: my upstream failed (connection lost, aborted, idle, corrupt twice); where
/// do I pull from now? Answers a blob_source; `unavailable` when the transfer is over or unknown.
struct chain_upstream_request {
  uint64_t transfer_id = 0;
  std::string node;
  std::string failed_upstream;
  uint64_t offset = 0;
  std::string reason;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chain_upstream_request& x) {
  return f(caf::meta::type_name("chain_upstream_request"), x.transfer_id, x.node, x.failed_upstream, x.offset,
           x.reason);
}

/// Controller -> hop: pull from `upstream` from now on (resuming from the verified offset).
struct chain_splice {
  uint64_t transfer_id = 0;
  blob_source upstream;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chain_splice& x) {
  return f(caf::meta::type_name("chain_splice"), x.transfer_id, x.upstream);
}

/// Cache -> hop (local only): a newer load of the same blob joined the hop's fetch. With a
/// controller: the load makes this node a hop of chain `transfer_id` under another controller (a
/// restarted manager, or a standby that took over, placed the model while the dead one's chain
/// still runs here); the hop follows it at once: it reports to `controller` under the new id, keeps
/// `sources` as its upstreams, and goes on from its verified offset from sources[0], rather than
/// waiting out the orphan window of a controller that is gone. Ignored from the controller the hop
/// already follows. Without one (a plain load, from `sources`): taken only by a hop whose
/// controller is down or does not answer, which then tries those sources from its verified offset
/// (its orphan window starting again). Ignored once the hop has ended.
struct chain_handover {
  uint64_t transfer_id = 0;
  caf::actor controller;
  std::vector<blob_source> sources;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chain_handover& x) {
  return f(caf::meta::type_name("chain_handover"), x.transfer_id, x.controller, x.sources);
}

/// The part of the cluster manager a hop talks to.
using chain_controller_actor = caf::typed_actor<caf::reacts_to<chain_progress>,
                                                caf::replies_to<chain_upstream_request>::with<blob_source>>;

/// A hop: obeys splices and handovers; its fetch attempts, and a wait before retrying an upstream that does not
/// hold the blob yet, come back as offload_done (self-sent, local only); tick is its progress timer.
using transfer_peer_actor =
    caf::typed_actor<caf::reacts_to<chain_splice>, caf::reacts_to<chain_handover>, caf::reacts_to<offload_done>,
                     caf::reacts_to<tick_atom>>;

}  // namespace ember
