// The cluster's actors together in one process: a manager, a gateway and nodes built exactly as
// `ember serve` builds them (actors/process/), driven through the gateway's interface.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <set>
#include <sstream>
#include <thread>

#include "actors/admin_interface.hpp"
#include "actors/console/console.hpp"
#include "actors/gateway/routing_view.hpp"
#include "actors/node/node_supervisor.hpp"
#include "actors/process/gateway_process.hpp"
#include "actors/process/manager_process.hpp"
#include "actors/process/node_process.hpp"
#include "actors/tensor_codec.hpp"
#include "security/certs.hpp"
#include "tests/actors/actor_test_util.hpp"

namespace ember {
namespace cluster_actors_test {

using namespace std::chrono_literals;
using testing::ask;

struct Cluster {
  std::unique_ptr<caf::actor_system> sys = testing::make_system();
  testing::Repository repo;
  std::unique_ptr<ManagerProcess> manager;
  std::vector<std::unique_ptr<NodeProcess>> nodes;
  std::unique_ptr<GatewayProcess> gateway;
  bool allow_faults = false;
  BindingMode binding = BindingMode::late;

  explicit Cluster(int node_count, uint64_t cold_start_timeout_us = 20'000'000, bool allow_faults = false,
                   BindingMode binding = BindingMode::late, uint64_t request_timeout_us = 60'000'000)
      : allow_faults(allow_faults), binding(binding) {
    ManagerConfig mc;
    mc.repository = repo.path();
    mc.admin_token_file = repo.path() + "/admin.token";
    std::ofstream(mc.admin_token_file) << "cluster-token\n";
    manager =
        std::move(*ManagerProcess::start(*sys, mc, TransferConfig{}, AutoscaleConfig{}, AutoscalerSettings{}, false));
    for (int i = 0; i < node_count; ++i) add_node("n" + std::to_string(i + 1));
    GatewayConfig gc;
    gc.http.port = 0;
    gc.cold_start_timeout_us = cold_start_timeout_us;
    gc.request_timeout_us = request_timeout_us;
    gateway = std::move(*GatewayProcess::start(*sys, gc, manager->manager()));
  }
  ~Cluster() {
    gateway.reset();
    nodes.clear();
    manager.reset();
  }
  NodeProcess& add_node(const std::string& name) {
    NodeConfig nc;
    nc.name = name;
    nc.cache_bytes = 256 << 20;
    DevicesConfig dc;
    dc.kind = DeviceKind::sim;
    dc.sim.memory_bytes = 256 << 20;
    dc.sim.compute_threads = 1;
    nc.allow_faults = allow_faults;
    BindingConfig bc;
    bc.mode = binding;
    nodes.push_back(std::move(*NodeProcess::start(*sys, nc, dc, TransferConfig{}, bc)));
    EXPECT_TRUE(nodes.back()->join_local(manager->manager()).ok());
    return *nodes.back();
  }
  Result<infer_reply> infer(const std::string& name, uint32_t version, uint64_t seed,
                            std::chrono::milliseconds timeout = 30s) {
    // Inputs shaped for the named model (mlp's for names the repository does not have).
    const std::string dir = name == "resnet" ? repo.dir / "resnet"
                            : name == "bert" ? repo.dir / "bert/1"
                                             : repo.dir / "mlp/1";
    auto model = *gpu::Model::load(dir);
    infer_request req;
    req.model = {name, version};
    req.inputs = encode_tensors(gpu::testing::arch_inputs(*model, 1, 4, seed));
    return ask<infer_reply>(*sys, gateway->gateway(), timeout, std::move(req));
  }
  std::string metrics() { return *ask<std::string>(*sys, gateway->gateway(), 10s, metrics_atom_v); }
  Result<std::string> fault(size_t node, std::string kind, std::string target, uint64_t duration_ms = 0,
                            uint64_t delay_ms = 0) {
    fault_command f;  // parsed here, as the console parses its words
    EMBER_ASSIGN_OR_RETURN(f.kind, parse_fault_kind(kind));
    EMBER_RETURN_IF_ERROR(parse_fault_target(f, target));
    f.duration_ms = duration_ms;
    f.delay_ms = delay_ms;
    f.seed = 7;
    return inject(node, f);
  }
  /// `f` on node `node` as `ember console fault` sends it: to the manager's admin actor with the
  /// admin token; the manager passes it on (a node takes a fault only from its manager).
  Result<std::string> inject(size_t node, const fault_command& f) {
    auto admin = ask<admin_actor>(*sys, manager->manager(), 10s, admin_atom_v);
    if (!admin.ok()) return admin.error();
    return ask<std::string>(*sys, *admin, 40s, admin_auth{"cluster-token", "test"}, fault_atom_v,
                            nodes.at(node)->name(), f);
  }
};

/// The sum of the series of `name` whose labels include `label` (e.g. outcome="late").
double metric_sum(const std::string& text, const std::string& name, const std::string& label) {
  double total = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + "{", 0) != 0 || line.find(label) == std::string::npos) continue;
    total += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return total;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) ++n;
  return n;
}

TEST(Cluster, ACorruptStateFolderStopsTheManagerFromStartingAndNamesTheFile) {
  auto sys = testing::make_system();
  testing::Repository repo;
  const std::string state = repo.path() + "/manager-state";
  std::filesystem::create_directories(state);
  std::ofstream(state + "/journal") << "not a journal\n";
  ManagerConfig mc;
  mc.repository = repo.path();
  mc.state_dir = state;
  auto started = ManagerProcess::start(*sys, mc, TransferConfig{}, AutoscaleConfig{}, AutoscalerSettings{}, false);
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.error().code(), ErrorCode::corrupt);
  EXPECT_EQ(started.error().message(),
            "manager.state_dir: " + state + "/journal: not an Ember manager journal file (no \"format\": "
            "\"ember-manager-journal\")");
}

// With tickets bound to certificates (security.ticket_receiver: certificate), tickets for a node name
// it, and blob servers hold them to the name its certificate gives: a node whose certificate names
// another would be refused every byte, so it does not start, and says what to change.
TEST(Cluster, ANodeWhoseCertificateNamesAnotherDoesNotStartWhenTicketsNameCertificates) {
  auto sys = testing::make_system();
  gpu::testing::TempDir certs;
  ASSERT_TRUE(security::init_ca(certs.path(), "cluster CA", 2, false).ok());
  ASSERT_TRUE(security::issue_certificate(certs.path(), {"gpu-a", "node", {"127.0.0.1"}, 2, false}).ok());
  SecurityConfig sec;
  sec.tls_certificate = certs / "gpu-a.crt";
  sec.tls_key = certs / "gpu-a.key";
  sec.tls_ca = certs / "ca.crt";
  sec.data_plane_tls = true;
  sec.ticket_names_certificate = true;
  NodeConfig nc;
  nc.name = "gpu-b";
  DevicesConfig dc;
  dc.kind = DeviceKind::sim;
  dc.sim.memory_bytes = 64 << 20;
  auto refused = NodeProcess::start(*sys, nc, dc, TransferConfig{}, BindingConfig{}, sec);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(refused.error().message().find("this node is named 'gpu-b' but its certificate (" + sec.tls_certificate +
                                           ") names 'gpu-a'"),
            std::string::npos)
      << refused.error().message();
}

// A node started with --allow-faults takes a fault only from the manager it joined, which passes on
// the console's (the admin token checked by the admin actor): one sent straight to the node by
// another actor of the cluster is refused, and nothing is injected.
TEST(Cluster, ANodeTakesAFaultOnlyFromItsManagerThatIsWithTheAdminToken) {
  Cluster c(1, 20'000'000, /*allow_faults=*/true);
  fault_command heal;
  heal.kind = FaultKind::heal;
  heal.target = FaultTarget::router;
  auto direct = ask<std::string>(*c.sys, c.nodes[0]->router(), 10s, fault_atom_v, heal);
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(direct.error().code(), ErrorCode::permission_denied);
  EXPECT_NE(direct.error().message().find("takes a fault only from the manager it joined"), std::string::npos)
      << direct.error().message();
  auto admin = ask<admin_actor>(*c.sys, c.manager->manager(), 10s, admin_atom_v);
  ASSERT_TRUE(admin.ok());
  auto forged = ask<std::string>(*c.sys, *admin, 10s, admin_auth{"wrong-token", "test"}, fault_atom_v,
                                 std::string("n1"), heal);
  ASSERT_FALSE(forged.ok());
  EXPECT_EQ(forged.error().code(), ErrorCode::permission_denied);
  auto passed = c.inject(0, heal);
  ASSERT_TRUE(passed.ok()) << passed.error().message();
  EXPECT_NE(passed->find("no interposer was active"), std::string::npos) << *passed;
}

TEST(Cluster, ManyConcurrentRequestsForAColdModelTriggerOneLoad) {
  Cluster c(2);
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 12; ++i) {
    clients.emplace_back([&, i] { ok += c.infer("bert", 1, static_cast<uint64_t>(i)).ok(); });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 12);
  const std::string m = c.metrics();
  // One replica load in the whole cluster, however many requests waited for it.
  EXPECT_EQ(count(m, "ember_replica_loads_total{node=\"n1\",outcome=\"ok\"} 1") +
                count(m, "ember_replica_loads_total{node=\"n2\",outcome=\"ok\"} 1"),
            1u)
      << m;
  EXPECT_NE(m.find("ember_requests_total{node=\"gateway\",model=\"bert\",version=\"1\",outcome=\"success\"} 12"),
            std::string::npos)
      << m;
}

// The console's slo through the admin actor and the manager: every replica now (each node's
// router) and every replica placed later (its load_replica) orders late binding's queue by the new
// deadline; cleared, each goes back to its own. With a 1 us deadline every answer counts as late.
TEST(Cluster, AnSloSetAtRunTimeReachesEveryReplicaNowAndLater) {
  Cluster c(2);
  ASSERT_TRUE(c.infer("mlp", 1, 1).ok());
  const admin_auth admin{"cluster-token", "tester@host"};
  auto set = ask<std::vector<model_state>>(*c.sys, c.manager->admin(), 10s, admin, slo_atom_v,
                                           slo_command{{"mlp", 0}, {1, 0.99}});
  ASSERT_TRUE(set.ok()) << set.error().message();
  ASSERT_EQ(set->size(), 2u);  // both versions of mlp
  for (const auto& m : *set) {
    EXPECT_TRUE(m.slo_set);
    EXPECT_EQ(m.slo.deadline_us, 1u);
    EXPECT_DOUBLE_EQ(m.slo.percentile, 0.99);
  }
  // A second replica, placed after the change: its load carries the SLO.
  auto two = ask<model_state>(*c.sys, c.manager->admin(), 30s, admin, load_atom_v, model_command{{"mlp", 1}, 2});
  ASSERT_TRUE(two.ok()) << two.error().message();
  EXPECT_EQ(two->replicas, 2u);
  EXPECT_TRUE(two->slo_set);
  // Six requests to each node's router directly (the gateway may send them all to one).
  const std::string before = c.metrics();
  auto model = *gpu::Model::load(c.repo.dir / "mlp/1");
  for (auto& node : c.nodes) {
    for (uint64_t i = 0; i < 6; ++i) {
      infer_request req;
      req.model = {"mlp", 1};
      req.inputs = encode_tensors(gpu::testing::arch_inputs(*model, 1, 4, 10 + i));
      ASSERT_TRUE(ask<infer_reply>(*c.sys, node->router(), 10s, std::move(req)).ok());
    }
  }
  const std::string after = c.metrics();
  const std::string name = "ember_slo_requests_total";
  for (const char* node : {"node=\"n1\"", "node=\"n2\""}) {  // both replicas took it
    EXPECT_EQ(metric_sum(after, name, std::string(node) + ",outcome=\"late\"") -
                  metric_sum(before, name, std::string(node) + ",outcome=\"late\""),
              6)
        << node << "\n"
        << after;
  }
  EXPECT_EQ(metric_sum(after, name, "outcome=\"on_time\""), metric_sum(before, name, "outcome=\"on_time\""));

  // Cleared: back to what model.json declares (10 ms, for these models).
  auto cleared = ask<std::vector<model_state>>(*c.sys, c.manager->admin(), 10s, admin, slo_atom_v,
                                               slo_command{{"mlp", 1}, {0, 0.98}});
  ASSERT_TRUE(cleared.ok()) << cleared.error().message();
  ASSERT_EQ(cleared->size(), 1u);
  EXPECT_FALSE(cleared->front().slo_set);
  EXPECT_EQ(cleared->front().slo.deadline_us, 10'000u);

  auto bad = ask<std::vector<model_state>>(*c.sys, c.manager->admin(), 10s, admin, slo_atom_v,
                                           slo_command{{"mlp", 1}, {1000, 1.5}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::invalid_argument) << bad.error().message();
  auto unknown = ask<std::vector<model_state>>(*c.sys, c.manager->admin(), 10s, admin, slo_atom_v,
                                               slo_command{{"nope", 0}, {1000, 0.9}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code(), ErrorCode::not_found);
  auto anonymous = ask<std::vector<model_state>>(*c.sys, c.manager->admin(), 10s, admin_auth{"", "x"}, slo_atom_v,
                                                 slo_command{{"mlp", 1}, {1000, 0.9}});
  ASSERT_FALSE(anonymous.ok());
  EXPECT_EQ(anonymous.error().code(), ErrorCode::permission_denied);
}

// What a node holds reaches the manager without the manager's own answers: a replica loaded there
// by someone else (as a load that ends after the node rejoined a restarted manager) is adopted
// from the node's next report, which its heartbeat asks for; one the node drops is counted lost
// and replaced, as a lost node's are.
TEST(Cluster, TheManagerLearnsReplicasFromTheNodesReportsNotOnlyFromItsOwnLoads) {
  Cluster c(2);
  auto first = c.infer("mlp", 1, 1);
  ASSERT_TRUE(first.ok()) << first.error().message();
  const size_t holder = c.nodes[0]->name() == first->node ? 0 : 1;
  auto from = ask<node_report>(*c.sys, c.nodes[holder]->router(), 10s, report_atom_v);
  ASSERT_TRUE(from.ok());
  const auto v = testing::repository_version(c.repo.path(), "mlp", 1);
  load_replica req{v.key,
                   v.manifest_json,
                   blob_key_of(v.key),
                   v.weights_bytes,
                   {blob_source{SourceTier::peer, c.nodes[holder]->name(), from->data}}};
  auto loaded = ask<replica_info>(*c.sys, c.nodes[1 - holder]->router(), 30s, std::move(req));
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  auto replicas = [&] {
    auto states = ask<std::vector<model_state>>(*c.sys, c.manager->manager(), 10s, index_atom_v);
    for (const auto& s : *states)
      if (s.model == model_key{"mlp", 1}) return s.replicas;
    return 0u;
  };
  auto wait_for = [&](uint32_t n) {
    for (int i = 0; i < 100 && replicas() != n; ++i) std::this_thread::sleep_for(50ms);
    return replicas();
  };
  EXPECT_EQ(wait_for(2), 2u);
  auto nodes = ask<std::vector<node_report>>(*c.sys, c.manager->manager(), 10s, nodes_atom_v);
  ASSERT_TRUE(nodes.ok());
  for (const auto& n : *nodes) EXPECT_EQ(n.replicas.size(), 1u) << n.name;  // the reports are fresh
  // Dropped on the node behind the manager's back: counted lost and replaced there (the one node
  // without it), which the manager would not do if it still counted it.
  ASSERT_TRUE(ask<bool>(*c.sys, c.nodes[1 - holder]->router(), 10s, unload_atom_v, model_key{"mlp", 1}).ok());
  auto holds = [&] {
    auto r = ask<node_report>(*c.sys, c.nodes[1 - holder]->router(), 10s, report_atom_v);
    return r.ok() && r->replicas.size() == 1;
  };
  ASSERT_FALSE(holds());
  for (int i = 0; i < 100 && !holds(); ++i) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(holds());
  EXPECT_EQ(wait_for(2), 2u);
  ASSERT_TRUE(c.infer("mlp", 1, 2).ok());
}

TEST(Cluster, VersionsUnknownUnloadedAndBrokenModels) {
  Cluster c(1);
  auto latest = c.infer("mlp", 0, 1);
  ASSERT_TRUE(latest.ok()) << latest.error().message();
  EXPECT_EQ(latest->model.version, 2u);  // version 0 means the highest
  auto v1 = c.infer("mlp", 1, 1);
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(v1->model.version, 1u);

  auto unknown = c.infer("nope", 0, 1);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code(), ErrorCode::not_found);

  auto unloaded = ask<model_state>(*c.sys, c.gateway->gateway(), 10s, unload_atom_v, model_command{{"mlp", 0}});
  ASSERT_TRUE(unloaded.ok()) << unloaded.error().message();
  auto refused = c.infer("mlp", 2, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(refused.error().message().find("unloaded"), std::string::npos) << refused.error().message();
  ASSERT_TRUE(ask<model_state>(*c.sys, c.gateway->gateway(), 30s, load_atom_v, model_command{{"mlp", 0}}).ok());
  EXPECT_TRUE(c.infer("mlp", 2, 1).ok());

  // A model directory that becomes corrupt: the load names the file and the problem.
  std::ofstream(c.repo.dir / "bert/1/weights.safetensors", std::ios::trunc) << "garbage";
  auto broken = ask<model_state>(*c.sys, c.gateway->gateway(), 30s, load_atom_v, model_command{{"bert", 0}});
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(broken.error().message().find("weights.safetensors"), std::string::npos) << broken.error().message();
  auto index = ask<std::vector<model_state>>(*c.sys, c.gateway->gateway(), 10s, index_atom_v);
  ASSERT_TRUE(index.ok());
  bool found = false;
  for (const auto& s : *index) {
    if (s.model == model_key{"bert", 1}) {
      found = true;
      EXPECT_EQ(s.state, ModelReadiness::failed);
    }
  }
  EXPECT_TRUE(found);
}

TEST(Cluster, ALostNodesModelsAreReplacedAndServed) {
  Cluster c(2);
  auto first = c.infer("resnet", 0, 1);
  ASSERT_TRUE(first.ok()) << first.error().message();
  // The node holding the replica, as the manager knows it; the premise is asserted, not assumed.
  auto reports = ask<std::vector<node_report>>(*c.sys, c.manager->manager(), 10s, nodes_atom_v);
  ASSERT_TRUE(reports.ok()) << reports.error().message();
  std::vector<std::string> holders;
  for (const auto& r : *reports)
    for (const auto& key : r.replicas)
      if (key.name == "resnet") holders.push_back(r.name);
  ASSERT_EQ(holders, (std::vector<std::string>{first->node})) << "one replica, on the node that answered";
  size_t holder = c.nodes.size();
  for (size_t i = 0; i < c.nodes.size(); ++i)
    if (c.nodes[i]->name() == holders[0]) holder = i;
  ASSERT_LT(holder, c.nodes.size());
  // Kill its router (as a crashed process would vanish).
  caf::anon_send_exit(c.nodes[holder]->router(), caf::exit_reason::kill);
  for (int i = 0; i < 5; ++i) {
    auto r = c.infer("resnet", 0, static_cast<uint64_t>(i));
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(r->node, c.nodes[1 - holder]->name());
  }
}

TEST(Cluster, RequestsForAModelNoNodeCanTakeFailAfterTheColdStartTimeout) {
  Cluster c(0, 300'000);  // no nodes, 300 ms cold start budget
  const auto start = std::chrono::steady_clock::now();
  auto r = c.infer("mlp", 1, 1);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::unavailable);
  EXPECT_NE(r.error().message().find("became ready within 300 ms"), std::string::npos) << r.error().message();
  EXPECT_GE(waited, 250ms);
  // A node joining later is used by the next request.
  c.add_node("late");
  auto ok = c.infer("mlp", 1, 2);
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ(ok->node, "late");
}

// -- faults (node_supervisor) ----------------------------------------------------------------------

/// The outputs' bytes, to compare an answer before and after a fault.
std::vector<std::vector<uint8_t>> bytes_of(const infer_reply& r) {
  std::vector<std::vector<uint8_t>> out;
  for (const auto& t : r.outputs) out.push_back(t.data);
  return out;
}

TEST(Faults, ANodeWithoutAllowFaultsRefusesThemAndBadCommandsAreClearErrors) {
  Cluster plain(1);
  auto refused = plain.fault(0, "kill", "router");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), ErrorCode::permission_denied);
  EXPECT_NE(refused.error().message().find("--allow-faults"), std::string::npos) << refused.error().message();

  Cluster c(1, 20'000'000, true);
  for (auto [kind, target] : std::vector<std::pair<std::string, std::string>>{{"explode", "router"},
                                                                              {"kill", "cache:0"},
                                                                              {"kill", "executor:9"},
                                                                              {"kill", "executor:x"},
                                                                              {"delay", "router"} /* no delay */,
                                                                              {"drop", "executor:0"},
                                                                              {"fail-alloc", "router"}}) {
    auto bad = c.fault(0, kind, target);
    ASSERT_FALSE(bad.ok()) << kind << " " << target;
    EXPECT_EQ(bad.error().code(), ErrorCode::invalid_argument) << kind << " " << target;
  }
  EXPECT_TRUE(c.infer("mlp", 1, 1).ok());  // nothing was harmed
}

TEST(Faults, TheConsoleParsesFaultCommandsAndRefusesBadOnes) {
  auto f = parse_fault({"delay", "router", "p=0.25", "for=3s", "delay=1500ms", "seed=9"});
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_EQ(to_string(f->kind), "delay");
  EXPECT_EQ(target_name(*f), "router");
  EXPECT_DOUBLE_EQ(f->probability, 0.25);
  EXPECT_EQ(f->duration_ms, 3000u);
  EXPECT_EQ(f->delay_ms, 1500u);
  EXPECT_EQ(f->seed, 9u);
  auto alloc = parse_fault({"fail-alloc", "count=3"});  // the target defaults to executor:0
  ASSERT_TRUE(alloc.ok());
  EXPECT_EQ(target_name(*alloc), "executor:0");
  EXPECT_EQ(alloc->count, 3u);
  EXPECT_EQ(target_name(*parse_fault({"kill"})), "router");
  for (const auto& bad : std::vector<std::vector<std::string>>{{},
                                                               {"drop", "p=0"},
                                                               {"drop", "p=1.5"},
                                                               {"drop", "p=x"},
                                                               {"delay", "delay=soon"},
                                                               {"kill", "router", "x"},
                                                               {"fail-alloc", "count=-1"},
                                                               {"drop", "loud=1"}}) {
    auto r = parse_fault(bad);
    ASSERT_FALSE(r.ok()) << ::testing::PrintToString(bad);
    EXPECT_EQ(r.error().code(), ErrorCode::invalid_argument);
  }
  // An unknown kind or target is refused here, at the edge, with the valid ones listed.
  auto explode = parse_fault({"explode", "router"});
  ASSERT_FALSE(explode.ok());
  EXPECT_EQ(explode.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(explode.error().message().find("no fault kind 'explode' (kill, drop, delay, duplicate, heal, fail-alloc, "
                                           "fault-kernel, corrupt-chunk, throttle, stall, stop-heartbeats)"),
            std::string::npos)
      << explode.error().message();
  for (const std::string target : {"cache:0", "executor:x", "routr"}) {
    auto r = parse_fault({"kill", target});
    ASSERT_FALSE(r.ok()) << target;
    EXPECT_EQ(r.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(r.error().message().find("router, cache, executor:N, hop, data or hops, not '" + target + "'"),
              std::string::npos)
        << r.error().message();
  }
}

/// mlp/1 asked again (inputs of `seed`) until it is answered, for at most 20 s: every answer before
/// that must be a retryable error. The last answer.
Result<infer_reply> served_again(Cluster& c, uint64_t seed) {
  Result<infer_reply> after = internal_error("not asked");
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  do {
    after = c.infer("mlp", 1, seed);
    if (after.ok()) break;
    EXPECT_TRUE(retryable(after.error().code())) << after.error().message();
    std::this_thread::sleep_for(50ms);
  } while (std::chrono::steady_clock::now() < deadline);
  return after;
}

class FaultsBothBindings : public ::testing::TestWithParam<BindingMode> {};

TEST_P(FaultsBothBindings, AKilledRouterComesBackWithItsReplicasAndTheSameAnswers) {
  Cluster c(1, 20'000'000, true, GetParam());
  auto before = c.infer("mlp", 1, 3);
  ASSERT_TRUE(before.ok()) << before.error().message();
  auto killed = c.fault(0, "kill", "router");
  ASSERT_TRUE(killed.ok()) << killed.error().message();
  // Served at once by the restarted router, from its ledger: no new load.
  auto after = c.infer("mlp", 1, 3);
  ASSERT_TRUE(after.ok()) << after.error().message();
  EXPECT_EQ(bytes_of(*after), bytes_of(*before));
  const std::string m = c.metrics();
  EXPECT_NE(m.find("ember_actor_restarts_total{node=\"n1\",actor=\"router\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("ember_faults_injected_total{node=\"n1\",kind=\"kill\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("ember_replica_loads_total{node=\"n1\",outcome=\"ok\"} 1"), std::string::npos) << m;
}

TEST_P(FaultsBothBindings, AKilledExecutorIsReplacedAndItsModelsComeBackFromHostMemory) {
  Cluster c(1, 20'000'000, true, GetParam());
  auto before = c.infer("mlp", 1, 5);
  ASSERT_TRUE(before.ok()) << before.error().message();
  ASSERT_TRUE(c.fault(0, "kill", "executor:0").ok());
  // Until the replacement is restarted and the model bound again the node refuses (the gateway
  // retries); within a bound it answers right again.
  Result<infer_reply> after = served_again(c, 5);
  ASSERT_TRUE(after.ok()) << after.error().message();
  EXPECT_EQ(bytes_of(*after), bytes_of(*before));
  const std::string m = c.metrics();
  EXPECT_NE(m.find("ember_actor_restarts_total{node=\"n1\",actor=\"executor\"} 1"), std::string::npos) << m;
}

/// Four clients send requests of mlp while `kill(k)` kills something three times (k = 0, 1, 2):
/// every request gets one answer, the right output or a retryable error, and the node serves after.
void kills_under_load_lose_no_request(Cluster& c, const std::function<void(int)>& kill) {
  ASSERT_TRUE(c.infer("mlp", 1, 1).ok());
  const auto expected = bytes_of(*c.infer("mlp", 1, 1));
  std::atomic<bool> stop{false};
  std::atomic<int> right{0}, wrong{0}, retryable_errors{0}, other{0}, lost{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&] {
      for (int n = 0; n < 2000 && !stop; ++n) {  // bounded
        auto r = c.infer("mlp", 1, 1, 5s);
        if (!r.ok() && r.error().code() == ErrorCode::deadline_exceeded) {  // no answer: lost somewhere
          if (lost++ == 0) ADD_FAILURE() << "a request got no answer: " << r.error().message() << "\n" << c.metrics();
          continue;
        }
        if (r.ok()) {
          (bytes_of(*r) == expected ? right : wrong)++;
        } else {
          (retryable(r.error().code()) ? retryable_errors : other)++;
        }
      }
    });
  }
  for (int k = 0; k < 3; ++k) {
    std::this_thread::sleep_for(150ms);
    kill(k);
  }
  std::this_thread::sleep_for(300ms);
  stop = true;
  for (auto& t : clients) t.join();
  // Every request got one answer: the right output or a retryable error; none wrong, none other.
  EXPECT_GT(right.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(lost.load(), 0);
  auto last = c.infer("mlp", 1, 1);
  for (int i = 0; i < 100 && !last.ok(); ++i) {
    std::this_thread::sleep_for(100ms);
    last = c.infer("mlp", 1, 1);
  }
  ASSERT_TRUE(last.ok()) << last.error().message();
}

TEST_P(FaultsBothBindings, KillsUnderLoadLoseNoRequest) {
  Cluster c(1, 20'000'000, true, GetParam());
  kills_under_load_lose_no_request(c, [&](int k) {
    ASSERT_TRUE(c.fault(0, "kill", k % 2 ? "executor:0" : "router").ok());
  });
}

/// The router the gateway sends requests of `model` version 1 to now (none: no ready replica in its table).
caf::actor_addr requests_in_view(const Cluster& c, const std::string& model) {
  auto snap = c.gateway->view().snapshot();
  const ModelView* m = snap->find(model, 1);
  if (!m || m->replicas.empty()) return {};
  return m->replicas.front().for_requests().address();
}

/// The node's router now, from its supervisor (local: the roster).
caf::actor node_router_now(Cluster& c, size_t node) {
  auto roster = ask<node_roster>(*c.sys, caf::actor_cast<caf::actor>(c.nodes.at(node)->router()), 10s, roster_atom_v);
  EXPECT_TRUE(roster.ok()) << roster.error().message();
  return roster.ok() ? caf::actor_cast<caf::actor>(roster->router) : caf::actor{};
}

// Without --allow-faults the supervisor is off the request path: requests go to the router itself,
// and to its successor once the manager has published it. Nothing is loaded again.
TEST_P(FaultsBothBindings, WithoutAllowFaultsRequestsGoStraightToTheRouterAndFollowARestartedOne) {
  Cluster c(1, 20'000'000, false, GetParam());
  auto before = c.infer("mlp", 1, 3);
  ASSERT_TRUE(before.ok()) << before.error().message();
  const caf::actor first = node_router_now(c, 0);
  ASSERT_TRUE(first);
  EXPECT_NE(first.address(), c.nodes[0]->router().address()) << "the roster's router is not the supervisor";
  EXPECT_EQ(requests_in_view(c, "mlp"), first.address()) << "requests skip the supervisor";
  caf::anon_send_exit(first, caf::exit_reason::kill);
  // Served again (retryable errors at worst meanwhile) once the restarted router is published.
  Result<infer_reply> after = served_again(c, 3);
  ASSERT_TRUE(after.ok()) << after.error().message();
  EXPECT_EQ(bytes_of(*after), bytes_of(*before));
  const caf::actor second = node_router_now(c, 0);
  ASSERT_NE(second.address(), first.address()) << "the router was not restarted";
  EXPECT_EQ(requests_in_view(c, "mlp"), second.address());
  auto reports = ask<std::vector<node_report>>(*c.sys, c.manager->manager(), 10s, nodes_atom_v);
  ASSERT_TRUE(reports.ok() && reports->size() == 1u);
  EXPECT_EQ(reports->front().requests.address(), second.address()) << "the manager knows the new router";
  const std::string m = c.metrics();
  EXPECT_NE(m.find("ember_actor_restarts_total{node=\"n1\",actor=\"router\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("ember_replica_loads_total{node=\"n1\",outcome=\"ok\"} 1"), std::string::npos) << m;
}

TEST_P(FaultsBothBindings, WithoutAllowFaultsRouterKillsUnderLoadLoseNoRequest) {
  Cluster c(1, 20'000'000, false, GetParam());
  kills_under_load_lose_no_request(c, [&](int) {
    const caf::actor router = node_router_now(c, 0);
    ASSERT_TRUE(router);
    caf::anon_send_exit(router, caf::exit_reason::kill);
  });
}

// A node with --allow-faults keeps its requests on its supervisor, whose interposer sees them all.
TEST(Faults, ANodeThatTakesFaultsKeepsItsRequestsOnItsSupervisor) {
  Cluster c(1, 20'000'000, true);
  ASSERT_TRUE(c.infer("mlp", 1, 3).ok());
  EXPECT_EQ(requests_in_view(c, "mlp"), c.nodes[0]->router().address());
}

TEST(Faults, ALoadAskedWhileAPinnedReplicaIsBoundAgainIsAnsweredOnceItIs) {
  // The manager, having counted the replica lost while its executor was replaced, places it on the
  // same node again: the router answers that load when the replica is bound again (it once never
  // did, and the model stayed unplaced: the manager waited for the answer, the node held it).
  Cluster c(1, 20'000'000, true, BindingMode::pinned);
  ASSERT_TRUE(c.infer("mlp", 1, 1).ok());
  ASSERT_TRUE(c.fault(0, "kill", "executor:0").ok());
  std::this_thread::sleep_for(20ms);  // the supervisor's replacement reaches the router
  load_replica again;
  again.model = {"mlp", 1};
  auto info = ask<replica_info>(*c.sys, c.nodes[0]->router(), 10s, again);
  ASSERT_TRUE(info.ok()) << info.error().message();
  EXPECT_EQ(info->model, (model_key{"mlp", 1}));
  EXPECT_TRUE(c.infer("mlp", 1, 1).ok());
}

INSTANTIATE_TEST_SUITE_P(Bindings, FaultsBothBindings, ::testing::Values(BindingMode::late, BindingMode::pinned),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(Faults, MessagesDelayedPastTheGatewayTimeoutAreRetryableErrorsThenServedAgain) {
  Cluster c(1, 20'000'000, true, BindingMode::late, 400'000);
  ASSERT_TRUE(c.infer("mlp", 1, 1).ok());
  auto armed = c.fault(0, "delay", "router", 1500, 1000);
  ASSERT_TRUE(armed.ok()) << armed.error().message();
  EXPECT_NE(armed->find("seed 7"), std::string::npos) << *armed;
  auto late = c.infer("mlp", 1, 1);
  ASSERT_FALSE(late.ok());
  EXPECT_TRUE(retryable(late.error().code())) << late.error().message();
  std::this_thread::sleep_for(1600ms);  // the interposer's duration is over
  auto again = c.infer("mlp", 1, 1);
  EXPECT_TRUE(again.ok()) << again.error().message();
}

TEST(Faults, DuplicatedAndDroppedMessages) {
  Cluster c(1, 20'000'000, true, BindingMode::late, 400'000);
  const auto expected = bytes_of(*c.infer("mlp", 1, 2));
  ASSERT_TRUE(c.fault(0, "duplicate", "router").ok());
  for (int i = 0; i < 20; ++i) {  // each runs twice; each caller gets one answer, the right one
    auto r = c.infer("mlp", 1, 2);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(bytes_of(*r), expected);
  }
  ASSERT_TRUE(c.fault(0, "drop", "router").ok());  // replaces the duplicator
  auto dropped = c.infer("mlp", 1, 2);
  ASSERT_FALSE(dropped.ok());
  EXPECT_TRUE(retryable(dropped.error().code())) << dropped.error().message();
  ASSERT_TRUE(c.fault(0, "heal", "router").ok());
  EXPECT_TRUE(c.infer("mlp", 1, 2).ok());
}

TEST(Faults, AFaultedKernelAndFailedAllocationsAreRecoveredFrom) {
  Cluster c(1, 20'000'000, true);
  const auto expected = bytes_of(*c.infer("mlp", 1, 4));
  auto armed = c.fault(0, "fault-kernel", "executor:0");
  ASSERT_TRUE(armed.ok()) << armed.error().message();
  // Late binding: the faulted run is retried once the executor restarted; the caller sees no fault.
  auto r = c.infer("mlp", 1, 4);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(bytes_of(*r), expected);
  fault_command alloc;
  alloc.kind = FaultKind::fail_alloc;
  alloc.target = FaultTarget::executor;
  alloc.count = 2;
  ASSERT_TRUE(c.inject(0, alloc).ok());
  // mlp/2's load swaps it in to profile it: the allocation fails, and so does the retry after evicting
  // mlp/1 (what the engine does on out of memory), so the load fails as out of memory (a clear error,
  // counted); a later placement loads it.
  auto failed = c.infer("mlp", 2, 4);
  if (!failed.ok()) {
    EXPECT_EQ(failed.error().code(), ErrorCode::out_of_memory) << failed.error().message();
  }
  Result<infer_reply> later = internal_error("not asked");
  for (int i = 0; i < 50 && !later.ok(); ++i) {
    later = c.infer("mlp", 2, 4);
    if (!later.ok()) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(later.ok()) << later.error().message();
  const std::string m = c.metrics();
  EXPECT_NE(m.find("kind=\"fault-kernel\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("ember_executor_restarts_total{node=\"n1\"} 1"), std::string::npos) << m;  // the kernel faulted
  EXPECT_NE(m.find("kind=\"fail-alloc\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("ember_replica_loads_total{node=\"n1\",outcome=\"out_of_memory\"}"), std::string::npos) << m;
}

TEST(Faults, AKilledModelCacheIsRestartedWithTheBytesItHeld) {
  Cluster c(1, 20'000'000, true);
  auto before = c.infer("mlp", 1, 6);
  ASSERT_TRUE(before.ok()) << before.error().message();
  ASSERT_TRUE(c.fault(0, "kill", "cache").ok());
  // The warm path does not need the cache; a cold load needs the new one.
  auto warm = c.infer("mlp", 1, 6);
  ASSERT_TRUE(warm.ok()) << warm.error().message();
  EXPECT_EQ(bytes_of(*warm), bytes_of(*before));
  Result<infer_reply> cold = internal_error("not asked");
  for (int i = 0; i < 50 && !cold.ok(); ++i) {
    cold = c.infer("mlp", 2, 6);
    if (!cold.ok()) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(cold.ok()) << cold.error().message();
  // The restarted cache lists what its predecessor held and what it fetched since.
  auto fresh = ask<node_report>(*c.sys, c.nodes[0]->router(), 10s, report_atom_v);
  ASSERT_TRUE(fresh.ok()) << fresh.error().message();
  EXPECT_EQ(fresh->cached.size(), 2u);
  const std::string m = c.metrics();
  EXPECT_NE(m.find("ember_actor_restarts_total{node=\"n1\",actor=\"cache\"} 1"), std::string::npos) << m;
}

TEST(Faults, AKilledStageHostIsRestartedAndTheNodeReportsTheNewOne) {
  Cluster c(1, 20'000'000, true);
  const auto supervisor = caf::actor_cast<caf::actor>(c.nodes[0]->router());
  auto roster = ask<node_roster>(*c.sys, supervisor, 10s, roster_atom_v);
  ASSERT_TRUE(roster.ok()) << roster.error().message();
  ASSERT_TRUE(roster->stages);
  auto before = ask<node_report>(*c.sys, c.nodes[0]->router(), 10s, report_atom_v);
  ASSERT_TRUE(before.ok()) << before.error().message();
  EXPECT_EQ(before->stages.address(), roster->stages.address()) << "the node reports its stage host";
  const caf::actor_addr dead = roster->stages.address();
  caf::anon_send_exit(roster->stages, caf::exit_reason::kill);
  // The supervisor restarts it once it hears of the death (asked again, no sleep, until then).
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  do {
    roster = ask<node_roster>(*c.sys, supervisor, 10s, roster_atom_v);
    ASSERT_TRUE(roster.ok()) << roster.error().message();
  } while (roster->stages.address() == dead && std::chrono::steady_clock::now() < deadline);
  ASSERT_NE(roster->stages.address(), dead) << "the stage host was not restarted";
  // The supervisor told the router before it answered: the next report names the new host.
  auto after = ask<node_report>(*c.sys, c.nodes[0]->router(), 10s, report_atom_v);
  ASSERT_TRUE(after.ok()) << after.error().message();
  EXPECT_EQ(after->stages.address(), roster->stages.address());
  EXPECT_TRUE(c.infer("mlp", 1, 8).ok()) << "the node serves on";
  const std::string m = c.metrics();
  EXPECT_NE(m.find("ember_actor_restarts_total{node=\"n1\",actor=\"stages\"} 1"), std::string::npos) << m;
}

TEST(Faults, ANodeWhoseRouterAnswersNoHeartbeatIsDroppedThenTakenBack) {
  Cluster c(2, 20'000'000, true);  // manager.node_timeout 2 s, heartbeat 250 ms (the defaults)
  auto first = c.infer("mlp", 1, 7);
  ASSERT_TRUE(first.ok()) << first.error().message();
  const size_t holder = c.nodes[0]->name() == first->node ? 0 : 1;
  auto members = [&] {
    std::set<std::string> names;
    auto reports = ask<std::vector<node_report>>(*c.sys, c.manager->manager(), 10s, nodes_atom_v);
    if (reports.ok())
      for (const auto& r : *reports) names.insert(r.name);
    return names;
  };
  auto armed = c.fault(holder, "stop-heartbeats", "router", 3500);
  ASSERT_TRUE(armed.ok()) << armed.error().message();
  // Its process and connection live, but its router answers no heartbeat: dropped after ~2 s.
  const auto started = std::chrono::steady_clock::now();
  while (members().count(first->node) && std::chrono::steady_clock::now() - started < 5s)
    std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(members().count(first->node)) << "the silent node is still a member";
  EXPECT_GE(std::chrono::steady_clock::now() - started, 1500ms);
  auto meanwhile = c.infer("mlp", 1, 7);  // its replica was re-placed on the other node
  ASSERT_TRUE(meanwhile.ok()) << meanwhile.error().message();
  EXPECT_EQ(bytes_of(*meanwhile), bytes_of(*first));
  // It answers again once the fault ends: taken back with what it holds.
  while (!members().count(first->node) && std::chrono::steady_clock::now() - started < 10s) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(members().count(first->node)) << "the node was not taken back";
  EXPECT_TRUE(c.infer("mlp", 1, 7).ok());
}

TEST(Faults, ACorruptedChunkIsFetchedAgainAndAStalledHopWaits) {
  Cluster c(2, 20'000'000, true);
  auto first = c.infer("mlp", 1, 1);
  ASSERT_TRUE(first.ok()) << first.error().message();
  const size_t holder = c.nodes[0]->name() == first->node ? 0 : 1;
  const std::string other = c.nodes[1 - holder]->name();
  // The holder's next data frame goes out corrupted: the receiving hop finds it by its checksum and
  // fetches the chunk again; the distribution completes with the right bytes.
  fault_command corrupt;
  corrupt.kind = FaultKind::corrupt_chunk;
  corrupt.target = FaultTarget::data;
  ASSERT_TRUE(c.inject(holder, corrupt).ok());
  auto sent = ask<distribute_result>(*c.sys, c.gateway->gateway(), 30s, distribute_atom_v,
                                     distribute_request{{"mlp", 1}, {other}});
  ASSERT_TRUE(sent.ok()) << sent.error().message();
  ASSERT_EQ(sent->nodes.size(), 1u);
  EXPECT_EQ(sent->nodes[0].source_peer, first->node);
  std::string m = c.metrics();
  EXPECT_NE(m.find("ember_transfer_resumes_total{node=\"" + other + "\",reason=\"corrupt\"} 1"), std::string::npos)
      << m;
  EXPECT_NE(m.find("kind=\"corrupt-chunk\"} 1"), std::string::npos) << m;

  // A receiver's hops stall for 1.5 s: mlp/2's distribution to it waits them out, then completes.
  auto second = c.infer("mlp", 2, 1);
  ASSERT_TRUE(second.ok()) << second.error().message();
  const size_t lacking = c.nodes[0]->name() == second->node ? 1 : 0;
  fault_command stall;
  stall.kind = FaultKind::stall;
  stall.target = FaultTarget::hops;
  stall.duration_ms = 1500;
  auto armed = c.inject(lacking, stall);
  ASSERT_TRUE(armed.ok()) << armed.error().message();
  const auto started = std::chrono::steady_clock::now();
  auto stalled = ask<distribute_result>(*c.sys, c.gateway->gateway(), 30s, distribute_atom_v,
                                        distribute_request{{"mlp", 2}, {c.nodes[lacking]->name()}});
  ASSERT_TRUE(stalled.ok()) << stalled.error().message();
  EXPECT_GE(std::chrono::steady_clock::now() - started, 1200ms);
  fault_command unbounded = stall;
  unbounded.duration_ms = 0;  // a stall needs an end
  EXPECT_FALSE(c.inject(0, unbounded).ok());
}

// A multicast hop killed mid-transfer (actor level): the receiving node's cache starts a new hop over
// the same buffer, which goes on from the verified offset; the distribution completes with the
// digest verified, having fetched only what the dead hop had not.
TEST(Faults, AKilledHopIsReplacedAndGoesOnFromItsVerifiedOffset) {
  Cluster c(2, 20'000'000, true);
  c.repo.write("mlp", "big/1", 5, false);  // 7.1 MiB: several 1 MiB frames (the distribution rescans)
  const size_t lacking = 1;
  const std::string receiver = c.nodes[lacking]->name();
  EXPECT_FALSE(c.fault(lacking, "kill", "hop").ok());  // no hop runs yet: a clear error
  // The receiver's hops take ~2 MB/s for 3 s, so that the kill lands mid-transfer.
  fault_command throttle;
  throttle.kind = FaultKind::throttle;
  throttle.target = FaultTarget::hops;
  throttle.rate = 2'000'000;
  throttle.duration_ms = 3000;
  ASSERT_TRUE(c.inject(lacking, throttle).ok());
  auto sent = std::async(std::launch::async, [&] {
    return ask<distribute_result>(*c.sys, c.gateway->gateway(), 60s, distribute_atom_v,
                                  distribute_request{{"big", 1}, {receiver}});
  });
  std::this_thread::sleep_for(1s);
  auto killed = c.fault(lacking, "kill", "hop");
  ASSERT_TRUE(killed.ok()) << killed.error().message();
  EXPECT_NE(killed->find("killed 1 multicast hop"), std::string::npos) << *killed;
  auto done = sent.get();
  ASSERT_TRUE(done.ok()) << done.error().message();
  ASSERT_EQ(done->nodes.size(), 1u) << (done->errors.empty() ? "" : done->errors[0]);
  const std::string m = c.metrics();
  // What the receiver fetched: the rest only, not all of it again.
  const std::string fetched = "ember_model_bytes_fetched_total{node=\"" + receiver + "\",source=\"repository\"} ";
  const size_t at = m.find(fetched);
  ASSERT_NE(at, std::string::npos) << m;
  const double bytes = std::stod(m.substr(at + fetched.size()));
  EXPECT_GT(bytes, 0) << m.substr(at, 300);
  EXPECT_LT(bytes, static_cast<double>(done->blob_bytes));
  EXPECT_NE(m.find("ember_actor_restarts_total{node=\"" + receiver + "\",actor=\"hop\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("reason=\"hop_restart\"} 1"), std::string::npos) << m;
  // The bytes the two hops put together, verified against the model's digest, are resident: the
  // manager has nothing left to send there.
  auto held = ask<distribute_result>(*c.sys, c.gateway->gateway(), 30s, distribute_atom_v,
                                     distribute_request{{"big", 1}, {receiver}});
  ASSERT_TRUE(held.ok()) << held.error().message();
  EXPECT_TRUE(held->nodes.empty() && held->errors.empty());
}

}  // namespace cluster_actors_test
}  // namespace ember
