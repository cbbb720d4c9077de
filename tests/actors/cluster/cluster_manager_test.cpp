// The cluster manager actor on the deterministic coordinator (tests/actors/deterministic.hpp): its
// own failure handling and its chain stall check, against fake node routers, transfer peers and a
// gateway, with the actor clock moved by the test; the console's commands through the admin actor
// it spawns beside itself (actors/console/admin.hpp). The concurrent scenarios with real nodes are
// in tests/actors/process/cluster_actors_test.cpp.
#include "actors/cluster/cluster_manager.hpp"

#include <gtest/gtest.h>

#include <caf/event_based_actor.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>

#include "actors/cluster/load_planner.hpp"
#include "actors/cluster/model_repository.hpp"
#include "actors/cluster/repository_index.hpp"
#include "actors/console/admin.hpp"
#include "gpu/profiler.hpp"
#include "tests/actors/deterministic.hpp"
#include "tests/gpu/test_util.hpp"
#include "transport/checksum.hpp"

namespace ember {
namespace cluster_manager_test {

using namespace std::chrono_literals;
constexpr uint64_t MiB = 1ull << 20;
const model_key kModel{"m", 1};

/// A node router that answers load_replica as told: with a replica, an error, or not yet.
struct FakeNode {
  std::string name;
  uint64_t device_mib = 1024;
  std::optional<Error> fail_with;
  bool hold = false;                                                 // keep load requests unanswered
  std::vector<load_replica> loads;                                   // every load_replica received
  std::vector<std::pair<caf::response_promise, load_replica>> held;  // held loads (a tick answers them)
  std::vector<load_stage> stage_loads;                               // pipeline stages asked for
  std::optional<Error> fail_stage;
  std::vector<model_key> unloads;
  bool hung = false;                // its router answers no ping and no report (a hang)
  std::vector<model_key> replicas;  // what it reports: the replicas it bound
  std::vector<std::vector<peer_endpoint>> peers;  // every member list the manager sent
  node_report report;               // as it joined
  caf::actor actor;

  replica_info replica(const load_replica& req) const {
    return {req.model, name, "sim0", SourceTier::repository, "", req.blob_bytes, 1000};
  }
};

caf::behavior fake_router(caf::event_based_actor* self, FakeNode* node) {
  return {
      [=](load_replica& req) -> caf::result<replica_info> {
        node->loads.push_back(req);
        if (node->fail_with) return to_caf(*node->fail_with);
        if (!node->hold) {
          node->replicas.push_back(req.model);
          return node->replica(req);
        }
        node->held.emplace_back(self->make_response_promise(), req);
        return caf::delegated<replica_info>();
      },
      [=](tick_atom) {  // answer the held loads (a promise is delivered by the actor that holds it)
        for (auto& [rp, req] : node->held) rp.deliver(node->replica(req));
        node->held.clear();
      },
      [=](load_stage& req) -> caf::result<replica_info> {
        node->stage_loads.push_back(req);
        if (node->fail_stage) return to_caf(*node->fail_stage);
        return replica_info{stage_key_of(req.load.model, req.part.first_layer, req.part.last_layer),
                            node->name,
                            "sim0",
                            SourceTier::repository,
                            "",
                            req.part.length(),
                            1000};
      },
      [=](unload_atom, const model_key& key) {
        node->unloads.push_back(key);
        return true;
      },
      [](evict_atom, const model_key&) { return true; },
      [=](peers_atom, const std::vector<peer_endpoint>& members) { node->peers.push_back(members); },
      [=](ping_atom) -> caf::result<uint64_t> {
        if (node->hung) return caf::delegated<uint64_t>();  // never answered: the request times out
        return replicas_fingerprint(node->replicas);
      },
      [=](report_atom) -> caf::result<node_report> {
        if (node->hung) return caf::delegated<node_report>();
        node_report r = node->report;
        r.replicas = node->replicas;
        r.control = {};  // as a router reports: where its process published it is the process's
        return r;
      },
  };
}

/// A gateway that keeps the routing table as the manager publishes it.
struct Table {
  std::map<model_key, routing_entry> entries;
  std::vector<routing_update> updates;
  std::vector<std::string> replicas(const model_key& key) const {
    std::vector<std::string> out;
    auto it = entries.find(key);
    if (it != entries.end())
      for (const auto& r : it->second.replicas) out.push_back(r.node);
    return out;
  }
  ModelReadiness state(const model_key& key) const { return entries.at(key).state.state; }
  void apply(const routing_update& u) {
    updates.push_back(u);
    if (u.full) entries.clear();
    for (const auto& e : u.entries) entries[e.state.model] = e;
    for (const auto& k : u.removed) entries.erase(k);
  }
};

struct Cluster {
  testing::Deterministic d;
  WorkQueue scan_queue{{.threads = 0}};
  std::map<std::string, std::unique_ptr<FakeNode>> nodes;
  Table table;
  cluster_manager_actor manager;
  admin_actor admin;  // the console's, beside the manager (what admin_atom answers)
  std::vector<caf::actor> others;

  explicit Cluster(ClusterManagerConfig config = {}, uint64_t weights_bytes = 100 * MiB,
                   const std::vector<model_key>& models = {kModel}, AdminSettings admin_settings = {}) {
    if (config.repository.empty()) config.repository = "/nonexistent/ember-repository";
    config.data = {"127.0.0.1", 9000};
    config.admin = make_admin_factory(d.sys(), admin_settings);
    std::vector<RepositoryEntry> entries;
    for (const auto& m : models) entries.push_back(RepositoryEntry{m, "", "{}", weights_bytes, ""});
    if (!models.empty() && models[0].name != kModel.name) entries = scan_repository(config.repository);
    manager = spawn_cluster_manager(d.sys(), config, entries, std::make_shared<RepositoryIndex>(), scan_queue);
    auto gateway = d.sys().spawn([this] { return caf::behavior{[this](const routing_update& u) { table.apply(u); }}; });
    others.push_back(gateway);
    auto first = d.request<routing_update>(manager, subscribe_atom_v, caf::actor_cast<gateway_actor>(gateway));
    d.run();
    EXPECT_TRUE(first->ok());
    table.apply(first->value());
    auto console = d.request<admin_actor>(manager, admin_atom_v);
    d.run();
    EXPECT_TRUE(console->ok());
    admin = console->value();
  }
  ~Cluster() {
    for (auto& [name, n] : nodes) caf::anon_send_exit(n->actor, caf::exit_reason::user_shutdown);
    for (auto& a : others) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(manager, caf::exit_reason::user_shutdown);
    d.run();
  }
  FakeNode& join(const std::string& name, uint64_t device_mib = 1024, std::vector<model_key> holding = {}) {
    auto& n = *(nodes[name] = std::make_unique<FakeNode>());
    n.name = name;
    n.replicas = holding;  // a node that comes back with replicas reports them
    n.actor = d.sys().spawn(fake_router, &n);
    node_report r;
    r.name = name;
    r.replicas = holding;
    r.data = {name, 7000};
    r.control = {name, 7201};  // as its process publishes its router
    r.devices.push_back({"sim0", device_mib * MiB, 0});
    n.report = r;
    auto id = d.request<uint64_t>(manager, join_atom_v, r, caf::actor_cast<node_router_actor>(n.actor));
    d.run();
    EXPECT_TRUE(id->ok());
    return n;
  }
  /// The transfer peer of a chain hop: records the splices it gets.
  caf::actor peer(std::vector<chain_splice>* got) {
    auto a = d.sys().spawn([got] { return caf::behavior{[got](const chain_splice& s) { got->push_back(s); }}; });
    others.push_back(a);
    return a;
  }
};

/// A gateway relaying a repository command as the real one does (actors/gateway/gateway.cpp): it
/// subscribes, then asks the manager itself, and notes what its own routing table showed of `key`
/// when the answer reached it. The manager's answer and its routing updates reach it in the order
/// the manager sent them (one sender, one receiver), exactly as over a connection.
struct Relay {
  Table table;
  std::optional<Result<model_state>> answer;
  std::vector<std::string> replicas_at_answer;
  size_t stages_at_answer = 0;
};

template <class... Ts>
std::shared_ptr<Relay> relay(Cluster& c, const model_key& key, Ts... msg) {
  auto r = std::make_shared<Relay>();
  auto gateway = c.d.sys().spawn([r, key, manager = c.manager, msg...](caf::event_based_actor* self) {
    self->request(manager, caf::infinite, subscribe_atom_v, caf::actor_cast<gateway_actor>(self))
        .then([=](routing_update& first) {
          r->table.apply(first);
          self->request(manager, caf::infinite, msg...)
              .then(
                  [=](model_state& s) {
                    r->answer = s;
                    r->replicas_at_answer = r->table.replicas(key);
                    auto e = r->table.entries.find(key);
                    r->stages_at_answer = e == r->table.entries.end() ? 0 : e->second.pipeline.size();
                  },
                  [=](caf::error& e) { r->answer = from_caf(e); });
        });
    return caf::behavior{[r](const routing_update& u) { r->table.apply(u); }};
  });
  c.others.push_back(gateway);
  return r;
}

std::vector<std::string> names_of(const std::vector<peer_endpoint>& members) {
  std::vector<std::string> out;
  for (const auto& m : members) out.push_back(m.node + "@" + m.control.to_string());
  return out;
}

// Nodes dial each other (actors/peer_dials.hpp) where the manager says the members are published.
TEST(ClusterManager, EveryMemberIsToldWhereTheMembersArePublishedAsOneJoinsAndAsOneIsLost) {
  Cluster c;
  auto& a = c.join("a");
  ASSERT_EQ(a.peers.size(), 1u);
  EXPECT_EQ(names_of(a.peers.back()), (std::vector<std::string>{"a@a:7201"}));
  auto& b = c.join("b");
  auto& d = c.join("d");
  const std::vector<std::string> three{"a@a:7201", "b@b:7201", "d@d:7201"};
  EXPECT_EQ(names_of(a.peers.back()), three);
  EXPECT_EQ(names_of(b.peers.back()), three);
  EXPECT_EQ(names_of(d.peers.back()), three);
  caf::anon_send_exit(b.actor, caf::exit_reason::kill);
  c.d.run();
  EXPECT_EQ(names_of(a.peers.back()), (std::vector<std::string>{"a@a:7201", "d@d:7201"}));
  EXPECT_EQ(names_of(d.peers.back()), (std::vector<std::string>{"a@a:7201", "d@d:7201"}));
}

TEST(ClusterManager, ALostNodesReplicasLeaveTheRoutingTableAtOnceAndItsModelIsPlacedOnASurvivor) {
  Cluster c;
  auto& a = c.join("a");
  auto& b = c.join("b");
  auto ready = c.d.request<model_state>(c.manager, ensure_atom_v, kModel);
  c.d.run();
  ASSERT_TRUE(ready->ok()) << ready->error().message();
  EXPECT_EQ(ready->value().state, ModelReadiness::ready);
  // Premise: exactly one node holds the replica, and the table says which.
  ASSERT_EQ(a.loads.size() + b.loads.size(), 1u);
  FakeNode& holder = a.loads.empty() ? b : a;
  FakeNode& survivor = a.loads.empty() ? a : b;
  ASSERT_EQ(c.table.replicas(kModel), (std::vector<std::string>{holder.name}));

  survivor.hold = true;  // the replacement stays in flight, so the loss alone is visible
  caf::anon_send_exit(holder.actor, caf::exit_reason::kill);
  c.d.run();  // no time passes
  EXPECT_TRUE(c.table.replicas(kModel).empty());
  EXPECT_EQ(c.table.state(kModel), ModelReadiness::loading);
  ASSERT_EQ(survivor.loads.size(), 1u);
  EXPECT_EQ(survivor.loads[0].model, kModel);
  for (const auto& m : c.table.updates.back().members) EXPECT_NE(m.node, holder.name);

  caf::anon_send(survivor.actor, tick_atom_v);
  c.d.run();
  EXPECT_EQ(c.table.replicas(kModel), (std::vector<std::string>{survivor.name}));
  EXPECT_EQ(c.table.state(kModel), ModelReadiness::ready);
}

TEST(ClusterManager, ALoadThatFailsOnOneNodeIsTriedOnAnother) {
  Cluster c;
  auto& roomy = c.join("roomy", 4096);  // most free memory: placed first
  roomy.fail_with = out_of_memory("sim0: no room after all");
  auto& other = c.join("other", 1024);
  auto ready = c.d.request<model_state>(c.manager, ensure_atom_v, kModel);
  c.d.run();
  ASSERT_EQ(roomy.loads.size(), 1u);  // premise: the failing node was tried first
  ASSERT_EQ(other.loads.size(), 1u);
  ASSERT_TRUE(ready->ok()) << ready->error().message();
  EXPECT_EQ(ready->value().state, ModelReadiness::ready);
  EXPECT_EQ(ready->value().replicas, 1u);
  EXPECT_EQ(c.table.replicas(kModel), (std::vector<std::string>{"other"}));
}

TEST(ClusterManager, TwoPlacementsInFlightNeverCountTheSameFreeMemory) {
  const model_key other{"n", 1};
  Cluster c({}, 100 * MiB, {kModel, other});  // a replica needs 125 MiB with its headroom
  auto& a = c.join("a", 150);                 // the emptiest: room for one
  auto& b = c.join("b", 140);
  a.hold = b.hold = true;
  auto first = c.d.request<model_state>(c.manager, ensure_atom_v, kModel);
  c.d.run();
  ASSERT_EQ(a.loads.size(), 1u);  // premise: the emptiest node got the first load, still in flight
  auto second = c.d.request<model_state>(c.manager, ensure_atom_v, other);
  c.d.run();
  ASSERT_EQ(b.loads.size(), 1u) << "a's memory is held for the load in flight";
  EXPECT_EQ(b.loads[0].model, other);
  EXPECT_EQ(a.loads.size(), 1u);
  caf::anon_send(a.actor, tick_atom_v);
  caf::anon_send(b.actor, tick_atom_v);
  c.d.run();
  ASSERT_TRUE(first->ok() && second->ok());
  EXPECT_EQ(c.table.replicas(kModel), (std::vector<std::string>{"a"}));
  EXPECT_EQ(c.table.replicas(other), (std::vector<std::string>{"b"}));
}

TEST(ClusterManager, AFailedLoadReleasesTheMemoryItHeld) {
  const model_key other{"n", 1};
  Cluster c({}, 100 * MiB, {kModel, other});
  auto& a = c.join("a", 150);
  a.fail_with = out_of_memory("sim0: no room after all");
  auto first = c.d.request<model_state>(c.manager, ensure_atom_v, kModel);
  c.d.run();
  ASSERT_TRUE(first->done());
  ASSERT_FALSE(first->ok());  // premise: the only node failed the load
  a.fail_with.reset();
  auto second = c.d.request<model_state>(c.manager, ensure_atom_v, other);
  c.d.run();
  ASSERT_TRUE(second->ok()) << second->error().message();
  EXPECT_EQ(a.loads.size(), 2u) << "the failed load's reservation is gone, so a has room again";
  EXPECT_EQ(c.table.replicas(other), (std::vector<std::string>{"a"}));
}

TEST(ClusterManager, ALoadThatFailsEverywhereFailsTheRequestSayingWhy) {
  Cluster c;
  c.join("a").fail_with = out_of_memory("no room");
  auto answer = c.d.request<model_state>(c.manager, ensure_atom_v, kModel);
  c.d.run();
  ASSERT_TRUE(answer->done());
  ASSERT_FALSE(answer->ok());
  EXPECT_EQ(answer->error().code(), ErrorCode::unavailable);
  EXPECT_NE(answer->error().message().find("tried 1 of 1 nodes"), std::string::npos) << answer->error().message();
  EXPECT_EQ(c.table.state(kModel), ModelReadiness::unloaded);
}

TEST(ClusterManager, AStalledHopIsSplicedAfterTheStallTimeoutAndNotBefore) {
  ClusterManagerConfig config;
  config.chain_check_interval = 100ms;
  config.stall = placement::StallOptions{1000, 0.25, 8 * MiB, 0};  // transfer.stall_timeout: 1 s
  Cluster c(config);
  c.join("a").hold = true;
  c.join("b").hold = true;
  distribute_request req;
  req.model = kModel;
  req.mode = DistributeMode::chain;
  auto answer = c.d.request<distribute_result>(c.manager, distribute_atom_v, req);
  c.d.run();
  // Premise: one chain, repository -> first -> second, under one transfer.
  const auto& la = c.nodes["a"]->loads;
  const auto& lb = c.nodes["b"]->loads;
  ASSERT_EQ(la.size(), 1u);
  ASSERT_EQ(lb.size(), 1u);
  const bool a_first = la[0].sources.at(0).name == kRepositoryName;
  const load_replica& first = a_first ? la[0] : lb[0];
  const load_replica& second = a_first ? lb[0] : la[0];
  ASSERT_EQ(first.sources.at(0).name, kRepositoryName);
  ASSERT_EQ(second.sources.at(0).name, a_first ? "a" : "b");
  ASSERT_NE(first.transfer_id, 0u);
  ASSERT_EQ(first.transfer_id, second.transfer_id);
  const std::string first_name = a_first ? "a" : "b";
  const std::string second_name = a_first ? "b" : "a";
  const uint64_t t = first.transfer_id;

  std::vector<chain_splice> first_got, second_got;
  const caf::actor first_peer = c.peer(&first_got);
  const caf::actor second_peer = c.peer(&second_got);
  auto report = [&](const std::string& hop, const std::string& upstream, uint64_t offset, const caf::actor& peer) {
    caf::anon_send(c.manager,
                   chain_progress{t, hop, upstream, offset, 100 * MiB, placement::HopState::receiving, "", peer});
  };
  // The first hop reports once and then stops moving while the repository holds everything; the
  // second keeps reporting behind it.
  report(first_name, kRepositoryName, 10 * MiB, first_peer);
  c.d.run();  // delivered now, at the transfer's start
  for (int step = 1; step <= 9; ++step) {
    report(second_name, first_name, static_cast<uint64_t>(step) * MiB, second_peer);
    c.d.advance(100ms);
  }
  EXPECT_TRUE(second_got.empty()) << "spliced before the stall timeout";
  c.d.advance(100ms);  // 1 s since the first hop's last progress
  ASSERT_EQ(second_got.size(), 1u);
  EXPECT_EQ(second_got[0].transfer_id, t);
  EXPECT_EQ(second_got[0].upstream.kind, SourceTier::repository);
  EXPECT_EQ(second_got[0].upstream.endpoint.port, 9000);
  EXPECT_TRUE(first_got.empty());
  EXPECT_FALSE(answer->done());  // the hops are still loading
  // The console's `transfers`: both hops of the chain, the spliced one re-pointed at the repository.
  auto hops = c.d.request<std::vector<hop_progress>>(c.admin, admin_auth{"", "x"}, transfers_atom_v);
  c.d.run();
  ASSERT_TRUE(hops->ok());
  ASSERT_EQ(hops->value().size(), 2u);
  for (const auto& h : hops->value()) {
    EXPECT_EQ(h.transfer_id, t);
    EXPECT_EQ(h.model, "m/1");
    EXPECT_EQ(h.blob_bytes, 100 * MiB);
    if (h.hop == first_name) {
      EXPECT_EQ(h.offset, 10 * MiB);
    }
    if (h.hop == second_name) {
      EXPECT_EQ(h.offset, 9 * MiB);
    }
  }
}

/// What the tests of decisions kept across a restart share: a repository holding a tiny mlp, a
/// state folder, a manager config over the repository, the admin token. Bound by name in each test.
struct KeptState {
  gpu::testing::TempDir repo, state;
  model_key mlp{"mlp", 1};
  ClusterManagerConfig config;
  AdminSettings admin{"s3cret", true};

  KeptState() {
    gpu::testing::tiny_model("mlp", repo / "mlp/1");
    config.repository = repo.path();
  }
};

// manager.state_dir: an explicit load and an SLO set at run time are on disk before they are
// acknowledged, and a manager started again over the same folder comes back with them: the load's
// replicas placed as the nodes join, the SLO set.
TEST(ClusterManager, DecisionsKeptInTheStateFolderSurviveARestart) {
  KeptState folder;
  auto& [repo, state, mlp, config, admin] = folder;
  {
    auto opened = DecisionLog::open(state / "manager");
    ASSERT_TRUE(opened.ok()) << opened.error().message();
    config.decisions = std::move(*opened);
    Cluster c(config, 0, {mlp}, admin);
    c.join("a");
    c.join("b");
    auto load = c.d.request<model_state>(c.manager, load_atom_v, model_command{mlp, 2});
    auto slo = c.d.request<std::vector<model_state>>(c.admin, admin_auth{"s3cret", "tester@host"}, slo_atom_v,
                                                     slo_command{mlp, slo_setting{400'000, 0.95}});
    c.d.run();
    ASSERT_TRUE(load->ok()) << load->error().message();
    ASSERT_TRUE(slo->ok()) << slo->error().message();
    EXPECT_EQ(c.table.replicas(mlp).size(), 2u);
  }
  // The manager's process is gone; a new one opens the folder.
  auto reopened = DecisionLog::open(state / "manager");
  ASSERT_TRUE(reopened.ok()) << reopened.error().message();
  const ModelIntent& kept = (*reopened)->state().models().at(mlp);
  EXPECT_EQ(kept.load, std::optional<uint32_t>(2));
  ASSERT_TRUE(kept.slo.has_value());
  EXPECT_EQ(kept.slo->deadline_us, 400'000u);
  config.decisions = std::move(*reopened);
  Cluster c(config, 0, {mlp}, admin);
  c.join("a");
  c.join("b");
  c.d.run();
  auto nodes = c.table.replicas(mlp);
  std::sort(nodes.begin(), nodes.end());
  EXPECT_EQ(nodes, (std::vector<std::string>{"a", "b"})) << "the load of two replicas was kept";
  auto listed = c.d.request<std::vector<model_state>>(c.manager, index_atom_v);
  c.d.run();
  ASSERT_TRUE(listed->ok());
  bool found = false;
  for (const auto& m : listed->value()) {
    if (m.model != mlp) continue;
    found = true;
    EXPECT_EQ(m.slo.deadline_us, 400'000u) << "the SLO set at run time was kept";
  }
  EXPECT_TRUE(found);
  // An unload is kept too: the next manager places nothing.
  auto unload = c.d.request<model_state>(c.manager, unload_atom_v, model_command{mlp, 0});
  c.d.run();
  ASSERT_TRUE(unload->ok());
  auto last = DecisionLog::open(state / "manager");
  ASSERT_TRUE(last.ok());
  EXPECT_FALSE((*last)->state().models().at(mlp).load.has_value());
}

// A drain is kept too: a manager started over the folder drains the node again as it rejoins, so
// nothing is placed there; the drain ends (and is forgotten) when the node leaves.
TEST(ClusterManager, ADrainKeptInTheStateFolderHoldsAfterARestartUntilTheNodeLeaves) {
  KeptState folder;
  auto& [repo, state, mlp, config, admin] = folder;
  {
    config.decisions = std::move(*DecisionLog::open(state / "manager"));
    Cluster c(config, 0, {mlp}, admin);
    c.join("a");
    c.join("b");
    auto drained = c.d.request<std::vector<model_key>>(c.admin, admin_auth{"s3cret", "x"}, drain_atom_v,
                                                       std::string("a"));
    auto load = c.d.request<model_state>(c.manager, load_atom_v, model_command{mlp, 1});
    c.d.run();
    c.d.advance(5s);
    ASSERT_TRUE(drained->ok()) << drained->error().message();
    ASSERT_TRUE(load->ok()) << load->error().message();
    EXPECT_EQ(c.table.replicas(mlp), (std::vector<std::string>{"b"}));
  }
  auto reopened = DecisionLog::open(state / "manager");
  ASSERT_TRUE(reopened.ok()) << reopened.error().message();
  EXPECT_TRUE((*reopened)->state().drained("a"));
  config.decisions = std::move(*reopened);
  Cluster c(config, 0, {mlp}, admin);
  c.join("a");  // first: without the kept drain, the kept load would be placed here
  c.d.run();
  EXPECT_TRUE(c.table.replicas(mlp).empty()) << "a drained node got a replica";
  c.join("b");
  c.d.run();
  EXPECT_EQ(c.table.replicas(mlp), (std::vector<std::string>{"b"}));
  caf::anon_send_exit(c.nodes["a"]->actor, caf::exit_reason::user_shutdown);
  c.d.run();
  auto last = DecisionLog::open(state / "manager");
  ASSERT_TRUE(last.ok());
  EXPECT_FALSE((*last)->state().drained("a")) << "the drain ended with its node's membership";
}

// A drained node whose replica was not yet unbound when the manager went comes back first, before any
// node with room: its drain cannot finish then, and does once another node joins.
TEST(ClusterManager, ADrainedNodeThatRejoinsFirstWithAReplicaGivesItUpOnceAnotherNodeJoins) {
  KeptState folder;
  auto& [repo, state, mlp, config, admin] = folder;
  config.autoscaler.enabled = false;
  {
    config.decisions = std::move(*DecisionLog::open(state / "manager"));
    Cluster c(config, 0, {mlp}, admin);
    c.join("a");
    c.join("b");
    auto load = c.d.request<model_state>(c.manager, load_atom_v, model_command{mlp, 1});
    auto drained = c.d.request<std::vector<model_key>>(c.admin, admin_auth{"s3cret", "x"}, drain_atom_v,
                                                       std::string("a"));
    c.d.run();
    c.d.advance(5s);
    ASSERT_TRUE(load->ok()) << load->error().message();
    ASSERT_TRUE(drained->ok()) << drained->error().message();
  }
  config.decisions = std::move(*DecisionLog::open(state / "manager"));
  Cluster c(config, 0, {mlp}, admin);
  auto& a = c.join("a", 1024, {mlp});  // back first, still holding a replica (its unbind never came)
  c.d.run();
  EXPECT_EQ(c.table.replicas(mlp), (std::vector<std::string>{"a"})) << "its only replica serves meanwhile";
  c.join("b");
  c.d.run();
  for (int i = 0; i < 50; ++i) c.d.advance(100ms);
  EXPECT_EQ(c.table.replicas(mlp), (std::vector<std::string>{"b"}));
  EXPECT_EQ(a.unloads, (std::vector<model_key>{mlp})) << "the drained node's replica was unbound";
}

TEST(ClusterManager, ALoadRescansTheModelsFolderOnTheScanQueueBeforeItAnswers) {
  Cluster c;  // the repository folder does not exist: the rescan finds no model
  model_command cmd;
  cmd.model = kModel;
  auto answer = c.d.request<model_state>(c.manager, load_atom_v, cmd);
  c.d.run();
  ASSERT_TRUE(answer->done());
  ASSERT_FALSE(answer->ok());
  EXPECT_EQ(answer->error().code(), ErrorCode::not_found);
  EXPECT_EQ(answer->error().message(), "the repository has no model 'm' version 1");
  EXPECT_TRUE(c.table.entries.empty());  // the version that vanished left the table
  ASSERT_FALSE(c.table.updates.empty());
  EXPECT_EQ(c.table.updates.back().removed, (std::vector<model_key>{kModel}));
}

// integration.http_api saw `POST .../load` answered 200 and the next `GET .../ready` say 400 "no
// warm replica (loading)": the manager answered the waiters before it sent the routing update that
// carries the replica, so the gateway relayed "ready" while its own view still said loading.
TEST(ClusterManager, AColdStartIsAnsweredOnlyAfterTheRoutingUpdateThatCarriesItsReplica) {
  Cluster c;
  c.join("a");
  auto r = relay(c, kModel, ensure_atom_v, kModel);
  c.d.run();
  ASSERT_TRUE(r->answer && r->answer->ok());
  EXPECT_EQ(r->answer->value().state, ModelReadiness::ready);
  EXPECT_EQ(r->replicas_at_answer, (std::vector<std::string>{"a"}))
      << "the gateway heard \"ready\" before its routing table had the replica";
}

TEST(ClusterManager, ALoadIsAnsweredOnlyAfterTheRoutingUpdateThatCarriesItsReplica) {
  gpu::testing::TempDir repo;
  gpu::testing::tiny_model("mlp", repo / "mlp/1");
  ClusterManagerConfig config;
  config.repository = repo.path();
  const model_key mlp{"mlp", 1};
  Cluster c(config, 0, {mlp});
  c.join("a");
  model_command cmd;
  cmd.model = mlp;
  auto r = relay(c, mlp, load_atom_v, cmd);
  c.d.run();
  ASSERT_TRUE(r->answer && r->answer->ok()) << (r->answer ? r->answer->error().message() : "no answer");
  EXPECT_EQ(r->replicas_at_answer, (std::vector<std::string>{"a"}))
      << "the gateway heard the load's answer before its routing table had the replica";
}

// Gateways dial a node's router where its process published it (node_report::control), which only
// the join says: a node dropped for silence and taken back with what its router reports now keeps
// that endpoint in the routing table's members (else a standalone gateway reaches it only through
// the manager's process, and loses what is in flight there when the manager restarts).
TEST(ClusterManager, ANodeTakenBackAfterSilenceKeepsWhereItsRouterIsPublished) {
  ClusterManagerConfig config;
  config.heartbeat = 100ms;
  config.node_timeout = 500ms;
  Cluster c(config);
  auto& a = c.join("a");
  auto control_of = [&](const std::string& name) -> std::optional<HostPort> {
    for (const auto& m : c.table.updates.back().members)
      if (m.node == name) return m.control;
    return std::nullopt;
  };
  ASSERT_EQ(control_of("a"), (HostPort{"a", 7201}));
  a.hung = true;
  for (int i = 0; i < 8; ++i) c.d.advance(100ms);
  ASSERT_EQ(control_of("a"), std::nullopt) << "the premise: the silent node was dropped";
  a.hung = false;  // it answers again: taken back with what its router reports
  for (int i = 0; i < 8; ++i) c.d.advance(100ms);
  ASSERT_TRUE(control_of("a").has_value()) << "the premise: the node was taken back";
  EXPECT_EQ(control_of("a"), (HostPort{"a", 7201})) << "taken back without its published endpoint";
}

TEST(ClusterManager, TheNodesAnswerListsTheReplicasTheManagerKnowsOnEachNode) {
  Cluster c;
  c.join("a");
  auto ready = c.d.request<model_state>(c.manager, ensure_atom_v, kModel);
  c.d.run();
  ASSERT_TRUE(ready->ok());
  auto nodes = c.d.request<std::vector<node_report>>(c.manager, nodes_atom_v);
  c.d.run();
  ASSERT_TRUE(nodes->ok());
  ASSERT_EQ(nodes->value().size(), 1u);
  EXPECT_EQ(nodes->value()[0].replicas, (std::vector<model_key>{kModel}));
  EXPECT_EQ(nodes->value()[0].cached, (std::vector<model_key>{kModel}));
}

TEST(ClusterManager, ConsoleCommandsNeedTheAdminTokenToChangeAndReadOpenlyWhenConfigured) {
  Cluster c({}, 100 * MiB, {kModel}, AdminSettings{"s3cret", true});
  c.join("a");
  auto load = [&](const std::string& token) {
    auto answer =
        c.d.request<model_state>(c.admin, admin_auth{token, "tester@host"}, load_atom_v, model_command{kModel, 1});
    c.d.run();
    return answer;
  };
  for (const std::string token : {"", "s3cres", "s3cret-and-more"}) {
    auto refused = load(token);
    ASSERT_TRUE(refused->done());
    ASSERT_FALSE(refused->ok()) << "'" << token << "'";
    EXPECT_EQ(refused->error().code(), ErrorCode::permission_denied);
  }
  EXPECT_TRUE(c.nodes["a"]->loads.empty());
  // The right token: done (an unload here: a load would rescan a repository this test has not).
  auto done =
      c.d.request<model_state>(c.admin, admin_auth{"s3cret", "tester@host"}, unload_atom_v, model_command{kModel, 0});
  c.d.run();
  ASSERT_TRUE(done->ok()) << done->error().to_string();
  EXPECT_TRUE(done->value().explicitly_unloaded);
  // Reads: open by default.
  auto nodes = c.d.request<std::vector<node_report>>(c.admin, admin_auth{"", "tester@host"}, nodes_atom_v);
  c.d.run();
  ASSERT_TRUE(nodes->ok());
  EXPECT_EQ(nodes->value().at(0).name, "a");
}

TEST(ClusterManager, WithoutATokenTheConsoleMayOnlyReadAndClosedReadsNeedOne) {
  Cluster c({}, 100 * MiB, {kModel}, AdminSettings{"", false});  // no admin token configured
  auto load = c.d.request<model_state>(c.admin, admin_auth{"", "x"}, load_atom_v, model_command{kModel, 1});
  auto metrics = c.d.request<metrics_snapshot>(c.admin, admin_auth{"", "x"}, metrics_atom_v);
  c.d.run();
  ASSERT_FALSE(load->ok());
  EXPECT_NE(load->error().message().find("no admin token is configured"), std::string::npos);
  ASSERT_FALSE(metrics->ok());
  EXPECT_EQ(metrics->error().code(), ErrorCode::permission_denied);
}

// The console's own commands reach the manager through its admin actor only: sent to the manager
// itself, without the token's check, they are refused and change nothing.
TEST(ClusterManager, TheConsolesCommandsSentToTheManagerItselfAreRefused) {
  Cluster c({}, 100 * MiB, {kModel}, AdminSettings{"t", true});
  c.join("a");
  auto drain = c.d.request<std::vector<model_key>>(c.manager, drain_atom_v, std::string("a"));
  auto hops = c.d.request<std::vector<hop_progress>>(c.manager, transfers_atom_v);
  auto level = c.d.request<uint32_t>(c.manager, log_level_atom_v, std::string("info"));
  c.d.run();
  ASSERT_TRUE(drain->done() && hops->done() && level->done());
  ASSERT_FALSE(drain->ok() || hops->ok() || level->ok());
  EXPECT_EQ(drain->error().code(), ErrorCode::permission_denied);
  EXPECT_EQ(hops->error().code(), ErrorCode::permission_denied);
  EXPECT_EQ(level->error().code(), ErrorCode::permission_denied);
  // Through the admin actor, with the token, the same drain runs.
  auto drained = c.d.request<std::vector<model_key>>(c.admin, admin_auth{"t", "x"}, drain_atom_v, std::string("a"));
  c.d.run();
  c.d.advance(5s);
  ASSERT_TRUE(drained->done());
  EXPECT_TRUE(drained->ok()) << drained->error().to_string();
}

TEST(ClusterManager, ADrainedNodeGetsNoReplicaAndItsReplicasMoveElsewhereFirst) {
  Cluster c({}, 100 * MiB, {kModel}, AdminSettings{"t", true});
  c.join("a");
  auto ready = c.d.request<model_state>(c.manager, ensure_atom_v, kModel);
  c.d.run();
  ASSERT_TRUE(ready->ok());
  ASSERT_EQ(c.table.replicas(kModel), (std::vector<std::string>{"a"}));
  c.join("b");
  auto unknown = c.d.request<std::vector<model_key>>(c.admin, admin_auth{"t", "x"}, drain_atom_v, std::string("z"));
  auto drained = c.d.request<std::vector<model_key>>(c.admin, admin_auth{"t", "x"}, drain_atom_v, std::string("a"));
  c.d.run();
  ASSERT_FALSE(unknown->ok());
  EXPECT_EQ(unknown->error().code(), ErrorCode::not_found);
  // a held the only replica: b got one first, then a's left the table; a unbinds after the
  // gateways had time to move on, and only then does the drain answer.
  EXPECT_EQ(c.table.replicas(kModel), (std::vector<std::string>{"b"}));
  EXPECT_EQ(c.nodes["b"]->loads.size(), 1u);
  EXPECT_FALSE(drained->done());
  c.d.advance(5s);
  ASSERT_TRUE(drained->done());
  ASSERT_TRUE(drained->ok()) << drained->error().to_string();
  EXPECT_EQ(drained->value(), (std::vector<model_key>{kModel}));
  EXPECT_EQ(c.nodes["a"]->unloads, (std::vector<model_key>{kModel}));
  // Nothing is placed on a drained node any more; the nodes' answer says it is draining.
  auto nodes = c.d.request<std::vector<node_report>>(c.manager, nodes_atom_v);
  c.d.run();
  for (const auto& n : nodes->value()) EXPECT_EQ(n.draining, n.name == "a") << n.name;
}

/// A manager that pings every 100 ms and drops a node silent for 1 s; no autoscaler.
ClusterManagerConfig silent_nodes_noticed() {
  ClusterManagerConfig config;
  config.heartbeat = 100ms;
  config.node_timeout = 1s;
  config.autoscaler.enabled = false;
  return config;
}

TEST(ClusterManager, ANodeThatAnswersNoHeartbeatIsLostAndTakenBackWithItsReplicasWhenItAnswers) {
  Cluster c(silent_nodes_noticed());
  auto& a = c.join("a");
  c.join("b").hold = true;  // a re-placement stays in flight
  auto ready = c.d.request<model_state>(c.manager, ensure_atom_v, kModel);
  c.d.run();
  ASSERT_TRUE(ready->ok());
  ASSERT_EQ(c.table.replicas(kModel), (std::vector<std::string>{"a"}));
  for (int i = 0; i < 20; ++i) c.d.advance(100ms);  // heartbeats answered: nothing changes
  EXPECT_EQ(c.table.replicas(kModel), (std::vector<std::string>{"a"}));

  a.hung = true;
  for (int i = 0; i < 12; ++i) c.d.advance(100ms);
  EXPECT_TRUE(c.table.replicas(kModel).empty()) << "a answered nothing for node_timeout: lost";
  for (const auto& m : c.table.updates.back().members) EXPECT_NE(m.node, "a");
  EXPECT_EQ(c.nodes["b"]->loads.size(), 1u) << "its model is re-placed on a survivor";

  a.hung = false;  // it answers again (once the ping out timed out): taken back, with its replica
  for (int i = 0; i < 12; ++i) c.d.advance(100ms);
  EXPECT_EQ(c.table.replicas(kModel), (std::vector<std::string>{"a"}));
  bool member = false;
  for (const auto& m : c.table.updates.back().members) member |= m.node == "a";
  EXPECT_TRUE(member);
}

// A node given up on (silent) whose model was placed again elsewhere comes back with its replica: the
// version holds two and wants one, so one retires (out of the table at once, unbound after the
// settle time). Without the autoscaler nothing else would ever reconcile them.
TEST(ClusterManager, AReplicaPlacedTwiceIsRetiredAndUnboundWhenItsNodeComesBack) {
  Cluster c(silent_nodes_noticed());
  auto& a = c.join("a");
  auto ready = c.d.request<model_state>(c.manager, ensure_atom_v, kModel);
  c.d.run();
  ASSERT_TRUE(ready->ok());
  ASSERT_EQ(c.table.replicas(kModel), (std::vector<std::string>{"a"}));
  auto& b = c.join("b");
  a.hung = true;
  for (int i = 0; i < 12; ++i) c.d.advance(100ms);
  // Re-placed on b while a is silent: the version wants one (ModelRegistry::want_replacements).
  ASSERT_EQ(c.table.replicas(kModel), (std::vector<std::string>{"b"}));
  a.hung = false;  // back, with its replica: two, one wanted
  for (int i = 0; i < 12; ++i) c.d.advance(100ms);
  EXPECT_EQ(c.table.replicas(kModel).size(), 1u) << "the excess left the routing table at once";
  EXPECT_TRUE(a.unloads.empty() && b.unloads.empty()) << "not unbound before gateways moved on";
  for (int i = 0; i < 40; ++i) c.d.advance(100ms);  // the settle time (two autoscale intervals)
  EXPECT_EQ(a.unloads.size() + b.unloads.size(), 1u) << "one replica unbound";
  EXPECT_EQ(c.table.replicas(kModel).size(), 1u);
  EXPECT_EQ(c.table.state(kModel), ModelReadiness::ready);
}

TEST(ClusterManager, AGatewayWithAnOldTableIsAnsweredOnlyOnceTheRecoveryWindowHasPassed) {
  ClusterManagerConfig config;
  config.recovery_window = 2s;
  Cluster c(config);
  auto gateway = c.d.sys().spawn([] { return caf::behavior{[](const routing_update&) {}}; });
  c.others.push_back(gateway);
  auto held =
      c.d.request<routing_update>(c.manager, subscribe_atom_v, caf::actor_cast<gateway_actor>(gateway), uint64_t{41});
  auto fresh = c.d.request<routing_update>(c.manager, subscribe_atom_v, caf::actor_cast<gateway_actor>(gateway));
  c.d.run();
  EXPECT_TRUE(fresh->ok()) << "a gateway without a table is answered at once";
  EXPECT_FALSE(held->done());
  c.join("a");  // a node rejoins meanwhile
  c.d.advance(1s);
  EXPECT_FALSE(held->done());
  c.d.advance(1s);
  ASSERT_TRUE(held->ok());
  EXPECT_TRUE(held->value().full);
  ASSERT_EQ(held->value().members.size(), 1u);
  EXPECT_EQ(held->value().members[0].node, "a");
  auto late =
      c.d.request<routing_update>(c.manager, subscribe_atom_v, caf::actor_cast<gateway_actor>(gateway), uint64_t{41});
  c.d.run();
  EXPECT_TRUE(late->ok()) << "the window is over";
}

// -- partitioned cold starts ------------------------------------------------------------------

const model_key kGpt{"gpt2", 1};

/// A repository holding a tiny GPT-2 with its profile.json, and a manager whose plan assumes slow
/// links (1 MB/s), so that cutting the model pays.
struct Partitioned {
  gpu::testing::TempDir repo;
  std::unique_ptr<Cluster> c;
  /// `autoscale`: the autoscaler runs (a tick a second, scale-downs at once) above the load's floor.
  explicit Partitioned(bool autoscale = false) {
    auto model = gpu::testing::tiny_model("gpt2", repo / "gpt2/1");
    auto device = gpu::testing::sim_device();
    auto hash = [](const uint8_t* data, uint64_t bytes) {
      return transport::to_hex(transport::Sha256::of(data, bytes));
    };
    auto profile = gpu::measure_profile(model, *device, {1}, 8, hash);
    EXPECT_TRUE(profile.ok());
    EXPECT_TRUE(gpu::write_profile(repo / "gpt2/1", *profile).ok());
    ClusterManagerConfig config;
    config.repository = repo.path();
    config.autoscaler.enabled = autoscale;  // else the replica count comes from the load command
    config.autoscaler.interval_us = 1'000'000;
    config.autoscale.downscale_delay_us = 0;
    config.autoscaler.partition_bandwidth = 1e6;
    c = std::make_unique<Cluster>(config, 0, std::vector<model_key>{kGpt});
  }
  std::shared_ptr<testing::Answer<model_state>> load(uint32_t replicas) {
    model_command cmd;
    cmd.model = kGpt;
    cmd.replicas = replicas;
    return c->d.request<model_state>(c->manager, load_atom_v, cmd);
  }
  const routing_entry& entry() { return c->table.entries.at(kGpt); }
  std::vector<std::string> pipeline_nodes() {
    std::vector<std::string> out;
    for (const auto& h : entry().pipeline) out.push_back(h.node);
    return out;
  }
};

TEST(PartitionedColdStart, AScaleUpOfAModelNoNodeHoldsServesThroughStagesThenBecomesReplicasInOneUpdate) {
  Partitioned p;
  auto& c = *p.c;
  for (const char* n : {"a", "b", "c"}) c.join(n).hold = true;  // completions wait for a tick
  auto answer = p.load(3);
  c.d.run();
  // Three stages, one per node, cutting the model into consecutive ranges that cover it.
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  for (const char* n : {"a", "b", "c"}) {
    ASSERT_EQ(c.nodes[n]->stage_loads.size(), 1u) << n;
    const blob_part& part = c.nodes[n]->stage_loads[0].part;
    ranges.emplace_back(part.first_layer, part.last_layer);
    EXPECT_EQ(part.layer_bytes.size(), part.last_layer - part.first_layer);
    EXPECT_EQ(c.nodes[n]->stage_loads[0].load.sources.at(0).kind, SourceTier::repository);
  }
  std::sort(ranges.begin(), ranges.end());
  EXPECT_EQ(ranges.front().first, 0u);
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_EQ(ranges[i].first, ranges[i - 1].second);
  // Served through the pipeline as soon as every stage is bound: the load answers, the table
  // routes to the stages, and each member fetches the whole model in the background.
  ASSERT_TRUE(answer->ok()) << answer->error().to_string();
  EXPECT_EQ(p.entry().pipeline.size(), 3u);
  EXPECT_TRUE(p.entry().replicas.empty());
  for (const char* n : {"a", "b", "c"}) ASSERT_EQ(c.nodes[n]->held.size(), 1u) << n << ": no completion load";

  // Two members complete: nothing changes for the gateways yet.
  const size_t updates = c.table.updates.size();
  for (const char* n : {"a", "b"}) caf::anon_send(c.nodes[n]->actor, tick_atom_v);
  c.d.run();
  EXPECT_EQ(p.entry().pipeline.size(), 3u);
  EXPECT_TRUE(p.entry().replicas.empty());
  // The last completes: one update moves the members into the replicas and drops the pipeline.
  caf::anon_send(c.nodes["c"]->actor, tick_atom_v);
  c.d.run();
  EXPECT_EQ(p.entry().replicas.size(), 3u);
  EXPECT_TRUE(p.entry().pipeline.empty());
  EXPECT_EQ(p.entry().state.state, ModelReadiness::ready);
  size_t with_replicas = 0;
  for (size_t i = updates; i < c.table.updates.size(); ++i)
    for (const auto& e : c.table.updates[i].entries) with_replicas += e.state.model == kGpt && !e.replicas.empty();
  EXPECT_EQ(with_replicas, 1u) << "the switch-over took more than one routing update";
  // The stages leave their nodes after the grace period, not before.
  for (const char* n : {"a", "b", "c"}) EXPECT_TRUE(c.nodes[n]->unloads.empty()) << n;
  c.d.advance(5s);
  for (const char* n : {"a", "b", "c"}) {
    const blob_part& part = c.nodes[n]->stage_loads[0].part;
    EXPECT_EQ(c.nodes[n]->unloads, (std::vector<model_key>{stage_key_of(kGpt, part.first_layer, part.last_layer)}))
        << n;
  }
}

TEST(PartitionedColdStart, ALoadServedThroughStagesIsAnsweredOnlyAfterTheUpdateThatRoutesToThem) {
  Partitioned p;
  auto& c = *p.c;
  for (const char* n : {"a", "b", "c"}) c.join(n).hold = true;  // completions wait: only the stages serve
  model_command cmd;
  cmd.model = kGpt;
  cmd.replicas = 3;
  auto r = relay(c, kGpt, load_atom_v, cmd);
  c.d.run();
  ASSERT_TRUE(r->answer && r->answer->ok()) << (r->answer ? r->answer->error().message() : "no answer");
  ASSERT_EQ(p.entry().pipeline.size(), 3u) << "the premise: a pipeline serves, no replica yet";
  EXPECT_EQ(r->stages_at_answer, 3u) << "the gateway heard the load's answer before its table had the pipeline";
}

TEST(PartitionedColdStart, AStageThatFailsGivesThePipelineUpForWholeReplicas) {
  Partitioned p;
  auto& c = *p.c;
  for (const char* n : {"a", "b", "c"}) c.join(n);
  c.nodes["b"]->fail_stage = unavailable("b: no room after all");
  auto answer = p.load(3);
  c.d.run();
  ASSERT_TRUE(answer->ok()) << answer->error().to_string();
  // No pipeline; whole replicas instead (b's stage failure counted against b for one round only:
  // once a replica is ready the third is tried there again); every bound stage unloaded.
  EXPECT_TRUE(p.entry().pipeline.empty());
  auto replicas = c.table.replicas(kGpt);
  std::sort(replicas.begin(), replicas.end());
  EXPECT_EQ(replicas, (std::vector<std::string>{"a", "b", "c"}));
  for (const char* n : {"a", "c"}) {
    ASSERT_EQ(c.nodes[n]->stage_loads.size(), 1u);
    const blob_part& part = c.nodes[n]->stage_loads[0].part;
    EXPECT_EQ(c.nodes[n]->unloads, (std::vector<model_key>{stage_key_of(kGpt, part.first_layer, part.last_layer)}))
        << n;
    EXPECT_EQ(c.nodes[n]->loads.size(), 1u) << n;  // then a whole replica
  }
  EXPECT_TRUE(c.nodes["b"]->unloads.empty()) << "b bound no stage";
}

TEST(PartitionedColdStart, AMemberLostWhileThePipelineServesDissolvesItAndTheOthersCompleteOnTheirOwn) {
  Partitioned p;
  auto& c = *p.c;
  for (const char* n : {"a", "b", "c"}) c.join(n).hold = true;
  auto answer = p.load(3);
  c.d.run();
  ASSERT_TRUE(answer->ok());
  ASSERT_EQ(p.entry().pipeline.size(), 3u);
  caf::anon_send(c.nodes["a"]->actor, tick_atom_v);  // a completes before b is lost
  c.d.run();
  caf::anon_send_exit(c.nodes["b"]->actor, caf::exit_reason::kill);
  c.d.run();
  // The pipeline left the table at once; a is a replica now; c becomes one when it completes.
  EXPECT_TRUE(p.entry().pipeline.empty());
  EXPECT_EQ(c.table.replicas(kGpt), (std::vector<std::string>{"a"}));
  caf::anon_send(c.nodes["c"]->actor, tick_atom_v);
  c.d.run();
  auto replicas = c.table.replicas(kGpt);
  std::sort(replicas.begin(), replicas.end());
  EXPECT_EQ(replicas, (std::vector<std::string>{"a", "c"}));
  for (const char* n : {"a", "c"}) EXPECT_EQ(c.nodes[n]->unloads.size(), 1u) << n << ": its stage stayed bound";
}

TEST(PartitionedColdStart, AScaleDownRemovesTheReplicasAPipelineCompletedIntoFirst) {
  Partitioned p(/*autoscale=*/true);
  auto& c = *p.c;
  // a's device is the smallest: the pipeline goes to b and c, the later whole replica to a, which
  // the usual order (least busy, most replicas on the node, then the first node) would retire.
  c.join("a", 512);
  for (const char* n : {"b", "c"}) c.join(n).hold = true;
  auto two = p.load(2);
  c.d.run();
  ASSERT_TRUE(two->ok()) << two->error().to_string();
  auto members = p.pipeline_nodes();
  std::sort(members.begin(), members.end());
  ASSERT_EQ(members, (std::vector<std::string>{"b", "c"}));
  for (const char* n : {"b", "c"}) caf::anon_send(c.nodes[n]->actor, tick_atom_v);  // both complete
  c.d.run();
  auto three = p.load(3);  // the bytes are cached now: a whole replica on a
  c.d.run();
  ASSERT_TRUE(three->ok()) << three->error().to_string();
  auto replicas = c.table.replicas(kGpt);
  std::sort(replicas.begin(), replicas.end());
  ASSERT_EQ(replicas, (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_TRUE(c.nodes["a"]->stage_loads.empty());
  // The floor falls to one: the two partitioned replicas go, the whole one stays.
  auto one = p.load(1);
  c.d.run();
  ASSERT_TRUE(one->ok());
  for (int s = 0; s < 4; ++s) c.d.advance(1s);
  EXPECT_EQ(c.table.replicas(kGpt), (std::vector<std::string>{"a"}));
}

TEST(PartitionedColdStart, AModelWithoutAProfileOrOneReplicaLoadsWhole) {
  Partitioned p;
  auto& c = *p.c;
  for (const char* n : {"a", "b"}) c.join(n);
  auto one = p.load(1);  // one replica: nothing to partition over
  c.d.run();
  ASSERT_TRUE(one->ok());
  EXPECT_TRUE(c.nodes["a"]->stage_loads.empty() && c.nodes["b"]->stage_loads.empty());
  // Two replicas, but a node holds the bytes now: a plain scale-up is as quick.
  auto two = p.load(2);
  c.d.run();
  ASSERT_TRUE(two->ok());
  EXPECT_TRUE(c.nodes["a"]->stage_loads.empty() && c.nodes["b"]->stage_loads.empty());
  EXPECT_EQ(c.table.replicas(kGpt).size(), 2u);
}

// -- workflows --------------------------------------------------------------------------------

TEST(ClusterManager, AWholeRescanPublishesTheRepositorysWorkflowsWhenTheyChangeAndSubscribersGetThem) {
  gpu::testing::TempDir repo;
  gpu::testing::tiny_model("mlp", repo / "mlp/1");
  ClusterManagerConfig config;
  config.repository = repo.path();
  Cluster c(config, 0, {{"mlp", 1}});
  ASSERT_TRUE(c.table.updates.back().workflows_set) << "a subscriber's full table carries the workflows";
  EXPECT_TRUE(c.table.updates.back().workflows.empty());
  auto write = [&](const std::string& text) {
    std::filesystem::create_directories(repo / "flow");
    std::ofstream(repo / "flow/workflow.json") << text;
  };
  auto rescan = [&] {
    auto index = c.d.request<std::vector<model_state>>(c.manager, index_atom_v);
    c.d.run();
    ASSERT_TRUE(index->ok());
  };
  write(R"({"inputs": ["x"], "steps": [{"name": "a", "model": "mlp", "inputs": {"input": "x"}}],
            "outputs": {"y": "a.fc3"}})");
  size_t before = c.table.updates.size();
  rescan();
  ASSERT_EQ(c.table.updates.size(), before + 1);
  const routing_update& added = c.table.updates.back();
  ASSERT_TRUE(added.workflows_set);
  ASSERT_EQ(added.workflows.size(), 1u);
  EXPECT_EQ(added.workflows[0].name, "flow");
  EXPECT_TRUE(added.workflows[0].error.empty()) << added.workflows[0].error;

  before = c.table.updates.size();
  rescan();
  ASSERT_EQ(c.table.updates.size(), before + 1);
  EXPECT_FALSE(c.table.updates.back().workflows_set) << "unchanged workflows are not sent again";
  before = c.table.updates.size();

  write(R"({"inputs": ["x"]})");
  rescan();
  ASSERT_EQ(c.table.updates.size(), before + 1);
  ASSERT_EQ(c.table.updates.back().workflows.size(), 1u);
  EXPECT_NE(c.table.updates.back().workflows[0].error.find("flow/workflow.json"), std::string::npos);

  // A new subscriber gets them in its full table.
  auto gateway = c.d.sys().spawn([] { return caf::behavior{[](const routing_update&) {}}; });
  c.others.push_back(gateway);
  auto full = c.d.request<routing_update>(c.manager, subscribe_atom_v, caf::actor_cast<gateway_actor>(gateway));
  c.d.run();
  ASSERT_TRUE(full->ok());
  EXPECT_TRUE(full->value().workflows_set);
  EXPECT_EQ(full->value().workflows, c.table.updates.back().workflows);
}

}  // namespace cluster_manager_test
}  // namespace ember
