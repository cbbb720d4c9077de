// Late binding end to end on SimDevices: the executor engine's swaps (from host, from a peer, with
// eviction) and the node router serving more models than its devices hold, including an executor
// that faults mid-request.
#include <gtest/gtest.h>

#include <atomic>
#include <caf/typed_event_based_actor.hpp>
#include <cstring>
#include <future>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "actors/model_cache_interface.hpp"
#include "actors/node/blob_store.hpp"
#include "actors/node/engine/executor_engine.hpp"
#include "actors/node/gpu_executor.hpp"
#include "actors/node/inline_runs.hpp"
#include "actors/node/model_cache.hpp"
#include "actors/node/node_instruments.hpp"
#include "actors/node/node_router.hpp"
#include "actors/node_router_interface.hpp"
#include "actors/tensor_codec.hpp"
#include "gpu/profiler.hpp"
#include "metrics/metrics.hpp"
#include "model/architectures.hpp"
#include "model/layer_blocks.hpp"
#include "model/model_builder.hpp"
#include "model/model_profile.hpp"
#include "tests/actors/actor_test_util.hpp"
#include "tests/actors/node/engine/engine_test_util.hpp"
#include "tests/actors/node/engine/generation_test_util.hpp"
#include "tests/actors/node/node_test_util.hpp"

namespace ember {
namespace late_binding_test {

using namespace std::chrono_literals;
// The engine room's helpers (tests/actors/node/engine/engine_test_util.hpp); the engine's own
// suites live there too, one file per part.
using engine_test::engine;
using engine_test::MiB;
using engine_test::warm_outputs;
using engine_test::write_mlp;
// Batching's helpers, shared with the executor's own tests (tests/actors/node/node_test_util.hpp).
using testing::batching;
using testing::metric;
using testing::same_answer;

// -- the router ---------------------------------------------------------------------------------

struct LateNode {
  // The node's queues (NodeProcess owns them): before the actor system, so they outlive the actors.
  WorkQueue fetches{{.threads = 2}};
  WorkQueue hops{{.threads = 1}};
  WorkQueue maintenance{{.threads = 1}};
  std::unique_ptr<caf::actor_system> sys = testing::make_system();
  gpu::testing::TempDir repo;
  std::vector<std::shared_ptr<const gpu::Model>> models;
  std::shared_ptr<BlobStore> store = std::make_shared<BlobStore>();
  std::vector<gpu_executor_actor> execs;
  model_cache_actor cache;
  node_router_actor router;
  std::atomic<int> restarts{0};
  std::atomic<int> reopened_while_open{0};  // restarts that opened a device its old engine still held
  std::atomic<int> reopen_failures{0};      // the next this many reopens fail

  using ModelMaker = std::function<std::shared_ptr<const gpu::Model>(const std::string& dir, int i)>;

  // `devices` devices of `device_bytes` (16 MiB: 8 MiB pools), `count` models (3 MiB MLPs unless
  // `make` writes them); device 0 faults after `fault_after` kernels when set; devices compute on a
  // dilated clock when `dilation` > 0.
  LateNode(uint32_t devices, int count, int64_t fault_after = -1, double dilation = 0, ModelMaker make = {},
           uint64_t device_bytes = 16 * MiB, NodeInstruments* instruments = nullptr,
           std::shared_ptr<InlineRuns> inline_runs = nullptr,
           placement::EvictionRule eviction = placement::EvictionRule::torpor, uint32_t streams = 1,
           ShadowScalingOptions scaling = {}) {
    for (int i = 0; i < count; ++i) {
      const std::string dir = repo / ("m" + std::to_string(i)) + "/1";
      models.push_back(make ? make(dir, i) : write_mlp(dir, i + 1, 3));
    }
    std::vector<device_report> reports;
    std::vector<uint64_t> pools, workspaces;
    for (uint32_t d = 0; d < devices; ++d) {
      auto dev = gpu::testing::sim_device(device_bytes, d, dilation);
      if (d == 0 && fault_after >= 0) dev->TEST_fail_after_kernels(static_cast<uint64_t>(fault_after));
      auto e = engine(std::move(dev), streams);
      pools.push_back(e->engine_memory().pool_capacity);
      workspaces.push_back(e->engine_memory().workspace);
      reports.push_back({e->device_info().name, device_bytes, 0});
      engine_factory reopen = [this, d, dilation, device_bytes, streams]() -> Result<std::unique_ptr<ExecutorEngine>> {
        ++restarts;
        if (gpu::SimDevice::TEST_open_on_ordinal(d) > 0) ++reopened_while_open;
        for (int left = reopen_failures.load(); left > 0;) {
          if (reopen_failures.compare_exchange_weak(left, left - 1)) return unavailable("the device did not come back");
        }
        return engine(gpu::testing::sim_device(device_bytes, d, dilation), streams);
      };
      execs.push_back(
          spawn_gpu_executor(*sys, std::move(e), "n1", instruments, maintenance, reopen, InlineSlot{inline_runs, d}));
    }
    ModelCacheConfig c;
    c.repository = repo.path();
    cache = spawn_model_cache(*sys, c, store, nullptr, fetches, hops);
    std::vector<uint32_t> switches;
    for (uint32_t d = 0; d < devices; ++d) switches.push_back(d / 2);
    auto topology = placement::NodeTopology::create(
        switches, std::vector<std::vector<double>>(devices, std::vector<double>(devices, 0.0)),
        std::vector<double>(devices, 16.0));
    EXPECT_TRUE(topology.ok());
    NodeRouterConfig rc{"n1", "127.0.0.1", 0, "", LateBinding{{}, *topology, pools, workspaces}};
    rc.late->options.eviction = eviction;
    rc.late->options.streams = streams;
    rc.late->scaling = scaling;
    rc.inline_runs = std::move(inline_runs);
    router = spawn_node_router(*sys, rc, execs, reports, cache, instruments);
  }
  ~LateNode() {
    caf::scoped_actor self{*sys};
    std::vector<caf::actor> all{caf::actor_cast<caf::actor>(router), caf::actor_cast<caf::actor>(cache)};
    for (auto& e : execs) all.push_back(caf::actor_cast<caf::actor>(e));
    for (const auto& a : all) {
      self->send_exit(a, caf::exit_reason::user_shutdown);
      self->wait_for(a);
    }
  }
  Result<replica_info> load(int i, std::string profile_json = {}) {
    auto e = testing::repository_version(repo.path(), "m" + std::to_string(i), 1);
    load_replica req{e.key, e.manifest_json, blob_key_of(e.key), e.weights_bytes, {}};
    req.profile_json = std::move(profile_json);
    return testing::ask<replica_info>(*sys, router, 30s, std::move(req));
  }
};

struct Served {
  int answers = 0, right = 0;
  std::set<std::string> devices;
};

// Three rounds of one request per model, each answer checked against a warm run of the model.
Served serve_rounds(LateNode& node) {
  caf::scoped_actor self{*node.sys};
  Served s;
  const int count = static_cast<int>(node.models.size());
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < count; ++i) {
      const auto in = gpu::testing::arch_inputs(*node.models[i], 2, 1, 10 * round + i);
      infer_request req;
      req.model = {"m" + std::to_string(i), 1};
      req.inputs = encode_tensors(in);
      self->request(node.router, 30s, std::move(req))
          .receive(
              [&](infer_reply& r) {
                ++s.answers;
                s.devices.insert(r.device);
                auto out = decode_tensors(std::move(r.outputs));
                s.right += out.ok() && gpu::testing::bitwise_equal((*out)[0], warm_outputs(node.models[i], in)[0]);
              },
              [&](caf::error& e) { ADD_FAILURE() << from_caf(e).message(); });
    }
  }
  return s;
}

// The executor actors' side of AsyFunc: a Shadow loaded on one executor (load_shadow), a late-binding
// request on another with the Shadow's gate puts half its rows there (swap_reply's split.shadow_rows),
// the Shadow dropped (shadow_atom) leaves them to the Body, and a range outside the model is refused.
TEST(LateBindingShadow, ExecutorsLoadAShadowShareABatchWithItAndDropIt) {
  NodeInstruments instruments;
  LateNode node(2, 1, -1, 0, {}, 16 * MiB, &instruments);
  caf::scoped_actor self{*node.sys};
  const model_key key{"m0", 1};
  const auto m = node.models[0];
  const auto x = gpu::testing::arch_inputs(*m, 4, 1, 23);
  const auto want = warm_outputs(m, x)[0];
  auto swap = [&](std::shared_ptr<EngineGate> shadow) {
    auto req = std::make_shared<infer_request>();
    req->model = key;
    req->inputs = encode_tensors(x);
    swap_request s;
    s.request = req;
    s.run.model = m;
    s.run.shadow = std::move(shadow);
    auto r = testing::ask<swap_reply>(*node.sys, node.execs[0], 30s, std::move(s));
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : swap_reply{};
  };
  auto answer_of = [&](const swap_reply& r) {
    EXPECT_TRUE(r.reply.has_value()) << (r.error ? r.error->message() : "");
    if (!r.reply) return 1.0;
    auto out = decode_tensors(r.reply->outputs);
    return out.ok() ? gpu::testing::relative_error((*out)[0], want) : 1.0;
  };
  EXPECT_LT(answer_of(swap(nullptr)), 1e-5);  // the Body: resident on device 0
  const auto blocks = gpu::layer_blocks(m->graph());
  ASSERT_GE(blocks.size(), 3u);
  auto ready =
      testing::ask<shadow_ready>(*node.sys, node.execs[1], 30s, load_shadow{key, m, blocks[1].first, blocks[1].last});
  ASSERT_TRUE(ready.ok()) << ready.error().message();
  EXPECT_EQ(ready->bytes, m->range_bytes({blocks[1].first, blocks[1].last}).length);
  ASSERT_TRUE(ready->gate);
  auto paired = swap(ready->gate);
  EXPECT_EQ(paired.result.split.shadow_rows, 2) << paired.result.split.shadow_error;
  EXPECT_FALSE(paired.result.split.shadow_lost);
  EXPECT_LT(answer_of(paired), 1e-5);
  auto dropped = testing::ask<bool>(*node.sys, node.execs[1], 30s, shadow_atom_v, key);
  ASSERT_TRUE(dropped.ok());
  EXPECT_TRUE(*dropped);
  auto again = testing::ask<bool>(*node.sys, node.execs[1], 30s, shadow_atom_v, key);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again) << "nothing left to drop";
  auto alone = swap(ready->gate);
  EXPECT_EQ(alone.result.split.shadow_rows, 0);
  EXPECT_NE(alone.result.split.shadow_error.find("no Shadow"), std::string::npos) << alone.result.split.shadow_error;
  EXPECT_TRUE(alone.result.split.shadow_lost);
  EXPECT_LT(answer_of(alone), 1e-5);
  // The metrics: one started and released, one run shared (2 rows), one taken back; the Shadow's
  // memory shown apart from weights while it was held, and none after.
  const std::string text = metrics::render(instruments.snapshot());
  for (const char* line :
       {R"(ember_shadows_started_total{model="m0",version="1"} 1)",
        R"(ember_shadows_released_total{model="m0",version="1"} 1)",
        R"(ember_shadow_splits_total{model="m0",version="1",outcome="shared"} 1)",
        R"(ember_shadow_splits_total{model="m0",version="1",outcome="taken_back"} 1)",
        R"(ember_shadow_rows_total{model="m0",version="1"} 2)",
        R"(ember_device_memory_in_use_bytes{device="sim:1",use="shadows"} 0)", "ember_shadow_start_seconds_count 1"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << " in\n" << text;
  }
  auto outside = testing::ask<shadow_ready>(*node.sys, node.execs[1], 30s, load_shadow{key, m, 0, m->num_layers() + 5});
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.error().code(), ErrorCode::invalid_argument) << outside.error().message();
}

// The router's side of AsyFunc: a burst of one model (batching up to 8 rows, its profile shipped
// with it) on a node of two devices with model-level scaling holding it to one copy: the idle device
// takes a Shadow of the layer whose time grows with the batch, batches split with it, every answer
// is the model's own, and once the rate falls the Shadow goes and its device serves again.
TEST(LateBindingShadow, ABurstStartsAShadowOnTheIdleDeviceThatSharesBatchesUntilTheRateFalls) {
  NodeInstruments instruments;
  ShadowScalingOptions scaling;
  scaling.model_level = true;
  scaling.shadows = true;
  scaling.burst_window_us = 200'000;
  scaling.period_us = 300'000;
  auto batching_mlp = [](const std::string& dir, int i) {
    gpu::ServingConfig serving;
    serving.dynamic_batching = true;
    serving.max_batch = 8;
    serving.slo_deadline_us = 2'000'000;
    return write_mlp(dir, static_cast<uint64_t>(i + 1), 3, serving);
  };
  LateNode node(2, 1, -1, 30, batching_mlp, 16 * MiB, &instruments, nullptr, placement::EvictionRule::torpor, 1,
                scaling);
  const auto m = node.models[0];
  // Its profile, measured, then made CNN-like: the first linear layer's time grows steeply with the
  // batch (20 ms a row), the rest flat, so one Body carries about 50 rows/s within the SLO.
  auto device = gpu::testing::sim_device(64 * MiB, 7);
  auto no_hash = [](const uint8_t*, uint64_t) { return std::string(64, '0'); };
  auto profile = gpu::measure_profile(m, *device, {1, 2, 4, 8}, 1, no_hash);
  ASSERT_TRUE(profile.ok()) << profile.error().message();
  for (size_t l = 0; l < profile->layers.size(); ++l) {
    for (size_t k = 0; k < profile->batches.size(); ++k) {
      profile->layers[l].exec_us[k] = l == 0 ? 20'000.0 * profile->batches[k] : 200.0;
    }
  }
  ASSERT_TRUE(node.load(0, gpu::profile_to_json(*profile)).ok());
  // The burst: 40 requests at once, 200 a second over the burst window.
  caf::scoped_actor self{*node.sys};
  const model_key key{"m0", 1};
  constexpr int kBurst = 40;
  std::vector<std::vector<gpu::HostTensor>> inputs, want;
  for (int i = 0; i < kBurst; ++i) {
    inputs.push_back(gpu::testing::arch_inputs(*m, 1, 1, 100 + i));
    want.push_back(warm_outputs(m, inputs.back()));
  }
  int right = 0;
  std::vector<decltype(self->request(node.router, 60s, infer_request{}))> pending;
  for (int i = 0; i < kBurst; ++i) {
    infer_request req;
    req.model = key;
    req.inputs = encode_tensors(inputs[i]);
    pending.push_back(self->request(node.router, 60s, std::move(req)));
  }
  for (int i = 0; i < kBurst; ++i) {
    pending[i].receive(
        [&](infer_reply& r) {
          auto out = decode_tensors(r.outputs);
          right += out.ok() && gpu::testing::relative_error((*out)[0], want[i][0]) < 1e-5;
        },
        [&](caf::error& e) { ADD_FAILURE() << to_string(e); });
  }
  EXPECT_EQ(right, kBurst);
  auto text = [&] { return metrics::render(instruments.snapshot()); };
  const std::string during = text();
  EXPECT_NE(during.find(R"(ember_shadows_started_total{model="m0",version="1"} 1)"), std::string::npos) << during;
  EXPECT_EQ(during.find(R"(ember_shadow_splits_total{model="m0",version="1",outcome="taken_back"})"), std::string::npos)
      << during;
  const auto shared = during.find(R"(ember_shadow_splits_total{model="m0",version="1",outcome="shared"} )");
  ASSERT_NE(shared, std::string::npos) << "no batch was split with the Shadow:\n" << during;
  // The rate fell to nothing: within a few periods the Shadow goes, and its memory with it.
  const std::string released = R"(ember_shadows_released_total{model="m0",version="1"} 1)";
  for (int i = 0; i < 100 && text().find(released) == std::string::npos; ++i) std::this_thread::sleep_for(50ms);
  const std::string after = text();
  EXPECT_NE(after.find(released), std::string::npos) << after;
  EXPECT_NE(after.find(R"(ember_device_memory_in_use_bytes{device="sim:1",use="shadows"} 0)"), std::string::npos)
      << after;
  // Both devices serve again: a second burst is answered, right.
  int again = 0;
  for (int i = 0; i < 8; ++i) {
    infer_request req;
    req.model = key;
    req.inputs = encode_tensors(inputs[i]);
    auto r = testing::ask<infer_reply>(*node.sys, node.router, 30s, std::move(req));
    ASSERT_TRUE(r.ok()) << r.error().message();
    auto out = decode_tensors(r->outputs);
    again += out.ok() && gpu::testing::relative_error((*out)[0], want[i][0]) < 1e-5;
  }
  EXPECT_EQ(again, 8);
}

TEST(LateBindingRouter, ServesMoreModelsThanTheDevicesHoldWithRightAnswers) {
  LateNode node(2, 8);  // 8 models x 3 MiB against 2 x 8 MiB of pools: at most 4 resident
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(node.load(i).ok()) << i;
  const Served s = serve_rounds(node);
  EXPECT_EQ(s.answers, 24);
  EXPECT_EQ(s.right, 24);
  EXPECT_EQ(s.devices.size(), 2u);
  // Bad input is the client's error and costs nothing else.
  infer_request bad;
  bad.model = {"m0", 1};
  bad.inputs = encode_tensors(gpu::testing::arch_inputs(*node.models[0], 2, 1, 1));
  bad.inputs[0].shape = {2, 7};
  bad.inputs[0].data.resize(2 * 7 * 4);
  auto r = testing::ask<infer_reply>(*node.sys, node.router, 30s, std::move(bad));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::invalid_argument);
}

// The autoscaler asks each node for what waits in its queue: one model's burst shows there, the
// other model's replica reports zero, and every request is answered.
TEST(LateBindingRouter, TellsTheAutoscalerHowManyRequestsWaitPerModel) {
  LateNode node(1, 2, -1, 3);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(node.load(i).ok()) << i;
  caf::scoped_actor self{*node.sys};
  const auto in = gpu::testing::arch_inputs(*node.models[0], 2, 1, 5);
  constexpr int kBurst = 40;  // five batches of max_batch 8: most still wait when the report is made
  for (int i = 0; i < kBurst; ++i) {
    infer_request req;
    req.model = {"m0", 1};
    req.inputs = encode_tensors(in);
    self->send(node.router, std::move(req));
  }
  auto report = testing::ask<load_report>(*node.sys, node.router, 30s, scale_atom_v);
  ASSERT_TRUE(report.ok()) << report.error().message();
  EXPECT_EQ(report->reporter, "node:n1");
  ASSERT_EQ(report->models.size(), 2u);
  std::map<model_key, model_load> by_model;
  for (const auto& m : report->models) by_model[m.model] = m;
  const model_load& busy = by_model[model_key{"m0", 1}];
  EXPECT_GE(busy.queued, 1u) << "a burst on one device waits in its queue";
  EXPECT_LE(busy.queued, static_cast<uint32_t>(kBurst));
  EXPECT_EQ(busy.ongoing, 0u) << "in flight is the gateways' count";
  const model_load& quiet = by_model[model_key{"m1", 1}];
  EXPECT_EQ(quiet.queued, 0u);
  int answers = 0;
  for (int i = 0; i < kBurst; ++i) {
    self->receive([&](infer_reply&) { ++answers; }, [&](caf::error& e) { ADD_FAILURE() << from_caf(e).message(); });
  }
  EXPECT_EQ(answers, kBurst);
  auto after = testing::ask<load_report>(*node.sys, node.router, 30s, scale_atom_v);
  ASSERT_TRUE(after.ok());
  for (const auto& m : after->models) EXPECT_EQ(m.queued, 0u) << m.model.to_string();
}

// The density benchmark's devices: compute on a dilated clock (devices.compute_dilation), swaps
// pipelined against it. Same answers, bit for bit.
// Requests run inline (on a front end's thread, actors/node/inline_runs.hpp) are uses the router
// learns of: the model run inline most recently is not the one evicted, though the router itself
// last ran the other; and each counts as an SLO outcome.
TEST(LateBindingRouter, InlineRunsCountAsUsesForEvictionAndAsSloOutcomes) {
  NodeInstruments instruments;
  auto runs = std::make_shared<InlineRuns>("n1", &instruments);
  // One 8 MiB pool, 3 MiB models: two fit.
  LateNode node(1, 3, -1, 0, {}, 16 * MiB, &instruments, runs, placement::EvictionRule::lru);
  ASSERT_TRUE(node.load(0).ok());
  ASSERT_TRUE(node.load(1).ok());  // its profile ran last: plain LRU would evict m0 next
  auto request = [&](int i) {
    infer_request req;
    req.model = {"m" + std::to_string(i), 1};
    req.inputs = encode_tensors(gpu::testing::arch_inputs(*node.models[i], 2, 1, 5));
    return req;
  };
  auto run_when_idle = [&](int i) {
    for (int attempt = 0; attempt < 1000; ++attempt) {
      if (auto ran = runs->run(request(i))) return ran->ok();
      std::this_thread::sleep_for(1ms);
    }
    return false;
  };
  for (int k = 0; k < 3; ++k) ASSERT_TRUE(run_when_idle(0));
  ASSERT_TRUE(node.load(2).ok());                   // its profile swaps it in, evicting one
  EXPECT_TRUE(run_when_idle(0));                    // m0 stayed
  EXPECT_FALSE(runs->run(request(1)).has_value());  // m1 went
  const std::string text = instruments.registry().render();
  EXPECT_NE(text.find("ember_swap_dispatches_total{kind=\"inline\"} 4"), std::string::npos) << text;
  // The three runs before m2's load are SLO outcomes (on time or late: the machine decides); the
  // router's own runs so far were profiles, which count as none.
  double outcomes = 0;
  for (const char* outcome : {"on_time", "late"}) {
    const std::string key = std::string("ember_slo_requests_total{outcome=\"") + outcome + "\"} ";
    if (const size_t at = text.find(key); at != std::string::npos) outcomes += std::stod(text.substr(at + key.size()));
  }
  EXPECT_GE(outcomes, 3) << text;
}

TEST(LateBindingRouter, DilatedDevicesSwapAndAnswerAlike) {
  LateNode node(2, 8, -1, 3);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(node.load(i).ok()) << i;
  const Served s = serve_rounds(node);
  EXPECT_EQ(s.answers, 24);
  EXPECT_EQ(s.right, 24);
  EXPECT_EQ(s.devices.size(), 2u);
}

TEST(LateBindingRouter, AFaultingExecutorHasItsRequestRetriedElsewhereAndIsRestarted) {
  LateNode node(2, 4, /*fault_after=*/20);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(node.load(i).ok()) << i;
  caf::scoped_actor self{*node.sys};
  int right = 0, answers = 0;
  std::set<std::string> devices;
  // Concurrent requests keep both devices busy, so device 0 gets some and faults on one.
  for (int round = 0; round < 6; ++round) {
    std::vector<std::vector<gpu::HostTensor>> inputs;
    for (int i = 0; i < 4; ++i) {
      inputs.push_back(gpu::testing::arch_inputs(*node.models[i], 2, 1, 100 * round + i));
      infer_request req;
      req.model = {"m" + std::to_string(i), 1};
      req.id = std::to_string(i);
      req.inputs = encode_tensors(inputs.back());
      self->send(node.router, std::move(req));
    }
    for (int k = 0; k < 4; ++k) {
      self->receive(
          [&](infer_reply& r) {
            ++answers;
            devices.insert(r.device);
            const int i = std::stoi(r.id);
            auto out = decode_tensors(std::move(r.outputs));
            right += out.ok() && gpu::testing::bitwise_equal((*out)[0], warm_outputs(node.models[i], inputs[i])[0]);
          },
          [&](caf::error& e) { ADD_FAILURE() << from_caf(e).message(); },
          caf::after(30s) >> [&] { ADD_FAILURE() << "no answer"; });
    }
  }
  EXPECT_EQ(answers, 24);
  EXPECT_EQ(right, 24);
  EXPECT_GE(node.restarts.load(), 1);
  EXPECT_EQ(node.reopened_while_open.load(), 0) << "a restart opened the device before closing the broken one";
  // The restarted executor serves again: its models come back from host memory.
  EXPECT_EQ(devices.size(), 2u);
}

// The router tries a failed restart again (after 1 s, then backing off) until the device is back.
TEST(LateBindingRouter, AFailedRestartIsTriedAgainUntilTheDeviceServes) {
  LateNode node(2, 4, /*fault_after=*/20);
  node.reopen_failures = 1;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(node.load(i).ok()) << i;
  // Sequential requests until device 0 faults: each is answered right (device 1 takes the retry).
  Served s = serve_rounds(node);
  EXPECT_EQ(s.right, 12);
  for (int i = 0; i < 100 && node.restarts.load() < 2; ++i) std::this_thread::sleep_for(100ms);
  ASSERT_EQ(node.restarts.load(), 2) << "the failed restart was not tried again within 10 s";
  std::set<std::string> devices;
  for (int i = 0; i < 20 && devices.count("sim:0") == 0; ++i) {
    std::this_thread::sleep_for(100ms);
    s = serve_rounds(node);
    EXPECT_EQ(s.right, s.answers);
    devices.insert(s.devices.begin(), s.devices.end());
  }
  EXPECT_EQ(devices.count("sim:0"), 1u) << "device 0 never served again after its second restart";
}

}  // namespace late_binding_test
}  // namespace ember

namespace ember {
namespace late_binding_test {

// Concurrent requests of a batching model run as fewer executions, and every answer is what the
// model gives that request alone (up to the rounding of batched products): for each reference
// architecture.
TEST(LateBindingBatching, BatchedAnswersAreIdenticalToSoloRunsForEveryReferenceArchitecture) {
  const std::vector<std::string> archs{"mlp", "resnet50", "bert-base", "gpt2"};
  NodeInstruments instruments;
  LateNode node(1, 4, -1, 0, batching(archs, 8, 20'000), 128 * MiB, &instruments);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(node.load(i).ok()) << archs[static_cast<size_t>(i)];
  caf::scoped_actor self{*node.sys};
  for (int i = 0; i < 4; ++i) {
    const double executions_before = metric(instruments, "ember_execution_count_total", i);
    constexpr int kRequests = 6;
    std::vector<std::vector<gpu::HostTensor>> inputs;
    for (int k = 0; k < kRequests; ++k) {
      // One row each (resnet50: 1 image), different data per request.
      inputs.push_back(gpu::testing::arch_inputs(*node.models[static_cast<size_t>(i)], 1, 4, 100 * i + k));
      infer_request req;
      req.model = {"m" + std::to_string(i), 1};
      req.id = std::to_string(k);
      req.inputs = encode_tensors(inputs.back());
      self->send(node.router, std::move(req));
    }
    int right = 0;
    for (int k = 0; k < kRequests; ++k) {
      self->receive(
          [&](infer_reply& r) {
            const int which = std::stoi(r.id);
            auto out = decode_tensors(std::move(r.outputs));
            ASSERT_TRUE(out.ok());
            const auto want = warm_outputs(node.models[static_cast<size_t>(i)], inputs[static_cast<size_t>(which)]);
            right += same_answer(*out, want);
          },
          [&](caf::error& e) { ADD_FAILURE() << from_caf(e).message(); },
          caf::after(60s) >> [&] { ADD_FAILURE() << "no answer"; });
    }
    EXPECT_EQ(right, kRequests) << archs[static_cast<size_t>(i)];
    const double executions = metric(instruments, "ember_execution_count_total", i) - executions_before;
    EXPECT_LT(executions, kRequests) << archs[static_cast<size_t>(i)] << ": no request was batched";
    EXPECT_GE(executions, 1) << archs[static_cast<size_t>(i)];
  }
}

// The gathering delay never makes a request late by itself: a model that may wait 5 s for more
// requests but has a 300 ms deadline answers a lone request long before 5 s.
TEST(LateBindingBatching, GatheringForABatchEndsBeforeTheDeadline) {
  LateNode node(1, 1, -1, 0, batching({"mlp"}, 8, 5'000'000, 300'000), 64 * MiB);
  ASSERT_TRUE(node.load(0).ok());
  infer_request req;
  req.model = {"m0", 1};
  req.inputs = encode_tensors(gpu::testing::arch_inputs(*node.models[0], 1, 1, 3));
  const auto start = std::chrono::steady_clock::now();
  auto r = testing::ask<infer_reply>(*node.sys, node.router, 30s, std::move(req));
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_LT(waited, 2s) << "waited for a batch past the deadline";
}

// A batch on a device that faults: every member is retried (on the other device) and answered right.
TEST(LateBindingBatching, AFaultedBatchRetriesEveryMember) {
  LateNode node(2, 1, /*fault_after=*/12, 0, batching({"mlp"}, 8, 2'000), 64 * MiB);
  ASSERT_TRUE(node.load(0).ok());
  caf::scoped_actor self{*node.sys};
  int right = 0, answers = 0;
  for (int round = 0; round < 6; ++round) {
    std::vector<std::vector<gpu::HostTensor>> inputs;
    for (int k = 0; k < 5; ++k) {
      inputs.push_back(gpu::testing::arch_inputs(*node.models[0], 1, 1, 10 * round + k));
      infer_request req;
      req.model = {"m0", 1};
      req.id = std::to_string(k);
      req.inputs = encode_tensors(inputs.back());
      self->send(node.router, std::move(req));
    }
    for (int k = 0; k < 5; ++k) {
      self->receive(
          [&](infer_reply& r) {
            ++answers;
            auto out = decode_tensors(std::move(r.outputs));
            right += out.ok() && same_answer(*out, warm_outputs(node.models[0], inputs[std::stoul(r.id)]));
          },
          [&](caf::error& e) { ADD_FAILURE() << from_caf(e).message(); },
          caf::after(30s) >> [&] { ADD_FAILURE() << "no answer"; });
    }
  }
  EXPECT_EQ(answers, 30);
  EXPECT_EQ(right, 30);
  EXPECT_GE(node.restarts.load(), 1) << "device 0 never faulted: the test did not test the fault";
}

// An executor that answers its model's registration profile, then never answers a request again
// (a hung device): counts its restarts.
gpu_executor_actor::behavior_type silent_executor(gpu_executor_actor::pointer,
                                                  std::shared_ptr<std::atomic<int>> restarts) {
  return {
      [](bind_model&) -> caf::result<std::string> { return std::string("sim:hung"); },
      [](unload_atom, const model_key&) { return true; },
      [](infer_request&) -> caf::result<infer_reply> { return caf::delegated<infer_reply>{}; },
      [](status_atom) {
        return executor_status{{"sim:hung", 16 * MiB, 0}, {}, 0, 8 * MiB, 8 * MiB, 256 << 10};
      },
      [](swap_request& req) -> caf::result<swap_reply> {
        if (!req.run.profile) return caf::delegated<swap_reply>{};  // hangs
        swap_reply r;
        r.reply = infer_reply{};
        r.result.footprint = req.run.model->data_bytes();
        r.result.pool_free = 4 * MiB;
        r.result.run.compute_us = 100;
        r.result.warm_us = 50;
        return r;
      },
      [](weights_atom, const model_key&) { return weights_lease{}; },
      [](release_atom, std::vector<uint64_t>&) {},
      [](cancel_atom, const model_key&, const std::string&) {},
      [](lend_atom, std::vector<uint64_t>&) -> caf::result<value_lease> {
        return to_caf(not_found("this fake keeps nothing"));
      },
      [restarts](restart_atom) {
        ++*restarts;
        return device_report{"sim:hung", 16 * MiB, 0};
      },
      [](forget_atom) { return true; },
      [](load_shadow&) -> caf::result<shadow_ready> { return to_caf(unsupported("no shadows here")); },
      [](shadow_atom, const model_key&) { return false; },
      [](fault_atom, const fault_command&) -> caf::result<std::string> { return std::string("no"); },
      [](offload_done&) {},
  };
}

// The router's requests to its executors carry no CAF timeout; its tick takes an executor that has
// not answered a dispatch within run_timeout as faulted: the device restarts and the request is
// dispatched again (here to the same hung executor, so it restarts again).
TEST(LateBindingRouter, AnExecutorSilentPastTheRunTimeoutIsTakenAsFaultedAndRestarted) {
  WorkQueue fetches{{.threads = 1}};
  WorkQueue hops{{.threads = 1}};
  auto sys = testing::make_system();
  gpu::testing::TempDir repo;
  write_mlp(repo / "m0/1", 1, 1);
  auto restarts = std::make_shared<std::atomic<int>>(0);
  auto exec = sys->spawn(silent_executor, restarts);
  ModelCacheConfig c;
  c.repository = repo.path();
  auto cache = spawn_model_cache(*sys, c, std::make_shared<BlobStore>(), nullptr, fetches, hops);
  auto topology = placement::NodeTopology::create({0}, {{0.0}}, {16.0});
  ASSERT_TRUE(topology.ok());
  LateBinding late{{}, *topology, {8 * MiB}};
  late.run_timeout_us = 300'000;
  NodeRouterConfig rc{"n1", "127.0.0.1", 0, "", late};
  auto router = spawn_node_router(*sys, rc, {exec}, {{"sim:hung", 16 * MiB, 0}}, cache, nullptr);
  auto e = testing::repository_version(repo.path(), "m0", 1);
  auto loaded = testing::ask<replica_info>(
      *sys, router, 30s, load_replica{e.key, e.manifest_json, blob_key_of(e.key), e.weights_bytes, {}});
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  caf::scoped_actor self{*sys};
  infer_request req;
  req.model = e.key;
  req.inputs = encode_tensors(gpu::testing::arch_inputs(*gpu::Model::load(repo / "m0/1").value(), 1, 1, 3));
  self->send(router, std::move(req));
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (restarts->load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(50ms);
  EXPECT_GE(restarts->load(), 2) << "the hung executor was not taken as faulted (or its retry was not dispatched)";
  for (const auto& a :
       {caf::actor_cast<caf::actor>(router), caf::actor_cast<caf::actor>(cache), caf::actor_cast<caf::actor>(exec)}) {
    self->send_exit(a, caf::exit_reason::user_shutdown);
    self->wait_for(a);
  }
}

// -- workflows run on the node ----------------------------------------------------------------------

// m0, m1, m2: MLPs of 512 (3 MiB each); m3: the sum of two 512-wide inputs "a" and "b".
std::shared_ptr<const gpu::Model> write_flow_model(const std::string& dir, int i) {
  if (i < 3) return write_mlp(dir, static_cast<uint64_t>(i + 1), 3);
  gpu::ModelBuilder b("sum", 1);
  b.add("sum", gpu::OpKind::add, {},
        {b.input("a", gpu::DType::f32, {-1, 512}), b.input("b", gpu::DType::f32, {-1, 512})});
  b.output("sum", gpu::DType::f32, {-1, 512});
  EXPECT_TRUE(b.write(dir).ok());
  return gpu::testing::must(gpu::Model::load(dir), "loading the sum");
}

// a (m0) feeds b (m1) and c (m2), whose outputs d (m3) sums; the answer is d's sum and a's output.
constexpr const char* kFlow = R"({"inputs": ["x"],
  "steps": [{"name": "a", "model": "m0", "inputs": {"input": "x"}},
            {"name": "b", "model": "m1", "inputs": {"input": "a.relu2"}},
            {"name": "c", "model": "m2", "inputs": {"input": "a.relu2"}},
            {"name": "d", "model": "m3", "inputs": {"a": "b.relu2", "b": "c.relu2"}}],
  "outputs": {"y": "d.sum", "f": "a.relu2"}})";

workflow_request flow_request(const std::string& json, const gpu::HostTensor& x) {
  workflow_request w;
  w.name = "flow";
  w.json = json;
  for (int i = 0; i < 4; ++i) w.models.push_back({"m" + std::to_string(i), 1});
  w.request.model = {"flow", 1};
  w.request.id = "w1";
  w.request.inputs = encode_tensors({x});
  return w;
}

/// Waits (bounded) until no executor of the node keeps a value on its device.
void expect_nothing_kept(LateNode& node) {
  uint64_t kept = 0;
  for (int tries = 0; tries < 200; ++tries) {
    kept = 0;
    for (auto& e : node.execs) {
      auto st = testing::ask<executor_status>(*node.sys, e, 10s, status_atom_v);
      ASSERT_TRUE(st.ok());
      kept += st->kept_values;
    }
    if (kept == 0) return;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(kept, 0u) << "intermediates still kept on a device";
}

TEST(NodeWorkflows, StepsHandTheirOutputsOnTheDeviceAndAnswerWhatTheModelsGiveByHand) {
  for (uint32_t devices : {1u, 2u}) {
    NodeInstruments instruments;
    LateNode node(devices, 4, -1, 0, write_flow_model, 16 * MiB, &instruments);
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(node.load(i).ok()) << i;
    const auto x = gpu::testing::random_tensor("input", {gpu::DType::f32, gpu::Shape{2, 512}}, 7);
    // By hand, on the host.
    const auto a = warm_outputs(node.models[0], {x})[0];
    gpu::HostTensor a_in = a;
    a_in.name = "input";
    auto b = warm_outputs(node.models[1], {a_in})[0];
    auto c = warm_outputs(node.models[2], {a_in})[0];
    b.name = "a";
    c.name = "b";
    const auto d = warm_outputs(node.models[3], {b, c})[0];
    for (int round = 0; round < 3; ++round) {
      gpu::HostTensor in = x;
      in.name = "x";
      auto reply = testing::ask<infer_reply>(*node.sys, node.router, 30s, flow_request(kFlow, in));
      ASSERT_TRUE(reply.ok()) << reply.error().message();
      EXPECT_EQ(reply->id, "w1");
      auto out = decode_tensors(std::move(reply->outputs));
      ASSERT_TRUE(out.ok());
      ASSERT_EQ(out->size(), 2u);
      std::map<std::string, gpu::HostTensor> got;
      for (auto& t : *out) got.emplace(t.name, t);
      EXPECT_TRUE(gpu::testing::bitwise_equal(got.at("y"), d)) << devices << " device(s), round " << round;
      EXPECT_TRUE(gpu::testing::bitwise_equal(got.at("f"), a)) << devices << " device(s), round " << round;
    }
    expect_nothing_kept(node);
    // The scrape reads each device's memory afresh: the models' weights, nothing kept, no run's buffers.
    const std::string text = metrics::render(instruments.snapshot());
    double weights = 0;
    std::istringstream gauges(text);
    for (std::string line; std::getline(gauges, line);) {
      if (line.rfind("ember_device_memory_in_use_bytes{", 0) != 0) continue;
      const double v = std::stod(line.substr(line.rfind(' ')));
      if (line.find(R"(use="weights")") != std::string::npos) weights += v;
      if (line.find(R"(use="kept")") != std::string::npos || line.find(R"(use="activations")") != std::string::npos) {
        EXPECT_EQ(v, 0) << line;
      }
    }
    EXPECT_GE(weights, 2.0 * 3 * 512 * 512 * sizeof(float)) << "two models at least: " << text;
    if (devices == 1) {
      // Every hand-off on the one device: a.relu2 to b and c, b and c to d, 2 x 512 floats each.
      EXPECT_NE(text.find(R"(ember_workflow_handoff_bytes_total{workflow="flow",path="same_device"} 49152)"),
                std::string::npos)
          << text;
    }
    EXPECT_EQ(text.find(R"(path="host")"), std::string::npos) << "nothing came back through the host";
    // On two devices a step may run where its inputs are not: they are copied over the link then
    // (peer). Either way every hand-off is counted once.
    double handed = 0;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("ember_workflow_handoff_bytes_total{", 0) == 0) handed += std::stod(line.substr(line.rfind(' ')));
    }
    EXPECT_EQ(handed, 49152) << text;
    EXPECT_NE(text.find(R"(ember_node_workflow_runs_total{workflow="flow",outcome="success"} 3)"), std::string::npos);
  }
}

// Functions as streams on the node: b and c read a's output on the one device and run beside each
// other (the router dispatches one as the device's request and the other beside it); concurrent
// workflow requests answer what the models give by hand, and nothing stays kept.
TEST(NodeWorkflows, StepsOfDifferentModelsRunBesideEachOtherOnOneDeviceAndAnswerAsByHand) {
  NodeInstruments instruments;
  LateNode node(1, 4, -1, 0, write_flow_model, 32 * MiB, &instruments, nullptr, placement::EvictionRule::torpor,
                /*streams=*/3);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(node.load(i).ok()) << i;
  std::vector<gpu::HostTensor> xs, want;
  for (int r = 0; r < 6; ++r) {
    xs.push_back(gpu::testing::random_tensor("x", {gpu::DType::f32, gpu::Shape{4, 512}}, 70 + r));
    gpu::HostTensor in = xs.back();
    in.name = "input";
    auto a = warm_outputs(node.models[0], {in})[0];
    a.name = "input";
    auto b = warm_outputs(node.models[1], {a})[0];
    auto c = warm_outputs(node.models[2], {a})[0];
    b.name = "a";
    c.name = "b";
    want.push_back(warm_outputs(node.models[3], {b, c})[0]);
  }
  std::vector<std::optional<Result<infer_reply>>> replies(xs.size());
  std::vector<std::thread> clients;
  for (size_t r = 0; r < xs.size(); ++r) {
    clients.emplace_back(
        [&, r] { replies[r] = testing::ask<infer_reply>(*node.sys, node.router, 30s, flow_request(kFlow, xs[r])); });
  }
  for (auto& t : clients) t.join();
  for (size_t r = 0; r < xs.size(); ++r) {
    ASSERT_TRUE(replies[r]->ok()) << replies[r]->error().message();
    auto out = decode_tensors(std::move((*replies[r])->outputs));
    ASSERT_TRUE(out.ok());
    bool answered = false;
    for (const auto& t : *out) {
      if (t.name != "y") continue;
      answered = true;
      EXPECT_TRUE(gpu::testing::bitwise_equal(t, want[r])) << "request " << r;
    }
    EXPECT_TRUE(answered) << "request " << r << " has no output y";
  }
  expect_nothing_kept(node);
  const std::string text = metrics::render(instruments.registry().snapshot());
  const auto at = text.find(R"(ember_swap_dispatches_total{kind="beside"} )");
  ASSERT_NE(at, std::string::npos) << "no step ran beside another\n" << text;
  EXPECT_GE(std::stod(text.substr(at + std::strlen(R"(ember_swap_dispatches_total{kind="beside"} )"))), 1.0);
}

// The device faults in a step that reads a value kept there: the value went with the fault, so the
// request fails as retryable, naming the step; the node restarts the device and serves the workflow
// again.
TEST(NodeWorkflows, AFaultUnderAStepThatReadsOnTheDeviceFailsTheRequestRetryablyAndTheNodeServesOn) {
  // Registration profiles run every model twice (6 kernels an MLP run, 1 the sum): 38 kernels;
  // step a takes 6 more; the 45th, the first of step b or c, faults.
  LateNode node(1, 4, /*fault_after=*/44, 0, write_flow_model);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(node.load(i).ok()) << i;
  const auto x = gpu::testing::random_tensor("x", {gpu::DType::f32, gpu::Shape{2, 512}}, 7);
  auto failed = testing::ask<infer_reply>(*node.sys, node.router, 30s, flow_request(kFlow, x));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code(), ErrorCode::unavailable) << failed.error().message();
  EXPECT_NE(failed.error().message().find("the device holding its inputs (sim:0) faulted"), std::string::npos)
      << failed.error().message();
  EXPECT_TRUE(failed.error().message().find("step 'b'") != std::string::npos ||
              failed.error().message().find("step 'c'") != std::string::npos)
      << failed.error().message();
  std::optional<Result<infer_reply>> again;
  for (int tries = 0; tries < 100 && !(again && again->ok()); ++tries) {
    again = testing::ask<infer_reply>(*node.sys, node.router, 30s, flow_request(kFlow, x));
    if (!again->ok()) std::this_thread::sleep_for(50ms);  // the device restarts meanwhile
  }
  ASSERT_TRUE(again->ok()) << again->error().message();
  EXPECT_GE(node.restarts.load(), 1);
  expect_nothing_kept(node);
}

TEST(NodeWorkflows, AFailingStepFailsTheRequestByNameAndReleasesEveryIntermediate) {
  LateNode node(1, 4, -1, 0, write_flow_model);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(node.load(i).ok()) << i;
  auto x = gpu::testing::random_tensor("x", {gpu::DType::f32, gpu::Shape{2, 512}}, 7);
  std::string wrong = kFlow;
  wrong.replace(wrong.find(R"({"input": "a.relu2"}},)"), 22, R"({"nope": "a.relu2"}},)");
  auto reply = testing::ask<infer_reply>(*node.sys, node.router, 30s, flow_request(wrong, x));
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(reply.error().message().find("step 'b' (model m1): unexpected input 'nope'"), std::string::npos)
      << reply.error().message();
  expect_nothing_kept(node);
  // Requests the node cannot take: a model it does not hold, a bad input; it still serves.
  auto request = flow_request(kFlow, x);
  request.models[3] = {"m9", 1};
  auto absent = testing::ask<infer_reply>(*node.sys, node.router, 30s, request);
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.error().code(), ErrorCode::unavailable);
  x.name = "y";
  auto unknown = testing::ask<infer_reply>(*node.sys, node.router, 30s, flow_request(kFlow, x));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message().find("input 'y' is not one of workflow 'flow''s"), std::string::npos);
  x.name = "x";
  EXPECT_TRUE(testing::ask<infer_reply>(*node.sys, node.router, 30s, flow_request(kFlow, x)).ok());
  expect_nothing_kept(node);
}

}  // namespace late_binding_test
}  // namespace ember

namespace ember {
namespace late_binding_test {

// -- text generation through the late-binding router ----------------------------------------------

// Collects a generation's chunks (the sink the gateway would be).
struct Sink {
  std::vector<int32_t> tokens;
  std::optional<generate_chunk> final;
  int chunks = 0;
};

generate_request greedy(std::string id, std::string model, std::vector<int32_t> prompt, uint32_t max_tokens) {
  generate_request r;
  r.id = std::move(id);
  r.model = {std::move(model), 1};
  r.kind = PromptKind::tokens;
  r.prompt_tokens = std::move(prompt);
  r.sampling.temperature = 0;
  r.max_tokens = max_tokens;
  return r;
}

// Waits for the router's answer to `r` and, when it joined, for its final chunk.
caf::error generate_on(caf::scoped_actor& self, node_router_actor router, generate_request r, Sink& sink) {
  caf::error refused;
  bool answered = false;
  self->send(router, std::move(r), caf::actor_cast<caf::actor>(self));
  while (!answered || (!refused && !sink.final)) {
    bool timed_out = false;
    self->receive([&](bool) { answered = true; },
                  [&](caf::error& e) {
                    answered = true;
                    refused = e;
                  },
                  [&](generate_chunk& c) {
                    ++sink.chunks;
                    sink.tokens.insert(sink.tokens.end(), c.tokens.begin(), c.tokens.end());
                    if (c.is_final()) sink.final = c;
                  },
                  caf::after(30s) >> [&] { timed_out = true; });
    if (timed_out) return to_caf(deadline_exceeded("the generation stalled"));
  }
  return refused;
}

// A node binding models pinned (no late binding): a generative model bound to its device at load.
struct PinnedNode {
  WorkQueue fetches{{.threads = 2}};
  WorkQueue hops{{.threads = 1}};
  WorkQueue maintenance{{.threads = 1}};
  std::unique_ptr<caf::actor_system> sys = testing::make_system();
  gpu::testing::TempDir repo;
  std::shared_ptr<const gpu::Model> model;
  std::shared_ptr<BlobStore> store = std::make_shared<BlobStore>();
  gpu_executor_actor exec;
  model_cache_actor cache;
  node_router_actor router;

  PinnedNode() {
    model = engine::generation_test::decoder(repo / "m0/1", true);
    auto e = engine(gpu::testing::sim_device(64 * MiB), 1);
    device_report report{e->device_info().name, 64 * MiB, 0};
    exec = spawn_gpu_executor(*sys, std::move(e), "n1", nullptr, maintenance, nullptr);
    ModelCacheConfig c;
    c.repository = repo.path();
    cache = spawn_model_cache(*sys, c, store, nullptr, fetches, hops);
    NodeRouterConfig rc{"n1", "127.0.0.1", 0, ""};
    router = spawn_node_router(*sys, rc, {exec}, {report}, cache, nullptr);
  }
  ~PinnedNode() {
    caf::scoped_actor self{*sys};
    for (const auto& a : {caf::actor_cast<caf::actor>(router), caf::actor_cast<caf::actor>(cache),
                          caf::actor_cast<caf::actor>(exec)}) {
      self->send_exit(a, caf::exit_reason::user_shutdown);
      self->wait_for(a);
    }
  }
  Result<replica_info> load() {
    auto e = testing::repository_version(repo.path(), "m0", 1);
    return testing::ask<replica_info>(*sys, router, 30s,
                                      load_replica{e.key, e.manifest_json, blob_key_of(e.key), e.weights_bytes, {}});
  }
};

// Pinned binding: the router sends a generation to the executor holding the model; its tokens reach
// the sink equal to the reference, the final chunk with usage; refusals (unknown model, ids outside
// the vocabulary, a prompt over the context window, a duplicate id in flight) answer errors and
// no chunk. (Late binding cannot load a generative model yet: its registration profile runs the
// model on sample inputs, which a kv_attention model refuses; docs/design/generation.md.)
TEST(NodeRouterGeneration, PinnedStreamsEveryTokenEqualToTheReferenceAndRefusesBadRequests) {
  namespace gt = engine::generation_test;
  PinnedNode node;
  auto loaded = node.load();
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  caf::scoped_actor self{*node.sys};
  Sink sink;
  caf::error e = generate_on(self, node.router, greedy("g1", "m0", {5, 17, 33, 2}, 10), sink);
  ASSERT_FALSE(e) << from_caf(e).message();
  auto device = gpu::testing::sim_device(64 * MiB);
  auto ex = gpu::LayerExecutor::create(*device, node.model, {0, node.model->num_layers()});
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ(sink.tokens, gt::recomputed(*device, **ex, {5, 17, 33, 2}, 10));
  ASSERT_TRUE(sink.final);
  EXPECT_EQ(sink.final->finish, FinishReason::length);
  EXPECT_EQ(sink.final->usage.prompt_tokens, 4u);
  EXPECT_EQ(sink.final->usage.completion_tokens, 10u);

  Sink none;
  e = generate_on(self, node.router, greedy("g2", "nope", {1}, 4), none);
  EXPECT_EQ(from_caf(e).code(), ErrorCode::not_found) << from_caf(e).message();
  e = generate_on(self, node.router, greedy("g3", "m0", {1, 500}, 4), none);
  EXPECT_EQ(from_caf(e).code(), ErrorCode::invalid_argument) << from_caf(e).message();
  e = generate_on(self, node.router, greedy("g4", "m0", std::vector<int32_t>(gt::kContext + 1, 1), 4), none);
  EXPECT_EQ(from_caf(e).code(), ErrorCode::invalid_argument) << from_caf(e).message();
  e = generate_on(self, node.router, greedy("g1", "m0", {1}, 4), none);
  EXPECT_EQ(from_caf(e).code(), ErrorCode::invalid_argument) << "g1 is still recorded until its sink is down or it is cancelled";
  EXPECT_EQ(none.chunks, 0);
  // A cancel forgets the id: it may generate again.
  self->send(node.router, cancel_atom_v, std::string("g1"));
  Sink again;
  e = generate_on(self, node.router, greedy("g1", "m0", {5, 17, 33, 2}, 3), again);
  ASSERT_FALSE(e) << from_caf(e).message();
  EXPECT_EQ(again.tokens, std::vector<int32_t>(sink.tokens.begin(), sink.tokens.begin() + 3));
}

// Late binding: a generation is held and bound to a device like a request; the executor's refusal
// (here: a model with no generation section) answers the gateway, no chunk sent; an unknown model is
// not_found; the node's requests are served as before afterwards.
TEST(LateBindingGeneration, AGenerationIsBoundLikeARequestAndItsRefusalAnswered) {
  LateNode node(1, 1);
  auto loaded = node.load(0);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  caf::scoped_actor self{*node.sys};
  Sink none;
  caf::error e = generate_on(self, node.router, greedy("g1", "m0", {1, 2}, 4), none);
  EXPECT_EQ(from_caf(e).code(), ErrorCode::invalid_argument) << from_caf(e).message();
  EXPECT_NE(from_caf(e).message().find("generative"), std::string::npos) << from_caf(e).message();
  e = generate_on(self, node.router, greedy("g2", "nope", {1}, 4), none);
  EXPECT_EQ(from_caf(e).code(), ErrorCode::not_found) << from_caf(e).message();
  EXPECT_EQ(none.chunks, 0);
  // The refused id is forgotten: it may be asked again.
  e = generate_on(self, node.router, greedy("g1", "m0", {1, 2}, 4), none);
  EXPECT_EQ(from_caf(e).code(), ErrorCode::invalid_argument) << from_caf(e).message();
  auto in = gpu::testing::arch_inputs(*node.models[0], 1, 4, 3);
  infer_request req;
  req.model = {"m0", 1};
  req.inputs = encode_tensors(in);
  auto reply = testing::ask<infer_reply>(*node.sys, node.router, 30s, req);
  ASSERT_TRUE(reply.ok()) << reply.error().message();
}

}  // namespace late_binding_test
}  // namespace ember
