// Pipeline stages on real node actors (Flashpoint's partitioned cold start, issue 14): three nodes
// in one actor system, each with its executor on a SimDevice and its cache with no repository of
// its own, so every stage's header and layers come over the data plane from a blob server holding
// the weights file, checked against the model's profile digests. Requests travel the three stages
// and are answered exactly as the whole model answers.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "actors/gpu_executor_interface.hpp"
#include "actors/model_cache_interface.hpp"
#include "actors/node/blob_store.hpp"
#include "actors/node/engine/executor_engine.hpp"
#include "actors/node/gpu_executor.hpp"
#include "actors/node/model_cache.hpp"
#include "actors/node/node_instruments.hpp"
#include "actors/node/node_router.hpp"
#include "actors/node/stage_host.hpp"
#include "actors/node_router_interface.hpp"
#include "actors/tensor_codec.hpp"
#include "gpu/profiler.hpp"
#include "model/model_profile.hpp"
#include "tests/actors/actor_test_util.hpp"
#include "transport/checksum.hpp"
#include "transport/data_plane.hpp"
#include "transport/tcp_blob_server.hpp"

namespace ember {
namespace pipeline_test {

using namespace std::chrono_literals;
using testing::ask;

std::string sha_hex(const uint8_t* data, uint64_t bytes) {
  return transport::to_hex(transport::Sha256::of(data, bytes));
}

/// A blob whose bytes are right but whose reads flip one byte: a source with a bad disk. The range
/// digest the server sends is of what it read, so only the per-layer digests catch it.
class FlippingBlob final : public transport::Blob {
 public:
  FlippingBlob(std::shared_ptr<const gpu::HostBuffer> bytes, uint64_t flip_at)
      : bytes_(std::move(bytes)), flip_at_(flip_at) {}
  uint64_t size() const override { return bytes_->size(); }
  Status read(uint64_t offset, void* dst, uint64_t n) const override {
    std::memcpy(dst, bytes_->data() + offset, n);
    if (flip_at_ >= offset && flip_at_ < offset + n) static_cast<uint8_t*>(dst)[flip_at_ - offset] ^= 0x01;
    return Status::OK();
  }

 private:
  std::shared_ptr<const gpu::HostBuffer> bytes_;
  uint64_t flip_at_;
};

/// How the stages hand their tensors over: in the actor message, or over the data plane.
enum class Handoff { inline_message, tcp, ucx };

struct Pipeline {
  static constexpr int kStages = 3;
  WorkQueue fetches{{.threads = 2}};
  WorkQueue handoffs{{.threads = 2}};
  WorkQueue hops{{.threads = 1}};
  WorkQueue maintenance{{.threads = 1}};
  std::unique_ptr<caf::actor_system> sys = testing::make_system();
  gpu::testing::TempDir dir;
  std::shared_ptr<const gpu::Model> model;
  std::string manifest;
  gpu::ModelProfile profile;
  std::unique_ptr<transport::BlobServer> server;  // the "repository"
  std::unique_ptr<transport::BlobServer> bad;     // a source whose disk flips a byte
  NodeInstruments instruments[kStages];
  std::shared_ptr<BlobStore> stores[kStages];
  std::unique_ptr<transport::DataServer> data[kStages];  // each node's data plane
  gpu_executor_actor execs[kStages];
  model_cache_actor caches[kStages];
  node_router_actor routers[kStages];
  stage_host_actor hosts[kStages];  // what the pipeline's hops address
  std::vector<gpu::LayerRange> ranges;
  const model_key key{"gpt2", 1};

  /// `last_dilation`: the last stage's device runs kernels this many times slower (requests queue up
  /// in front of it).
  explicit Pipeline(double last_dilation = 0, Handoff handoff = Handoff::tcp) {
    auto b = testing::must(gpu::build_architecture("gpt2", {true, 5, {}}), "gpt2");
    testing::must(b.write(dir.path()), "writing gpt2");
    model = testing::must(gpu::Model::load(dir.path()), "loading gpt2");
    manifest = gpu::testing::read_file(dir / gpu::kManifestFile);
    auto device = gpu::testing::sim_device();
    profile = testing::must(gpu::measure_profile(model, *device, {1}, 8, sha_hex), "profiling");
    auto file = testing::must(transport::FileBlob::open(dir / gpu::kWeightsFile), "weights");
    server = testing::must(
        transport::BlobServer::start(
            {}, [file](const std::string&) { return Result<std::shared_ptr<const transport::Blob>>(file); }),
        "blob server");
    // The flipped byte lies in the middle stage's layers.
    const uint32_t n = model->num_layers();
    ranges = {{0, n / 3}, {n / 3, 2 * n / 3}, {2 * n / 3, n}};
    const uint64_t flip = model->data_offset() + model->range_bytes(ranges[1]).offset + 7;
    auto flipping = std::make_shared<FlippingBlob>(model->file(), flip);
    bad = testing::must(
        transport::BlobServer::start(
            {}, [flipping](const std::string&) { return Result<std::shared_ptr<const transport::Blob>>(flipping); }),
        "bad server");
    for (int i = 0; i < kStages; ++i) {
      const std::string name = "n" + std::to_string(i);
      auto engine = testing::must(
          ExecutorEngine::create(gpu::testing::sim_device(64 << 20, i, i == kStages - 1 ? last_dilation : 0),
                                 EngineOptions{16, 0, 2 << 20}),
          "engine");
      execs[i] = spawn_gpu_executor(*sys, std::move(engine), name, &instruments[i], maintenance);
      stores[i] = std::make_shared<BlobStore>();
      caches[i] = spawn_model_cache(*sys, ModelCacheConfig{}, stores[i], &instruments[i], fetches, hops);
      NodeRouterConfig config{name, {"127.0.0.1", 0}, "", std::nullopt};
      StageHostConfig host{name, {"127.0.0.1", 0}, std::nullopt};
      if (handoff != Handoff::inline_message) {
        const TransportKind kind = handoff == Handoff::ucx ? TransportKind::ucx : TransportKind::tcp;
        data[i] = testing::must(transport::start_data_server(kind, {}, stores[i]->lookup()), "data plane");
        config.data.port = host.data.port = data[i]->port();
        host.handoff = StageHandoff{stores[i], kind, &handoffs};
      }
      hosts[i] = spawn_stage_host(*sys, host, &instruments[i]);
      config.stages = hosts[i];
      routers[i] = spawn_node_router(*sys, config, {execs[i]}, {{"sim:0", 64 << 20, 0}}, caches[i], &instruments[i]);
    }
  }
  ~Pipeline() {
    caf::scoped_actor self{*sys};
    for (int i = 0; i < kStages; ++i) {
      for (const caf::actor& a : {caf::actor_cast<caf::actor>(hosts[i]), caf::actor_cast<caf::actor>(routers[i]),
                                  caf::actor_cast<caf::actor>(caches[i]), caf::actor_cast<caf::actor>(execs[i])}) {
        self->send_exit(a, caf::exit_reason::user_shutdown);
        self->wait_for(a);
      }
    }
    server->stop();
    bad->stop();
    for (auto& d : data)
      if (d) d->stop();
  }
  size_t handoffs_held() const {
    size_t n = 0;
    for (const auto& s : stores) n += s->handoffs();
    return n;
  }

  blob_part part_of(gpu::LayerRange r) const {
    blob_part p;
    p.first_layer = r.first;
    p.last_layer = r.last;
    p.header_bytes = profile.header_bytes;
    p.header_sha256 = profile.header_sha256;
    p.offset = model->data_offset() + model->range_bytes(r).offset;
    for (uint32_t l = r.first; l < r.last; ++l) {
      p.layer_bytes.push_back(profile.layers[l].bytes);
      p.layer_sha256.push_back(profile.layers[l].sha256);
    }
    return p;
  }
  load_stage stage_load(int i, std::vector<blob_source> sources) const {
    load_stage s;
    s.load = {key, manifest, blob_key_of(key), model->file_bytes(), std::move(sources)};
    s.part = part_of(ranges[static_cast<size_t>(i)]);
    return s;
  }
  blob_source repository() const { return {SourceTier::repository, "manager", {"127.0.0.1", server->port()}}; }
  blob_source bad_peer() const { return {SourceTier::peer, "bad", {"127.0.0.1", bad->port()}}; }

  std::vector<pipeline_hop> hops_list() const {
    std::vector<pipeline_hop> h;
    for (int i = 0; i < kStages; ++i) {
      h.push_back({caf::actor_cast<caf::actor>(hosts[i]), stage_key_of(key, ranges[i].first, ranges[i].last),
                   "n" + std::to_string(i)});
    }
    return h;
  }
  stage_request request(uint64_t seed) const {
    stage_request r;
    r.request.model = key;
    r.request.id = "r" + std::to_string(seed);
    r.request.inputs = encode_tensors(gpu::testing::arch_inputs(*model, 2, 5, seed));
    r.hops = hops_list();
    return r;
  }
  std::vector<gpu::HostTensor> direct(const stage_request& r) const {
    auto d = gpu::testing::sim_device();
    auto ex = testing::must(gpu::LayerExecutor::create(*d, model, {0, model->num_layers()}), "executor");
    return testing::must((*ex).run_host(testing::must(decode_tensors(r.request.inputs), "inputs")), "direct run");
  }
  void load_all() {
    for (int i = 0; i < kStages; ++i) {
      auto info = ask<replica_info>(*sys, routers[i], 30s, stage_load(i, {repository()}));
      ASSERT_TRUE(info.ok()) << info.error().to_string();
    }
  }
};

void expect_same(const std::vector<gpu::HostTensor>& want, const infer_reply& got) {
  auto outs = testing::must(decode_tensors(got.outputs), "outputs");
  ASSERT_EQ(outs.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(outs[i].name, want[i].name);
    EXPECT_TRUE(gpu::testing::bitwise_equal(outs[i], want[i])) << want[i].name;
  }
}

TEST(Pipeline, ThreeStagesFetchOnlyTheirLayersAndAnswerAsTheWholeModel) {
  Pipeline f;
  // The middle stage's first source flips a byte of its layers: caught by the layer digest, the
  // repository is tried next.
  for (int i = 0; i < Pipeline::kStages; ++i) {
    auto sources =
        i == 1 ? std::vector<blob_source>{f.bad_peer(), f.repository()} : std::vector<blob_source>{f.repository()};
    auto info = ask<replica_info>(*f.sys, f.routers[i], 30s, f.stage_load(i, sources));
    ASSERT_TRUE(info.ok()) << info.error().to_string();
    EXPECT_EQ(info->model, stage_key_of(f.key, f.ranges[i].first, f.ranges[i].last));
    EXPECT_EQ(info->source, SourceTier::repository);
    const blob_part part = f.part_of(f.ranges[i]);
    EXPECT_EQ(info->bytes_fetched, part.header_bytes + part.length())
        << "stage " << i << " fetched more than its share";
    // The stage's share is not a cached model: the node does not offer it to peers.
    EXPECT_TRUE(f.stores[i]->models().empty());
    EXPECT_EQ(f.stores[i]->used_bytes(), part.header_bytes + part.length());
  }
  // A request and its answer through the three stages, then eight at once (one at a time per
  // stage, credits between them).
  const stage_request first = f.request(1);
  auto reply = ask<infer_reply>(*f.sys, f.hosts[0], 30s, first);
  ASSERT_TRUE(reply.ok()) << reply.error().to_string();
  EXPECT_EQ(reply->model, f.key);
  EXPECT_EQ(reply->id, "r1");
  expect_same(f.direct(first), *reply);

  caf::scoped_actor self{*f.sys};
  std::map<std::string, infer_reply> answers;
  int errors = 0;
  for (uint64_t s = 10; s < 18; ++s) self->send(f.hosts[0], f.request(s));
  for (int i = 0; i < 8; ++i) {
    self->receive([&](infer_reply& r) { answers[r.id] = std::move(r); }, [&](caf::error&) { ++errors; },
                  caf::after(30s) >> [&] { ++errors; });
  }
  EXPECT_EQ(errors, 0);
  ASSERT_EQ(answers.size(), 8u);  // every request answered once
  for (uint64_t s = 10; s < 18; ++s) {
    const stage_request r = f.request(s);
    expect_same(f.direct(r), answers.at(r.request.id));
  }
  // The tensors went between the stages over the data plane, each buffer dropped once taken.
  EXPECT_EQ(f.handoffs_held(), 0u);
}

TEST(Pipeline, TensorsTravelOverUcxOrInTheMessageAlike) {
  for (Handoff h : {Handoff::ucx, Handoff::inline_message}) {
    Pipeline f(0, h);
    f.load_all();
    for (uint64_t s = 20; s < 23; ++s) {
      const stage_request r = f.request(s);
      auto reply = ask<infer_reply>(*f.sys, f.hosts[0], 30s, r);
      ASSERT_TRUE(reply.ok()) << reply.error().to_string();
      expect_same(f.direct(r), *reply);
    }
    EXPECT_EQ(f.handoffs_held(), 0u);
  }
}

TEST(Pipeline, AForgedOrLostHandoffIsAClearErrorAndTheStageServesOn) {
  Pipeline f;
  f.load_all();
  // What stage 0 would send stage 1, with the tensors' bytes waiting on node n0's data plane.
  auto handed = [&](uint64_t seed, const std::string& key) {
    stage_request r = f.request(seed);
    r.at = 1;
    r.upstream = caf::actor_cast<caf::actor>(f.hosts[0]);
    std::vector<uint8_t> bytes;
    for (tensor_msg& t : r.request.inputs) {
      r.handoff.sizes.push_back(t.data.size());
      bytes.insert(bytes.end(), t.data.begin(), t.data.end());
      t.data.clear();
    }
    r.handoff.from = {"127.0.0.1", f.data[0]->port()};
    r.handoff.key = key;
    r.handoff.sha256 = sha_hex(bytes.data(), bytes.size());
    f.stores[0]->put_handoff(key, transport::MemoryBlob::of(std::move(bytes)));
    return r;
  };
  // Gone from the upstream (it died, or dropped it): retryable.
  stage_request lost = handed(50, "lost");
  f.stores[0]->erase_handoff("lost");
  auto got = ask<infer_reply>(*f.sys, f.hosts[1], 10s, lost);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code(), ErrorCode::unavailable) << got.error().to_string();
  EXPECT_NE(got.error().message().find("did not arrive"), std::string::npos) << got.error().to_string();
  // Bytes that are not what the digest says: caught, retryable.
  stage_request swapped = handed(51, "swapped");
  swapped.handoff.sha256 = handed(52, "other").handoff.sha256;
  got = ask<infer_reply>(*f.sys, f.hosts[1], 10s, swapped);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().message().find("digest"), std::string::npos) << got.error().to_string();
  // Sizes that do not describe the tensors, or bytes both inline and handed over: invalid_argument.
  stage_request miscounted = handed(53, "miscounted");
  miscounted.handoff.sizes.push_back(1);
  got = ask<infer_reply>(*f.sys, f.hosts[1], 10s, miscounted);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code(), ErrorCode::invalid_argument) << got.error().to_string();
  stage_request both = handed(54, "both");
  both.request.inputs[0].data = {1, 2, 3};
  got = ask<infer_reply>(*f.sys, f.hosts[1], 10s, both);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code(), ErrorCode::invalid_argument) << got.error().to_string();
  // The pipeline serves on.
  auto reply = ask<infer_reply>(*f.sys, f.hosts[0], 30s, f.request(56));
  ASSERT_TRUE(reply.ok()) << reply.error().to_string();
  expect_same(f.direct(f.request(56)), *reply);
}

TEST(Pipeline, AMemberCompletesByFetchingOnlyTheLayersOutsideItsStage) {
  Pipeline f;
  f.load_all();
  const int i = 1;
  load_replica whole{f.key, f.manifest, blob_key_of(f.key), f.model->file_bytes(), {f.repository()}};
  whole.reuse = f.part_of(f.ranges[i]);
  whole.layers = f.part_of({0, f.model->num_layers()});
  auto info = ask<replica_info>(*f.sys, f.routers[i], 30s, whole);
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_EQ(info->model, f.key);
  EXPECT_EQ(info->bytes_fetched, f.model->file_bytes() - whole.reuse.header_bytes - whole.reuse.length());
  // The full replica answers as the whole model, beside the stage, which still serves.
  infer_request req = f.request(40).request;
  auto reply = ask<infer_reply>(*f.sys, f.routers[i], 30s, req);
  ASSERT_TRUE(reply.ok()) << reply.error().to_string();
  expect_same(f.direct(f.request(40)), *reply);
  EXPECT_TRUE(ask<infer_reply>(*f.sys, f.hosts[0], 30s, f.request(41)).ok());
}

TEST(Pipeline, BadRequestsAndMissingStagesAreClearErrors) {
  Pipeline f;
  // A stage described with a digest missing, or past the file: refused before any fetch.
  load_stage short_digests = f.stage_load(0, {f.repository()});
  short_digests.part.layer_sha256.pop_back();
  auto refused = ask<replica_info>(*f.sys, f.routers[0], 10s, short_digests);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("do not fit"), std::string::npos) << refused.error().to_string();
  load_stage past_end = f.stage_load(0, {f.repository()});
  past_end.part.offset = f.model->file_bytes();
  EXPECT_FALSE(ask<replica_info>(*f.sys, f.routers[0], 10s, past_end).ok());
  f.load_all();
  // A stage this node does not hold: unavailable (the gateway's table is stale, retry).
  stage_request r = f.request(2);
  r.at = 1;
  r.upstream = caf::actor_cast<caf::actor>(f.hosts[0]);
  auto wrong = ask<infer_reply>(*f.sys, f.hosts[0], 10s, r);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code(), ErrorCode::unavailable);
  // A request without the model's input: invalid_argument, and the pipeline keeps serving.
  r = f.request(3);
  r.request.inputs.clear();
  auto empty = ask<infer_reply>(*f.sys, f.hosts[0], 10s, r);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code(), ErrorCode::invalid_argument) << empty.error().to_string();
  // An output the model does not have.
  r = f.request(4);
  r.request.outputs = {"no_such_output"};
  auto unknown = ask<infer_reply>(*f.sys, f.hosts[0], 10s, r);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code(), ErrorCode::invalid_argument) << unknown.error().to_string();
  EXPECT_TRUE(ask<infer_reply>(*f.sys, f.hosts[0], 10s, f.request(5)).ok());
}

TEST(Pipeline, TheNodeReportsItsStageHostAndARestartedRouterDropsTheStagesItHadHandedOver) {
  Pipeline f;
  f.load_all();
  for (int i = 0; i < Pipeline::kStages; ++i) {
    auto report = ask<node_report>(*f.sys, f.routers[i], 10s, report_atom_v);
    ASSERT_TRUE(report.ok()) << report.error().to_string();
    EXPECT_EQ(report->stages.address(), f.hosts[i].address()) << "pipelines address the stage host";
    EXPECT_TRUE(report->replicas.empty()) << "a stage is not a replica of a model";
  }
  ASSERT_TRUE(ask<infer_reply>(*f.sys, f.hosts[0], 30s, f.request(70)).ok());
  // The middle node's router is restarted (its supervisor would): the new one attaches itself to
  // the stage host, which drops the stages the dead one handed over (it restores none).
  NodeRouterConfig config{"n1", {"127.0.0.1", f.data[1]->port()}, "", std::nullopt};
  config.stages = f.hosts[1];
  auto successor =
      spawn_node_router(*f.sys, config, {f.execs[1]}, {{"sim:0", 64 << 20, 0}}, f.caches[1], &f.instruments[1]);
  ASSERT_TRUE(ask<node_report>(*f.sys, successor, 10s, report_atom_v).ok());
  auto through = ask<infer_reply>(*f.sys, f.hosts[0], 30s, f.request(71));
  ASSERT_FALSE(through.ok());
  EXPECT_EQ(through.error().code(), ErrorCode::unavailable) << through.error().to_string();
  caf::scoped_actor self{*f.sys};
  self->send_exit(successor, caf::exit_reason::user_shutdown);
  self->wait_for(successor);
}

TEST(Pipeline, AStageUnloadedWhileItRunsARequestFailsItAsRetryableAndTheNodeServesOn) {
  Pipeline f(200);  // the last stage runs long enough to be unloaded under it
  f.load_all();
  caf::scoped_actor self{*f.sys};
  self->send(f.hosts[0], f.request(60));
  std::this_thread::sleep_for(100ms);
  const model_key last = stage_key_of(f.key, f.ranges[2].first, f.ranges[2].last);
  auto unloaded = ask<bool>(*f.sys, f.routers[2], 10s, unload_atom_v, last);
  ASSERT_TRUE(unloaded.ok()) << unloaded.error().to_string();
  bool answered = false;
  self->receive([&](infer_reply&) { answered = true; },
                [&](caf::error& err) {
                  answered = true;
                  EXPECT_EQ(from_caf(err).code(), ErrorCode::unavailable) << caf::to_string(err);
                },
                caf::after(30s) >> [] {});
  EXPECT_TRUE(answered) << "the request hangs";
  EXPECT_TRUE(ask<node_report>(*f.sys, f.routers[2], 10s, report_atom_v).ok()) << "the node's router died";
  EXPECT_EQ(f.handoffs_held(), 0u);
}

TEST(Pipeline, AStageKilledUnderLoadAnswersEveryRequestRightOrRetryable) {
  Pipeline f(200);  // the last stage is slow: requests wait in front of it
  f.load_all();
  caf::scoped_actor self{*f.sys};
  constexpr int kRequests = 24;
  for (int s = 0; s < kRequests; ++s) self->send(f.hosts[0], f.request(100 + static_cast<uint64_t>(s)));
  // The last stage's node dies while requests are in the pipeline.
  std::this_thread::sleep_for(100ms);
  self->send_exit(f.hosts[2], caf::exit_reason::kill);
  self->send_exit(f.routers[2], caf::exit_reason::kill);
  int right = 0, retryable = 0, other = 0;
  for (int i = 0; i < kRequests; ++i) {
    self->receive(
        [&](infer_reply& r) {
          const stage_request req = f.request(std::stoull(r.id.substr(1)));
          auto want = f.direct(req);
          auto got = testing::must(decode_tensors(r.outputs), "outputs");
          bool same = got.size() == want.size();
          for (size_t k = 0; same && k < want.size(); ++k) same = gpu::testing::bitwise_equal(got[k], want[k]);
          same ? ++right : ++other;
        },
        [&](caf::error& err) { from_caf(err).code() == ErrorCode::unavailable ? ++retryable : ++other; },
        caf::after(30s) >> [&] { ++other; });
  }
  EXPECT_EQ(right + retryable, kRequests) << right << " right, " << retryable << " retryable, " << other << " other";
  EXPECT_GT(retryable, 0);
  std::printf("after the kill: %d answered right, %d retryable\n", right, retryable);
  EXPECT_EQ(f.stores[1]->handoffs(), 0u) << "a handoff to the dead stage stayed behind";
  // The first two stages stay up and free: with the third gone, a request fails fast as retryable.
  auto after = ask<infer_reply>(*f.sys, f.hosts[0], 10s, f.request(7));
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.error().code(), ErrorCode::unavailable) << after.error().to_string();
}

}  // namespace pipeline_test
}  // namespace ember
