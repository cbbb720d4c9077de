// Inline runs (actors/node/inline_runs.hpp): a warm request run on the caller's thread through an
// engine's gate, beside the executor actor that owns the engine, and what it declines.
#include "actors/node/inline_runs.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "actors/gpu_executor_interface.hpp"
#include "actors/node/engine/executor_engine.hpp"
#include "actors/node/gpu_executor.hpp"
#include "actors/node/node_instruments.hpp"
#include "actors/tensor_codec.hpp"
#include "model/architectures.hpp"
#include "tests/actors/actor_test_util.hpp"
#include "tests/actors/node/node_test_util.hpp"

namespace ember {
namespace inline_runs_test {

using namespace std::chrono_literals;
using testing::ask;

using testing::direct;
using testing::engine;
using testing::request_for;

bool same_outputs(const infer_reply& reply, const std::vector<gpu::HostTensor>& want) {
  if (reply.outputs.size() != want.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    auto got = decode_tensor(reply.outputs[i]);
    if (!got.ok() || !gpu::testing::bitwise_equal(*got, want[i])) return false;
  }
  return true;
}

/// An inline run of `req`, tried until the engine's worker has finished the job it was running (an
/// actor's answer comes from inside the job, which may still be ending): nullopt if it never runs.
std::optional<Result<infer_reply>> run_when_idle(InlineRuns& runs, const infer_request& req) {
  for (int i = 0; i < 1000; ++i) {
    if (auto ran = runs.run(req)) return ran;
    std::this_thread::sleep_for(1ms);
  }
  return std::nullopt;
}

/// An executor whose engines are offered to `runs` as device 0, with `model` bound as `key`.
struct Node {
  WorkQueue maintenance{{.threads = 1}};  // outlives the actors (as in NodeProcess)
  NodeInstruments instruments;
  std::shared_ptr<InlineRuns> runs = std::make_shared<InlineRuns>("n1", &instruments);
  std::unique_ptr<caf::actor_system> sys = testing::make_system();
  gpu_executor_actor exec;

  Node() { exec = spawn_gpu_executor(*sys, engine(), "n1", &instruments, maintenance, {}, InlineSlot{runs, 0}); }
  ~Node() {
    caf::anon_send_exit(exec, caf::exit_reason::user_shutdown);
    sys->await_all_actors_done();
  }
  void bind(const model_key& key, std::shared_ptr<const gpu::Model> model) {
    auto bound = ask<std::string>(*sys, exec, 10s, bind_model{key, std::move(model)});
    ASSERT_TRUE(bound.ok()) << bound.error().message();
  }
};

TEST(InlineRuns, AnswersAWarmRequestAsTheExecutorWouldAndRecordsItForTheRouter) {
  testing::Repository repo;
  auto model = *gpu::Model::load(repo.dir / "bert/1");
  const model_key key{"bert", 1};
  Node node;
  node.bind(key, model);
  node.runs->keep_records(true);

  const infer_request req = request_for(*model, key, 7);
  auto ran = run_when_idle(*node.runs, req);
  ASSERT_TRUE(ran.has_value());
  ASSERT_TRUE(ran->ok()) << ran->error().message();
  EXPECT_EQ((*ran)->id, "r7");
  EXPECT_EQ((*ran)->node, "n1");
  EXPECT_EQ((*ran)->device, "sim:0");
  EXPECT_EQ((*ran)->model, key);
  EXPECT_TRUE(same_outputs(**ran, direct(model, req)));
  // The executor's own answer is the same.
  auto by_actor = ask<infer_reply>(*node.sys, node.exec, 10s, req);
  ASSERT_TRUE(by_actor.ok());
  EXPECT_TRUE(same_outputs(*by_actor, direct(model, req)));

  // One output asked for; an output the model lacks is the client's error, answered here.
  infer_request one = req;
  one.outputs = {"pooler.activation"};
  ran = run_when_idle(*node.runs, one);
  ASSERT_TRUE(ran.has_value() && ran->ok());
  ASSERT_EQ((*ran)->outputs.size(), 1u);
  one.outputs = {"logits"};
  ran = run_when_idle(*node.runs, one);
  ASSERT_TRUE(ran.has_value());
  ASSERT_FALSE(ran->ok());
  EXPECT_EQ(ran->error().code(), ErrorCode::invalid_argument);

  auto records = node.runs->drain();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].model, key);
  EXPECT_EQ(records[0].device, 0u);
  EXPECT_GT(records[0].latency_us, 0u);
  EXPECT_TRUE(node.runs->drain().empty());
  node.runs->keep_records(false);
  ASSERT_TRUE(run_when_idle(*node.runs, req).has_value());
  EXPECT_TRUE(node.runs->drain().empty());  // nobody asks for them: none kept

  const std::string text = node.instruments.registry().render();
  EXPECT_NE(text.find("ember_swap_dispatches_total{kind=\"inline\"} 4"), std::string::npos) << text;
  EXPECT_NE(text.find("ember_execution_count_total{model=\"bert\",version=\"1\"} 5"), std::string::npos) << text;
}

TEST(InlineRuns, DeclinesWhatTheRouterShouldTake) {
  testing::Repository repo;
  auto mlp = *gpu::Model::load(repo.dir / "mlp/1");
  const model_key key{"mlp", 1};
  Node node;
  const infer_request req = request_for(*mlp, key, 1);
  EXPECT_FALSE(node.runs->run(req).has_value());  // not resident
  node.bind(key, mlp);
  EXPECT_TRUE(run_when_idle(*node.runs, req).has_value());
  infer_request other = req;
  other.model = {"mlp", 2};
  EXPECT_FALSE(node.runs->run(other).has_value());  // another version

  // While an interposer holds the router's messages, nothing passes it by.
  node.runs->suspend(true);
  EXPECT_FALSE(node.runs->run(req).has_value());
  node.runs->suspend(false);
  EXPECT_TRUE(run_when_idle(*node.runs, req).has_value());

  // A model that batches with a queue delay waits for company on the router's way; without a delay,
  // a request that finds its device idle is a batch of one and runs here.
  auto built = gpu::build_architecture("mlp", {.tiny = true, .seed = 3, .name = "batched"});
  ASSERT_TRUE(built.ok());
  built->serving().dynamic_batching = true;
  built->serving().max_queue_delay_us = 500;
  gpu::testing::TempDir dir;
  ASSERT_TRUE(built->write(dir / "batched").ok());
  auto batched = *gpu::Model::load(dir / "batched");
  node.bind({"batched", 1}, batched);
  infer_request b = request_for(*batched, {"batched", 1}, 2);
  ASSERT_TRUE(run_when_idle(*node.runs, req).has_value());  // the device is idle ...
  EXPECT_FALSE(node.runs->run(b).has_value());              // ... and still it declines
  built->serving().max_queue_delay_us = 0;
  ASSERT_TRUE(built->write(dir / "now").ok());
  auto at_once = *gpu::Model::load(dir / "now");
  node.bind({"now", 1}, at_once);
  EXPECT_TRUE(run_when_idle(*node.runs, request_for(*at_once, {"now", 1}, 2)).has_value());

  // A device fault is the router's to answer (it restarts the device and runs the request again):
  // declined, and the executor's next answer shows the engine broken.
  ASSERT_TRUE(run_when_idle(*node.runs, req).has_value());
  ASSERT_TRUE(
      ask<std::string>(*node.sys, node.exec, 10s, fault_atom_v, fault_command{FaultKind::fault_kernel, FaultTarget::executor}).ok());
  EXPECT_FALSE(node.runs->run(req).has_value());  // arming the fault ran no job: the inline run met it
  auto after = ask<infer_reply>(*node.sys, node.exec, 10s, req);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.error().code(), ErrorCode::device_fault);
}

TEST(InlineRuns, WaitsForNoWorkerJobAndTheGateClosesWithItsEngine) {
  testing::Repository repo;
  auto mlp = *gpu::Model::load(repo.dir / "mlp/1");
  const model_key key{"mlp", 1};
  auto e = engine();
  std::shared_ptr<EngineGate> gate = e->gate();
  std::promise<void> bound;
  e->bind(key, mlp, [&](Status s) {
    EXPECT_TRUE(s.ok());
    bound.set_value();
  });
  bound.get_future().wait();
  const auto inputs = *decode_tensors(request_for(*mlp, key, 4).inputs);
  ASSERT_TRUE(gate->holds(key));
  // `done` ran inside the bind job: the worker may still be finishing it.
  std::optional<ExecutorEngine::InferResult> ran;
  for (int i = 0; i < 1000 && !ran; ++i) {
    ran = gate->run_here(key, inputs);
    if (!ran) std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(ran.has_value());
  EXPECT_TRUE(ran->outputs.ok());

  // The worker runs a job: an inline run does not wait for it, it declines.
  std::promise<void> release;
  std::promise<void> started;
  e->unbind({"nothing", 1}, [&started, released = release.get_future().share()] {
    started.set_value();
    released.wait();
  });
  started.get_future().wait();
  EXPECT_FALSE(gate->run_here(key, inputs).has_value());
  release.set_value();

  e.reset();  // the engine goes: its gate refuses from now on
  EXPECT_FALSE(gate->open());
  EXPECT_FALSE(gate->holds(key));
  EXPECT_FALSE(gate->run_here(key, inputs).has_value());
}

// The router's device order (Algorithm 1's, published with prefer()) decides which idle holder
// runs a request; the inputs are decoded only once a device gave the run its turn.
TEST(InlineRuns, TakesDevicesInTheRoutersOrderAndDecodesOnlyWhenItRuns) {
  testing::Repository repo;
  auto mlp = *gpu::Model::load(repo.dir / "mlp/1");
  const model_key key{"mlp", 1};
  NodeInstruments instruments;
  InlineRuns runs("n1", &instruments);
  std::vector<std::unique_ptr<ExecutorEngine>> engines;
  for (uint32_t d = 0; d < 2; ++d) {
    engines.push_back(engine());
    std::promise<void> bound;
    engines[d]->bind(key, mlp, [&](Status s) {
      EXPECT_TRUE(s.ok());
      bound.set_value();
    });
    bound.get_future().wait();
    runs.attach(d, engines[d]->gate());
  }
  const infer_request req = request_for(*mlp, key, 5);
  const auto inputs = *decode_tensors(req.inputs);
  // `done` ran inside each bind job: a worker may still be finishing it. Once a run took each
  // device's turn, both workers are idle and nothing else is posted: every run below is inline.
  for (auto& e : engines) {
    std::optional<InferResult> settled;
    for (int i = 0; i < 1000 && !settled; ++i) {
      settled = e->gate()->run_here(key, inputs);
      if (!settled) std::this_thread::sleep_for(1ms);
    }
    ASSERT_TRUE(settled.has_value());
  }
  runs.keep_records(true);
  auto device_of_next_run = [&]() -> std::optional<uint32_t> {
    if (!runs.run(req).has_value()) return std::nullopt;
    auto records = runs.drain();
    if (records.size() != 1) return std::nullopt;
    return records[0].device;
  };
  EXPECT_EQ(device_of_next_run(), 0u);  // no order published yet: by index
  runs.prefer({1, 0});
  EXPECT_EQ(device_of_next_run(), 1u);
  runs.prefer({1});  // a device left out comes last
  EXPECT_EQ(device_of_next_run(), 1u);
  runs.prefer({0, 1});
  EXPECT_EQ(device_of_next_run(), 0u);

  // The gate asks for the inputs only when the run happens: a busy device decodes nothing.
  int asked = 0;
  const InlineInputs counted = [&]() -> const std::vector<gpu::HostTensor>* {
    ++asked;
    return &inputs;
  };
  // The job holds the future it waits on: once released, the test may end (and its promise go)
  // before the worker wakes; the engines, destroyed last, join it.
  std::promise<void> release;
  std::promise<void> started;
  engines[0]->unbind({"nothing", 1}, [&started, released = release.get_future().share()] {
    started.set_value();
    released.wait();
  });
  started.get_future().wait();
  EXPECT_FALSE(engines[0]->gate()->run_here(key, counted).has_value());
  EXPECT_EQ(asked, 0);
  release.set_value();
  std::optional<InferResult> ran;
  for (int i = 0; i < 1000 && !ran; ++i) {
    ran = engines[1]->gate()->run_here(key, counted);
    if (!ran) std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(ran.has_value());
  EXPECT_EQ(asked, 1);
  // Inputs that do not decode: the run declines (the router's way answers the client).
  const InlineInputs none = [] { return static_cast<const std::vector<gpu::HostTensor>*>(nullptr); };
  EXPECT_FALSE(engines[1]->gate()->run_here(key, none).has_value());
}

// Front-end threads running inline beside the executor actor's own jobs: every answer right, no
// run lost, none overlapping another on the device (the engine's queue hands out one turn at a time).
TEST(InlineRuns, ManyThreadsBesideTheExecutorsOwnJobsAllGetRightAnswers) {
  testing::Repository repo;
  auto model = *gpu::Model::load(repo.dir / "mlp/1");
  const model_key key{"mlp", 1};
  Node node;
  node.bind(key, model);
  node.runs->keep_records(true);
  const infer_request req = request_for(*model, key, 9);
  const auto want = direct(model, req);
  std::atomic<int> inline_ok{0}, declined{0}, wrong{0};
  std::vector<std::thread> fronts;
  for (int t = 0; t < 4; ++t) {
    fronts.emplace_back([&] {
      // Until 100 ran inline here (a declined attempt, the worker being busy, takes no time).
      for (int ran_here = 0, i = 0; ran_here < 100 && i < 100'000; ++i) {
        auto ran = node.runs->run(req);
        if (!ran) {
          ++declined;
          std::this_thread::yield();
        } else if (ran->ok() && same_outputs(**ran, want)) {
          ++inline_ok;
          ++ran_here;
        } else {
          ++wrong;
        }
      }
    });
  }
  int actor_ok = 0;
  for (int i = 0; i < 50; ++i) {
    auto r = ask<infer_reply>(*node.sys, node.exec, 10s, req);
    if (r.ok() && same_outputs(*r, want)) ++actor_ok;
  }
  for (auto& f : fronts) f.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(actor_ok, 50);
  EXPECT_EQ(inline_ok.load(), 400);
  EXPECT_EQ(node.runs->drain().size(), static_cast<size_t>(inline_ok.load()));
}

// A whole workflow request runs inline when one device holds every step's model, each step reading
// on the device what the one before left there; it declines when a model is not resident.
TEST(InlineRuns, AWorkflowWhoseModelsAreAllResidentRunsOnTheCallersThread) {
  gpu::testing::TempDir dir;
  auto left = gpu::testing::tiny_model("mlp", dir / "left", 1);
  auto right = gpu::testing::tiny_model("mlp", dir / "right", 2);
  Node node;
  node.bind({"left", 1}, left);
  workflow_request w;
  w.name = "pair";
  w.json = R"({"inputs": ["x"], "steps": [{"name": "a", "model": "left", "inputs": {"input": "x"}},
                                         {"name": "b", "model": "right", "inputs": {"input": "x"}}],
              "outputs": {"ya": "a.fc3", "yb": "b.fc3"}})";
  w.models = {{"left", 1}, {"right", 1}};
  w.request = request_for(*left, {"pair", 1}, 3);
  w.request.inputs[0].name = "x";
  EXPECT_FALSE(node.runs->run_workflow(w).has_value()) << "right is not resident: the router's way";
  node.bind({"right", 1}, right);
  std::optional<Result<infer_reply>> ran;
  for (int i = 0; i < 1000 && !ran; ++i) {
    ran = node.runs->run_workflow(w);
    if (!ran) std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(ran.has_value());
  ASSERT_TRUE(ran->ok()) << ran->error().message();
  EXPECT_EQ((*ran)->model.name, "pair");
  infer_request alone = request_for(*left, {"left", 1}, 3);
  ASSERT_EQ((*ran)->outputs.size(), 2u);
  infer_reply ya, yb;
  ya.outputs = {(*ran)->outputs[0]};
  yb.outputs = {(*ran)->outputs[1]};
  EXPECT_TRUE(same_outputs(ya, direct(left, alone)));
  EXPECT_TRUE(same_outputs(yb, direct(right, alone)));
  // A bad input is the client's error, answered here as the router would.
  w.request.inputs[0].shape = {2, 7};
  w.request.inputs[0].data.resize(2 * 7 * 4);
  auto bad = node.runs->run_workflow(w);
  ASSERT_TRUE(bad.has_value());
  ASSERT_FALSE(bad->ok());
  EXPECT_NE(bad->error().message().find("step 'a' (model left)"), std::string::npos) << bad->error().message();
}

}  // namespace inline_runs_test
}  // namespace ember
