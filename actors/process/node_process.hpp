// The node process: its executors (one per device), model cache, blob server and router, built
// and wired; `ember node` and `ember serve` run one. Construction does the blocking work of startup
// (opening devices, binding the data port) on the caller's thread, before any actor depends on it.
//
// It owns every thread the node's actors run blocking work on, as WorkQueues it passes to them
// by reference (no actor owns a queue its own work runs on, and no thread is ever detached):
//   fetches      the model cache's reads of the local repository and fetches from sources
//                (kFetchThreads concurrent fetches);
//   hops         the multicast hops' fetch attempts (kHopThreads hops receive at once; more wait);
//   maintenance  executor restarts and the destruction of executors' engines (serial), so an
//                engine is never joined on an actor's thread or on its own worker.
// Each executor engine owns its own serial job queue, and each SimDevice stream its own.
//
// Destruction stops the blob server, then the actors (the router, the cache with the hops it
// spawned, the executors), and only then the queues: each runs what is queued and joins. The actor
// system must outlive it. Not thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "actors/cluster_manager_interface.hpp"
#include "actors/gpu_executor_interface.hpp"
#include "actors/model_cache_interface.hpp"
#include "actors/node/joined_manager.hpp"
#include "actors/node_router_interface.hpp"
#include "base/status.hpp"
#include "base/work_queue.hpp"
#include "config/cluster_config.hpp"

namespace caf {
class actor_system;
}
namespace ember::transport {
class DataServer;
}

namespace ember {

class BlobStore;
class InlineRunner;
class InlineRuns;
class NodeInstruments;

class NodeProcess {
 public:
  /// `security` gives the node's data plane tickets and TLS (security.ticket_key_file, data_plane);
  /// `generation` bounds every generative model's loop (a kv_cache size over a device's model pool
  /// is refused, naming the device).
  static Result<std::unique_ptr<NodeProcess>> start(caf::actor_system& sys, const NodeConfig& node,
                                                    const DevicesConfig& devices, const TransferConfig& transfer = {},
                                                    const BindingConfig& binding = {},
                                                    const SecurityConfig& security = {},
                                                    const GenerationConfig& generation = {});
  ~NodeProcess();

  const node_router_actor& router() const { return router_; }
  const std::string& name() const { return name_; }
  /// Warm runs on a caller's thread (actors/node/inline_runs.hpp), for a gateway in this process;
  /// null when binding.inline is off. It uses the node's instruments: whoever holds it (a gateway
  /// process) must stop using it before this process is destroyed.
  std::shared_ptr<InlineRunner> inline_runner() const;

  /// Joins the manager at `config.manager` over the network and stays joined: rejoins every
  /// rejoin_interval after losing it, until `stop` becomes true. Blocks the calling thread.
  void serve_remote(const NodeConfig& config, const std::atomic<bool>& stop);
  /// Joins a manager in this process. Returns the node id.
  Result<uint64_t> join_local(const cluster_manager_actor& manager);

 private:
  explicit NodeProcess(caf::actor_system& sys);
  caf::actor_system& sys_;
  std::string name_;
  // Before the actors' handles: destroyed after the destructor stopped the actors (see the header).
  WorkQueue fetches_;
  WorkQueue hops_;
  WorkQueue handoffs_;  // tensors handed between pipeline stages
  WorkQueue maintenance_;
  WorkQueue dials_;  // connections to the other members (actors/peer_dials.hpp)
  std::unique_ptr<NodeInstruments> instruments_;
  std::shared_ptr<InlineRuns> inline_runs_;
  /// The manager joined last (set as the join is asked, so that what the manager sends with its
  /// answer is taken); the supervisor takes faults and member lists only from it.
  std::shared_ptr<JoinedManager> joined_ = std::make_shared<JoinedManager>();
  std::shared_ptr<BlobStore> store_;
  std::unique_ptr<transport::DataServer> blob_server_;
  std::vector<gpu_executor_actor> executors_;
  model_cache_actor cache_;
  stage_host_actor stages_;  // the first; its supervisor replaces it
  /// The node's supervisor, which stands for its router (actors/node/node_supervisor.hpp).
  node_router_actor router_;
  HostPort control_;  // where router_ is published (port 0: not)
};

}  // namespace ember
