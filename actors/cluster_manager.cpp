// cluster_manager: membership, registry, replicas and routing (see cluster_manager_interface.hpp).
#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <map>
#include <set>

#include "actors/cluster_manager_interface.hpp"
#include "actors/errors.hpp"
#include "actors/worker_pool.hpp"
#include "config/units.hpp"
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
  std::shared_ptr<WorkerPool> scanner;
  std::map<model_key, Version> models;
  std::map<uint64_t, Node> nodes;
  std::vector<gateway_actor> gateways;
  uint64_t next_node = 1;
  uint64_t next_attempt = 1;
  uint64_t next_scan = 1;
  uint64_t epoch = 0;
  /// Requests waiting for a rescan, by scan request id.
  std::map<uint64_t, std::function<void()>> after_scan;

  ~manager_state() { release_off_own_thread(scanner); }
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
    v.state.state = "failed";
    v.state.reason = v.entry.error;
  } else if (!v.replicas.empty()) {
    v.state.state = "ready";
    v.state.reason.clear();
  } else if (!v.loading_on.empty()) {
    v.state.state = "loading";
  } else if (v.state.state != "failed") {
    v.state.state = "unloaded";
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
    if (was_failed && v.entry.error.empty()) v.state.state = "unloaded";
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

/// Runs `then` after a rescan of `model` ("" = the whole repository) on the scanner thread.
void rescan(manager_pointer self, const std::string& model, std::function<void()> then) {
  auto& st = self->state;
  const uint64_t id = st.next_scan++;
  st.after_scan[id] = std::move(then);
  auto handle = caf::actor_cast<cluster_manager_actor>(self);
  st.scanner->submit([handle, id, model, root = st.config.repository] {
    auto entries = model.empty() ? scan_repository(root) : scan_repository_model(root, model);
    caf::anon_send(handle, repository_scanned{id, model, std::move(entries)});
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
    view.data_host = n.report.data_host;
    view.data_port = n.report.data_port;
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
               st.nodes[node].report.name, info.device, info.source, static_cast<double>(info.load_us) / 1e3);
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
    v.state.state = "failed";
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

/// Starts a replica of `key` on the best node, unless one is ready or loading. Fails the waiters
/// when no node can take it.
void place(manager_pointer self, const model_key& key) {
  auto& st = self->state;
  auto it = st.models.find(key);
  if (it == st.models.end()) return;
  auto& v = it->second;
  if (!v.loading_on.empty()) return;
  if (!v.replicas.empty() && v.replicas.size() >= std::max<uint32_t>(1, v.wanted)) {
    auto waiters = std::move(v.waiters);
    for (auto& w : waiters) w.deliver(v.state);
    return;
  }
  const auto views = node_views(st, key);
  auto target = placement::choose_node(views, v.entry.weights_bytes, v.failed_on);
  if (!target) {
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
  const placement::Source repo{"repository", "manager", st.config.data_host, st.config.data_port};
  load_replica req;
  req.model = key;
  req.manifest_json = v.entry.manifest_json;
  req.blob_key = blob_key_of(key);
  req.blob_bytes = v.entry.weights_bytes;
  for (const auto& s : placement::choose_sources(views, *target, repo))
    req.sources.push_back({s.kind, s.name, s.host, s.port});
  const uint64_t attempt = st.next_attempt++;
  v.loading_on[*target] = attempt;
  refresh_state(v);
  publish(self, {key});
  auto& node = st.nodes[*target];
  spdlog::info(
      "manager: placing {} on node {} (sources: {})", key.to_string(), node.report.name,
      req.sources.front().kind + (req.sources.size() > 1 ? " +" + std::to_string(req.sources.size() - 1) : ""));
  const uint64_t node_id = *target;
  self->request(node.router, kLoadTimeout, std::move(req))
      .then([self, key, node_id, attempt](replica_info& info) { on_loaded(self, key, node_id, attempt, info); },
            [self, key, node_id, attempt](caf::error& err) {
              on_load_failed(self, key, node_id, attempt, from_caf(err));
            });
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
               report.data_host, report.data_port,
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
  rescan(self, cmd.model.name, [self, rp, key = cmd.model]() mutable {
    auto* v = find_version(self->state, key);
    if (!v) {
      rp.deliver(to_caf(not_found("the repository has no model '" + key.name + "'" +
                                  (key.version ? " version " + std::to_string(key.version) : ""))));
      return;
    }
    if (!v->entry.error.empty()) {
      v->state.state = "failed";
      v->state.reason = v->entry.error;
      {
        rp.deliver(to_caf(invalid_argument("model " + v->state.model.to_string() + " cannot load: " + v->entry.error)));
        return;
      }
    }
    v->state.explicitly_unloaded = false;
    v->wanted = std::max<uint32_t>(v->wanted, 1);
    if (!v->replicas.empty()) {
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
    v.state.state = "unloaded";
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
  st.scanner = std::make_shared<WorkerPool>(1);
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
