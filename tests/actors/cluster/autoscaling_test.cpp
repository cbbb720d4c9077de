// Autoscaling end to end on the deterministic coordinator (tests/actors/deterministic.hpp): a real
// gateway and the real manager, fake node routers that answer inference at once (or hold it) and
// say each request ran 100 ms on the device. Requests go to the gateway; its load reports drive
// the manager's autoscaler; the actor clock is moved by the test, so a minute of traffic takes
// milliseconds and no step can be flaky.
#include <gtest/gtest.h>

#include <caf/event_based_actor.hpp>
#include <map>
#include <memory>

#include "actors/cluster/cluster_manager.hpp"
#include "actors/cluster/load_planner.hpp"
#include "actors/cluster/repository_index.hpp"
#include "actors/gateway/gateway.hpp"
#include "actors/gateway/routing_view.hpp"
#include "base/work_queue.hpp"
#include "tests/actors/deterministic.hpp"

namespace ember {
namespace autoscaling_test {

using namespace std::chrono_literals;
constexpr uint64_t MiB = 1ull << 20;
const model_key kModel{"m", 1};

struct FakeNode {
  std::string name;
  bool hold_infer = false;  // keep inference unanswered (a replica busy with it)
  std::vector<load_replica> loads;
  std::vector<model_key> unloads, evicts;
  int infers = 0;
  std::vector<caf::response_promise> held;
  caf::actor actor;
};

caf::behavior fake_router(caf::event_based_actor* self, FakeNode* node) {
  return {
      [=](load_replica& req) -> replica_info {
        node->loads.push_back(req);
        return {req.model, node->name, "sim0", SourceTier::repository, "", req.blob_bytes, 50'000};
      },
      [=](infer_request& req) -> caf::result<infer_reply> {
        ++node->infers;
        if (node->hold_infer) {
          node->held.push_back(self->make_response_promise());
          return caf::delegated<infer_reply>();
        }
        infer_reply r;
        r.model = req.model;
        r.node = node->name;
        r.compute_us = 100'000;
        return r;
      },
      [=](tick_atom) {  // answer the held requests
        for (auto& rp : node->held) {
          infer_reply r;
          r.node = node->name;
          r.compute_us = 100'000;
          rp.deliver(r);
        }
        node->held.clear();
      },
      [=](unload_atom, const model_key& key) {
        node->unloads.push_back(key);
        return true;
      },
      [=](evict_atom, const model_key& key) {
        node->evicts.push_back(key);
        return true;
      },
      [](metrics_atom) { return metrics_snapshot{}; },
      [](peers_atom, const std::vector<peer_endpoint>&) {},  // a process would dial them
  };
}

ClusterManagerConfig scaling_config() {
  ClusterManagerConfig c;
  c.repository = "/nonexistent/ember-repository";
  c.data = {"127.0.0.1", 9000};
  c.autoscaler.interval_us = 1'000'000;
  c.autoscaler.look_back_us = 2'000'000;
  c.autoscaler.drain_timeout_us = 10'000'000;
  c.autoscale.idle_timeout_us = 5'000'000;
  c.autoscale.host_keep_alive_us = 30'000'000;
  return c;
}

struct Cluster {
  testing::Deterministic d;
  WorkQueue scan_queue{{.threads = 0}};
  WorkQueue metrics_queue{{.threads = 0}};
  std::map<std::string, std::unique_ptr<FakeNode>> nodes;
  cluster_manager_actor manager;
  gateway_actor gateway;
  std::shared_ptr<RoutingView> view = std::make_shared<RoutingView>();
  std::vector<std::shared_ptr<testing::Answer<infer_reply>>> answers;

  explicit Cluster(ClusterManagerConfig config = scaling_config()) {
    std::vector<RepositoryEntry> entries{RepositoryEntry{kModel, "", "{}", 100 * MiB, "", {}}};
    manager = spawn_cluster_manager(d.sys(), config, entries, std::make_shared<RepositoryIndex>(), scan_queue);
    GatewayConfig gc;
    gc.http.port = 0;
    gateway = spawn_gateway(d.sys(), gc, caf::actor_cast<caf::actor>(manager), view, nullptr, metrics_queue);
    d.run();
  }
  ~Cluster() {
    caf::anon_send_exit(gateway, caf::exit_reason::user_shutdown);
    for (auto& [name, n] : nodes) caf::anon_send_exit(n->actor, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(manager, caf::exit_reason::user_shutdown);
    d.run();
  }
  FakeNode& join(const std::string& name) {
    auto& n = *(nodes[name] = std::make_unique<FakeNode>());
    n.name = name;
    n.actor = d.sys().spawn(fake_router, &n);
    node_report r;
    r.name = name;
    r.data = {name, 7000};
    r.devices.push_back({"sim0", 1024 * MiB, 0});
    auto id = d.request<uint64_t>(manager, join_atom_v, r, caf::actor_cast<node_router_actor>(n.actor));
    d.run();
    EXPECT_TRUE(id->ok());
    return n;
  }
  /// Moves the clock a second at a time, as it moves for real: every tick and report in between
  /// happens (one advance of several seconds would fire each timer once).
  void wait(int seconds) {
    for (int s = 0; s < seconds; ++s) d.advance(1s);
  }
  /// `count` requests now.
  void send(int count) {
    for (int i = 0; i < count; ++i) {
      infer_request req;
      req.model = kModel;
      answers.push_back(d.request<infer_reply>(gateway, req));
    }
    d.run();
  }
  /// `per_second` requests a second, in tenths, for `seconds`.
  void traffic(int per_second, int seconds) {
    for (int tenth = 0; tenth < seconds * 10; ++tenth) {
      send(per_second / 10);
      d.advance(100ms);
    }
  }
  std::vector<std::string> replicas() {
    auto table = d.request<std::vector<node_report>>(manager, nodes_atom_v);
    d.run();
    std::vector<std::string> out;
    for (const auto& n : table->value())
      if (std::find(n.replicas.begin(), n.replicas.end(), kModel) != n.replicas.end()) out.push_back(n.name);
    return out;
  }
  /// The model's state as the gateway sees it (the index API would rescan the repository, which
  /// this test does not have).
  model_state state() const { return view->snapshot()->models.at(kModel.name).at(kModel.version).state; }
  size_t answered_ok() const {
    size_t n = 0;
    for (const auto& a : answers) n += a->ok();
    return n;
  }
  size_t loads() const {
    size_t n = 0;
    for (const auto& [name, node] : nodes) n += node->loads.size();
    return n;
  }
};

TEST(Autoscaling, ABurstRaisesReplicasAcrossNodesInOneChainAndSilenceDropsThemToZero) {
  Cluster c;
  for (const char* name : {"a", "b", "c", "d"}) c.join(name);
  c.send(1);  // from zero: the gateway holds it and asks for a replica
  ASSERT_EQ(c.answered_ok(), 1u);
  ASSERT_EQ(c.replicas().size(), 1u);
  const std::string first = c.replicas()[0];

  // 30 requests a second of 100 ms each keep 3 replicas busy: 4 with the hysteresis' rounding, once
  // the need held for upscale_delay (1 s).
  c.traffic(30, 3);
  const auto scaled = c.replicas();
  EXPECT_EQ(scaled.size(), 4u);
  // The three new replicas got the bytes in one chain, the first replica's node its source.
  std::vector<load_replica> added;
  for (const auto& [name, node] : c.nodes)
    for (const auto& l : node->loads)
      if (name != first) added.push_back(l);
  ASSERT_EQ(added.size(), 3u);
  EXPECT_NE(added[0].transfer_id, 0u);
  size_t from_first = 0;
  for (const auto& l : added) {
    EXPECT_EQ(l.transfer_id, added[0].transfer_id) << "one multicast for the scale-up";
    from_first += l.sources.at(0).name == first;
  }
  EXPECT_EQ(from_first, 1u) << "the chain starts at the node that has the bytes";
  EXPECT_EQ(c.answered_ok(), c.answers.size()) << "no request lost or refused";

  // Silence: the rate leaves the 2 s window, the model idles for 5 s and drops to zero at once.
  const size_t before = c.answers.size();
  for (int s = 0; s < 12 && !c.replicas().empty(); ++s) c.d.advance(1s);
  EXPECT_TRUE(c.replicas().empty());
  const model_state zero = c.state();
  EXPECT_EQ(zero.state, ModelReadiness::unloaded);
  EXPECT_FALSE(zero.explicitly_unloaded);
  for (const auto& [name, node] : c.nodes) EXPECT_TRUE(node->unloads.empty()) << name << ": unbound before its drain";
  c.wait(2);  // two report intervals with nothing in flight: the drains end
  for (const auto& [name, node] : c.nodes)
    EXPECT_EQ(node->unloads, (std::vector<model_key>{kModel})) << name << " unbinds its replica";
  for (const auto& [name, node] : c.nodes) EXPECT_TRUE(node->evicts.empty()) << "the bytes stay in host memory";

  // The next request is held, one replica is placed (on a node whose cache has the bytes), and
  // the request is answered.
  const size_t loads = c.loads();
  c.send(1);
  ASSERT_EQ(c.answers.size(), before + 1);
  EXPECT_TRUE(c.answers.back()->ok()) << (c.answers.back()->done() ? c.answers.back()->error().message() : "pending");
  EXPECT_EQ(c.loads(), loads + 1);
  EXPECT_EQ(c.replicas().size(), 1u);
}

TEST(Autoscaling, AnIdleModelsBytesLeaveTheHostCachesAfterHostKeepAlive) {
  Cluster c;
  auto& a = c.join("a");
  c.send(1);
  ASSERT_EQ(c.answered_ok(), 1u);
  c.wait(20);
  ASSERT_TRUE(c.replicas().empty());
  ASSERT_EQ(a.unloads.size(), 1u);
  EXPECT_TRUE(a.evicts.empty());
  c.wait(15);  // 30 s idle
  EXPECT_EQ(a.evicts, (std::vector<model_key>{kModel}));
}

TEST(Autoscaling, WithoutAHostCacheTierTheBytesLeaveWithTheReplica) {
  ClusterManagerConfig config = scaling_config();
  config.autoscale.host_keep_alive_us = 0;
  Cluster c(config);
  auto& a = c.join("a");
  c.send(1);
  c.wait(12);
  ASSERT_TRUE(c.replicas().empty());
  ASSERT_EQ(a.unloads.size(), 1u);
  EXPECT_EQ(a.evicts, (std::vector<model_key>{kModel})) << "evicted once unbound";
  const size_t loads = a.loads.size();
  c.send(1);
  ASSERT_TRUE(c.answers.back()->ok());
  ASSERT_EQ(a.loads.size(), loads + 1);
  EXPECT_EQ(a.loads.back().sources.at(0).kind, SourceTier::repository);
}

TEST(Autoscaling, AScaledDownReplicaLeavesTheTableAtOnceAndIsUnboundOnlyWhenItsRequestsAreAnswered) {
  ClusterManagerConfig config = scaling_config();
  config.autoscale.downscale_delay_us = 0;
  Cluster c(config);
  for (const char* name : {"a", "b", "c", "d"}) c.join(name);
  c.send(1);
  c.traffic(30, 3);
  ASSERT_EQ(c.replicas().size(), 4u);
  // The load falls; the four replicas each hold one request when the scale-down comes.
  for (auto& [name, node] : c.nodes) node->hold_infer = true;
  c.send(4);
  for (const auto& [name, node] : c.nodes) ASSERT_EQ(node->held.size(), 1u) << name;
  std::string retired;
  for (int s = 0; s < 4 && retired.empty(); ++s) {
    c.d.advance(1s);
    const auto now = c.replicas();
    for (const auto& [name, node] : c.nodes)
      if (std::find(now.begin(), now.end(), name) == now.end()) retired = name;
  }
  ASSERT_FALSE(retired.empty()) << "no scale-down";
  EXPECT_EQ(c.replicas().size(), 3u);
  FakeNode& victim = *c.nodes[retired];
  c.wait(5);
  EXPECT_TRUE(victim.unloads.empty()) << "unbound with a request in flight";
  EXPECT_EQ(c.replicas().size(), 3u) << "four in flight keep three replicas";
  for (auto& [name, node] : c.nodes) {
    node->hold_infer = false;
    caf::anon_send(node->actor, tick_atom_v);
  }
  c.d.run();
  EXPECT_EQ(c.answered_ok(), c.answers.size()) << "every request answered, the drained one's too";
  c.wait(3);
  EXPECT_EQ(victim.unloads, (std::vector<model_key>{kModel})) << "unbound once its request was answered";
}

}  // namespace autoscaling_test
}  // namespace ember
