// ClusterGenerations on the deterministic coordinator (tests/actors/deterministic.hpp): its relays
// against scripted node routers that speak the generation protocol of
// actors/node_router_interface.hpp (answer true and stream; give the stream up with a resume final;
// hold it until the test kills them; refuse), a fake gateway that records ensure_atom, and a
// RoutingView the test publishes by hand. The sink records every call, so each test checks what a
// client would see: every token once, in order, one final call.
#include "actors/gateway/cluster_generations.hpp"

#include <gtest/gtest.h>

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include "actors/gateway/gateway_instruments.hpp"
#include "actors/gateway/routing_view.hpp"
#include "model/generation_spec.hpp"
#include "tests/actors/deterministic.hpp"

namespace ember {
namespace cluster_generations_test {

using namespace std::chrono_literals;

enum class Mode { stream, resume, hold, refuse, refuse_bad };

/// A node router's generation side, scripted.
struct NodeScript {
  Mode mode = Mode::stream;
  /// Tokens it generates, one chunk each (after the resume tokens it was given).
  std::vector<int32_t> tokens;
  std::vector<generate_request> requests;
  std::vector<std::string> cancels;
};

caf::behavior scripted_node(caf::event_based_actor* self, std::shared_ptr<NodeScript> script) {
  return {
      [self, script](generate_request& req, caf::actor& sink) -> caf::result<bool> {
        script->requests.push_back(req);
        if (script->mode == Mode::refuse) return to_caf(unavailable("queue full"));
        if (script->mode == Mode::refuse_bad) return to_caf(invalid_argument("prompt over the context window"));
        for (size_t i = 0; i < script->tokens.size(); ++i) {
          generate_chunk c;
          c.id = req.id;
          c.tokens = {script->tokens[i]};
          c.text = "t" + std::to_string(script->tokens[i]);
          self->send(sink, std::move(c));
        }
        generate_chunk last;
        last.id = req.id;
        if (script->mode == Mode::stream) {
          last.finish = FinishReason::stop;
          last.usage.completion_tokens = static_cast<uint32_t>(req.resume_tokens.size() + script->tokens.size());
          self->send(sink, std::move(last));
        } else if (script->mode == Mode::resume) {
          last.finish = FinishReason::error;
          last.error = {ErrorCode::unavailable, "model unloaded", true};
          self->send(sink, std::move(last));
        }  // hold: nothing more until killed
        return true;
      },
      [script](cancel_atom, const std::string& id) { script->cancels.push_back(id); },
  };
}

struct GatewayScript {
  std::vector<model_key> ensures;
};

caf::behavior fake_gateway(caf::event_based_actor*, std::shared_ptr<GatewayScript> script) {
  return {[script](ensure_atom, const model_key& key) { script->ensures.push_back(key); }};
}

/// What the front end's sink saw.
struct Seen {
  std::vector<Result<generate_chunk>> calls;
  std::vector<int32_t> tokens() const {
    std::vector<int32_t> out;
    for (const auto& c : calls) {
      if (c.ok()) out.insert(out.end(), c->tokens.begin(), c->tokens.end());
    }
    return out;
  }
  bool ended() const { return !calls.empty() && (!calls.back().ok() || calls.back()->is_final()); }
  int finals() const {
    int n = 0;
    for (const auto& c : calls) n += (!c.ok() || c->is_final()) ? 1 : 0;
    return n;
  }
};

class ClusterGenerationsTest : public ::testing::Test {
 protected:
  ClusterGenerationsTest() {
    gateway_ = caf::actor_cast<gateway_actor>(d_.sys().spawn(fake_gateway, gw_script_));
    ClusterGenerationsOptions o;
    o.cold_start_timeout = 2s;
    o.poll_interval = 10ms;
    o.ensure_interval = 500ms;
    service_ = std::make_unique<ClusterGenerations>(d_.sys(), view_, gateway_, &instruments_, o);
  }
  ~ClusterGenerationsTest() override {
    d_.run();
    EXPECT_EQ(service_->streams(), 0u);
    if (service_->streams() == 0) service_.reset();  // else it would wait for relays forever
    else service_.release();
  }

  /// A node named `name` (id `id`) with a scripted router.
  replica_ref node(uint64_t id, std::shared_ptr<NodeScript> script) {
    auto a = d_.sys().spawn(scripted_node, script);
    routers_[id] = a;
    replica_ref r;
    r.node_id = id;
    r.node = "n" + std::to_string(id);
    r.router = caf::actor_cast<node_router_actor>(a);
    return r;
  }

  static gpu::GenerationSpec spec() {
    gpu::GenerationSpec s;
    s.family = "gpt2";
    s.context_length = 64;
    s.vocab_size = 100;
    s.num_kv_layers = 1;
    s.num_kv_heads = 1;
    s.head_dim = 4;
    s.tokenizer = "tokenizer.json";
    return s;
  }

  /// Publishes model "lm" version 1 (generative unless told) with `replicas` ready.
  void publish(std::vector<replica_ref> replicas, bool generative = true) {
    auto snap = std::make_shared<RoutingSnapshot>();
    snap->subscribed = true;
    ModelView v;
    v.state.model = {"lm", 1};
    v.state.state = replicas.empty() ? ModelReadiness::unloaded : ModelReadiness::ready;
    v.ready = !replicas.empty();
    v.replicas = std::move(replicas);
    if (generative) v.generation = std::make_shared<const gpu::GenerationSpec>(spec());
    snap->models["lm"][1] = std::move(v);
    view_->publish(snap);
  }

  std::shared_ptr<Seen> generate(std::string id = "cmpl-1", std::vector<int32_t> resume = {}) {
    auto seen = std::make_shared<Seen>();
    generate_request r;
    r.id = std::move(id);
    r.model = {"lm", 0};
    r.prompt = "hello";
    r.max_tokens = 8;
    r.resume_tokens = std::move(resume);
    service_->generate(std::move(r), [seen](Result<generate_chunk> c) { seen->calls.push_back(std::move(c)); });
    return seen;
  }

  double metric(const std::string& name, const std::string& labels) {
    const std::string text = instruments_.registry().render();
    const std::string line = name + "{" + labels + "} ";
    auto at = text.find(line);
    if (at == std::string::npos) return 0;
    return std::stod(text.substr(at + line.size()));
  }

  testing::Deterministic d_;
  std::shared_ptr<RoutingView> view_ = std::make_shared<RoutingView>();
  GatewayInstruments instruments_;
  std::shared_ptr<GatewayScript> gw_script_ = std::make_shared<GatewayScript>();
  gateway_actor gateway_;
  std::map<uint64_t, caf::actor> routers_;
  std::unique_ptr<ClusterGenerations> service_;
};

TEST_F(ClusterGenerationsTest, StreamsEveryChunkInOrderAndEndsAfterTheFinal) {
  auto a = std::make_shared<NodeScript>();
  a->tokens = {7, 8, 9};
  publish({node(1, a)});
  auto seen = generate();
  d_.run();
  ASSERT_EQ(a->requests.size(), 1u);
  EXPECT_EQ(a->requests[0].model, (model_key{"lm", 1}));  // version 0 resolved to the highest
  EXPECT_TRUE(a->requests[0].resume_tokens.empty());
  EXPECT_EQ(seen->tokens(), (std::vector<int32_t>{7, 8, 9}));
  ASSERT_TRUE(seen->ended());
  EXPECT_EQ(seen->finals(), 1);
  EXPECT_EQ(seen->calls.back()->finish, FinishReason::stop);
  EXPECT_EQ(service_->streams(), 0u);
  EXPECT_EQ(view_->chooser().in_flight(1), 0u);
  EXPECT_EQ(metric("ember_generation_tokens_total", "model=\"lm\",version=\"1\""), 3);
  EXPECT_EQ(metric("ember_generation_requests_total", "model=\"lm\",version=\"1\",outcome=\"success\""), 1);
  EXPECT_EQ(metric("ember_generation_time_to_first_token_seconds_count", "model=\"lm\",version=\"1\""), 1);
  EXPECT_EQ(metric("ember_generation_inter_token_seconds_count", "model=\"lm\",version=\"1\""), 2);
  auto [counts, in_flight] = view_->direct().drain();  // what the gateway's load report adds
  EXPECT_EQ((counts[model_key{"lm", 1}].arrivals), 1u);
  EXPECT_EQ((counts[model_key{"lm", 1}].completions), 1u);
  EXPECT_TRUE(in_flight.empty());
}

TEST_F(ClusterGenerationsTest, AResumeFinalContinuesOnAnotherReplicaFromTheTokensSent) {
  auto a = std::make_shared<NodeScript>();
  a->mode = Mode::resume;
  a->tokens = {10, 11};
  auto b = std::make_shared<NodeScript>();
  b->tokens = {12, 13};
  publish({node(1, a), node(2, b)});
  auto seen = generate("cmpl-r", {5});
  d_.run();
  ASSERT_EQ(a->requests.size(), 1u);
  EXPECT_EQ(a->requests[0].resume_tokens, (std::vector<int32_t>{5}));
  ASSERT_EQ(b->requests.size(), 1u);
  EXPECT_EQ(b->requests[0].resume_tokens, (std::vector<int32_t>{5, 10, 11}));  // the client's own, then those sent
  EXPECT_EQ(seen->tokens(), (std::vector<int32_t>{10, 11, 12, 13}));          // each once, in order
  EXPECT_EQ(seen->finals(), 1);
  EXPECT_EQ(seen->calls.back()->finish, FinishReason::stop);
  for (const auto& c : seen->calls) EXPECT_FALSE(c->error.resume);  // the resume final never reaches the client
  EXPECT_EQ(metric("ember_generation_resumed_total", "model=\"lm\",version=\"1\""), 1);
  EXPECT_EQ(view_->chooser().in_flight(1) + view_->chooser().in_flight(2), 0u);
  auto [counts, in_flight] = view_->direct().drain();
  EXPECT_EQ((counts[model_key{"lm", 1}].arrivals), 1u);  // one stream, though sent twice
  EXPECT_EQ((counts[model_key{"lm", 1}].completions), 1u);
  EXPECT_TRUE(in_flight.empty());
}

TEST_F(ClusterGenerationsTest, ANodeThatDiesMidStreamIsContinuedElsewhere) {
  auto a = std::make_shared<NodeScript>();
  a->mode = Mode::hold;
  a->tokens = {20, 21};
  auto b = std::make_shared<NodeScript>();
  b->tokens = {22};
  publish({node(1, a), node(2, b)});
  auto seen = generate();
  d_.run();
  EXPECT_EQ(seen->tokens(), (std::vector<int32_t>{20, 21}));
  EXPECT_FALSE(seen->ended());
  EXPECT_EQ(view_->chooser().in_flight(1), 1u);
  EXPECT_EQ((view_->direct().drain().second), (std::map<std::pair<model_key, uint64_t>, uint32_t>{{{{"lm", 1}, 1}, 1}}));
  caf::anon_send_exit(routers_[1], caf::exit_reason::kill);
  d_.run();
  ASSERT_EQ(b->requests.size(), 1u);
  EXPECT_EQ(b->requests[0].resume_tokens, (std::vector<int32_t>{20, 21}));
  EXPECT_EQ(seen->tokens(), (std::vector<int32_t>{20, 21, 22}));
  EXPECT_EQ(seen->finals(), 1);
  EXPECT_EQ(view_->chooser().in_flight(1) + view_->chooser().in_flight(2), 0u);
}

TEST_F(ClusterGenerationsTest, ALostNodeWithNoOtherReplicaEndsTheStreamWithAnErrorChunk) {
  auto a = std::make_shared<NodeScript>();
  a->mode = Mode::hold;
  a->tokens = {30};
  publish({node(1, a)});
  auto seen = generate();
  d_.run();
  caf::anon_send_exit(routers_[1], caf::exit_reason::kill);
  d_.run();
  ASSERT_TRUE(seen->ended());
  EXPECT_EQ(seen->tokens(), (std::vector<int32_t>{30}));
  ASSERT_TRUE(seen->calls.back().ok());
  EXPECT_EQ(seen->calls.back()->finish, FinishReason::error);
  EXPECT_EQ(seen->calls.back()->error.code, ErrorCode::unavailable);
  EXPECT_EQ(seen->calls.back()->usage.completion_tokens, 1u);
}

TEST_F(ClusterGenerationsTest, ResumesAreBoundedByMaxAttempts) {
  std::vector<std::shared_ptr<NodeScript>> nodes;
  std::vector<replica_ref> refs;
  for (uint64_t i = 1; i <= 4; ++i) {
    nodes.push_back(std::make_shared<NodeScript>());
    nodes.back()->mode = Mode::resume;
    nodes.back()->tokens = {static_cast<int32_t>(40 + i)};
    refs.push_back(node(i, nodes.back()));
  }
  publish(refs);
  auto seen = generate();
  d_.run();
  EXPECT_EQ(nodes[3]->requests.size(), 0u);  // three sends at most
  EXPECT_EQ(seen->tokens(), (std::vector<int32_t>{41, 42, 43}));
  ASSERT_TRUE(seen->ended());
  EXPECT_EQ(seen->calls.back()->error.code, ErrorCode::unavailable);
  EXPECT_EQ(seen->finals(), 1);
}

TEST_F(ClusterGenerationsTest, ARefusalBeforeAnyChunkTriesAnotherReplicaOrReachesTheSink) {
  auto a = std::make_shared<NodeScript>();
  a->mode = Mode::refuse;
  auto b = std::make_shared<NodeScript>();
  b->tokens = {1};
  publish({node(1, a), node(2, b)});
  auto seen = generate();
  d_.run();
  EXPECT_EQ(a->requests.size(), 1u);
  EXPECT_EQ(seen->tokens(), (std::vector<int32_t>{1}));
  EXPECT_EQ(seen->finals(), 1);

  auto bad = std::make_shared<NodeScript>();
  bad->mode = Mode::refuse_bad;
  publish({node(3, bad)});
  auto refused = generate("cmpl-2");
  d_.run();
  ASSERT_EQ(refused->calls.size(), 1u);
  ASSERT_FALSE(refused->calls[0].ok());
  EXPECT_EQ(refused->calls[0].error().code(), ErrorCode::invalid_argument);

  // Every replica full: the client is told so (the node's own words), not that a node was lost.
  auto full = std::make_shared<NodeScript>();
  full->mode = Mode::refuse;
  publish({node(4, full)});
  auto busy = generate("cmpl-3");
  d_.run();
  ASSERT_EQ(busy->calls.size(), 1u);
  ASSERT_FALSE(busy->calls[0].ok());
  EXPECT_EQ(busy->calls[0].error().code(), ErrorCode::unavailable);
  EXPECT_EQ(busy->calls[0].error().message(), "queue full");
}

TEST_F(ClusterGenerationsTest, CancelReachesTheNodeAndEndsTheStream) {
  auto a = std::make_shared<NodeScript>();
  a->mode = Mode::hold;
  a->tokens = {50};
  publish({node(1, a)});
  auto seen = generate("chatcmpl-9");
  d_.run();
  service_->cancel("chatcmpl-9");
  service_->cancel("nobody");  // does nothing
  d_.run();
  EXPECT_EQ(a->cancels, (std::vector<std::string>{"chatcmpl-9"}));
  EXPECT_EQ(seen->finals(), 1);
  EXPECT_EQ(service_->streams(), 0u);
  EXPECT_EQ(view_->chooser().in_flight(1), 0u);
  EXPECT_EQ(metric("ember_generation_requests_total", "model=\"lm\",version=\"1\",outcome=\"cancelled\""), 1);
}

TEST_F(ClusterGenerationsTest, AColdModelIsEnsuredAndWaitsForAReplica) {
  publish({});
  auto seen = generate();
  d_.run();
  EXPECT_EQ(gw_script_->ensures, (std::vector<model_key>{{"lm", 1}}));
  EXPECT_TRUE(seen->calls.empty());
  d_.advance(100ms);
  EXPECT_TRUE(seen->calls.empty());
  auto a = std::make_shared<NodeScript>();
  a->tokens = {60, 61};
  publish({node(1, a)});
  d_.advance(10ms);
  EXPECT_EQ(seen->tokens(), (std::vector<int32_t>{60, 61}));
  EXPECT_EQ(seen->finals(), 1);
}

TEST_F(ClusterGenerationsTest, AColdModelWithNoReplicaInTimeIsRefusedUnavailable) {
  publish({});
  auto seen = generate();
  d_.run();
  for (int i = 0; i < 250 && seen->calls.empty(); ++i) d_.advance(10ms);
  ASSERT_EQ(seen->calls.size(), 1u);
  ASSERT_FALSE(seen->calls[0].ok());
  EXPECT_EQ(seen->calls[0].error().code(), ErrorCode::unavailable);
  EXPECT_GE(gw_script_->ensures.size(), 4u);  // asked again every ensure interval
}

TEST_F(ClusterGenerationsTest, RefusesAtOnceWhatTheViewTells) {
  auto a = std::make_shared<NodeScript>();
  publish({node(1, a)}, /*generative=*/false);
  auto plain = generate();
  ASSERT_EQ(plain->calls.size(), 1u);  // on the calling thread, before generate() returns
  EXPECT_EQ(plain->calls[0].error().code(), ErrorCode::invalid_argument);

  auto seen = std::make_shared<Seen>();
  generate_request r;
  r.id = "x";
  r.model = {"nope", 0};
  r.prompt = "hi";
  service_->generate(r, [seen](Result<generate_chunk> c) { seen->calls.push_back(std::move(c)); });
  ASSERT_EQ(seen->calls.size(), 1u);
  EXPECT_EQ(seen->calls[0].error().code(), ErrorCode::not_found);
  EXPECT_NE(seen->calls[0].error().message().find("unknown model 'nope'"), std::string::npos);
  EXPECT_TRUE(a->requests.empty());
}

TEST_F(ClusterGenerationsTest, ModelsListsTheGenerativeOnes) {
  EXPECT_EQ(service_->models().error().code(), ErrorCode::unavailable);  // no table yet
  publish({});
  auto models = service_->models();
  ASSERT_TRUE(models.ok());
  ASSERT_EQ(models->size(), 1u);
  EXPECT_EQ((*models)[0].name, "lm");
  EXPECT_EQ((*models)[0].version, 1u);
  EXPECT_EQ((*models)[0].context_tokens, 64u);
  publish({}, /*generative=*/false);
  EXPECT_TRUE(service_->models()->empty());
}

}  // namespace cluster_generations_test
}  // namespace ember
