// EngineGate and NodeEngines (actors/node/engine/engine_gate.hpp): an open gate runs resident
// models inline and reports memory; the engine goes only once a call inside has left, and a closed
// gate refuses every call; the node's engines are every gate but the caller's, a restarted device's
// taking its place.
#include "actors/node/engine/engine_gate.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "tests/actors/node/engine/engine_test_util.hpp"

namespace ember::engine_gate_test {

// The helpers by name, not by `using namespace`: the helper `engine` would clash with the room's
// namespace, ember::engine.
using engine_test::engine;
using engine_test::MiB;
using engine_test::run_when_idle;
using engine_test::swap_run;
using engine_test::warm_outputs;
using engine_test::write_mlp;

TEST(EngineGate, AnOpenGateRunsResidentModelsInlineAndReportsMemory) {
  gpu::testing::TempDir dir;
  auto e = engine(gpu::testing::sim_device(16 * MiB));
  auto m = write_mlp(dir / "m", 1, 2);
  const model_key key{"m", 1};
  const auto in = gpu::testing::arch_inputs(*m, 2, 1, 4);
  std::shared_ptr<EngineGate> gate = e->gate();
  EXPECT_TRUE(gate->open());
  EXPECT_EQ(gate->device(), "sim:0");
  EXPECT_FALSE(gate->holds(key));
  EXPECT_FALSE(gate->run_here(key, in).has_value()) << "not resident: the router's way";
  ASSERT_TRUE(swap_run(*e, SwapRun{key, m, in}).run.outputs.ok());
  EXPECT_TRUE(gate->holds(key));
  auto ran = run_when_idle(*gate, key, in);
  ASSERT_TRUE(ran.has_value());
  ASSERT_TRUE(ran->outputs.ok()) << ran->outputs.error().message();
  EXPECT_TRUE(gpu::testing::bitwise_equal((*ran->outputs)[0], warm_outputs(m, in)[0]));
  auto memory = gate->memory_use();
  ASSERT_TRUE(memory.has_value());
  EXPECT_GE(memory->use.weights, m->data_bytes());
}

// The engine's destructor closes the gate first and waits for the call inside (here an Entry held
// by another thread): it cannot finish while that call lasts, and the gate refuses from the moment
// it closed.
TEST(EngineGate, TheEngineGoesOnlyOnceTheCallInsideHasLeft) {
  auto e = engine(gpu::testing::sim_device(16 * MiB));
  std::shared_ptr<EngineGate> gate = e->gate();
  auto inside = std::make_unique<EngineGate::Entry>(gate.get());
  ASSERT_TRUE(*inside);
  EXPECT_EQ(&**inside, e.get());
  std::atomic<bool> gone{false};
  std::thread destroyer([&] {
    e.reset();
    gone = true;
  });
  while (gate->open()) std::this_thread::yield();  // closing has begun
  EXPECT_FALSE(gone.load()) << "the engine went while a call was inside its gate";
  EXPECT_FALSE(EngineGate::Entry(gate.get())) << "a closed gate lets nobody in";
  EXPECT_FALSE(gate->holds({"m", 1}));
  inside.reset();  // the call leaves
  destroyer.join();
  EXPECT_TRUE(gone.load());
  EXPECT_FALSE(gate->run_here({"m", 1}, std::vector<gpu::HostTensor>{}).has_value());
  EXPECT_FALSE(gate->memory_use().has_value());
  EXPECT_FALSE(EngineGate::Entry(nullptr)) << "no gate, no engine";
}

TEST(NodeEngines, OthersAreEveryGateButTheCallersAndARestartedDeviceTakesItsPlace) {
  NodeEngines node;
  auto g0 = std::make_shared<EngineGate>(nullptr, "d0");
  auto g1 = std::make_shared<EngineGate>(nullptr, "d1");
  auto g2 = std::make_shared<EngineGate>(nullptr, "d2");
  node.attach(2, g2);
  node.attach(0, g0);
  node.attach(1, g1);
  EXPECT_EQ(node.others(g1.get()), (std::vector<std::shared_ptr<EngineGate>>{g0, g2})) << "by ordinal";
  EXPECT_EQ(node.others(nullptr).size(), 3u);
  auto restarted = std::make_shared<EngineGate>(nullptr, "d1");
  node.attach(1, restarted);
  EXPECT_EQ(node.others(g0.get()), (std::vector<std::shared_ptr<EngineGate>>{restarted, g2}));
  EXPECT_EQ(node.others(g1.get()).size(), 3u) << "the engine before the restart is no longer one of them";
}

}  // namespace ember::engine_gate_test
