// ExecutorEngine (actors/node/engine/executor_engine.hpp), the façade over the room's parts: late
// binding's swap_run (evictions, fallbacks, peer copies), the sticky fault as callers see it,
// destruction answering every job still queued, and inputs made by the job (RunInputs) on its own
// thread.
#include "actors/node/engine/executor_engine.hpp"

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/actors/node/engine/engine_test_util.hpp"

namespace ember::executor_engine_test {

// The helpers by name, not by `using namespace`: the helper `engine` would clash with the room's
// namespace, ember::engine.
using engine_test::engine;
using engine_test::MiB;
using engine_test::run_when_idle;
using engine_test::swap_run;
using engine_test::warm_outputs;
using engine_test::write_mlp;

TEST(ExecutorEngineSwap, SwapsInEvictsThroughTheFallbackAndMatchesAWarmRun) {
  gpu::testing::TempDir dir;
  auto e = engine(gpu::testing::sim_device(16 * MiB));
  std::vector<std::shared_ptr<const gpu::Model>> models;
  for (int i = 0; i < 3; ++i) models.push_back(write_mlp(dir / ("m" + std::to_string(i)), i + 1, 3));
  const auto in = gpu::testing::arch_inputs(*models[0], 2, 1, 5);
  for (int i = 0; i < 2; ++i) {
    auto r = swap_run(*e, SwapRun{{"m" + std::to_string(i), 1}, models[i], in, std::nullopt, {}, {}, false});
    ASSERT_TRUE(r.run.outputs.ok()) << r.run.outputs.error().message();
    EXPECT_TRUE(r.swapped);
    EXPECT_GE(r.footprint, models[i]->data_bytes());
  }
  // A third 3 MiB model does not fit beside two in 8 MiB: with no plan, the fallback order evicts.
  auto r = swap_run(*e, SwapRun{{"m2", 1}, models[2], in, std::nullopt, {}, {{"m0", 1}, {"m1", 1}}, false});
  ASSERT_TRUE(r.run.outputs.ok()) << r.run.outputs.error().message();
  EXPECT_EQ(r.evicted, (std::vector<model_key>{{"m0", 1}}));
  const auto want = warm_outputs(models[2], in);
  ASSERT_EQ(r.run.outputs->size(), want.size());
  EXPECT_TRUE(gpu::testing::bitwise_equal((*r.run.outputs)[0], want[0]));
  // Resident now: the next request runs without a swap.
  auto again = swap_run(*e, SwapRun{{"m2", 1}, models[2], in, std::nullopt, {}, {}, false});
  EXPECT_FALSE(again.swapped);
  // Out of memory with nothing to evict is an error, not a crash, and leaves the pool as it was.
  auto big = write_mlp(dir / "big", 9, 9);
  auto oom = swap_run(*e, SwapRun{{"big", 1}, big, in, std::nullopt, {}, {}, false});
  ASSERT_FALSE(oom.run.outputs.ok());
  EXPECT_EQ(oom.run.outputs.error().code(), ErrorCode::out_of_memory);
  EXPECT_FALSE(oom.fault);
  EXPECT_EQ(e->bound().size(), 2u);
}

TEST(ExecutorEngineSwap, CopiesFromAPeerDeviceAndTwoNeighboursSwapAtOnce) {
  gpu::testing::TempDir dir;
  auto a = engine(gpu::testing::sim_device(16 * MiB, 0));
  auto b = engine(gpu::testing::sim_device(16 * MiB, 1));
  auto m = write_mlp(dir / "m", 3, 3);
  auto n = write_mlp(dir / "n", 4, 3);
  const auto in = gpu::testing::arch_inputs(*m, 2, 1, 6);
  // Two swaps from host at once, one per device.
  std::promise<ExecutorEngine::SwapRunResult> pa, pb;
  ASSERT_TRUE(a->swap_run(SwapRun{{"m", 1}, m, in, std::nullopt, {}, {}, false},
                          [&](ExecutorEngine::SwapRunResult r) { pa.set_value(std::move(r)); }));
  ASSERT_TRUE(b->swap_run(SwapRun{{"n", 1}, n, in, std::nullopt, {}, {}, false},
                          [&](ExecutorEngine::SwapRunResult r) { pb.set_value(std::move(r)); }));
  auto ra = pa.get_future().get(), rb = pb.get_future().get();
  ASSERT_TRUE(ra.run.outputs.ok() && rb.run.outputs.ok());
  EXPECT_TRUE(gpu::testing::bitwise_equal((*ra.run.outputs)[0], warm_outputs(m, in)[0]));
  EXPECT_TRUE(gpu::testing::bitwise_equal((*rb.run.outputs)[0], warm_outputs(n, in)[0]));
  // m from a's device to b's, device to device.
  auto lease = a->weights_of({"m", 1});
  ASSERT_TRUE(lease.has_value());
  auto rp = swap_run(*b, SwapRun{{"m", 1}, m, in, lease, {}, {}, false});
  ASSERT_TRUE(rp.run.outputs.ok()) << rp.run.outputs.error().message();
  EXPECT_TRUE(rp.swapped);
  EXPECT_TRUE(gpu::testing::bitwise_equal((*rp.run.outputs)[0], (*ra.run.outputs)[0]));
  EXPECT_FALSE(b->weights_of({"absent", 1}).has_value());
}

// The sticky fault as the engine's callers see it: the run that faults says so (fault), every later
// job answers with the same fault, inline runs included, and jobs that change no device state
// (unbind) still answer; only a new engine serves again.
TEST(ExecutorEngineFault, AFaultIsStickyAndTheEngineStillAnswersEveryJob) {
  gpu::testing::TempDir dir;
  auto e = engine(gpu::testing::sim_device(16 * MiB));
  auto m = write_mlp(dir / "m", 1, 2);
  const model_key key{"m", 1};
  const auto in = gpu::testing::arch_inputs(*m, 2, 1, 5);
  auto warm = swap_run(*e, SwapRun{key, m, in});
  ASSERT_TRUE(warm.run.outputs.ok()) << warm.run.outputs.error().message();
  EXPECT_FALSE(warm.fault);
  e->fault_next_kernel();
  auto faulted = swap_run(*e, SwapRun{key, m, in});
  ASSERT_FALSE(faulted.run.outputs.ok());
  EXPECT_EQ(faulted.run.outputs.error().code(), ErrorCode::device_fault);
  EXPECT_TRUE(faulted.fault);
  const std::string why = faulted.run.outputs.error().message();
  std::promise<ExecutorEngine::InferResult> inferred;
  ASSERT_TRUE(e->infer(key, in, [&](ExecutorEngine::InferResult r) { inferred.set_value(std::move(r)); }));
  auto r = inferred.get_future().get();
  ASSERT_FALSE(r.outputs.ok());
  EXPECT_EQ(r.outputs.error().message(), why);
  auto inline_run = run_when_idle(*e->gate(), key, in);
  ASSERT_TRUE(inline_run.has_value()) << "the device is idle and the model resident: the run is tried";
  ASSERT_FALSE(inline_run->outputs.ok());
  EXPECT_EQ(inline_run->outputs.error().code(), ErrorCode::device_fault);
  auto again = swap_run(*e, SwapRun{key, m, in});
  EXPECT_TRUE(again.fault);
  std::promise<void> unbound;
  e->unbind(key, [&] { unbound.set_value(); });
  unbound.get_future().get();
  EXPECT_FALSE(e->holds(key));
  auto fresh = engine(gpu::testing::sim_device(16 * MiB, 1));
  auto served = swap_run(*fresh, SwapRun{key, m, in});
  EXPECT_TRUE(served.run.outputs.ok()) << "a new engine serves";
}

// A device whose kernel faults breaks the engine the same way (the device's own status).
TEST(ExecutorEngineFault, ADeviceFaultBreaksTheEngine) {
  gpu::testing::TempDir dir;
  auto device = gpu::testing::sim_device(16 * MiB);
  gpu::SimDevice* sim = device.get();
  auto e = engine(std::move(device));
  auto m = write_mlp(dir / "m", 2, 2);
  const model_key key{"m", 1};
  const auto in = gpu::testing::arch_inputs(*m, 2, 1, 6);
  ASSERT_TRUE(swap_run(*e, SwapRun{key, m, in}).run.outputs.ok());
  sim->TEST_fail_after_kernels(0);
  auto faulted = swap_run(*e, SwapRun{key, m, in});
  EXPECT_TRUE(faulted.fault);
  EXPECT_FALSE(faulted.run.outputs.ok());
  auto later = swap_run(*e, SwapRun{key, m, in});
  EXPECT_TRUE(later.fault);
  ASSERT_FALSE(later.run.outputs.ok());
  EXPECT_EQ(later.run.outputs.error().code(), ErrorCode::device_fault);
}

// Destruction runs every job still queued (each answers) before the models and the device go.
TEST(ExecutorEngineLifecycle, DestructionAnswersEveryJobStillQueued) {
  gpu::testing::TempDir dir;
  auto e = engine(gpu::testing::sim_device(16 * MiB));
  auto m = write_mlp(dir / "m", 3, 2);
  const model_key key{"m", 1};
  std::promise<Status> bound;
  e->bind(key, m, [&](Status s) { bound.set_value(s); });
  ASSERT_TRUE(bound.get_future().get().ok());
  constexpr int kJobs = 10;
  std::vector<std::promise<bool>> answers(kJobs);
  for (int i = 0; i < kJobs; ++i) {
    ASSERT_TRUE(e->infer(key, gpu::testing::arch_inputs(*m, 2, 1, 10 + i),
                         [&, i](ExecutorEngine::InferResult r) { answers[i].set_value(r.outputs.ok()); }));
  }
  e.reset();
  for (int i = 0; i < kJobs; ++i) EXPECT_TRUE(answers[i].get_future().get()) << "job " << i;
}

// RunInputs (the gpu_executor decodes a request's tensors in them): made on the thread that runs the
// job, the worker or a lane, never the caller's, and right before the run, on the thread that then
// calls `done`. With one stream (every job on the worker) and with lanes.
TEST(ExecutorEngineInputs, AreMadeOnTheThreadThatRunsTheJobNotTheCallers) {
  gpu::testing::TempDir dir;
  auto m = write_mlp(dir / "m", 4, 2);
  const model_key key{"m", 1};
  const auto in = gpu::testing::arch_inputs(*m, 2, 1, 7);
  const auto want = warm_outputs(m, in);
  for (uint32_t streams : {1u, 2u}) {
    SCOPED_TRACE("streams " + std::to_string(streams));
    auto e = engine(gpu::testing::sim_device(16 * MiB, streams), streams);
    struct Threads {
      std::thread::id made, done;
      bool right = false;
    };
    // The thread that made the inputs, shared by the job's two callbacks (which run one after the other).
    auto made = std::make_shared<std::thread::id>();
    RunInputs inputs = [made, in] {
      *made = std::this_thread::get_id();
      return Result<std::vector<gpu::HostTensor>>(in);
    };
    // A swap-in on the worker, then the warm run (in a lane when there are lanes), then an infer job.
    for (int job = 0; job < 2; ++job) {
      std::promise<Threads> ran;
      SwapRun run{key, m, {}};
      run.make_inputs = inputs;
      ASSERT_TRUE(e->swap_run(std::move(run), [&](SwapRunResult r) {
        ran.set_value({*made, std::this_thread::get_id(),
                       r.run.outputs.ok() && gpu::testing::bitwise_equal((*r.run.outputs)[0], want[0])});
      }));
      const Threads t = ran.get_future().get();
      EXPECT_TRUE(t.right) << "swap_run " << job;
      EXPECT_NE(t.made, std::thread::id{}) << "swap_run " << job << " never made its inputs";
      EXPECT_NE(t.made, std::this_thread::get_id()) << "swap_run " << job << " made its inputs on the caller";
      EXPECT_EQ(t.made, t.done) << "swap_run " << job;
      *made = std::thread::id{};
    }
    std::promise<Threads> inferred;
    ASSERT_TRUE(e->infer(key, inputs, [&](InferResult r) {
      inferred.set_value(
          {*made, std::this_thread::get_id(), r.outputs.ok() && gpu::testing::bitwise_equal((*r.outputs)[0], want[0])});
    }));
    const Threads t = inferred.get_future().get();
    EXPECT_TRUE(t.right) << "infer";
    EXPECT_NE(t.made, std::thread::id{}) << "infer never made its inputs";
    EXPECT_NE(t.made, std::this_thread::get_id()) << "infer made its inputs on the caller";
    EXPECT_EQ(t.made, t.done) << "infer";
  }
}

// Inputs that fail (a request that does not decode) answer their job with their error, and nothing
// changes on the device: no eviction the router planned, no swap-in, no memory; a run of a resident
// model (in a lane when there are lanes) as much as a swap-in. The engine serves on.
TEST(ExecutorEngineInputs, InputsThatFailAnswerTheJobAndChangeNothingOnTheDevice) {
  gpu::testing::TempDir dir;
  auto a = write_mlp(dir / "a", 5, 2);
  auto b = write_mlp(dir / "b", 6, 2);
  const model_key ka{"a", 1};
  const model_key kb{"b", 1};
  const auto in = gpu::testing::arch_inputs(*a, 2, 1, 8);
  const RunInputs bad = [] {
    return Result<std::vector<gpu::HostTensor>>(invalid_argument("input 'input': 12 bytes of data"));
  };
  auto is_bad = [](const Result<std::vector<gpu::HostTensor>>& out) {
    return !out.ok() && out.error().code() == ErrorCode::invalid_argument &&
           out.error().message() == "input 'input': 12 bytes of data";
  };
  for (uint32_t streams : {1u, 2u}) {
    SCOPED_TRACE("streams " + std::to_string(streams));
    auto e = engine(gpu::testing::sim_device(16 * MiB, 10 + streams), streams);
    ASSERT_TRUE(swap_run(*e, SwapRun{ka, a, in}).run.outputs.ok());
    const uint64_t used = e->memory().used_bytes;
    const uint64_t pool_free = e->engine_memory().pool_free;

    std::promise<InferResult> inferred;
    ASSERT_TRUE(e->infer(ka, bad, [&](InferResult r) { inferred.set_value(std::move(r)); }));
    EXPECT_TRUE(is_bad(inferred.get_future().get().outputs));
    SwapRun swap_in{kb, b, {}, std::nullopt, {ka}};  // the router's plan: evict a for b
    swap_in.make_inputs = bad;
    SwapRun warm{ka, a, {}};
    warm.make_inputs = bad;
    for (SwapRun* run : {&swap_in, &warm}) {
      const auto r = swap_run(*e, *run);
      EXPECT_TRUE(is_bad(r.run.outputs)) << run->key.to_string();
      EXPECT_FALSE(r.swapped);
      EXPECT_TRUE(r.evicted.empty());
      EXPECT_EQ(r.footprint, 0u) << "a default result, as before anything ran";
      EXPECT_FALSE(r.fault);
      EXPECT_TRUE(r.inputs_failed);
    }
    EXPECT_TRUE(e->holds(ka));
    EXPECT_FALSE(e->holds(kb));
    EXPECT_EQ(e->memory().used_bytes, used);
    EXPECT_EQ(e->engine_memory().pool_free, pool_free);

    swap_in.make_inputs = [in] { return Result<std::vector<gpu::HostTensor>>(in); };
    const auto served = swap_run(*e, swap_in);
    ASSERT_TRUE(served.run.outputs.ok()) << served.run.outputs.error().message();
    EXPECT_TRUE(served.swapped);
    EXPECT_FALSE(served.inputs_failed);
    EXPECT_EQ(served.evicted, std::vector<model_key>{ka}) << "the plan the failed job left alone";
  }
}

}  // namespace ember::executor_engine_test
