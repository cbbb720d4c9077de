// The model_cache on the deterministic coordinator, its fetch and hop queues inline (threads = 0):
// which source tier its metrics count bytes under, and that it outlives the multicast hops it
// spawned (the node process destroys the hop queue once the cache is gone). Fetch concurrency and
// LRU under real threads: node_actors_test.
#include "actors/node/model_cache.hpp"

#include <gtest/gtest.h>

#include <caf/event_based_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <map>
#include <string>
#include <vector>

#include "actors/node/blob_store.hpp"
#include "actors/node/node_instruments.hpp"
#include "model/model.hpp"
#include "tests/actors/actor_test_util.hpp"
#include "tests/actors/deterministic.hpp"
#include "tests/transport/transfer_test_util.hpp"
#include "transport/data_plane.hpp"

namespace ember {
namespace model_cache_test {

/// The bytes the cache's metrics count per source tier (ember_model_bytes_fetched_total).
std::map<std::string, double> fetched_by_source(NodeInstruments& instruments) {
  std::map<std::string, double> out;
  for (const auto& family : instruments.registry().snapshot().families) {
    if (family.name != "ember_model_bytes_fetched_total") continue;
    for (const auto& series : family.series) out[series.label_values.at(0)] = series.value;
  }
  return out;
}

fetch_blob request_for(const testing::Repository& repo, const std::string& name, uint32_t version) {
  const auto e = testing::repository_version(repo.path(), name, version);
  return {e.key, blob_key_of(e.key), e.weights_bytes, {}};
}

struct Cache {
  NodeInstruments instruments;  // outlives the actors, which write to it
  testing::Repository repo;
  WorkQueue inline_queue{{.threads = 0}};
  testing::Deterministic d;
  std::shared_ptr<BlobStore> store = std::make_shared<BlobStore>();
  model_cache_actor cache;

  Cache() {
    ModelCacheConfig c;
    c.repository = repo.path();
    cache = spawn_model_cache(d.sys(), c, store, &instruments, inline_queue, inline_queue);
    d.run();
  }
  ~Cache() {
    caf::anon_send_exit(cache, caf::exit_reason::user_shutdown);
    d.run();
  }
};

TEST(ModelCache, BytesReadFromTheNodesOwnRepositoryAreCountedAsLocalDiskThenAsCache) {
  Cache f;
  const fetch_blob req = request_for(f.repo, "mlp", 1);
  ASSERT_GT(req.blob_bytes, 0u);
  auto first = f.d.request<blob_ref>(f.cache, req);
  f.d.run();
  ASSERT_TRUE(first->ok()) << (first->done() ? first->error().message() : "no answer");
  EXPECT_EQ(first->value().source, SourceTier::local_disk);
  auto counted = fetched_by_source(f.instruments);
  EXPECT_EQ(counted["local_disk"], static_cast<double>(req.blob_bytes));
  EXPECT_EQ(counted.count("repository"), 0u) << "the node's own repository was counted as the cluster's";

  auto again = f.d.request<blob_ref>(f.cache, req);
  f.d.run();
  ASSERT_TRUE(again->ok());
  EXPECT_EQ(again->value().source, SourceTier::cache);
  counted = fetched_by_source(f.instruments);
  EXPECT_EQ(counted["cache"], static_cast<double>(req.blob_bytes));
  EXPECT_EQ(counted["local_disk"], static_cast<double>(req.blob_bytes));
}

/// A chain controller that never names a new upstream; it remembers which hops asked.
chain_controller_actor::behavior_type silent_controller(chain_controller_actor::pointer self,
                                                        std::vector<caf::actor>* asked) {
  return {
      [](chain_progress&) {},
      [self, asked](const chain_upstream_request&) -> caf::result<blob_source> {
        asked->push_back(caf::actor_cast<caf::actor>(self->current_sender()));
        return self->make_response_promise<blob_source>();  // never delivered
      },
  };
}

/// Monitors the actors it is sent and records the order in which they went down.
caf::behavior down_order(caf::event_based_actor* self, std::vector<caf::actor_addr>* gone) {
  self->set_down_handler([gone](caf::down_msg& down) { gone->push_back(down.source); });
  return {[self](const caf::actor& whom) { self->monitor(whom); }};
}

/// A cache whose hop of mlp/1 (transfer 7) waits for its controller: its upstream `from` refuses
/// connections, it asks the controller for another, and the (silent) controller never answers, so
/// the hop stays alive.
struct WaitingHop : Cache {
  std::vector<caf::actor> asked;
  chain_controller_actor controller = d.sys().spawn(silent_controller, &asked);
  fetch_blob base = request_for(repo, "mlp", 1);
  std::shared_ptr<testing::Answer<blob_ref>> first;

  explicit WaitingHop(blob_source from = {SourceTier::peer, "gone", {"127.0.0.1", 1}}) {
    fetch_blob req = base;
    req.sources = {std::move(from)};
    req.transfer_id = 7;
    req.controller = caf::actor_cast<caf::actor>(controller);
    first = d.request<blob_ref>(cache, req);
    d.run();
    EXPECT_EQ(asked.size(), 1u) << "premise: the hop is alive, waiting for its controller";
  }
};

TEST(ModelCache, AnExitingCacheStopsItsMulticastHopsAndQuitsOnlyAfterTheLast) {
  WaitingHop f;
  auto& asked = f.asked;
  ASSERT_EQ(asked.size(), 1u);
  std::vector<caf::actor_addr> gone;
  auto observer = f.d.sys().spawn(down_order, &gone);
  caf::anon_send(observer, asked[0]);
  caf::anon_send(observer, caf::actor_cast<caf::actor>(f.cache));
  f.d.run();
  ASSERT_TRUE(gone.empty());

  caf::anon_send_exit(f.cache, caf::exit_reason::user_shutdown);
  f.d.run();
  ASSERT_EQ(gone.size(), 2u) << "the cache or its hop is still alive";
  EXPECT_EQ(gone[0], asked[0].address()) << "the cache quit before its hop";
  EXPECT_EQ(gone[1], f.cache.address());
  caf::anon_send_exit(f.controller, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(observer, caf::exit_reason::user_shutdown);
}

/// A chain controller that records what its hops report and never names a new upstream.
chain_controller_actor::behavior_type recording_controller(chain_controller_actor::pointer self,
                                                           std::vector<chain_progress>* heard) {
  return {
      [heard](chain_progress& p) { heard->push_back(p); },
      [self](const chain_upstream_request&) -> caf::result<blob_source> {
        return self->make_response_promise<blob_source>();  // never delivered
      },
  };
}

/// A WaitingHop whose controller died with the question unanswered (a manager killed mid-chain),
/// its upstream the dead manager's repository server: orphaned, the hop retries its upstreams a
/// second apart for its 30 s orphan window, which the deterministic clock never reaches unless told.
/// A peer's data-plane server holds the bytes.
struct OrphanedHop : WaitingHop {
  std::unique_ptr<transport::DataServer> peer;

  OrphanedHop() : WaitingHop({SourceTier::repository, "manager", {"127.0.0.1", 1}}) {
    const std::string weights =
        gpu::testing::read_file(gpu::repository_version_dir(repo.path(), "mlp", 1) + "/" + gpu::kWeightsFile);
    auto server = transport::start_data_server(
        TransportKind::tcp, {},
        transport::testing::lookup_of(
            {{base.blob_key, transport::MemoryBlob::of(std::vector<uint8_t>(weights.begin(), weights.end()))}}));
    if (!server.ok()) throw std::runtime_error(server.error().to_string());
    peer = std::move(*server);
    caf::anon_send_exit(controller, caf::exit_reason::kill);
    d.run();
    EXPECT_FALSE(first->done()) << "premise: the orphaned hop retries its upstreams for its orphan window";
  }
  blob_source from_peer() const { return {SourceTier::peer, "peer", peer->endpoint()}; }
};

TEST(ModelCache, AHopOfADeadControllersChainFollowsTheNewControllersChainAtOnce) {
  // A new manager (restarted, or a standby) placed the model here again along a chain: its load
  // joins the fetch in flight, whose hop must not wait out its orphan window on the dead manager's
  // upstreams but follow the new chain from its verified offset.
  OrphanedHop f;
  std::vector<chain_progress> heard;
  auto new_controller = f.d.sys().spawn(recording_controller, &heard);
  fetch_blob new_req = f.base;
  new_req.sources = {f.from_peer()};
  new_req.transfer_id = 9;
  new_req.controller = caf::actor_cast<caf::actor>(new_controller);
  auto second = f.d.request<blob_ref>(f.cache, new_req);
  f.d.run();  // no time passes

  ASSERT_TRUE(second->done()) << "the new load waits for the orphaned hop";
  ASSERT_TRUE(second->ok()) << second->error().message();
  EXPECT_EQ(second->value().source, SourceTier::peer);
  EXPECT_EQ(second->value().source_peer, "peer");
  ASSERT_TRUE(f.first->done() && f.first->ok()) << "the dead manager's load, joined by the new one, ends with it";
  ASSERT_FALSE(heard.empty()) << "the hop did not report to its new controller";
  EXPECT_EQ(heard.back().transfer_id, 9u);
  EXPECT_EQ(heard.back().state, placement::HopState::done);
  EXPECT_EQ(heard.back().offset, f.base.blob_bytes);
  caf::anon_send_exit(new_controller, caf::exit_reason::user_shutdown);
}

TEST(ModelCache, AnOrphanedHopGoesOnFromTheSourcesOfAPlainLoadThatJoinsIt) {
  // The new manager placed the model here alone (no chain): its load names only sources.
  OrphanedHop f;
  fetch_blob plain = f.base;
  plain.sources = {f.from_peer()};
  auto second = f.d.request<blob_ref>(f.cache, plain);
  f.d.run();
  ASSERT_TRUE(second->done()) << "the new load waits for the orphaned hop";
  ASSERT_TRUE(second->ok()) << second->error().message();
  EXPECT_EQ(second->value().source_peer, "peer");
  ASSERT_TRUE(f.first->done() && f.first->ok());
}

TEST(ModelCache, AHopWhoseControllerAnswersKeepsItsChainWhenAPlainLoadJoinsIt) {
  WaitingHop f;
  fetch_blob plain = f.base;
  plain.sources = {blob_source{SourceTier::peer, "other", {"127.0.0.1", 2}}};
  auto second = f.d.request<blob_ref>(f.cache, plain);
  f.d.run();
  // The controller decides while it lives: the hop neither tried the plain load's source nor asked again.
  EXPECT_FALSE(second->done());
  EXPECT_EQ(f.asked.size(), 1u);
  caf::anon_send_exit(f.controller, caf::exit_reason::user_shutdown);
}

}  // namespace model_cache_test
}  // namespace ember
