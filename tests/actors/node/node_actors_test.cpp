// The node's actors: gpu_executor, model_cache and node_router, each driven through its interface.
#include <gtest/gtest.h>

#include <thread>

#include "actors/gpu_executor_interface.hpp"
#include "actors/model_cache_interface.hpp"
#include "actors/node/blob_store.hpp"
#include "actors/node/engine/executor_engine.hpp"
#include "actors/node/gpu_executor.hpp"
#include "actors/node/model_cache.hpp"
#include "actors/node/node_instruments.hpp"
#include "actors/node/node_router.hpp"
#include "actors/node_router_interface.hpp"
#include "actors/tensor_codec.hpp"
#include "tests/actors/actor_test_util.hpp"
#include "tests/actors/node/node_test_util.hpp"
#include "transport/tcp_blob_server.hpp"

namespace ember {
namespace node_actors_test {

using namespace std::chrono_literals;
using testing::ask;

// The queues a node process owns, declared before the actor system in every test so that they
// outlive the actors that use them (as in NodeProcess).
struct NodeQueues {
  WorkQueue fetches{{.threads = 2}};
  WorkQueue hops{{.threads = 2}};
  WorkQueue maintenance{{.threads = 1}};
};

using testing::direct;
using testing::engine;
using testing::request_for;

TEST(GpuExecutor, BindRunUnbind) {
  NodeQueues queues;
  auto sys = testing::make_system();
  NodeInstruments instruments;
  testing::Repository repo;
  auto model = *gpu::Model::load(repo.dir / "bert/1");
  auto exec = spawn_gpu_executor(*sys, engine(), "n1", &instruments, queues.maintenance);
  const model_key key{"bert", 1};

  auto device = ask<std::string>(*sys, exec, 10s, bind_model{key, model});
  ASSERT_TRUE(device.ok()) << device.error().message();
  EXPECT_EQ(*device, "sim:0");
  auto req = request_for(*model, key, 7);
  auto reply = ask<infer_reply>(*sys, exec, 10s, req);
  ASSERT_TRUE(reply.ok()) << reply.error().message();
  EXPECT_EQ(reply->id, "r7");
  EXPECT_EQ(reply->node, "n1");
  const auto want = direct(model, req);
  ASSERT_EQ(reply->outputs.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    auto got = decode_tensor(std::move(reply->outputs[i]));
    EXPECT_TRUE(gpu::testing::bitwise_equal(*got, want[i]));
  }

  // Asking for one output by name returns only that one; an unknown name is a clear error.
  req.outputs = {"pooler.activation"};
  reply = ask<infer_reply>(*sys, exec, 10s, req);
  ASSERT_TRUE(reply.ok());
  ASSERT_EQ(reply->outputs.size(), 1u);
  EXPECT_EQ(reply->outputs[0].name, "pooler.activation");
  req.outputs = {"logits"};
  reply = ask<infer_reply>(*sys, exec, 10s, req);
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(reply.error().message().find("no output 'logits'"), std::string::npos);

  auto status = ask<executor_status>(*sys, exec, 10s, status_atom_v);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->bound, std::vector<model_key>{key});
  EXPECT_GT(status->device.used_bytes, 0u);

  ASSERT_TRUE(ask<bool>(*sys, exec, 10s, unload_atom_v, key).ok());
  reply = ask<infer_reply>(*sys, exec, 10s, request_for(*model, key, 8));
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.error().code(), ErrorCode::unavailable);
}

TEST(GpuExecutor, BadInputsAndOutOfMemoryAreErrorsNotCrashes) {
  NodeQueues queues;
  auto sys = testing::make_system();
  testing::Repository repo;
  auto resnet = *gpu::Model::load(repo.dir / "resnet");  // 13.5 MiB of weights
  auto exec = spawn_gpu_executor(*sys, engine(8 << 20), "n1", nullptr, queues.maintenance);
  auto bound = ask<std::string>(*sys, exec, 10s, bind_model{{"resnet", 1}, resnet});
  ASSERT_FALSE(bound.ok());
  EXPECT_EQ(bound.error().code(), ErrorCode::out_of_memory);

  auto mlp = *gpu::Model::load(repo.dir / "mlp/1");
  ASSERT_TRUE(ask<std::string>(*sys, exec, 10s, bind_model{{"mlp", 1}, mlp}).ok());
  infer_request bad;
  bad.model = {"mlp", 1};
  bad.inputs.push_back({"input", static_cast<uint8_t>(gpu::DType::f32), {2, 16}, std::vector<uint8_t>(12)});
  auto reply = ask<infer_reply>(*sys, exec, 10s, bad);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(reply.error().message().find("12 bytes of data"), std::string::npos) << reply.error().message();
  // The executor still serves good requests.
  EXPECT_TRUE(ask<infer_reply>(*sys, exec, 10s, request_for(*mlp, {"mlp", 1}, 1)).ok());
}

// -- model cache ------------------------------------------------------------------------------

struct CacheFixture {
  NodeQueues queues;
  std::unique_ptr<caf::actor_system> sys = testing::make_system();
  testing::Repository repo;
  NodeInstruments instruments;
  std::shared_ptr<BlobStore> store = std::make_shared<BlobStore>();

  model_cache_actor spawn(uint64_t capacity, bool local_repository) {
    ModelCacheConfig c;
    c.capacity_bytes = capacity;
    if (local_repository) c.repository = repo.path();
    return spawn_model_cache(*sys, c, store, &instruments, queues.fetches, queues.hops);
  }
  fetch_blob request(const std::string& name, uint32_t version, std::vector<blob_source> sources = {}) {
    const auto e = testing::repository_version(repo.path(), name, version);
    return {e.key, blob_key_of(e.key), e.weights_bytes, std::move(sources)};
  }
};

TEST(ModelCache, ConcurrentFetchesOfOneBlobShareOneFetch) {
  CacheFixture f;
  auto cache = f.spawn(1 << 30, true);
  caf::scoped_actor self{*f.sys};
  std::vector<blob_ref> refs;
  for (int i = 0; i < 8; ++i) {
    self->request(cache, 10s, f.request("bert", 1)).receive([&](blob_ref& r) { refs.push_back(r); }, [](caf::error&) {});
  }
  ASSERT_EQ(refs.size(), 8u);
  for (const auto& r : refs) EXPECT_EQ(r.bytes.get(), refs[0].bytes.get());  // one buffer
  auto again = ask<blob_ref>(*f.sys, cache, 10s, f.request("bert", 1));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->source, SourceTier::cache);
  EXPECT_EQ(again->bytes.get(), refs[0].bytes.get());
  EXPECT_EQ(f.store->models(), (std::vector<model_key>{model_key{"bert", 1}}));
}

TEST(ModelCache, EvictsLeastRecentlyUsedUnpinnedBlobs) {
  CacheFixture f;
  const uint64_t mlp = f.request("mlp", 1).blob_bytes;
  auto cache = f.spawn(3 * mlp, true);  // room for three mlp versions' worth, not for bert
  ASSERT_TRUE(ask<blob_ref>(*f.sys, cache, 10s, f.request("mlp", 1)).ok());
  ASSERT_TRUE(ask<blob_ref>(*f.sys, cache, 10s, f.request("mlp", 2)).ok());
  caf::anon_send(cache, pin_atom_v, blob_key_of({"mlp", 1}));
  // bert does not fit even after evicting the unpinned mlp/2 (mlp/1 is pinned).
  auto bert = ask<blob_ref>(*f.sys, cache, 10s, f.request("bert", 1));
  ASSERT_FALSE(bert.ok());
  EXPECT_EQ(bert.error().code(), ErrorCode::out_of_memory);
  EXPECT_NE(bert.error().message().find("cannot hold bert/1"), std::string::npos) << bert.error().message();
  // A third small blob fits by evicting mlp/2, never the pinned mlp/1.
  f.repo.write("mlp", "mlp/3", 9);
  ASSERT_TRUE(ask<blob_ref>(*f.sys, cache, 10s, f.request("mlp", 3)).ok());
  ASSERT_TRUE(ask<blob_ref>(*f.sys, cache, 10s, f.request("mlp", 2)).ok());
  auto status = ask<cache_status>(*f.sys, cache, 10s, status_atom_v);
  ASSERT_TRUE(status.ok());
  EXPECT_LE(status->used, 3 * mlp);
  auto models = f.store->models();
  EXPECT_NE(std::find(models.begin(), models.end(), model_key{"mlp", 1}), models.end()) << "pinned blob evicted";
}

TEST(ModelCache, FetchesFromPeersThenTheRepositoryAndReportsEveryFailure) {
  CacheFixture f;
  // A "peer" that serves bert/1 from memory over the data plane.
  auto peer_store = std::make_shared<BlobStore>();
  auto bytes = gpu::HostBuffer::read_file(f.repo.dir / "bert/1/weights.safetensors", UINT64_MAX);
  peer_store->put(blob_key_of({"bert", 1}), {"bert", 1}, *bytes);
  auto peer = transport::BlobServer::start({}, peer_store->lookup());
  ASSERT_TRUE(peer.ok());
  auto cache = f.spawn(1 << 30, false);  // no local repository: only the network
  const blob_source dead{SourceTier::peer, "gone", {"127.0.0.1", 1}};
  const blob_source alive{SourceTier::peer, "p1", {"127.0.0.1", (*peer)->port()}};
  auto got = ask<blob_ref>(*f.sys, cache, 20s, f.request("bert", 1, {dead, alive}));
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_EQ(got->source, SourceTier::peer);
  EXPECT_EQ(got->source_peer, "p1");
  EXPECT_EQ(got->bytes->size(), (*bytes)->size());
  EXPECT_EQ(std::memcmp(got->bytes->data(), (*bytes)->data(), (*bytes)->size()), 0);

  // No source has mlp/1: one error naming every source tried.
  auto missing = ask<blob_ref>(*f.sys, cache, 20s, f.request("mlp", 1, {dead, alive}));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ErrorCode::unavailable);
  EXPECT_NE(missing.error().message().find("peer gone"), std::string::npos) << missing.error().message();
  EXPECT_NE(missing.error().message().find("peer p1"), std::string::npos) << missing.error().message();
  (*peer)->stop();
}

// -- node router ------------------------------------------------------------------------------

struct NodeFixture {
  NodeQueues queues;
  std::unique_ptr<caf::actor_system> sys = testing::make_system();
  testing::Repository repo;
  NodeInstruments instruments;
  std::shared_ptr<BlobStore> store = std::make_shared<BlobStore>();
  gpu_executor_actor exec;
  model_cache_actor cache;
  node_router_actor router;

  explicit NodeFixture(uint64_t device_memory = 64 << 20) {
    exec = spawn_gpu_executor(*sys, engine(device_memory), "n1", &instruments, queues.maintenance);
    ModelCacheConfig c;
    c.repository = repo.path();
    cache = spawn_model_cache(*sys, c, store, &instruments, queues.fetches, queues.hops);
    router = spawn_node_router(*sys, {"n1", "127.0.0.1", 0}, {exec}, {{"sim:0", device_memory, 0}}, cache,
                               &instruments);
  }
  // Stops the actors (as NodeProcess does) before the instruments they write to go away.
  ~NodeFixture() {
    caf::scoped_actor self{*sys};
    for (const caf::actor& a : {caf::actor_cast<caf::actor>(router), caf::actor_cast<caf::actor>(cache),
                                caf::actor_cast<caf::actor>(exec)}) {
      self->send_exit(a, caf::exit_reason::user_shutdown);
      self->wait_for(a);
    }
  }
  load_replica load(const std::string& name, uint32_t version) {
    const auto e = testing::repository_version(repo.path(), name, version);
    return {e.key, e.manifest_json, blob_key_of(e.key), e.weights_bytes, {}};
  }
};

TEST(NodeRouter, LoadsOnceServesAndUnloads) {
  NodeFixture f;
  caf::scoped_actor self{*f.sys};
  std::vector<replica_info> infos;
  for (int i = 0; i < 5; ++i) {
    self->request(f.router, 20s, f.load("bert", 1)).receive([&](replica_info& r) { infos.push_back(r); }, [](caf::error&) {});
  }
  ASSERT_EQ(infos.size(), 5u);
  EXPECT_EQ(infos[0].source, SourceTier::local_disk);
  EXPECT_EQ(infos[0].device, "sim:0");
  // One load for five requests: the registry counts one successful load.
  EXPECT_NE(f.instruments.registry().render().find("ember_replica_loads_total{outcome=\"ok\"} 1"), std::string::npos);

  auto model = *gpu::Model::load(f.repo.dir / "bert/1");
  auto reply = ask<infer_reply>(*f.sys, f.router, 10s, request_for(*model, {"bert", 1}, 3));
  ASSERT_TRUE(reply.ok()) << reply.error().message();
  auto report = ask<node_report>(*f.sys, f.router, 10s, report_atom_v);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->replicas, (std::vector<model_key>{model_key{"bert", 1}}));

  ASSERT_TRUE(ask<bool>(*f.sys, f.router, 10s, unload_atom_v, model_key{"bert", 1}).ok());
  reply = ask<infer_reply>(*f.sys, f.router, 10s, request_for(*model, {"bert", 1}, 4));
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.error().code(), ErrorCode::unavailable);  // the gateway's table is stale: retry elsewhere
}

TEST(NodeRouter, CorruptBytesAndOversizedModelsFailTheLoadCleanly) {
  NodeFixture f(8 << 20);
  auto resnet = f.load("resnet", 1);  // 13.5 MiB: no device of 8 MiB holds it
  auto r = ask<replica_info>(*f.sys, f.router, 20s, resnet);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::out_of_memory);

  auto mlp = f.load("mlp", 1);
  mlp.manifest_json = R"({"format": "ember-model", "format_version": 1})";  // what a broken repository might send
  r = ask<replica_info>(*f.sys, f.router, 20s, mlp);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::invalid_argument);
  // The node is unharmed: the real model loads.
  EXPECT_TRUE(ask<replica_info>(*f.sys, f.router, 20s, f.load("mlp", 1)).ok());
}

}  // namespace node_actors_test
}  // namespace ember
