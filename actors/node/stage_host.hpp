// Spawning a node's stage host (its messages are in actors/stage_host_interface.hpp): the node's
// name and data plane, and how its stages hand their tensors to the next.
#pragma once

#include <caf/fwd.hpp>
#include <memory>
#include <optional>
#include <string>

#include "actors/stage_host_interface.hpp"
#include "base/host_port.hpp"
#include "config/choices.hpp"
#include "transport/ticket.hpp"
#include "transport/tls_stream.hpp"

namespace ember {

class BlobStore;
class NodeInstruments;
class WorkQueue;

/// Pipeline stages hand the tensors they carry to the next stage over the data plane: this node's
/// blob server serves them out of `store`, and `fetches` runs the fetches of those sent here
/// (blocking, `transport`'s fetch). Without it they ride in the actor message (tests).
struct StageHandoff {
  std::shared_ptr<BlobStore> store;
  TransportKind transport = TransportKind::tcp;
  WorkQueue* fetches = nullptr;
  /// The cluster's ticket keys (security.ticket_key_file): each handoff carries a ticket for the
  /// downstream's fetch. Null: none.
  std::shared_ptr<const transport::TicketKeys> tickets;
  /// The data plane's TLS (security.data_plane: tls); null: plain TCP.
  std::shared_ptr<const transport::DataTls> tls;
};

struct StageHostConfig {
  std::string name;
  /// Where this node's blob server listens: where the next stage fetches a hand-off from.
  HostPort data;
  std::optional<StageHandoff> handoff;
};

/// `instruments` (may be null) outlives the actor. The host serves nothing until a router attached
/// itself (stage_router) and handed it a stage (stage_ready).
stage_host_actor spawn_stage_host(caf::actor_system& sys, StageHostConfig config, NodeInstruments* instruments);

}  // namespace ember
