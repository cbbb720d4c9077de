// The gateway actor on the deterministic coordinator (tests/actors/deterministic.hpp), with a fake
// manager (subscribe answered with a table; ensure recorded and never answered) and fake node
// routers (infer answered, or held until the test kills the router). Time is the actor clock the
// test moves: a held request expires exactly at gateway.cold_start_timeout, and its duration in
// the metrics is that timeout exactly.
#include "actors/gateway/gateway.hpp"

#include <gtest/gtest.h>

#include <caf/event_based_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <nlohmann/json.hpp>

#include "actors/gateway/cluster_generations.hpp"
#include "actors/gateway/gateway_instruments.hpp"
#include "actors/gateway/routing_view.hpp"
#include "base/work_queue.hpp"
#include "model/architectures.hpp"
#include "model/generation_spec.hpp"
#include "tests/actors/deterministic.hpp"

namespace ember {
namespace gateway_test {

using namespace std::chrono_literals;

const model_key kModel{"m", 1};

std::string manifest_json() {
  static const std::string text = gpu::manifest_to_json(gpu::build_architecture("mlp", {true, 5, {}})->manifest());
  return text;
}

/// The fake manager's side of the story.
struct ManagerScript {
  routing_update table;
  std::vector<model_key> ensures;
  gateway_actor subscriber;
};

caf::behavior fake_manager(caf::event_based_actor* self, std::shared_ptr<ManagerScript> script) {
  auto never_answered = std::make_shared<std::vector<caf::response_promise>>();
  return {
      [script](subscribe_atom, const gateway_actor& g) {
        script->subscriber = g;
        return script->table;
      },
      [script](subscribe_atom, const gateway_actor& g, uint64_t) {  // a gateway that holds a table
        script->subscriber = g;
        return script->table;
      },
      // As the manager does: the routing update to its subscribers, then the answer.
      [self, script](unload_atom, const model_command& cmd) {
        routing_update u;
        u.epoch = ++script->table.epoch;
        routing_entry e;
        e.state.model = cmd.model;
        e.state.state = ModelReadiness::unloaded;
        e.state.explicitly_unloaded = true;
        e.manifest_json = manifest_json();
        u.entries.push_back(e);
        self->send(script->subscriber, u);
        return e.state;
      },
      [self, script, never_answered](ensure_atom, const model_key& key) -> caf::result<model_state> {
        script->ensures.push_back(key);
        never_answered->push_back(self->make_response_promise());
        return never_answered->back();
      },
  };
}

/// A node router: answers inference (naming itself) or holds it until it dies; answers metrics
/// unless told not to.
struct RouterScript {
  std::string node;
  bool answer_infer = true;
  bool answer_metrics = true;
  int infers = 0;
  int workflows = 0;
  /// Pipeline requests taken as the first stage: their hops' node names, and the model asked for.
  std::vector<std::vector<std::string>> stage_hops;
  /// Pipeline requests fail with this (a stage further down died).
  std::optional<Error> stage_error;
  /// Inference requests fail with this (its replica cannot run now: an executor restarting).
  std::optional<Error> infer_error;
};

caf::behavior fake_router(caf::event_based_actor* self, std::shared_ptr<RouterScript> script) {
  auto held = std::make_shared<std::vector<caf::response_promise>>();  // dies with the router
  // An answer naming this router, or none (held until the router dies).
  auto answer = [self, script, held](const infer_request& req) -> caf::result<infer_reply> {
    if (!script->answer_infer) {
      held->push_back(self->make_response_promise());
      return held->back();
    }
    infer_reply r;
    r.model = req.model;
    r.id = req.id;
    r.node = script->node;
    return r;
  };
  return {
      [script, answer](infer_request& req) -> caf::result<infer_reply> {
        ++script->infers;
        if (script->infer_error) return to_caf(*script->infer_error);
        return answer(req);
      },
      [script, answer](workflow_request& req) -> caf::result<infer_reply> {
        ++script->workflows;
        return answer(req.request);
      },
      [self, script, held](stage_request& req) -> caf::result<infer_reply> {
        std::vector<std::string> nodes;
        for (const auto& h : req.hops) nodes.push_back(h.node);
        script->stage_hops.push_back(nodes);
        if (script->stage_error) return to_caf(*script->stage_error);
        if (!script->answer_infer) {
          held->push_back(self->make_response_promise());
          return held->back();
        }
        infer_reply r;
        r.model = req.request.model;
        r.id = req.request.id;
        r.node = "pipeline via " + script->node;
        return r;
      },
      [self, script, held](metrics_atom) -> caf::result<metrics_snapshot> {
        if (!script->answer_metrics) {
          held->push_back(self->make_response_promise());
          return held->back();
        }
        metrics::Registry registry;
        registry.counter("ember_fake_total", "A node's own counter").with(std::vector<std::string>{}).inc(3);
        return registry.snapshot();
      },
  };
}

routing_entry entry(const model_key& key, std::vector<replica_ref> replicas) {
  routing_entry e;
  e.state.model = key;
  e.state.state = replicas.empty() ? ModelReadiness::unloaded : ModelReadiness::ready;
  e.state.replicas = static_cast<uint32_t>(replicas.size());
  e.manifest_json = manifest_json();
  e.replicas = std::move(replicas);
  return e;
}

class GatewayTest : public ::testing::Test {
 protected:
  GatewayTest() {
    config_.cold_start_timeout_us = 2'000'000;
    config_.request_timeout_us = 10'000'000;
    manager_script_->table.epoch = 1;
    manager_script_->table.full = true;
  }

  ~GatewayTest() override {
    // The fake manager holds unanswered promises to the gateway, which holds the manager: end both.
    caf::anon_send_exit(gateway_, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(manager_, caf::exit_reason::user_shutdown);
    for (auto& [id, a] : actors_) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    d_.run();
  }

  /// A router the test can kill, as a replica on node `id`.
  replica_ref router(uint64_t id, bool answer_infer = true) {
    auto script = std::make_shared<RouterScript>();
    script->node = "r" + std::to_string(id);
    script->answer_infer = answer_infer;
    routers_[id] = script;
    auto handle = d_.sys().spawn(fake_router, script);
    actors_[id] = handle;
    return {id, script->node, caf::actor_cast<node_router_actor>(handle)};
  }

  void start() {
    manager_ = d_.sys().spawn(fake_manager, manager_script_);
    gateway_ = spawn_gateway(d_.sys(), config_, manager_, view_, &instruments_, metrics_queue_);
    d_.run();
    ASSERT_TRUE(view_->snapshot()->subscribed);
  }

  std::shared_ptr<testing::Answer<infer_reply>> infer(std::string id) {
    return d_.request<infer_reply>(gateway_, infer_request{kModel, std::move(id), {}, {}});
  }

  std::string metrics_text() { return metrics::render(instruments_.registry().snapshot()); }

  testing::Deterministic d_;
  GatewayConfig config_;
  std::shared_ptr<ManagerScript> manager_script_ = std::make_shared<ManagerScript>();
  std::map<uint64_t, std::shared_ptr<RouterScript>> routers_;
  std::map<uint64_t, caf::actor> actors_;
  std::shared_ptr<RoutingView> view_ = std::make_shared<RoutingView>();
  GatewayInstruments instruments_;
  WorkQueue metrics_queue_{{.threads = 0}};
  caf::actor manager_;
  gateway_actor gateway_;
};

TEST_F(GatewayTest, AHeldRequestExpiresExactlyAtTheColdStartTimeoutAndNotBefore) {
  manager_script_->table.entries = {entry(kModel, {})};
  start();
  auto answer = infer("cold");
  d_.run();
  ASSERT_FALSE(answer->done());
  EXPECT_EQ(manager_script_->ensures, std::vector<model_key>{kModel});
  d_.advance(1999ms);
  EXPECT_FALSE(answer->done()) << "expired before gateway.cold_start_timeout";
  d_.advance(1ms);
  ASSERT_TRUE(answer->done());
  ASSERT_FALSE(answer->ok());
  EXPECT_EQ(answer->error().code(), ErrorCode::unavailable);
  EXPECT_EQ(answer->error().message(), "no replica of model m/1 became ready within 2000 ms; retry later");
  // The request's duration comes from the actor clock: exactly the timeout.
  const std::string text = metrics_text();
  EXPECT_NE(text.find("ember_request_duration_seconds_sum{model=\"m\",version=\"1\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ember_requests_total{model=\"m\",version=\"1\",outcome=\"unavailable\"} 1"), std::string::npos)
      << text;
}

TEST_F(GatewayTest, AGenerationForAColdModelHasTheGatewayEnsureItThoughNoRequestIsHeld) {
  // A generative version: the mlp's manifest with a generation section (the view is all that reads it).
  gpu::GenerationSpec spec;
  spec.family = "gpt2";
  spec.context_length = 32;
  spec.vocab_size = 16;
  spec.num_kv_layers = spec.num_kv_heads = 1;
  spec.head_dim = 4;
  spec.tokenizer = "tokenizer.json";
  nlohmann::ordered_json section;
  gpu::generation_to_json(spec, section);
  auto manifest = nlohmann::json::parse(manifest_json());
  manifest["generation"] = nlohmann::json::parse(section.dump());
  auto e = entry(kModel, {});
  e.manifest_json = manifest.dump();
  manager_script_->table.entries = {e};
  start();
  ClusterGenerationsOptions o;
  o.cold_start_timeout = 2s;
  ClusterGenerations generations(d_.sys(), view_, gateway_, &instruments_, o);
  ASSERT_EQ(generations.models()->size(), 1u);
  std::vector<Result<generate_chunk>> seen;
  generate_request r;
  r.id = "cmpl-1";
  r.model = {"m", 0};
  r.prompt = "hi";
  generations.generate(r, [&seen](Result<generate_chunk> c) { seen.push_back(std::move(c)); });
  d_.run();
  EXPECT_EQ(manager_script_->ensures, std::vector<model_key>{kModel});
  d_.advance(2s);  // no replica comes: refused at the cold-start timeout
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].error().code(), ErrorCode::unavailable);
  EXPECT_EQ(manager_script_->ensures.size(), 1u) << "one ensure per model at a time, the first still unanswered";
  EXPECT_EQ(generations.streams(), 0u);
}

TEST_F(GatewayTest, HeldRequestsAreReleasedWhenTheReplicasRoutingUpdateArrivesWithOneEnsureForAll) {
  manager_script_->table.entries = {entry(kModel, {})};
  start();
  auto first = infer("a");
  auto second = infer("b");
  d_.run();
  d_.advance(1500ms);
  ASSERT_FALSE(first->done());
  ASSERT_FALSE(second->done());
  EXPECT_EQ(manager_script_->ensures.size(), 1u) << "one ensure per model, however many requests wait";
  routing_update warm;
  warm.epoch = 2;
  warm.entries = {entry(kModel, {router(1)})};
  caf::anon_send(gateway_, warm);
  d_.run();
  ASSERT_TRUE(first->ok());
  ASSERT_TRUE(second->ok());
  EXPECT_EQ(first->value().node, "r1");
  EXPECT_EQ(first->value().id, "a");
  EXPECT_EQ(second->value().id, "b");
  EXPECT_EQ(routers_[1]->infers, 2);
  EXPECT_TRUE(view_->snapshot()->find("m", 1)->ready);
  EXPECT_NE(metrics_text().find("ember_cold_starts_total{model=\"m\",version=\"1\"} 2"), std::string::npos);
}

TEST_F(GatewayTest, APipelineServesWhileNoReplicaIsReadyAndFullReplicasTakeOverInOneUpdate) {
  manager_script_->table.entries = {entry(kModel, {})};
  start();
  auto held = infer("held");
  d_.run();
  ASSERT_FALSE(held->done());
  // The manager publishes a pipeline of two stages (a partitioned cold start): the held request
  // goes to the first stage, carrying the hops.
  const replica_ref a = router(1), b = router(2);
  routing_update staged;
  staged.epoch = 2;
  staged.entries = {entry(kModel, {})};
  staged.entries[0].pipeline = {{caf::actor_cast<caf::actor>(a.router), stage_key_of(kModel, 0, 3), "r1"},
                                {caf::actor_cast<caf::actor>(b.router), stage_key_of(kModel, 3, 6), "r2"}};
  caf::anon_send(gateway_, staged);
  d_.run();
  ASSERT_TRUE(held->ok()) << held->error().to_string();
  EXPECT_EQ(held->value().node, "pipeline via r1");
  EXPECT_EQ(held->value().model, kModel);
  ASSERT_EQ(routers_[1]->stage_hops.size(), 1u);
  EXPECT_EQ(routers_[1]->stage_hops[0], (std::vector<std::string>{"r1", "r2"}));
  EXPECT_EQ(routers_[1]->infers, 0);
  // The members complete: one update moves them into the replicas and drops the pipeline; the
  // next requests go to full replicas only.
  routing_update complete;
  complete.epoch = 3;
  complete.entries = {entry(kModel, {a, b})};
  caf::anon_send(gateway_, complete);
  d_.run();
  for (const char* id : {"w1", "w2"}) {
    auto warm = infer(id);
    d_.run();
    ASSERT_TRUE(warm->ok());
    EXPECT_EQ(warm->value().node.rfind("pipeline", 0), std::string::npos) << warm->value().node;
  }
  EXPECT_EQ(routers_[1]->stage_hops.size(), 1u);
  EXPECT_EQ(routers_[1]->infers + routers_[2]->infers, 2);
}

TEST_F(GatewayTest, APipelineWhoseFirstStageDiesHoldsItsRequestsForTheManagersNextMove) {
  const replica_ref a = router(1, /*answer_infer=*/false), b = router(2);
  manager_script_->table.entries = {entry(kModel, {})};
  manager_script_->table.entries[0].pipeline = {
      {caf::actor_cast<caf::actor>(a.router), stage_key_of(kModel, 0, 3), "r1"},
      {caf::actor_cast<caf::actor>(b.router), stage_key_of(kModel, 3, 6), "r2"}};
  manager_script_->table.members = {a, b};
  start();
  auto req = infer("x");
  d_.run();
  ASSERT_EQ(routers_[1]->stage_hops.size(), 1u);
  ASSERT_FALSE(req->done());
  // The first stage's node dies with the request: the pipeline leaves the gateway's table at once
  // and the request is held (a replica or a rebuilt pipeline will come), not lost.
  caf::anon_send_exit(actors_[1], caf::exit_reason::kill);
  d_.run();
  ASSERT_FALSE(req->done());
  routing_update warm;
  warm.epoch = 2;
  warm.entries = {entry(kModel, {b})};
  caf::anon_send(gateway_, warm);
  d_.run();
  ASSERT_TRUE(req->ok()) << req->error().to_string();
  EXPECT_EQ(req->value().node, "r2");
}

TEST_F(GatewayTest, ARequestWhosePipelineFailsWaitsForTheReplicasInsteadOfFailing) {
  const replica_ref a = router(1), b = router(2);
  routers_[1]->stage_error = unavailable("pipeline stage on node r2 went down");
  manager_script_->table.entries = {entry(kModel, {})};
  manager_script_->table.entries[0].pipeline = {
      {caf::actor_cast<caf::actor>(a.router), stage_key_of(kModel, 0, 3), "r1"},
      {caf::actor_cast<caf::actor>(b.router), stage_key_of(kModel, 3, 6), "r2"}};
  start();
  auto req = infer("x");
  d_.run();
  // Sent once through the pipeline, which failed: the gateway stops using it and holds the request.
  ASSERT_EQ(routers_[1]->stage_hops.size(), 1u);
  ASSERT_FALSE(req->done());
  auto again = infer("y");
  d_.run();
  EXPECT_EQ(routers_[1]->stage_hops.size(), 1u) << "a failed pipeline was used again";
  routing_update warm;
  warm.epoch = 2;
  warm.entries = {entry(kModel, {a})};
  caf::anon_send(gateway_, warm);
  d_.run();
  ASSERT_TRUE(req->ok()) << req->error().to_string();
  ASSERT_TRUE(again->ok()) << again->error().to_string();
  EXPECT_EQ(req->value().node, "r1");
}

TEST_F(GatewayTest, ARequestWhoseNodeIsLostIsRetriedOnceOnAnotherReplica) {
  manager_script_->table.entries = {entry(kModel, {router(1, /*answer_infer=*/false), router(2)})};
  start();
  auto answer = infer("x");
  d_.run();
  ASSERT_EQ(routers_[1]->infers, 1) << "the premise: the request went to the first replica";
  ASSERT_FALSE(answer->done());
  caf::anon_send_exit(actors_[1], caf::exit_reason::kill);
  d_.run();
  ASSERT_TRUE(answer->ok()) << answer->error().message();
  EXPECT_EQ(answer->value().node, "r2");
  EXPECT_EQ(routers_[2]->infers, 1);
  EXPECT_NE(metrics_text().find("ember_request_retries_total{model=\"m\",version=\"1\"} 1"), std::string::npos);
  EXPECT_TRUE(view_->snapshot()->find("m", 1)->ready);
  EXPECT_TRUE(manager_script_->ensures.empty());
}

// A node that refuses at once (its replica cannot run now) has the fewest requests in flight: a retry
// that chose the least loaded replica again would land there every time until it gave up. The retry
// leaves the refusing node out while another replica is ready.
TEST_F(GatewayTest, ARequestANodeRefusesIsRetriedOnAnotherReplicaNotOnTheRefusingOneAgain) {
  manager_script_->table.entries = {entry(kModel, {router(1), router(2, /*answer_infer=*/false)})};
  start();
  routers_[1]->infer_error = unavailable("no replica of m/1 can run here now");
  auto busy = infer("x");  // r1 refuses, the retry is held on r2: r2 has one in flight, r1 none
  d_.run();
  ASSERT_EQ(routers_[1]->infers, 1);
  ASSERT_EQ(routers_[2]->infers, 1);
  ASSERT_FALSE(busy->done());
  routers_[2]->answer_infer = true;
  auto answer = infer("y");  // least loaded: r1, which refuses; the retry goes to r2, not to r1 again
  d_.run();
  ASSERT_TRUE(answer->ok()) << answer->error().message();
  EXPECT_EQ(answer->value().node, "r2");
  EXPECT_EQ(routers_[1]->infers, 2) << "asked once per request: each refusal sent its retry elsewhere";
}

// The manager dropped a node that stopped answering (SIGSTOP: its process and its connection live,
// so no down message ever reaches this gateway, which may reach the node directly): the request in
// flight there is re-sent with the update that says so, not left to the request timeout.
TEST_F(GatewayTest, ARequestOnANodeTheManagerDroppedIsResentAtOnceThoughTheNodeNeverWentDown) {
  const replica_ref stopped = router(1, /*answer_infer=*/false), live = router(2);
  manager_script_->table.entries = {entry(kModel, {stopped, live})};
  manager_script_->table.members = {stopped, live};
  start();
  auto answer = infer("x");
  d_.run();
  ASSERT_EQ(routers_[1]->infers, 1) << "the premise: the request went to the node that stops answering";
  ASSERT_FALSE(answer->done());
  routing_update dropped;
  dropped.epoch = 2;
  dropped.entries = {entry(kModel, {live})};
  dropped.members = {live};
  caf::anon_send(gateway_, dropped);
  d_.run();  // no time passes
  ASSERT_TRUE(answer->ok()) << answer->error().message();
  EXPECT_EQ(answer->value().node, "r2");
  EXPECT_NE(metrics_text().find("ember_request_retries_total{model=\"m\",version=\"1\"} 1"), std::string::npos);
}

// A node's requests go to the actor it reports for them (its router, not its supervisor). When that
// one goes down while the node's handle lives (a router its supervisor restarts), the node's
// replicas leave the table until the manager publishes the new one, what was in flight there is
// re-sent, and the node stays a member.
TEST_F(GatewayTest, RequestsGoToTheNodesRequestsActorAndAreResentWhenItGoesDown) {
  replica_ref one = router(1);
  one.requests = router(3, /*answer_infer=*/false).router;
  const replica_ref two = router(2);
  manager_script_->table.entries = {entry(kModel, {one, two})};
  manager_script_->table.members = {one, two};
  start();
  auto answer = infer("x");
  d_.run();
  ASSERT_EQ(routers_[3]->infers, 1) << "the first of two idle replicas, at node 1's requests actor";
  EXPECT_EQ(routers_[1]->infers, 0) << "the node's handle is off the request path";
  ASSERT_FALSE(answer->done());
  caf::anon_send_exit(actors_[3], caf::exit_reason::kill);
  d_.run();
  ASSERT_TRUE(answer->ok()) << answer->error().message();
  EXPECT_EQ(answer->value().node, "r2");
  const ModelView* m = view_->snapshot()->find("m", 1);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->replicas.size(), 1u) << "node 1's replica waits for the manager's next update";
  EXPECT_EQ(m->replicas.front().node_id, 2u);
  auto again = infer("y");
  d_.run();
  ASSERT_TRUE(again->ok());
  EXPECT_EQ(routers_[1]->infers, 0);
  // The manager publishes the restarted router: node 1 serves again, through it.
  replica_ref back = one;
  back.requests = router(4).router;
  routing_update moved;
  moved.epoch = 2;
  moved.entries = {entry(kModel, {back, two})};
  moved.members = {back, two};
  caf::anon_send(gateway_, moved);
  d_.run();
  EXPECT_EQ(view_->snapshot()->find("m", 1)->replicas.size(), 2u);
  for (const char* id : {"a", "b", "c", "d"}) {
    auto r = infer(id);
    d_.run();
    ASSERT_TRUE(r->ok());
  }
  EXPECT_GT(routers_[4]->infers, 0);
  EXPECT_EQ(routers_[1]->infers, 0);
}

// A replica that leaves the table while its node stays a member (retired by a scale-down or a
// drain) answers what it holds: nothing is re-sent.
TEST_F(GatewayTest, ARequestOnARetiredReplicaOfANodeThatStaysAMemberIsNotResent) {
  const replica_ref draining = router(1, /*answer_infer=*/false), other = router(2);
  manager_script_->table.entries = {entry(kModel, {draining, other})};
  manager_script_->table.members = {draining, other};
  start();
  auto answer = infer("x");
  d_.run();
  ASSERT_EQ(routers_[1]->infers, 1);
  routing_update retired;
  retired.epoch = 2;
  retired.entries = {entry(kModel, {other})};
  retired.members = {draining, other};
  caf::anon_send(gateway_, retired);
  d_.run();
  EXPECT_FALSE(answer->done());
  EXPECT_EQ(routers_[2]->infers, 0);
}

// A standalone gateway reaches a node it has not dialed through the manager's process (here: the
// nodes publish no router to dial). When the manager goes, that way goes with it and no down message
// says so: the request in flight there is taken back and waits for a replica the gateway can reach,
// which the manager brings when it is back. (integration.control_tls saw such a request time out.)
TEST_F(GatewayTest, AStandaloneGatewayThatLosesItsManagerResendsWhatWentThroughItsProcess) {
  WorkQueue dials{{.threads = 0}};
  const replica_ref behind = router(1, /*answer_infer=*/false);
  manager_script_->table.entries = {entry(kModel, {behind})};
  manager_script_->table.members = {behind};  // control port 0: nothing to dial
  manager_ = d_.sys().spawn(fake_manager, manager_script_);
  gateway_ = spawn_gateway(d_.sys(), config_, caf::actor{}, view_, &instruments_, metrics_queue_, &dials);
  caf::anon_send(gateway_, manager_atom_v, manager_);
  d_.run();
  ASSERT_TRUE(view_->snapshot()->find("m", 1)->ready);
  auto answer = infer("x");
  d_.run();
  ASSERT_EQ(routers_[1]->infers, 1);
  caf::anon_send_exit(manager_, caf::exit_reason::kill);
  d_.run();
  EXPECT_FALSE(view_->snapshot()->find("m", 1)->ready) << "a replica reached through the lost manager stayed";
  ASSERT_FALSE(answer->done()) << "held for a replica the gateway can reach";
  auto back = std::make_shared<ManagerScript>();
  const replica_ref reachable = router(2);
  back->table.epoch = 7;
  back->table.full = true;
  back->table.entries = {entry(kModel, {reachable})};
  back->table.members = {reachable};
  manager_ = d_.sys().spawn(fake_manager, back);
  caf::anon_send(gateway_, manager_atom_v, manager_);
  d_.run();
  ASSERT_TRUE(answer->ok()) << answer->error().message();
  EXPECT_EQ(answer->value().node, "r2");
  caf::anon_send_exit(gateway_, caf::exit_reason::user_shutdown);  // before `dials` goes
  d_.run();
}

TEST_F(GatewayTest, AnUnloadIsAnsweredOnlyOnceTheGatewaysViewShowsIt) {
  manager_script_->table.entries = {entry(kModel, {router(1)})};
  start();
  ASSERT_TRUE(view_->snapshot()->find("m", 1)->ready);
  model_command cmd;
  cmd.model = kModel;
  auto answer = d_.request<model_state>(gateway_, unload_atom_v, cmd);
  // Newest message first: a reply sent past the gateway would reach the client before the
  // gateway took the manager's routing update, and the client's next request would be routed
  // by a view that still holds the replica.
  while (!answer->done() && d_.sched().try_run_once_lifo()) {
  }
  ASSERT_TRUE(answer->ok()) << answer->error().message();
  EXPECT_TRUE(answer->value().explicitly_unloaded);
  EXPECT_TRUE(view_->snapshot()->find("m", 1)->state.explicitly_unloaded)
      << "the client is told before the gateway's view knows";
  d_.run();
}

TEST_F(GatewayTest, ARequestWhoseOnlyReplicaIsLostWaitsForAReplacementAndFailsClearlyWhenNoneComes) {
  manager_script_->table.entries = {entry(kModel, {router(1, /*answer_infer=*/false)})};
  start();
  auto answer = infer("x");
  d_.run();
  ASSERT_EQ(routers_[1]->infers, 1);
  caf::anon_send_exit(actors_[1], caf::exit_reason::kill);
  d_.run();
  EXPECT_FALSE(view_->snapshot()->find("m", 1)->ready) << "the lost replica left the view at once";
  EXPECT_EQ(manager_script_->ensures, std::vector<model_key>{kModel}) << "the gateway asked for a replacement";
  d_.advance(1999ms);
  ASSERT_FALSE(answer->done());
  d_.advance(1ms);
  ASSERT_TRUE(answer->done());
  EXPECT_EQ(answer->error().code(), ErrorCode::unavailable);
  EXPECT_EQ(answer->error().message(), "no replica of model m/1 became ready within 2000 ms; retry later");
  EXPECT_NE(metrics_text().find("ember_request_retries_total{model=\"m\",version=\"1\"} 1"), std::string::npos);
}

TEST_F(GatewayTest, ARoutingUpdateThatMovesOnlyReplicasReusesEveryVersionsMetadata) {
  manager_script_->table.entries = {entry(kModel, {})};
  start();
  const auto before = view_->snapshot()->find("m", 1)->metadata_json;
  ASSERT_TRUE(before);
  EXPECT_NE(before->find(R"("versions":["1"])"), std::string::npos) << *before;
  routing_update warm;
  warm.epoch = 2;
  warm.entries = {entry(kModel, {router(1)})};
  caf::anon_send(gateway_, warm);
  d_.run();
  EXPECT_EQ(view_->snapshot()->find("m", 1)->metadata_json, before) << "metadata was built again for replicas only";
  routing_update second_version;
  second_version.epoch = 3;
  second_version.entries = {entry({"m", 2}, {})};
  caf::anon_send(gateway_, second_version);
  d_.run();
  const auto after = view_->snapshot()->find("m", 1)->metadata_json;
  ASSERT_NE(after, before);
  EXPECT_NE(after->find(R"("versions":["1","2"])"), std::string::npos) << *after;
}

TEST_F(GatewayTest, WorkflowsAreParsedOncePerChangeKeptAcrossUpdatesWithoutThemAndReplacedWhole) {
  const std::string text = R"({"inputs": ["x"], "steps": [{"name": "a", "model": "m", "inputs": {"input": "x"}}],
                                "outputs": {"y": "a.fc3"}})";
  manager_script_->table.entries = {entry(kModel, {})};
  manager_script_->table.workflows_set = true;
  manager_script_->table.workflows = {{"flow", text, ""}, {"bad", "{", ""}, {"refused", text, "the manager's reason"}};
  start();
  auto snap = view_->snapshot();
  ASSERT_EQ(snap->workflows.size(), 3u);
  const auto flow = snap->workflows.at("flow");
  ASSERT_TRUE(flow->config && flow->plan);
  EXPECT_EQ(flow->plan->steps(), 1u);
  EXPECT_FALSE(snap->workflows.at("bad")->config);
  EXPECT_NE(snap->workflows.at("bad")->entry.error.find("bad/workflow.json"), std::string::npos);
  EXPECT_FALSE(snap->workflows.at("refused")->config) << "the manager's error is kept, not parsed over";
  EXPECT_EQ(snap->workflows.at("refused")->entry.error, "the manager's reason");

  routing_update replicas_only;  // carries no workflows: they stay
  replicas_only.epoch = 2;
  replicas_only.entries = {entry(kModel, {router(1)})};
  caf::anon_send(gateway_, replicas_only);
  d_.run();
  EXPECT_EQ(view_->snapshot()->workflows.at("flow"), flow) << "the same parsed view";

  routing_update changed;  // the whole list again: flow unchanged, bad gone
  changed.epoch = 3;
  changed.workflows_set = true;
  changed.workflows = {{"flow", text, ""}, {"refused", text, ""}};
  caf::anon_send(gateway_, changed);
  d_.run();
  snap = view_->snapshot();
  EXPECT_EQ(snap->workflows.size(), 2u);
  EXPECT_EQ(snap->workflows.at("flow"), flow) << "unchanged text is not parsed again";
  EXPECT_TRUE(snap->workflows.at("refused")->config) << "its entry changed: parsed";
}

TEST_F(GatewayTest, AWholeWorkflowGoesToANodeHoldingEveryModelAndFailsRetryablyWhenThatNodeIsLost) {
  const model_key other{"n", 1};
  auto both = router(1, /*answer_infer=*/false);
  manager_script_->table.entries = {entry(kModel, {router(2), both}), entry(other, {both})};
  start();
  workflow_request w;
  w.name = "flow";
  w.models = {kModel, other};
  w.request.id = "w";
  auto answer = d_.request<infer_reply>(gateway_, w);
  d_.run();
  ASSERT_EQ(routers_[1]->workflows, 1) << "the only node holding both models";
  EXPECT_EQ(routers_[2]->workflows, 0);
  ASSERT_FALSE(answer->done());
  caf::anon_send_exit(actors_[1], caf::exit_reason::kill);
  d_.run();
  ASSERT_TRUE(answer->done());
  ASSERT_FALSE(answer->ok());
  EXPECT_EQ(answer->error().code(), ErrorCode::unavailable) << "the client runs the steps itself then";
  // No node holds both any more.
  auto none = d_.request<infer_reply>(gateway_, w);
  d_.run();
  ASSERT_FALSE(none->ok());
  EXPECT_NE(none->error().message().find("no node holds every model of workflow 'flow'"), std::string::npos);
}

TEST_F(GatewayTest, AScrapeMergesTheGatewayWithEveryNodeThatAnswersInTime) {
  auto answering = router(1);
  auto silent = router(2);
  routers_[2]->answer_metrics = false;
  manager_script_->table.members = {answering, silent};
  start();
  auto text = d_.request<std::string>(gateway_, metrics_atom_v);
  d_.run();
  ASSERT_FALSE(text->done()) << "the premise: one node has not answered";
  d_.advance(2s);
  ASSERT_TRUE(text->ok());
  EXPECT_NE(text->value().find("ember_fake_total{node=\"r1\"} 3"), std::string::npos) << text->value();
  EXPECT_NE(text->value().find("ember_held_requests{node=\"gateway\"} 0"), std::string::npos) << text->value();
  EXPECT_EQ(text->value().find("r2"), std::string::npos);
}

}  // namespace gateway_test
}  // namespace ember
