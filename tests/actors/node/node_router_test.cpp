// The node_router on the deterministic coordinator (tests/actors/deterministic.hpp): its timers run
// on the actor clock, so the restart backoff (1 s, 2 s, 4 s) and the RRC queue's repartition and
// alpha periods are checked to the millisecond without sleeping. The executor and the model cache
// are small fake actors: the executor answers each swap at once or after a delay the test sets per
// request (a delayed message on the same clock), and counts restarts; the cache hands out the bytes
// of a tiny model written once per test. What runs where on real threads is node_actors_test's and
// late_binding_test's subject.
#include "actors/node/node_router.hpp"

#include <gtest/gtest.h>

#include <caf/typed_event_based_actor.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/node/node_instruments.hpp"
#include "model/host_buffer.hpp"
#include "tests/actors/deterministic.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember {
namespace node_router_test {

using namespace std::chrono_literals;
using Time = caf::actor_clock::time_point;
constexpr uint64_t MiB = 1ull << 20;

/// What the fake executor does and saw; read and written on the test's thread only.
struct FakeDevice {
  std::string name = "fake:0";
  uint64_t pool_bytes = 64 * MiB;
  /// The next this many restarts fail.
  int failing_restarts = 0;
  /// The next swap faults (the device is broken).
  bool fault_next = false;
  /// Requests (by id) answered this long after they arrive; the others at once.
  std::map<std::string, caf::timespan> answer_after;
  /// Client requests (not profiles) in the order they reached the device.
  std::vector<std::string> swaps;
  /// When each restart arrived.
  std::vector<Time> restarts;
};

swap_reply answer(FakeDevice& dev, const swap_request& req) {
  swap_reply r;
  if (dev.fault_next) {
    dev.fault_next = false;
    r.result.fault = true;
    r.error = device_fault(dev.name + ": injected fault");
    return r;
  }
  infer_reply reply;
  reply.model = req.request->model;
  reply.id = req.request->id;
  reply.node = "n1";
  reply.device = dev.name;
  r.reply = std::move(reply);
  r.result.swapped = true;
  r.result.footprint = req.run.model->data_bytes();
  r.result.pool_free = dev.pool_bytes - r.result.footprint;
  r.result.run.compute_us = 1000;
  r.result.warm_us = 1000;  // light: the cold run is no slower than the warm one
  return r;
}

gpu_executor_actor::behavior_type fake_executor(gpu_executor_actor::pointer self, FakeDevice* dev) {
  return {
      [dev](bind_model&) -> std::string { return dev->name; },
      [](unload_atom, const model_key&) { return true; },
      [](infer_request&) -> caf::result<infer_reply> { return to_caf(unsupported("late binding only")); },
      [dev](status_atom) {
        return executor_status{{dev->name, dev->pool_bytes, 0}, {}, 0, dev->pool_bytes, dev->pool_bytes, 0};
      },
      [self, dev](swap_request& req) -> caf::result<swap_reply> {
        if (req.request->id != "profile") dev->swaps.push_back(req.request->id);
        swap_reply r = answer(*dev, req);
        auto delay = dev->answer_after.find(req.request->id);
        if (delay == dev->answer_after.end()) return r;
        auto rp = self->make_response_promise<swap_reply>();
        self->delayed_send(self, delay->second, offload_done{[rp, r]() mutable { rp.deliver(std::move(r)); }});
        return rp;
      },
      [](weights_atom, const model_key&) { return weights_lease{}; },
      [](release_atom, std::vector<uint64_t>&) {},
      [](cancel_atom, const model_key&, const std::string&) {},
      [](lend_atom, std::vector<uint64_t>&) -> caf::result<value_lease> {
        return to_caf(not_found("this fake keeps nothing"));
      },
      [self, dev](restart_atom) -> caf::result<device_report> {
        dev->restarts.push_back(self->clock().now());
        if (dev->failing_restarts > 0) {
          --dev->failing_restarts;
          return to_caf(unavailable("the device did not come back"));
        }
        return device_report{dev->name, dev->pool_bytes, 0};
      },
      [](forget_atom) { return true; },
      [](load_shadow&) -> caf::result<shadow_ready> { return to_caf(unsupported("no shadows here")); },
      [](shadow_atom, const model_key&) { return false; },
      [](fault_atom, const fault_command&) -> caf::result<std::string> {
        return to_caf(unsupported("a fake executor takes no fault"));
      },
      resume_offloaded(),
  };
}

/// Blob key -> bytes, as a cache that already holds every model.
using Blobs = std::map<std::string, std::shared_ptr<const gpu::HostBuffer>>;

model_cache_actor::behavior_type fake_cache(model_cache_actor::pointer, const Blobs* blobs) {
  return {
      [blobs](fetch_blob& req) -> caf::result<blob_ref> {
        auto it = blobs->find(req.blob_key);
        if (it == blobs->end()) return to_caf(not_found("no blob " + req.blob_key));
        return blob_ref{it->second, SourceTier::local_disk, "", it->second->size(), 0};
      },
      [](handover_atom, const fetch_blob&) {},
      [](pin_atom, const std::string&) {},
      [](unpin_atom, const std::string&) {},
      [](status_atom) { return cache_status{}; },
      [](cache_fetch_done&) {},
      [](offload_done&) {},
      [](evict_atom, const std::string&) { return false; },
      [](fault_atom, const std::string&) { return uint32_t{0}; },
  };
}

/// A late-binding router over one fake device, its RRC queue configured by the test; every model
/// has a 100 ms SLO at the 50th percentile, so RRC = n - 2m (n answers, m of them on time).
struct Router {
  NodeInstruments instruments;  // outlives the actors, which write to it
  gpu::testing::TempDir repo;
  testing::Deterministic d;
  FakeDevice device;
  Blobs blobs;
  gpu_executor_actor exec;
  model_cache_actor cache;
  node_router_actor router;
  std::map<std::string, load_replica> models;

  explicit Router(placement::RrcOptions queue = {}) {
    exec = d.sys().spawn(fake_executor, &device);
    cache = d.sys().spawn(fake_cache, &blobs);
    auto topology = placement::NodeTopology::create({0}, {{0.0}}, {16.0});
    EXPECT_TRUE(topology.ok());
    SwapControllerOptions options;
    options.queue = queue;
    LateBinding late{options, *topology, {device.pool_bytes}};
    late.slo_deadline_us = 100'000;
    late.slo_percentile = 0.5;
    NodeRouterConfig config{"n1", {"127.0.0.1", 0}, "", late};
    router = spawn_node_router(d.sys(), config, {exec}, {{device.name, device.pool_bytes, 0}}, cache, &instruments);
    d.run();
  }
  ~Router() {
    for (const caf::actor& a :
         {caf::actor_cast<caf::actor>(router), caf::actor_cast<caf::actor>(cache), caf::actor_cast<caf::actor>(exec)}) {
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    }
    d.run();
  }

  /// Writes a tiny MLP as model `name`, version 1, and loads it (profile included); true when ready.
  bool load(const std::string& name, uint64_t seed) {
    const std::string dir = repo / name;
    if (!gpu::testing::tiny_model("mlp", dir, seed)) return false;
    auto bytes = gpu::HostBuffer::read_file(dir + "/" + gpu::kWeightsFile, UINT64_MAX);
    if (!bytes.ok()) return false;
    const model_key key{name, 1};
    blobs[blob_key_of(key)] = *bytes;
    auto loaded = d.request<replica_info>(
        router,
        load_replica{
            key, gpu::testing::read_file(dir + "/" + gpu::kManifestFile), blob_key_of(key), (*bytes)->size(), {}});
    d.run();
    EXPECT_TRUE(loaded->ok()) << (loaded->done() ? loaded->error().message() : "no answer");
    return loaded->ok();
  }
  std::shared_ptr<testing::Answer<infer_reply>> infer(const std::string& model, const std::string& id) {
    infer_request req;
    req.model = {model, 1};
    req.id = id;
    auto answer = d.request<infer_reply>(router, req);
    d.run();
    return answer;
  }
  /// The RRC queue's alpha as the router's metrics show it.
  double alpha() {
    auto snapshot = d.request<metrics_snapshot>(router, metrics_atom_v);
    d.run();
    EXPECT_TRUE(snapshot->ok());
    if (!snapshot->ok()) return -1;
    for (const auto& family : snapshot->value().families) {
      if (family.name == "ember_slo_alpha" && family.series.size() == 1) return family.series[0].value;
    }
    ADD_FAILURE() << "no ember_slo_alpha in the router's metrics";
    return -1;
  }
};

TEST(NodeRouterClock, AFailedRestartIsRetriedAfterOneTwoAndFourSecondsAndTheDeviceThenServes) {
  Router r;
  ASSERT_TRUE(r.load("m", 1));
  r.device.fault_next = true;
  r.device.failing_restarts = 3;
  auto answer = r.infer("m", "q1");
  // The fault sent the request back to the queue and restarted the executor at once; that failed.
  ASSERT_EQ(r.device.swaps, std::vector<std::string>{"q1"});
  ASSERT_EQ(r.device.restarts.size(), 1u);
  EXPECT_FALSE(answer->done()) << "the request was answered while its only device was down";
  for (const auto wait : {1s, 2s, 4s}) {
    const size_t before = r.device.restarts.size();
    r.d.advance(wait - 1ms);
    EXPECT_EQ(r.device.restarts.size(), before) << "a restart was retried before " << wait.count() << " s";
    r.d.advance(1ms);
    ASSERT_EQ(r.device.restarts.size(), before + 1) << "no retry " << wait.count() << " s after the last failure";
    EXPECT_EQ(r.device.restarts.back() - r.device.restarts[before - 1], caf::timespan{wait});
  }
  // The third retry succeeded: the device is up again and serves the request that waited for it.
  ASSERT_TRUE(answer->ok()) << (answer->done() ? answer->error().message() : "no answer");
  EXPECT_EQ(answer->value().device, r.device.name);
  EXPECT_EQ(r.device.swaps, (std::vector<std::string>{"q1", "q1"}));
  r.d.advance(60s);
  EXPECT_EQ(r.device.restarts.size(), 4u) << "a device that serves was restarted again";
}

// The queue order is recomputed every binding.repartition, on the actor clock, and not in between.
// Model a misses its SLO and b meets it; the device is kept busy so that b's request is always the
// older one waiting. Before the repartition the order is still the old one (both RRC 0: oldest
// first, b); once the period has passed, a (RRC 2) goes before b (RRC -1). With a 2 s period, no
// repartition has happened by then and b still goes first.
std::vector<std::string> dispatch_order(std::chrono::seconds repartition) {
  placement::RrcOptions queue;
  queue.repartition_period_us = std::chrono::duration_cast<std::chrono::microseconds>(repartition).count();
  Router r(queue);
  EXPECT_TRUE(r.load("a", 1) && r.load("b", 2));
  r.device.answer_after = {{"a1", 200ms}, {"x", 700ms}, {"a2", 400ms}};
  auto a1 = r.infer("a", "a1");  // t = 0: a miss (200 ms > 100 ms), answered at 0.2 s
  r.d.advance(200ms);
  auto b1 = r.infer("b", "b1");  // two hits
  auto b1b = r.infer("b", "b1b");
  auto x = r.infer("a", "x");  // a miss; holds the device until 0.9 s, while b2 and then a2 wait
  auto b2 = r.infer("b", "b2");
  auto a2 = r.infer("a", "a2");
  // t = 0.9 s: b2 starts (a miss, answered at once), then a2 (it holds the device until 1.3 s).
  r.d.advance(700ms);
  auto b3 = r.infer("b", "b3");  // b3 waits longer than a3
  auto a3 = r.infer("a", "a3");
  r.d.advance(400ms);  // t = 1.3 s: a2 answered; the next request starts
  r.d.advance(1s);
  for (const auto& answer : {a1, b1, b1b, x, b2, a2, b3, a3}) EXPECT_TRUE(answer->ok());
  return r.device.swaps;
}

TEST(NodeRouterClock, TheQueueOrderChangesAtTheRepartitionPeriodAndNotBefore) {
  EXPECT_EQ(dispatch_order(1s), (std::vector<std::string>{"a1", "b1", "b1b", "x", "b2", "a2", "a3", "b3"}));
  EXPECT_EQ(dispatch_order(2s), (std::vector<std::string>{"a1", "b1", "b1b", "x", "b2", "a2", "b3", "a3"}));
}

// Alpha (Algorithm 2) moves only every binding.alpha_period: it halves at the first period after
// the compliant share fell, and doubles back at the one after it rose; not a millisecond earlier.
TEST(NodeRouterClock, AlphaMovesOnlyAtTheAlphaPeriod) {
  placement::RrcOptions queue;
  queue.window_us = 2'000'000;  // 10 buckets of 200 ms
  queue.repartition_period_us = 1'000'000;
  queue.alpha_period_us = 2'000'000;
  Router r(queue);
  ASSERT_TRUE(r.load("a", 1));
  EXPECT_EQ(r.alpha(), 1.0);
  r.d.advance(500ms);
  ASSERT_TRUE(r.infer("a", "hit")->ok());  // t = 0.5 s: on time
  r.d.advance(1500ms);                     // t = 2 s: all compliant, the first signal: alpha stays
  EXPECT_EQ(r.alpha(), 1.0);
  r.device.answer_after["miss"] = 300ms;
  auto miss = r.infer("a", "miss");  // answered at 2.3 s, late
  r.d.advance(1999ms);
  ASSERT_TRUE(miss->ok());
  EXPECT_EQ(r.alpha(), 1.0) << "alpha moved before its period";
  r.d.advance(1ms);  // t = 4 s: the window holds only the miss: none compliant
  EXPECT_EQ(r.alpha(), 0.5);
  r.d.advance(500ms);
  ASSERT_TRUE(r.infer("a", "hit2")->ok());  // t = 4.5 s
  r.d.advance(1499ms);
  EXPECT_EQ(r.alpha(), 0.5) << "alpha moved before its period";
  r.d.advance(1ms);  // t = 6 s: compliant again
  EXPECT_EQ(r.alpha(), 1.0);
}

}  // namespace node_router_test
}  // namespace ember
