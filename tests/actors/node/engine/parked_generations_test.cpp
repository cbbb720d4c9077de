// ParkedStreams (actors/node/engine/parked_generations.hpp) with GenerationLoop::park and unpark on
// SimDevices over the tests' small decoder: a loop's streams, running, waiting and never admitted,
// parked with their KV swapped to host memory or dropped, continue in a loop on ANOTHER device with
// the tokens an uninterrupted run gives; parked streams never taken back, or failed, end once with a
// resumable error; a stream whose id is generating there already is refused, resumable.
#include "actors/node/engine/parked_generations.hpp"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "actors/node/engine/generation_loop.hpp"
#include "tests/actors/node/engine/generation_test_util.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::engine {
namespace parked_generations_test {

using namespace generation_test;

struct Device {
  explicit Device(std::shared_ptr<const gpu::Model> m, uint32_t ordinal) : model(std::move(m)) {
    device = gpu::testing::sim_device(64 * MiB, ordinal);
    auto mem = DeviceMemory::reserve(*device, 16 * MiB, 256 * KiB, 0);
    EXPECT_TRUE(mem.ok()) << mem.error().message();
    memory = std::move(*mem);
    auto e = gpu::LayerExecutor::create(*device, model, {0, model->num_layers()});
    EXPECT_TRUE(e.ok()) << e.error().message();
    ex = std::move(*e);
  }
  std::unique_ptr<GenerationLoop> loop(KvPreemptionCosts costs) {
    GenerationLoopConfig config;
    config.batcher.max_num_seqs = 2;  // a third request waits, never admitted
    config.batcher.max_num_batched_tokens = 64;
    config.costs = costs;
    auto l = GenerationLoop::create(*device, *memory, spec(), nullptr, config);
    EXPECT_TRUE(l.ok()) << l.error().message();
    (*l)->attach(ex.get());
    return std::move(*l);
  }
  std::shared_ptr<const gpu::Model> model;
  std::unique_ptr<gpu::Device> device;
  std::unique_ptr<DeviceMemory> memory;
  std::unique_ptr<gpu::LayerExecutor> ex;
};

class ParkedStreamsOnLoops : public ::testing::TestWithParam<bool> {};  // true: swapped, else recomputed

TEST_P(ParkedStreamsOnLoops, StreamsParkedOnOneDeviceContinueOnAnotherExactly) {
  const bool swap = GetParam();
  gpu::testing::TempDir dir;
  auto model = decoder(dir / "m");
  Device here(model, 0), there(model, 1);
  KvPreemptionCosts costs;
  if (swap) costs = {1e12, 0, 1e6};
  auto from = here.loop(costs);
  std::map<std::string, Received> got;
  ASSERT_TRUE(from->submit(job("a", {1, 2, 3}, 20, got), 0).ok());
  ASSERT_TRUE(from->submit(job("b", {4, 5, 6, 7, 8, 9}, 15, got), 0).ok());
  ASSERT_TRUE(from->submit(job("c", {10, 11}, 12, got), 0).ok());  // waits: two run at most
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(from->step(i));
  ASSERT_GT(got["a"].tokens.size(), 0u);

  std::unique_ptr<ParkedStreams> parked = from->park();
  ASSERT_NE(parked, nullptr);
  EXPECT_EQ(parked->streams(), 3u);
  if (swap) {
    EXPECT_GT(parked->host_bytes(), 0u);
  } else {
    EXPECT_EQ(parked->host_bytes(), 0u);
  }
  EXPECT_FALSE(from->busy());
  EXPECT_EQ(from->stats().kv.in_use, 0u);
  EXPECT_EQ(from->stats().kv.swapped_bytes, 0u) << "the host copies left with the streams";
  EXPECT_EQ(from->park(), nullptr) << "nothing left to park";

  auto to = there.loop({});
  EXPECT_EQ(to->unpark(parked->take(), 100), 3u);
  EXPECT_EQ(parked->streams(), 0u);
  for (int i = 0; i < 1000 && to->step(100 + i); ++i) {
  }
  EXPECT_FALSE(to->busy());
  Device reference(model, 2);
  auto ref = [&](std::vector<int32_t> p, size_t n) { return recomputed(*reference.device, *reference.ex, p, n); };
  EXPECT_EQ(got["a"].tokens, ref({1, 2, 3}, 20));
  EXPECT_EQ(got["b"].tokens, ref({4, 5, 6, 7, 8, 9}, 15));
  EXPECT_EQ(got["c"].tokens, ref({10, 11}, 12));
  for (const char* id : {"a", "b", "c"}) {
    ASSERT_EQ(got[id].finals.size(), 1u) << id;
    EXPECT_FALSE(got[id].finals[0].error.has_value()) << id;
  }
  EXPECT_EQ(to->stats().kv.in_use, 0u) << "no block leaked";
  EXPECT_EQ(to->stats().kv.swapped_bytes, 0u);
  parked.reset();  // empty: nothing more is sent
  EXPECT_EQ(got["a"].finals.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(SwapOrRecompute, ParkedStreamsOnLoops, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Swap" : "Recompute"; });

TEST(ParkedStreams, UntakenOrFailedStreamsEndOnceResumable) {
  gpu::testing::TempDir dir;
  auto model = decoder(dir / "m");
  Device here(model, 0);
  auto loop = here.loop({1e12, 0, 1e6});
  std::map<std::string, Received> got;
  ASSERT_TRUE(loop->submit(job("a", {1, 2}, 20, got), 0).ok());
  ASSERT_TRUE(loop->submit(job("b", {3, 4}, 20, got), 0).ok());
  ASSERT_TRUE(loop->step(0));
  auto parked = loop->park();
  ASSERT_NE(parked, nullptr);
  parked->fail(not_found("model unloaded"));
  parked->fail(internal_error("again"));  // idempotent
  EXPECT_EQ(parked->streams(), 0u);
  EXPECT_EQ(parked->host_bytes(), 0u);
  for (const char* id : {"a", "b"}) {
    ASSERT_EQ(got[id].finals.size(), 1u) << id;
    EXPECT_EQ(got[id].finals[0].error->code(), ErrorCode::not_found);
    EXPECT_TRUE(got[id].finals[0].resumable);
    EXPECT_EQ(got[id].finals[0].completion_tokens, 1u);
  }

  ASSERT_TRUE(loop->submit(job("c", {5, 6}, 20, got), 1).ok());
  ASSERT_TRUE(loop->step(1));
  parked = loop->park();
  ASSERT_NE(parked, nullptr);
  parked.reset();  // never taken back
  ASSERT_EQ(got["c"].finals.size(), 1u);
  EXPECT_EQ(got["c"].finals[0].error->code(), ErrorCode::unavailable);
  EXPECT_TRUE(got["c"].finals[0].resumable);
  EXPECT_EQ(loop->stats().kv.in_use, 0u);
  EXPECT_EQ(loop->stats().kv.swapped_bytes, 0u);

  // A stream cancelled just before its model leaves is not parked, and its KV goes at once.
  ASSERT_TRUE(loop->submit(job("d", {7, 8}, 20, got), 2).ok());
  ASSERT_TRUE(loop->step(2));
  EXPECT_TRUE(loop->cancel("d"));
  EXPECT_EQ(loop->park(), nullptr);
  EXPECT_EQ(loop->stats().kv.in_use, 0u);
  EXPECT_EQ(loop->stats().kv.swapped_bytes, 0u);
  EXPECT_TRUE(got["d"].finals.empty());
}

TEST(ParkedStreams, AStreamWhoseIdGeneratesThereAlreadyIsRefusedResumable) {
  gpu::testing::TempDir dir;
  auto model = decoder(dir / "m");
  Device here(model, 0), there(model, 1);
  auto from = here.loop({});
  auto to = there.loop({});
  std::map<std::string, Received> got, other;
  ASSERT_TRUE(from->submit(job("x", {1, 2}, 20, got), 0).ok());
  ASSERT_TRUE(from->step(0));
  auto parked = from->park();
  ASSERT_TRUE(to->submit(job("x", {7}, 20, other), 0).ok());
  EXPECT_EQ(to->unpark(parked->take(), 1), 0u);
  ASSERT_EQ(got["x"].finals.size(), 1u);
  EXPECT_EQ(got["x"].finals[0].error->code(), ErrorCode::invalid_argument);
  EXPECT_TRUE(got["x"].finals[0].resumable);
  EXPECT_TRUE(other["x"].finals.empty()) << "the one generating there goes on";
}

}  // namespace parked_generations_test
}  // namespace ember::engine
