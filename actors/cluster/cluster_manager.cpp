// cluster_manager: membership, registry, replicas and routing (see cluster_manager_interface.hpp).
#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/weak_intrusive_ptr.hpp>
#include <map>
#include <set>

#include "actors/cluster/cluster_manager.hpp"
#include "actors/cluster/chain_controller.hpp"
#include "actors/cluster_manager_interface.hpp"
#include "actors/cluster/repository_index.hpp"
#include "actors/errors.hpp"
#include "base/work_queue.hpp"
#include "base/units.hpp"
#include "placement/chain_builder.hpp"
#include "placement/replica_placement.hpp"

namespace ember {

namespace {

/// Budget for a node to fetch and bind a replica.
constexpr auto kLoadTimeout = std::chrono::minutes(10);

struct manager_state {
  static inline const char* name = "ember.cluster_manager";

  struct Version {
    RepositoryEntry entry;
    model_state state;
    std::map<uint64_t, std::string> replicas;  // node id -> device, of every ready replica
    std::map<uint64_t, uint64_t> loading_on;   // node id -> attempt id
    std::set<uint64_t> failed_on;              // nodes that failed this placement round
    uint32_t wanted = 0;                       // replicas to keep (1 after an explicit load)
    std::vector<caf::typed_response_promise<model_state>> waiters;
  };
  struct Node {
    node_report report;
    node_router_actor router;
    std::map<std::string, uint64_t> device_weights;  // weights we know are bound, per device
  };

  ClusterManagerConfig config;
  std::shared_ptr<RepositoryIndex> index;
  std::map<model_key, Version> models;
  std::map<uint64_t, Node> nodes;
  std::vector<gateway_actor> gateways;
  uint64_t next_node = 1;
  uint64_t next_attempt = 1;
  uint64_t next_scan = 1;
  uint64_t epoch = 0;
  /// Requests waiting for a rescan, by scan request id.
  std::map<uint64_t, std::function<void()>> after_scan;
  /// Multicast transfers in progress, and the transfer_peer of each hop that has reported.
  ChainController chains;
  std::map<std::pair<uint64_t, std::string>, caf::actor> hop_peers;
  bool chain_timer = false;
  /// Distributions in progress (the distribute API), by id: answered when no node is pending.
  struct Distribution {
    distribute_result result;
    caf::typed_response_promise<distribute_result> rp;
    std::map<uint64_t, std::pair<std::string, uint64_t>> pending;  // node id -> (name, transfer id)
    std::chrono::steady_clock::time_point started;
  };
  std::map<uint64_t, Distribution> distributions;
  uint64_t next_distribution = 1;
};

using manager_pointer = cluster_manager_actor::stateful_pointer<manager_state>;

// -- registry --------------------------------------------------------------------------------

/// The version a request means: `key` itself, or the highest version when key.version is 0.
manager_state::Version* find_version(manager_state& st, const model_key& key) {
  if (key.version != 0) {
    auto it = st.models.find(key);
    return it == st.models.end() ? nullptr : &it->second;
  }
  manager_state::Version* best = nullptr;
  for (auto it = st.models.lower_bound({key.name, 0}); it != st.models.end() && it->first.name == key.name; ++it) {
    best = &it->second;
  }
  return best;
}

void refresh_state(manager_state::Version& v) {
  v.state.replicas = static_cast<uint32_t>(v.replicas.size());
  if (!v.entry.error.empty()) {
    v.state.state = ModelReadiness::failed;
    v.state.reason = v.entry.error;
  } else if (!v.replicas.empty()) {
    v.state.state = ModelReadiness::ready;
    v.state.reason.clear();
  } else if (!v.loading_on.empty()) {
    v.state.state = ModelReadiness::loading;
  } else if (v.state.state != ModelReadiness::failed) {
    v.state.state = ModelReadiness::unloaded;
  }
}

routing_entry entry_of(const manager_state& st, const manager_state::Version& v) {
  routing_entry e;
  e.state = v.state;
  e.manifest_json = v.entry.manifest_json;
  for (const auto& [id, device] : v.replicas) {
    auto n = st.nodes.find(id);
    if (n != st.nodes.end()) e.replicas.push_back({id, n->second.report.name, n->second.router});
  }
  return e;
}

std::vector<replica_ref> members(const manager_state& st) {
  std::vector<replica_ref> out;
  for (const auto& [id, n] : st.nodes) out.push_back({id, n.report.name, n.router});
  return out;
}

routing_update full_table(manager_state& st) {
  routing_update u;
  u.epoch = ++st.epoch;
  u.full = true;
  for (const auto& [key, v] : st.models) u.entries.push_back(entry_of(st, v));
  u.members = members(st);
  return u;
}

/// Pushes the current entries of `keys` (and the member list) to every gateway.
void publish(manager_pointer self, const std::set<model_key>& keys, const std::vector<model_key>& removed = {}) {
  auto& st = self->state;
  routing_update u;
  u.epoch = ++st.epoch;
  u.members = members(st);
  for (const auto& key : keys) {
    auto it = st.models.find(key);
    if (it != st.models.end()) u.entries.push_back(entry_of(st, it->second));
  }
  u.removed = removed;
  for (const auto& g : st.gateways) self->send(g, u);
}

/// Replaces the registry entries of one model (or of all models) with a scan's result, keeping
/// what is known about replicas of versions that still exist.
void apply_scan(manager_pointer self, const std::string& model, std::vector<RepositoryEntry> entries) {
  auto& st = self->state;
  std::set<model_key> changed;
  std::vector<model_key> removed;
  std::set<model_key> seen;
  for (auto& e : entries) {
    seen.insert(e.key);
    auto& v = st.models[e.key];
    const bool was_failed = !v.entry.error.empty();
    v.state.model = e.key;
    v.entry = std::move(e);
    if (was_failed && v.entry.error.empty()) v.state.state = ModelReadiness::unloaded;
    refresh_state(v);
    changed.insert(v.state.model);
  }
  for (auto it = st.models.begin(); it != st.models.end();) {
    const bool in_scope = model.empty() || it->first.name == model;
    if (in_scope && !seen.count(it->first) && it->second.replicas.empty() && it->second.loading_on.empty()) {
      removed.push_back(it->first);
      for (auto& w : it->second.waiters)
        w.deliver(to_caf(not_found("model " + it->first.to_string() + " was removed")));
      it = st.models.erase(it);
    } else {
      ++it;
    }
  }
  st.index->replace(
      [&] {
        std::vector<RepositoryEntry> all;
        for (const auto& [k, v] : st.models)
          if (model.empty() || k.name == model) all.push_back(v.entry);
        return all;
      }(),
      model);
  publish(self, changed, removed);
}

/// The repository scanner's thread (joined at exit; a scan's job holds the manager only weakly, so
/// it can never own the queue's last reference). A stopgap of the node branch, which deleted
/// actors/worker_pool.hpp: the manager process should own this queue (as the node process owns its).
WorkQueue& scan_queue() {
  static WorkQueue queue(WorkQueueOptions{.threads = 1});
  return queue;
}

/// Runs `then` after a rescan of `model` ("" = the whole repository) on the scanner thread.
void rescan(manager_pointer self, const std::string& model, std::function<void()> then) {
  auto& st = self->state;
  const uint64_t id = st.next_scan++;
  st.after_scan[id] = std::move(then);
  caf::weak_actor_ptr weak{self->ctrl()};
  scan_queue().post([weak, id, model, root = st.config.repository] {
    auto entries = model.empty() ? scan_repository(root) : scan_repository_model(root, model);
    if (auto strong = weak.lock()) {
      caf::anon_send(caf::actor_cast<cluster_manager_actor>(strong), repository_scanned{id, model, std::move(entries)});
    }
  });
}

// -- placement -------------------------------------------------------------------------------

std::vector<placement::NodeView> node_views(const manager_state& st, const model_key& key) {
  std::vector<placement::NodeView> out;
  auto version = st.models.find(key);
  for (const auto& [id, n] : st.nodes) {
    placement::NodeView view;
    view.id = id;
    view.name = n.report.name;
    view.data = n.report.data;
    for (const auto& d : n.report.devices) {
      auto used = n.device_weights.find(d.name);
      const uint64_t bound = used == n.device_weights.end() ? 0 : used->second;
      view.max_free_device_bytes =
          std::max(view.max_free_device_bytes, d.memory_bytes - std::min(d.memory_bytes, bound));
    }
    for (const auto& [k, v] : st.models) view.replicas += v.replicas.count(id);
    view.has_replica =
        version != st.models.end() && (version->second.replicas.count(id) || version->second.loading_on.count(id));
    view.caches_model =
        view.has_replica || std::find(n.report.cached.begin(), n.report.cached.end(), key) != n.report.cached.end();
    out.push_back(view);
  }
  return out;
}

void fail_waiters(manager_state::Version& v, const Error& e) {
  auto waiters = std::move(v.waiters);
  for (auto& w : waiters) w.deliver(to_caf(e));
}

void place(manager_pointer self, const model_key& key);

// -- chains ----------------------------------------------------------------------------------

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr const char* kRepositoryName = "manager";

blob_source repository_source(const manager_state& st) {
  return {SourceTier::repository, kRepositoryName, st.config.data};
}

/// The data-plane endpoint of a chain member: a node's blob server, or the repository's.
std::optional<blob_source> source_named(const manager_state& st, const std::string& name) {
  if (name == kRepositoryName) return repository_source(st);
  for (const auto& [id, n] : st.nodes)
    if (n.report.name == name) return blob_source{SourceTier::peer, name, n.report.data};
  return std::nullopt;
}

void send_splices(manager_pointer self, const std::vector<TransferSplice>& splices) {
  auto& st = self->state;
  for (const auto& sp : splices) {
    auto peer = st.hop_peers.find({sp.transfer_id, sp.hop});
    auto upstream = source_named(st, sp.upstream);
    spdlog::info("manager: transfer {}: splice: {} now pulls from {}{}", sp.transfer_id, sp.hop, sp.upstream,
                 peer == st.hop_peers.end() ? " (when it reports)" : "");
    // A hop that has not reported yet is re-pointed by its first report (ChainController::on_progress).
    if (peer != st.hop_peers.end() && upstream) {
      self->send(caf::actor_cast<transfer_peer_actor>(peer->second), chain_splice{sp.transfer_id, *upstream});
    }
  }
}

void arm_chain_timer(manager_pointer self) {
  auto& st = self->state;
  if (st.chain_timer || st.chains.empty()) return;
  st.chain_timer = true;
  self->delayed_send(self, st.config.chain_check_interval, tick_atom_v);
}

void chain_tick(manager_pointer self) {
  auto& st = self->state;
  st.chain_timer = false;
  send_splices(self, st.chains.check_stalls(now_ms()));
  arm_chain_timer(self);
}

void drop_transfer(manager_state& st, uint64_t transfer) {
  st.chains.erase(transfer);
  for (auto it = st.hop_peers.begin(); it != st.hop_peers.end();)
    it = it->first.first == transfer ? st.hop_peers.erase(it) : std::next(it);
}

/// A hop's load ended (its reply came): the controller's record follows; a finished transfer is
/// dropped with its peers.
void hop_ended(manager_pointer self, uint64_t transfer, const std::string& hop, bool ok) {
  auto& st = self->state;
  if (transfer == 0) return;
  if (ok) {
    st.chains.on_done(transfer, hop, now_ms());
  } else {
    send_splices(self, st.chains.on_failed(transfer, hop));
  }
  st.hop_peers.erase({transfer, hop});
  if (st.chains.finished(transfer)) drop_transfer(st, transfer);
}

void on_chain_progress(manager_pointer self, chain_progress& p) {
  auto& st = self->state;
  if (p.state == placement::HopState::receiving) {
    if (p.peer) st.hop_peers[{p.transfer_id, p.node}] = p.peer;
    send_splices(self, st.chains.on_progress(p.transfer_id, p.node, p.upstream, p.offset, now_ms()));
  } else if (p.state == placement::HopState::failed) {
    spdlog::warn("manager: transfer {}: hop {} failed at offset {}: {}", p.transfer_id, p.node, p.offset, p.error);
  }
  // done and failed are recorded when the hop's load reply arrives (hop_ended).
}

caf::result<blob_source> on_upstream_request(manager_pointer self, const chain_upstream_request& r) {
  auto& st = self->state;
  std::vector<TransferSplice> splices;
  auto upstream = st.chains.upstream_after_failure(r.transfer_id, r.node, r.failed_upstream, splices);
  send_splices(self, splices);
  if (!upstream.ok()) return to_caf(upstream.error());
  auto src = source_named(st, *upstream);
  if (!src) return to_caf(unavailable("upstream " + *upstream + " left the cluster"));
  spdlog::info("manager: transfer {}: {} lost {} at offset {} ({}); pulls from {} now", r.transfer_id, r.node,
               r.failed_upstream, r.offset, r.reason, *upstream);
  return *src;
}

/// Where each receiver pulls from. Chain mode: chains from the nodes that hold the bytes (else the
/// repository), one per holder, receivers spread evenly (placement/chain_builder.hpp); each hop
/// pulls from its predecessor under a new transfer. Unicast: each pulls from a holder directly.
struct LoadPlan {
  uint64_t node = 0;
  std::vector<blob_source> sources;
  uint64_t transfer = 0;
};

Result<std::vector<LoadPlan>> plan_loads(manager_pointer self, const model_key& key, const std::vector<uint64_t>& receivers,
                                         bool chain, std::vector<std::string>* chains_text) {
  auto& st = self->state;
  const auto& version = st.models.at(key);
  const auto views = node_views(st, key);
  std::vector<LoadPlan> out;
  const placement::Source repo{placement::SourceKind::repository, kRepositoryName, st.config.data};
  if (!chain) {
    for (uint64_t r : receivers) {
      LoadPlan p{r, {}, 0};
      for (const auto& s : placement::choose_sources(views, r, repo)) p.sources.push_back({s.kind == placement::SourceKind::peer ? SourceTier::peer : SourceTier::repository, s.name, s.endpoint});
      out.push_back(std::move(p));
    }
    return out;
  }
  std::set<uint64_t> receiving(receivers.begin(), receivers.end());
  std::vector<placement::ChainSource> sources;
  for (const auto& [id, n] : st.nodes) {
    const auto& cached = n.report.cached;
    const bool holds = version.replicas.count(id) || std::find(cached.begin(), cached.end(), key) != cached.end();
    if (holds && !receiving.count(id)) sources.push_back({n.report.name, n.report.rack, false});
  }
  sources.push_back({kRepositoryName, "", true});  // used only when no node holds the bytes
  std::vector<placement::ChainReceiver> chain_receivers;
  std::map<std::string, uint64_t> id_of;
  for (uint64_t r : receivers) {
    chain_receivers.push_back({st.nodes.at(r).report.name, st.nodes.at(r).report.rack});
    id_of[st.nodes.at(r).report.name] = r;
  }
  EMBER_ASSIGN_OR_RETURN(auto chains, placement::build_chains(sources, chain_receivers));
  const uint64_t transfer = st.chains.start(key.to_string(), version.entry.weights_bytes, chains, now_ms());
  for (const auto& c : chains) {
    std::string text = c.source;
    for (size_t i = 0; i < c.hops.size(); ++i) {
      text += " -> " + c.hops[i];
      auto upstream = source_named(st, i == 0 ? c.source : c.hops[i - 1]);
      out.push_back({id_of.at(c.hops[i]), {*upstream}, transfer});
    }
    spdlog::info("manager: transfer {} of {} ({}): {}", transfer, key.to_string(),
                 format_bytes(version.entry.weights_bytes), text);
    if (chains_text) chains_text->push_back(std::move(text));
  }
  arm_chain_timer(self);
  return out;
}

load_replica load_request(manager_pointer self, const manager_state::Version& v, const LoadPlan& plan) {
  load_replica req;
  req.model = v.state.model;
  req.manifest_json = v.entry.manifest_json;
  req.blob_key = blob_key_of(v.state.model);
  req.blob_bytes = v.entry.weights_bytes;
  req.sources = plan.sources;
  req.transfer_id = plan.transfer;
  if (plan.transfer != 0) req.controller = caf::actor_cast<caf::actor>(self);
  return req;
}

void on_loaded(manager_pointer self, const model_key& key, uint64_t node, uint64_t attempt, const replica_info& info) {
  auto& st = self->state;
  auto it = st.models.find(key);
  if (it == st.models.end()) return;
  auto& v = it->second;
  auto l = v.loading_on.find(node);
  if (l == v.loading_on.end() || l->second != attempt || !st.nodes.count(node)) return;  // stale
  v.loading_on.erase(l);
  v.replicas[node] = info.device;
  v.failed_on.clear();
  st.nodes[node].device_weights[info.device] += v.entry.weights_bytes;
  if (std::find(st.nodes[node].report.cached.begin(), st.nodes[node].report.cached.end(), key) ==
      st.nodes[node].report.cached.end()) {
    st.nodes[node].report.cached.push_back(key);
  }
  refresh_state(v);
  spdlog::info("manager: replica {} ready on node {} ({}; bytes from {}, {:.1f} ms)", key.to_string(),
               st.nodes[node].report.name, info.device, describe_source(info.source, info.source_peer), static_cast<double>(info.load_us) / 1e3);
  auto waiters = std::move(v.waiters);
  for (auto& w : waiters) w.deliver(v.state);
  publish(self, {key});
}

void on_load_failed(manager_pointer self, const model_key& key, uint64_t node, uint64_t attempt, const Error& e) {
  auto& st = self->state;
  auto it = st.models.find(key);
  if (it == st.models.end()) return;
  auto& v = it->second;
  auto l = v.loading_on.find(node);
  if (l == v.loading_on.end() || l->second != attempt) return;  // stale: already handled
  v.loading_on.erase(l);
  const std::string node_name = st.nodes.count(node) ? st.nodes[node].report.name : "(lost)";
  spdlog::warn("manager: loading {} on node {} failed: {}", key.to_string(), node_name, e.message());
  const bool model_is_bad =
      e.code() == ErrorCode::corrupt || e.code() == ErrorCode::invalid_argument || e.code() == ErrorCode::unsupported;
  if (model_is_bad) {
    v.state.state = ModelReadiness::failed;
    v.state.reason = e.message();
    refresh_state(v);
    fail_waiters(v, e);
    publish(self, {key});
    return;
  }
  v.failed_on.insert(node);
  refresh_state(v);
  publish(self, {key});
  place(self, key);  // another node, if any is left
}

/// Starts the replicas `key` lacks (at least one; `wanted` in all) on the best nodes, unless loads
/// are in flight already. Two or more nodes that need the bytes get them by chained multicast.
/// Fails the waiters when no node can take it.
void place(manager_pointer self, const model_key& key) {
  auto& st = self->state;
  auto it = st.models.find(key);
  if (it == st.models.end()) return;
  auto& v = it->second;
  if (!v.loading_on.empty()) return;
  const uint32_t want = std::max<uint32_t>(1, v.wanted);
  if (!v.replicas.empty() && v.replicas.size() >= want) {
    auto waiters = std::move(v.waiters);
    for (auto& w : waiters) w.deliver(v.state);
    return;
  }
  std::vector<uint64_t> targets;
  std::set<uint64_t> excluded = v.failed_on;
  while (targets.size() + v.replicas.size() < want) {
    const auto views = node_views(st, key);
    auto target = placement::choose_node(views, v.entry.weights_bytes, excluded);
    if (!target) break;
    targets.push_back(*target);
    excluded.insert(*target);
  }
  if (targets.empty()) {
    const std::string why = st.nodes.empty() ? "no node has joined the cluster"
                                             : "no node has room for " + format_bytes(v.entry.weights_bytes) +
                                                   " of weights (tried " + std::to_string(v.failed_on.size()) + " of " +
                                                   std::to_string(st.nodes.size()) + " nodes)";
    v.failed_on.clear();
    refresh_state(v);
    if (!v.waiters.empty()) spdlog::warn("manager: cannot place {}: {}", key.to_string(), why);
    fail_waiters(v, unavailable("cannot place model " + key.to_string() + ": " + why));
    return;
  }
  // Nodes whose cache lacks the bytes: chained when there are several.
  std::vector<uint64_t> needing, holding;
  for (uint64_t t : targets) {
    const auto& cached = st.nodes.at(t).report.cached;
    (std::find(cached.begin(), cached.end(), key) != cached.end() ? holding : needing).push_back(t);
  }
  std::vector<LoadPlan> plans;
  if (needing.size() >= 2) {
    auto chained = plan_loads(self, key, needing, true, nullptr);
    if (chained.ok()) {
      plans = std::move(*chained);
    } else {
      spdlog::warn("manager: no chain for {}: {}; fetching directly", key.to_string(), chained.error().message());
      holding.insert(holding.end(), needing.begin(), needing.end());
    }
  } else {
    holding.insert(holding.end(), needing.begin(), needing.end());
  }
  if (!holding.empty()) {
    auto direct = plan_loads(self, key, holding, false, nullptr);
    for (auto& p : *direct) plans.push_back(std::move(p));
  }
  for (const auto& plan : plans) {
    const uint64_t attempt = st.next_attempt++;
    const uint64_t node_id = plan.node;
    v.loading_on[node_id] = attempt;
    auto& node = st.nodes[node_id];
    spdlog::info("manager: placing {} on node {} (from {}{})", key.to_string(), node.report.name,
                 plan.sources.front().name, plan.transfer ? ", transfer " + std::to_string(plan.transfer) : "");
    const uint64_t transfer = plan.transfer;
    const std::string hop = node.report.name;
    self->request(node.router, kLoadTimeout, load_request(self, v, plan))
        .then(
            [self, key, node_id, attempt, transfer, hop](replica_info& info) {
              hop_ended(self, transfer, hop, true);
              on_loaded(self, key, node_id, attempt, info);
            },
            [self, key, node_id, attempt, transfer, hop](caf::error& err) {
              hop_ended(self, transfer, hop, false);
              on_load_failed(self, key, node_id, attempt, from_caf(err));
            });
  }
  refresh_state(v);
  publish(self, {key});
}

// -- distribution ----------------------------------------------------------------------------

/// Nodes named in `names` (all nodes when empty), or not_found naming the first unknown one.
Result<std::vector<uint64_t>> nodes_named(const manager_state& st, const std::vector<std::string>& names) {
  std::vector<uint64_t> out;
  if (names.empty()) {
    for (const auto& [id, n] : st.nodes) out.push_back(id);
    return out;
  }
  for (const auto& name : names) {
    auto n = std::find_if(st.nodes.begin(), st.nodes.end(), [&](const auto& e) { return e.second.report.name == name; });
    if (n == st.nodes.end()) return not_found("no node named '" + name + "' in the cluster");
    if (std::find(out.begin(), out.end(), n->first) == out.end()) out.push_back(n->first);
  }
  return out;
}

void note_cached(manager_state& st, uint64_t node, const model_key& key, bool cached) {
  auto n = st.nodes.find(node);
  if (n == st.nodes.end()) return;
  auto& list = n->second.report.cached;
  auto at = std::find(list.begin(), list.end(), key);
  if (cached && at == list.end()) list.push_back(key);
  if (!cached && at != list.end()) list.erase(at);
}

/// One node of distribution `id` answered (or was lost); the last one answers the request. Stale
/// answers (the node was already counted as lost) are ignored.
void distribution_hop_done(manager_pointer self, uint64_t id, uint64_t node, Result<replica_info> outcome) {
  auto& st = self->state;
  auto d = st.distributions.find(id);
  if (d == st.distributions.end()) return;
  auto p = d->second.pending.find(node);
  if (p == d->second.pending.end()) return;
  const auto [hop, transfer] = p->second;
  d->second.pending.erase(p);
  hop_ended(self, transfer, hop, outcome.ok());
  if (outcome.ok()) {
    note_cached(st, node, d->second.result.model, true);
    d->second.result.nodes.push_back(std::move(*outcome));
  } else {
    d->second.result.errors.push_back(hop + ": " + outcome.error().message());
  }
  if (!d->second.pending.empty()) return;
  d->second.result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - d->second.started).count();
  spdlog::info("manager: distribution of {} ({}) to {} node(s) done in {:.2f} s, {} error(s)",
               d->second.result.model.to_string(), to_string(d->second.result.mode),
               d->second.result.nodes.size() + d->second.result.errors.size(), d->second.result.seconds,
               d->second.result.errors.size());
  d->second.rp.deliver(std::move(d->second.result));
  st.distributions.erase(d);
}

caf::result<distribute_result> distribute(manager_pointer self, const distribute_request& req) {
  auto& st = self->state;
  auto* v = find_version(st, req.model);
  if (!v) return to_caf(not_found("unknown model '" + req.model.name + "'"));
  if (!v->entry.error.empty()) return to_caf(invalid_argument("model " + v->state.model.to_string() + ": " + v->entry.error));
  auto named = nodes_named(st, req.nodes);
  if (!named.ok()) return to_caf(named.error());
  const model_key key = v->state.model;
  std::vector<uint64_t> receivers;
  for (uint64_t id : *named) {
    const auto& cached = st.nodes.at(id).report.cached;
    const bool holds = v->replicas.count(id) || std::find(cached.begin(), cached.end(), key) != cached.end();
    if (!holds) receivers.push_back(id);
  }
  auto result = std::make_shared<distribute_result>();
  result->model = key;
  result->mode = req.mode != DistributeMode::automatic ? req.mode
                 : receivers.size() >= 2                ? DistributeMode::chain
                                                        : DistributeMode::unicast;
  result->blob_bytes = v->entry.weights_bytes;
  if (receivers.empty()) return *result;
  auto plans = plan_loads(self, key, receivers, result->mode == DistributeMode::chain, &result->chains);
  if (!plans.ok()) return to_caf(plans.error());
  const uint64_t id = st.next_distribution++;
  auto& d = st.distributions[id];
  d.result = std::move(*result);
  d.rp = self->make_response_promise<distribute_result>();
  d.started = std::chrono::steady_clock::now();
  for (const auto& plan : *plans) d.pending[plan.node] = {st.nodes.at(plan.node).report.name, plan.transfer};
  auto rp = d.rp;
  for (const auto& plan : *plans) {
    auto req_msg = load_request(self, *v, plan);
    req_msg.cache_only = true;
    const uint64_t node_id = plan.node;
    self->request(st.nodes.at(node_id).router, kLoadTimeout, std::move(req_msg))
        .then([self, id, node_id](replica_info& info) { distribution_hop_done(self, id, node_id, std::move(info)); },
              [self, id, node_id](caf::error& err) { distribution_hop_done(self, id, node_id, from_caf(err)); });
  }
  return rp;
}

caf::result<distribute_result> evict(manager_pointer self, const distribute_request& req) {
  auto& st = self->state;
  auto* v = find_version(st, req.model);
  if (!v) return to_caf(not_found("unknown model '" + req.model.name + "'"));
  auto named = nodes_named(st, req.nodes);
  if (!named.ok()) return to_caf(named.error());
  const model_key key = v->state.model;
  auto result = std::make_shared<distribute_result>();
  result->model = key;
  result->evicted = true;
  result->blob_bytes = v->entry.weights_bytes;
  auto rp = self->make_response_promise<distribute_result>();
  auto pending = std::make_shared<size_t>(named->size());
  if (named->empty()) {
    rp.deliver(*result);
    return rp;
  }
  for (uint64_t id : *named) {
    const std::string name = st.nodes.at(id).report.name;
    self->request(st.nodes.at(id).router, std::chrono::seconds(10), evict_atom_v, key)
        .then(
            [self, rp, pending, result, id, key, name](bool dropped) mutable {
              if (dropped) {
                note_cached(self->state, id, key, false);
                result->nodes.push_back(replica_info{key, name, "", SourceTier::cache, "", 0, 0});
              }
              if (--*pending == 0) rp.deliver(*result);
            },
            [rp, pending, result, name](caf::error& err) mutable {
              result->errors.push_back(name + ": " + from_caf(err).message());
              if (--*pending == 0) rp.deliver(*result);
            });
  }
  return rp;
}

// -- membership ------------------------------------------------------------------------------

uint64_t join(manager_pointer self, node_report& report, node_router_actor& router) {
  auto& st = self->state;
  const uint64_t id = st.next_node++;
  self->monitor(router);
  std::set<model_key> adopted;
  for (const auto& key : report.replicas) {
    auto it = st.models.find(key);
    if (it == st.models.end()) continue;
    it->second.replicas[id] = "";  // the device is not reported; placement treats it as free
    refresh_state(it->second);
    adopted.insert(key);
  }
  uint64_t memory = 0;
  for (const auto& d : report.devices) memory += d.memory_bytes;
  spdlog::info("manager: node {} joined as #{} ({} device(s), {} of device memory, cache {}, data plane {}:{}{})",
               report.name, id, report.devices.size(), format_bytes(memory), format_bytes(report.cache_capacity),
               report.data.host, report.data.port,
               adopted.empty() ? "" : ", " + std::to_string(adopted.size()) + " replica(s) adopted");
  st.nodes[id] = {std::move(report), std::move(router), {}};
  publish(self, adopted);
  // Models that wait for capacity, or that should have more replicas, get a node now.
  for (auto& [key, v] : st.models) {
    if (!v.loading_on.empty() || !v.entry.error.empty()) continue;
    v.failed_on.clear();
    if (!v.waiters.empty() || v.replicas.size() < v.wanted) place(self, key);
  }
  return id;
}

void node_lost(manager_pointer self, const caf::actor_addr& addr, const caf::error& reason) {
  auto& st = self->state;
  auto node =
      std::find_if(st.nodes.begin(), st.nodes.end(), [&](const auto& n) { return n.second.router.address() == addr; });
  if (node == st.nodes.end()) {
    auto& gws = st.gateways;
    gws.erase(std::remove_if(gws.begin(), gws.end(), [&](const gateway_actor& g) { return g.address() == addr; }),
              gws.end());
    return;
  }
  const uint64_t id = node->first;
  const std::string name = node->second.report.name;
  st.nodes.erase(node);
  // Chains through the node go around it; chains it fed continue from the repository.
  send_splices(self, st.chains.node_lost(name, kRepositoryName));
  for (uint64_t t : st.chains.finished_transfers()) drop_transfer(st, t);
  // Its answers to distributions will never come (CAF does not fail requests to a lost node).
  std::vector<uint64_t> waiting;
  for (const auto& [did, d] : st.distributions)
    if (d.pending.count(id)) waiting.push_back(did);
  for (uint64_t did : waiting) {
    distribution_hop_done(self, did, id, unavailable("node " + name + " was lost during the transfer"));
  }
  std::set<model_key> changed, replace;
  for (auto& [key, v] : st.models) {
    if (v.replicas.erase(id)) {
      changed.insert(key);
      replace.insert(key);
    }
    if (v.loading_on.erase(id)) {
      changed.insert(key);
      replace.insert(key);  // the load died with the node: try elsewhere
    }
    refresh_state(v);
  }
  spdlog::warn("manager: node {} (#{}) lost ({}); {} model(s) affected", name, id, caf::to_string(reason),
               changed.size());
  publish(self, changed);
  if (!st.config.replace_on_failure) return;
  for (const auto& key : replace) {
    auto& v = st.models[key];
    if (v.state.explicitly_unloaded) continue;
    // Re-place what the node held: one more replica, on a survivor that does not hold it yet.
    v.wanted = std::max<uint32_t>(v.wanted, static_cast<uint32_t>(v.replicas.size()) + 1);
    place(self, key);
  }
}

// -- the repository API ----------------------------------------------------------------------

caf::result<model_state> ensure(manager_pointer self, const model_key& key) {
  auto& st = self->state;
  auto* v = find_version(st, key);
  if (!v)
    return to_caf(
        not_found("unknown model '" + key.name + "'" + (key.version ? " version " + std::to_string(key.version) : "")));
  if (!v->entry.error.empty())
    return to_caf(invalid_argument("model " + v->state.model.to_string() + " cannot load: " + v->entry.error));
  if (v->state.explicitly_unloaded) {
    return to_caf(invalid_argument("model " + v->state.model.to_string() +
                                   " was unloaded; load it with POST /v2/repository/models/" + key.name + "/load"));
  }
  if (!v->replicas.empty()) return v->state;
  auto rp = self->make_response_promise<model_state>();
  v->waiters.push_back(rp);
  spdlog::info("manager: cold start of {} ({} waiting)", v->state.model.to_string(), v->waiters.size());
  place(self, v->state.model);
  return rp;
}

caf::result<model_state> load(manager_pointer self, const model_command& cmd) {
  auto rp = self->make_response_promise<model_state>();
  rescan(self, cmd.model.name, [self, rp, key = cmd.model, replicas = cmd.replicas]() mutable {
    auto* v = find_version(self->state, key);
    if (!v) {
      rp.deliver(to_caf(not_found("the repository has no model '" + key.name + "'" +
                                  (key.version ? " version " + std::to_string(key.version) : ""))));
      return;
    }
    if (!v->entry.error.empty()) {
      v->state.state = ModelReadiness::failed;
      v->state.reason = v->entry.error;
      {
        rp.deliver(to_caf(invalid_argument("model " + v->state.model.to_string() + " cannot load: " + v->entry.error)));
        return;
      }
    }
    v->state.explicitly_unloaded = false;
    v->wanted = std::max<uint32_t>(v->wanted, std::max<uint32_t>(1, replicas));
    if (!v->replicas.empty() && v->replicas.size() >= v->wanted) {
      rp.deliver(v->state);
      return;
    }
    v->waiters.push_back(rp);
    place(self, v->state.model);
  });
  return rp;
}

model_state unload(manager_pointer self, const model_command& cmd) {
  auto& st = self->state;
  std::set<model_key> changed;
  model_state last;
  for (auto& [key, v] : st.models) {
    if (key.name != cmd.model.name || (cmd.model.version != 0 && key.version != cmd.model.version)) continue;
    for (const auto& [node, device] : v.replicas) {
      auto n = st.nodes.find(node);
      if (n == st.nodes.end()) continue;
      caf::anon_send(n->second.router, unload_atom_v, key);  // fire and forget: the node may be gone
      auto bound = n->second.device_weights.find(device);
      if (bound != n->second.device_weights.end()) bound->second -= std::min(bound->second, v.entry.weights_bytes);
    }
    v.replicas.clear();
    v.loading_on.clear();
    v.wanted = 0;
    v.state.explicitly_unloaded = true;
    v.state.state = ModelReadiness::unloaded;
    v.state.reason = "unloaded by request";
    fail_waiters(v, invalid_argument("model " + key.to_string() + " was unloaded"));
    refresh_state(v);
    changed.insert(key);
    last = v.state;
    spdlog::info("manager: {} unloaded", key.to_string());
  }
  publish(self, changed);
  return last;
}

cluster_manager_actor::behavior_type manager_behavior(manager_pointer self, ClusterManagerConfig config,
                                                      std::vector<RepositoryEntry> initial,
                                                      std::shared_ptr<RepositoryIndex> index) {
  auto& st = self->state;
  st.config = std::move(config);
  st.index = std::move(index);
  apply_scan(self, "", std::move(initial));
  spdlog::info("manager: repository {} holds {} model version(s)", st.config.repository, st.models.size());
  self->set_down_handler([self](caf::down_msg& msg) { node_lost(self, msg.source, msg.reason); });
  return {
      // -- membership ----------------------------------------------------------------------------
      [self](join_atom, node_report& report, node_router_actor& router) -> uint64_t {
        return join(self, report, router);
      },
      [self](subscribe_atom, gateway_actor& gateway) -> routing_update {
        self->monitor(gateway);
        self->state.gateways.push_back(gateway);
        return full_table(self->state);
      },
      // -- models --------------------------------------------------------------------------------
      [self](ensure_atom, const model_key& key) -> caf::result<model_state> { return ensure(self, key); },
      [self](load_atom, const model_command& cmd) -> caf::result<model_state> { return load(self, cmd); },
      [self](unload_atom, const model_command& cmd) -> caf::result<model_state> {
        if (!find_version(self->state, cmd.model)) {
          return to_caf(not_found("unknown model '" + cmd.model.name + "'"));
        }
        return unload(self, cmd);
      },
      [self](index_atom) -> caf::result<std::vector<model_state>> {
        auto rp = self->make_response_promise<std::vector<model_state>>();
        rescan(self, "", [self, rp]() mutable {
          std::vector<model_state> out;
          for (const auto& [key, v] : self->state.models) out.push_back(v.state);
          rp.deliver(std::move(out));
        });
        return rp;
      },
      [self](nodes_atom) -> std::vector<node_report> {
        std::vector<node_report> out;
        for (const auto& [id, n] : self->state.nodes) out.push_back(n.report);
        return out;
      },
      // -- distribution and chains ---------------------------------------------------------------
      [self](distribute_atom, const distribute_request& req) -> caf::result<distribute_result> {
        return distribute(self, req);
      },
      [self](evict_atom, const distribute_request& req) -> caf::result<distribute_result> { return evict(self, req); },
      [self](chain_progress& p) { on_chain_progress(self, p); },
      [self](const chain_upstream_request& r) -> caf::result<blob_source> { return on_upstream_request(self, r); },
      [self](tick_atom) { chain_tick(self); },
      // -- scanner -------------------------------------------------------------------------------
      [self](repository_scanned& scan) {
        apply_scan(self, scan.model, std::move(scan.entries));
        auto it = self->state.after_scan.find(scan.request);
        if (it == self->state.after_scan.end()) return;
        auto then = std::move(it->second);
        self->state.after_scan.erase(it);
        then();
      },
  };
}

}  // namespace

cluster_manager_actor spawn_cluster_manager(caf::actor_system& sys, ClusterManagerConfig config,
                                            std::vector<RepositoryEntry> initial,
                                            std::shared_ptr<RepositoryIndex> index) {
  return sys.spawn(manager_behavior, std::move(config), std::move(initial), std::move(index));
}

}  // namespace ember
