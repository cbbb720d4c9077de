// KeptValues and HostedValues (actors/node/engine/kept_values.hpp): values kept by hand-off runs,
// read in place and over the link, spilled to host memory or the least pressed other device, lent,
// released and lost with a restarted device; and their counts.
#include "actors/node/engine/kept_values.hpp"

#include <gtest/gtest.h>

#include <future>
#include <utility>
#include <vector>

#include "tests/actors/node/engine/engine_test_util.hpp"

namespace ember::kept_values_test {

// The helpers by name, not by `using namespace`: the helper `engine` would clash with the room's
// namespace, ember::engine.
using engine_test::engine;
using engine_test::MiB;
using engine_test::swap_run;
using engine_test::warm_outputs;
using engine_test::write_mlp;

// A run's outputs kept on one device (SwapRun::keep) feed a run on another device: lent there
// (ExecutorEngine::lend) and copied over the link, the answer equal to the models run on the host.
TEST(ExecutorEngineSwap, KeptValuesFeedARunOnTheSameDeviceInPlaceAndOnAnotherOverTheLink) {
  gpu::testing::TempDir dir;
  auto first = write_mlp(dir / "first", 1, 2);
  auto second = write_mlp(dir / "second", 2, 2);
  auto a = engine(gpu::testing::sim_device(16 * MiB, 0));
  auto b = engine(gpu::testing::sim_device(16 * MiB, 1));
  const auto x = gpu::testing::arch_inputs(*first, 2, 1, 3);
  SwapRun produce{{"first", 1}, first, x};
  produce.keep = {"relu1"};
  auto made = swap_run(*a, produce);
  ASSERT_TRUE(made.run.outputs.ok()) << made.run.outputs.error().message();
  EXPECT_TRUE(made.run.outputs->empty()) << "a kept output does not come back";
  ASSERT_EQ(made.kept.size(), 1u);
  EXPECT_EQ(a->kept().first, 1u);
  // What the device holds, by use: the first model's weights, the kept value, no run's buffers.
  auto use = a->memory_use().use;
  EXPECT_EQ(use.kept, 2u * 512 * sizeof(float));
  EXPECT_EQ(use.activations, 0u);
  EXPECT_GE(use.weights, 2u * 512 * 512 * sizeof(float));
  EXPECT_EQ(use.weights, a->engine_memory().pool_capacity - a->engine_memory().pool_free);
  auto mid = warm_outputs(first, x);
  mid[0].name = "input";
  const auto want = warm_outputs(second, mid);

  SwapRun here{{"second", 1}, second, {}};
  here.device_inputs = {{"input", made.kept[0].handle}};
  auto in_place = swap_run(*a, here);
  ASSERT_TRUE(in_place.run.outputs.ok()) << in_place.run.outputs.error().message();
  EXPECT_TRUE(gpu::testing::bitwise_equal((*in_place.run.outputs)[0], want[0]));

  std::promise<Result<std::vector<gpu::PeerValue>>> lent;
  a->lend({made.kept[0].handle}, [&](Result<std::vector<gpu::PeerValue>> r) { lent.set_value(std::move(r)); });
  auto lease = lent.get_future().get();
  ASSERT_TRUE(lease.ok()) << lease.error().message();
  SwapRun there{{"second", 1}, second, {}};
  there.peer_inputs = *lease;
  there.peer_inputs[0].name = "input";
  auto over = swap_run(*b, there);
  ASSERT_TRUE(over.run.outputs.ok()) << over.run.outputs.error().message();
  EXPECT_TRUE(gpu::testing::bitwise_equal((*over.run.outputs)[0], want[0]));

  a->release({made.kept[0].handle});
  std::promise<Result<std::vector<gpu::PeerValue>>> gone;
  a->lend({made.kept[0].handle}, [&](Result<std::vector<gpu::PeerValue>> r) { gone.set_value(std::move(r)); });
  auto after = gone.get_future().get();  // a job after the release: it ran
  EXPECT_EQ(a->memory_use().use.kept, 0u);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.error().code(), ErrorCode::not_found);
  EXPECT_EQ(a->kept().first, 0u);
}

// A value kept for a later step takes device memory a run needs: it moves to host memory (never
// lost), the run goes ahead, and the step that reads it later still gets it.
TEST(ExecutorEngineSwap, AKeptValueMovesToHostMemoryWhenARunNeedsTheRoomAndIsStillRead) {
  gpu::testing::TempDir dir;
  auto first = write_mlp(dir / "first", 1, 2);
  auto second = write_mlp(dir / "second", 2, 2);
  auto e = engine(gpu::testing::sim_device(16 * MiB, 0));         // 8 MiB for everything but weights
  const auto big = gpu::testing::arch_inputs(*first, 768, 1, 3);  // 1.5 MiB a value
  SwapRun produce{{"first", 1}, first, big};
  produce.keep = {"relu1"};
  auto made = swap_run(*e, produce);
  ASSERT_TRUE(made.run.outputs.ok()) << made.run.outputs.error().message();
  ASSERT_EQ(made.kept.size(), 1u);
  // A run whose activations need more than what the kept value leaves.
  const auto wide = gpu::testing::arch_inputs(*second, 896, 1, 4);  // 7 MiB in all
  auto other = swap_run(*e, SwapRun{{"second", 1}, second, wide});
  ASSERT_TRUE(other.run.outputs.ok()) << other.run.outputs.error().message();
  EXPECT_EQ(e->spilled().to_host, 1u) << "the premise: it did not fit beside the kept value";
  EXPECT_EQ(e->memory_use().use.kept, 0u) << "a value in host memory holds no device memory";
  EXPECT_TRUE(gpu::testing::bitwise_equal((*other.run.outputs)[0], warm_outputs(second, wide)[0]));
  // The kept value is still there, and right.
  SwapRun read{{"second", 1}, second, {}};
  read.device_inputs = {{"input", made.kept[0].handle}};
  auto got = swap_run(*e, read);
  ASSERT_TRUE(got.run.outputs.ok()) << got.run.outputs.error().message();
  auto mid = warm_outputs(first, big);
  mid[0].name = "input";
  EXPECT_TRUE(gpu::testing::bitwise_equal((*got.run.outputs)[0], warm_outputs(second, mid)[0]));
  EXPECT_EQ(e->kept().first, 1u);
  // A run that fits in no case is out of memory, and the kept value stays.
  auto huge = swap_run(*e, SwapRun{{"second", 1}, second, gpu::testing::arch_inputs(*second, 8192, 1, 5)});
  ASSERT_FALSE(huge.run.outputs.ok());
  EXPECT_EQ(huge.run.outputs.error().code(), ErrorCode::out_of_memory);
  EXPECT_EQ(e->kept().first, 1u);
  e->release({made.kept[0].handle});
}

// Under memory pressure a kept value moves to the node's other device with the most room (StreamBox's
// rule 2) rather than to host memory, stays readable there, goes back there when released, and is
// reported lost (not read from freed memory) when that device restarts before it is read.
TEST(ExecutorEngineSwap, AKeptValueMovesToTheLeastPressedOtherDeviceBeforeHostMemory) {
  gpu::testing::TempDir dir;
  auto first = write_mlp(dir / "first", 1, 2);
  auto second = write_mlp(dir / "second", 2, 2);
  auto node = std::make_shared<NodeEngines>();
  auto make = [&](uint32_t ordinal) {
    auto e = ExecutorEngine::create(gpu::testing::sim_device(16 * MiB, ordinal),
                                    EngineOptions{64, 8 * MiB, 256 << 10, 1, 6, node});
    EXPECT_TRUE(e.ok()) << e.error().message();
    return std::move(*e);
  };
  auto a = make(0), c = make(1), b = make(2);                     // b after c: the first other is not the answer
  const auto big = gpu::testing::arch_inputs(*first, 768, 1, 3);  // 1.5 MiB a value
  const uint64_t value_bytes = 768 * 512 * sizeof(float);
  // c holds a value of its own: b is the less pressed.
  SwapRun on_c{{"first", 1}, first, big};
  on_c.keep = {"relu1"};
  ASSERT_TRUE(swap_run(*c, on_c).run.outputs.ok());
  SwapRun produce{{"first", 1}, first, big};
  produce.keep = {"relu1"};
  auto made = swap_run(*a, produce);
  ASSERT_TRUE(made.run.outputs.ok()) << made.run.outputs.error().message();
  ASSERT_EQ(made.kept.size(), 1u);
  auto mid = warm_outputs(first, big);
  mid[0].name = "input";
  const auto want = warm_outputs(second, mid);
  auto read_on_a = [&] {
    SwapRun read{{"second", 1}, second, {}};
    read.device_inputs = {{"input", made.kept[0].handle}};
    return swap_run(*a, read);
  };
  auto crowd = [&] {  // a run on a whose activations need the kept value's room (7 MiB in all)
    const auto wide = gpu::testing::arch_inputs(*second, 896, 1, 4);
    auto other = swap_run(*a, SwapRun{{"second", 1}, second, wide});
    ASSERT_TRUE(other.run.outputs.ok()) << other.run.outputs.error().message();
    EXPECT_TRUE(gpu::testing::bitwise_equal((*other.run.outputs)[0], warm_outputs(second, wide)[0]));
  };
  crowd();
  EXPECT_EQ(a->spilled().to_peer, 1u) << "moved to another device";
  EXPECT_EQ(a->spilled().to_host, 0u);
  EXPECT_EQ(a->memory_use().use.kept, 0u);
  EXPECT_EQ(b->memory_use().use.kept, value_bytes) << "to the less pressed device";
  EXPECT_EQ(c->memory_use().use.kept, value_bytes) << "c holds only its own";
  auto got = read_on_a();
  ASSERT_TRUE(got.run.outputs.ok()) << got.run.outputs.error().message();
  EXPECT_TRUE(gpu::testing::bitwise_equal((*got.run.outputs)[0], want[0]));
  // Released on a: its room on b comes back.
  a->release({made.kept[0].handle});
  std::promise<Result<std::vector<gpu::PeerValue>>> after;
  a->lend({made.kept[0].handle}, [&](Result<std::vector<gpu::PeerValue>> r) { after.set_value(std::move(r)); });
  EXPECT_FALSE(after.get_future().get().ok());
  EXPECT_EQ(b->memory_use().use.kept, 0u);
  // Moved to b again, and b restarts before it is read: the value is reported lost, a still serves.
  made = swap_run(*a, produce);
  ASSERT_TRUE(made.run.outputs.ok());
  crowd();
  EXPECT_EQ(a->spilled().to_peer, 2u);
  ASSERT_EQ(b->memory_use().use.kept, value_bytes);
  b.reset();
  auto lost = read_on_a();
  ASSERT_FALSE(lost.run.outputs.ok());
  EXPECT_EQ(lost.run.outputs.error().code(), ErrorCode::unavailable);
  EXPECT_NE(lost.run.outputs.error().message().find("restarted"), std::string::npos)
      << lost.run.outputs.error().message();
  EXPECT_FALSE(lost.fault) << "the device that lost it is another";
  a->release({made.kept[0].handle});
  auto fresh = swap_run(*a, SwapRun{{"second", 1}, second, mid});
  ASSERT_TRUE(fresh.run.outputs.ok()) << fresh.run.outputs.error().message();
  EXPECT_TRUE(gpu::testing::bitwise_equal((*fresh.run.outputs)[0], want[0]));
}

// KeptValues on its own: a device, its memory, one resident model.
struct Bench {
  std::unique_ptr<gpu::SimDevice> device = gpu::testing::sim_device(16 * MiB);
  std::unique_ptr<ember::engine::DeviceMemory> memory =
      std::move(*ember::engine::DeviceMemory::reserve(*device, 8 * MiB, 256 << 10, 0));
  gpu::testing::TempDir dir;
  std::shared_ptr<const gpu::Model> model = write_mlp(dir / "m", 4, 2);
  std::unique_ptr<gpu::LayerExecutor> ex;
  std::unique_ptr<gpu::Stream> stream = device->create_stream();
  Bench() {
    auto made = gpu::LayerExecutor::create(*device, model, {0, model->num_layers()}, memory->placer("m/1"));
    EXPECT_TRUE(made.ok()) << made.error().message();
    ex = std::move(*made);
    ex->set_activation_pool(&memory->activations());
  }
  ~Bench() {
    ex.reset();
    memory.reset();
  }
};

// The counts follow keeps and releases; a value spilled to host memory holds no device memory and
// is still counted, a lend brings it back to stay; unknown handles are ignored by release and not
// found by lend; an output the model lacks is refused and nothing is kept.
TEST(KeptValues, CountsFollowKeepsSpillsLendsAndReleases) {
  Bench b;
  ember::engine::KeptValues kept(*b.device, *b.memory, nullptr, nullptr);
  const auto x = gpu::testing::arch_inputs(*b.model, 4, 1, 3);
  SwapRun run{{"m", 1}, b.model, x};
  run.keep = {"relu1"};
  std::vector<gpu::KeptValue> made;
  auto out = kept.run_handoff(*b.ex, run, made, *b.stream);
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_TRUE(out->empty()) << "a kept output does not come back";
  ASSERT_EQ(made.size(), 1u);
  const uint64_t bytes = 4 * 512 * sizeof(float);
  EXPECT_EQ(kept.counts(), (std::pair<size_t, uint64_t>{1, bytes}));
  EXPECT_EQ(kept.bytes_here(), bytes);
  auto moved = kept.spill({}, *b.stream);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(*moved, 1u);
  EXPECT_EQ(kept.spilled().to_host, 1u);
  EXPECT_EQ(kept.spilled().to_host_bytes, bytes);
  EXPECT_EQ(kept.spilled().to_peer, 0u);
  EXPECT_EQ(kept.bytes_here(), 0u);
  EXPECT_EQ(kept.counts().first, 1u) << "spilled, never lost";
  auto lent = kept.lend({made[0].handle}, *b.stream);
  ASSERT_TRUE(lent.ok()) << lent.error().message();
  ASSERT_EQ(lent->size(), 1u);
  EXPECT_EQ((*lent)[0].device, b.device.get());
  EXPECT_EQ((*lent)[0].name, "relu1");
  EXPECT_EQ(kept.bytes_here(), bytes) << "lent: back on the device to stay";
  kept.release({made[0].handle, 999});
  EXPECT_EQ(kept.counts(), (std::pair<size_t, uint64_t>{0, 0}));
  auto gone = kept.lend({made[0].handle}, *b.stream);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code(), ErrorCode::not_found);
  SwapRun read{{"m", 1}, b.model, {}};
  read.device_inputs = {{"input", made[0].handle}};
  std::vector<gpu::KeptValue> none;
  auto missing = kept.run_handoff(*b.ex, read, none, *b.stream);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ErrorCode::unavailable);
  SwapRun bad{{"m", 1}, b.model, x};
  bad.keep = {"no such output"};
  auto refused = kept.run_handoff(*b.ex, bad, none, *b.stream);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), ErrorCode::invalid_argument);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(kept.counts().first, 0u);
}

// Values hosted for another device: counted while a holder has them, given back by the last
// holder, and freed (not counted twice) when this engine goes first.
TEST(HostedValues, AValueHostedGoesBackWithItsLastHolderOrWithThisDevice) {
  auto here = gpu::testing::sim_device(16 * MiB, 0);
  auto there = gpu::testing::sim_device(16 * MiB, 1);
  auto src = gpu::DeviceBuffer::allocate(*there, 1 * MiB);
  ASSERT_TRUE(src.ok());
  ember::engine::HostedValues hosted(*here);
  const uint64_t used = here->memory().used_bytes;
  auto view = hosted.host(*there, (*src)->ptr(), 1 * MiB);
  ASSERT_TRUE(view.ok()) << view.error().message();
  EXPECT_EQ(hosted.bytes(), 1 * MiB);
  EXPECT_GE(here->memory().used_bytes, used + 1 * MiB);
  view->reset();
  EXPECT_EQ(hosted.bytes(), 0u);
  EXPECT_EQ(here->memory().used_bytes, used);
  auto kept = hosted.host(*there, (*src)->ptr(), 1 * MiB);
  ASSERT_TRUE(kept.ok());
  hosted.clear();
  EXPECT_EQ(hosted.bytes(), 0u);
  EXPECT_EQ(here->memory().used_bytes, used) << "freed with this device";
  kept->reset();  // its holder lets go later: nothing counted twice
  EXPECT_EQ(hosted.bytes(), 0u);
  auto huge = hosted.host(*there, (*src)->ptr(), 64 * MiB);
  EXPECT_FALSE(huge.ok()) << "no room in the workspace";
}

}  // namespace ember::kept_values_test
