// run_workflow_on_device (actors/node/engine/device_workflow.hpp): a fan-out and fan-in workflow on one SimDevice
// answers exactly what the host hand-off answers, copies nothing to the host but the answer
// (counted on the device), and frees every intermediate, whether it succeeds or a step fails.
#include "actors/node/engine/device_workflow.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "gpu/sim_device.hpp"
#include "model/model_builder.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::gpu {
namespace device_workflow_test {

using testing::must;
using testing::TempDir;

/// A model of one linear layer `in` -> `out` wide (input "input", output "fc"), or, with `add`, the
/// sum of two inputs "a" and "b" of width `in` (output "sum").
std::shared_ptr<const Model> small_model(const TempDir& dir, const std::string& name, int64_t in, int64_t out,
                                         bool add = false, uint64_t seed = 3) {
  ModelBuilder b(name, seed);
  if (add) {
    b.add("sum", OpKind::add, {}, {b.input("a", DType::f32, Shape{-1, in}), b.input("b", DType::f32, Shape{-1, in})});
    b.output("sum", DType::f32, Shape{-1, in});
  } else {
    LayerAttrs a;
    a.in_features = in;
    a.out_features = out;
    b.add("fc", OpKind::linear, a, {b.input("input", DType::f32, Shape{-1, in})}, "fc");
    b.output("fc", DType::f32, Shape{-1, out});
  }
  must(b.write(dir / name), "writing " + name);
  return must(Model::load(dir / name), "loading " + name);
}

/// detect (8 -> 4) feeds left and right (4 -> 4, two models), which join sums; the answer is the
/// sum and detect's output.
WorkflowConfig traffic() {
  return must(parse_workflow(R"({
    "inputs": ["x"],
    "steps": [{"name": "detect", "model": "detect", "inputs": {"input": "x"}},
              {"name": "left", "model": "left", "inputs": {"input": "detect.fc"}},
              {"name": "right", "model": "right", "inputs": {"input": "detect.fc"}},
              {"name": "join", "model": "join", "inputs": {"a": "left.fc", "b": "right.fc"}}],
    "outputs": {"label": "join.sum", "features": "detect.fc"}})",
                             "traffic", "traffic/workflow.json"),
              "parsing traffic");
}

struct Fixture {
  TempDir dir;
  std::unique_ptr<SimDevice> device = testing::sim_device();
  std::vector<std::unique_ptr<LayerExecutor>> executors;
  std::vector<LayerExecutor*> steps;
  WorkflowConfig config = traffic();
  WorkflowPlan plan{config};

  Fixture() {
    for (auto model : {small_model(dir, "detect", 8, 4), small_model(dir, "left", 4, 4, false, 5),
                       small_model(dir, "right", 4, 4, false, 7), small_model(dir, "join", 4, 4, true)}) {
      executors.push_back(must(LayerExecutor::create(*device, model, {0, model->num_layers()}), "executor"));
      steps.push_back(executors.back().get());
    }
  }
  std::vector<HostTensor> inputs(int64_t width = 8) const {
    return {testing::random_tensor("x", {DType::f32, Shape{3, width}}, 11)};
  }
  /// The host hand-off: every step's outputs back on the host.
  Result<std::vector<HostTensor>> by_host(std::vector<HostTensor> in) {
    return run_workflow(config, plan, std::move(in),
                        [&](size_t s, std::vector<HostTensor> given) { return steps[s]->run_host(given); });
  }
};

TEST(DeviceWorkflow, AnswersWhatTheHostHandOffAnswersAndCopiesOnlyTheAnswerToTheHost) {
  Fixture f;
  auto want = f.by_host(f.inputs());
  ASSERT_TRUE(want.ok()) << want.error().message();
  const uint64_t used_before = f.device->memory().used_bytes;
  const auto before = f.device->copy_counts();
  DeviceWorkflowStats stats;
  auto got = run_workflow_on_device(f.config, f.plan, f.steps, f.inputs(), &stats);
  ASSERT_TRUE(got.ok()) << got.error().message();
  const auto after = f.device->copy_counts();

  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < got->size(); ++i) {
    EXPECT_EQ((*got)[i].name, (*want)[i].name);
    ASSERT_EQ((*got)[i].desc.shape.to_string(), (*want)[i].desc.shape.to_string());
    ASSERT_EQ((*got)[i].desc.dtype, (*want)[i].desc.dtype);
    EXPECT_EQ(std::memcmp((*got)[i].data(), (*want)[i].data(), (*got)[i].desc.bytes()), 0) << (*got)[i].name;
  }
  EXPECT_EQ(after.to_host - before.to_host, 2u) << "the answer's two tensors, nothing else";
  EXPECT_EQ(after.to_host_bytes - before.to_host_bytes, 2u * 3 * 4 * 4);
  EXPECT_EQ(after.to_device - before.to_device, 1u) << "the request's one tensor, once";
  EXPECT_EQ(after.on_device - before.on_device, 0u) << "zero-copy: a consumer reads the producer's buffer";
  // detect.fc to left and right, left.fc and right.fc to join: four [3, 4] floats.
  EXPECT_EQ(stats.handoff_bytes, 4u * 3 * 4 * 4);
  EXPECT_EQ(stats.uploaded_bytes, 3u * 8 * 4);
  EXPECT_EQ(stats.downloaded_bytes, 2u * 3 * 4 * 4);
  EXPECT_EQ(f.device->memory().used_bytes, used_before) << "every intermediate freed";
}

TEST(DeviceWorkflow, AFailingStepFailsTheRequestByNameAndLeavesNoIntermediateBehind) {
  Fixture f;
  const uint64_t used_before = f.device->memory().used_bytes;
  auto got = run_workflow_on_device(f.config, f.plan, f.steps, f.inputs(6));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(got.error().message().find("step 'detect' (model detect): input 'input' is float32[3, 6]"),
            std::string::npos)
      << got.error().message();
  // A later step failing: the join reads left and right of different widths.
  f.executors[3] = must(LayerExecutor::create(*f.device, small_model(f.dir, "join8", 8, 8, true), {0, 1}), "join8");
  f.steps[3] = f.executors[3].get();
  got = run_workflow_on_device(f.config, f.plan, f.steps, f.inputs());
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().message().find("step 'join' (model join)"), std::string::npos) << got.error().message();
  f.executors[3].reset();  // its weights (none: an add) go with it
  EXPECT_EQ(f.device->memory().used_bytes, used_before) << "every intermediate freed";
}

TEST(DeviceWorkflow, StepsOnTwoDevicesAreRefusedAndIdsReadBackAreChecked) {
  Fixture f;
  auto other = testing::sim_device(256ull << 20, 1);
  auto model = small_model(f.dir, "left2", 4, 4);
  auto elsewhere = must(LayerExecutor::create(*other, model, {0, 1}), "executor on sim1");
  f.steps[1] = elsewhere.get();
  auto got = run_workflow_on_device(f.config, f.plan, f.steps, f.inputs());
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().message().find("a device hand-off needs every step on one device"), std::string::npos)
      << got.error().message();

  // An embedding's ids handed on the device are read back and checked as run_host checks them.
  ModelBuilder b("lookup", 1);
  LayerAttrs e;
  e.num_embeddings = 10;
  e.embedding_dim = 4;
  b.add("emb", OpKind::embedding, e, {b.input("ids", DType::i64, Shape{-1, 2})}, "emb");
  b.output("emb", DType::f32, Shape{-1, 2, 4});
  must(b.write(f.dir / "lookup"), "writing lookup");
  auto lookup = must(Model::load(f.dir / "lookup"), "loading lookup");
  auto ex = must(LayerExecutor::create(*f.device, lookup, {0, 1}), "lookup executor");
  auto wf = must(parse_workflow(R"({"inputs": ["ids"], "steps": [{"name": "e", "model": "lookup",
                                   "inputs": {"ids": "ids"}}], "outputs": {"v": "e.emb"}})",
                                "ids", "ids/workflow.json"),
                 "parsing ids");
  WorkflowPlan plan(wf);
  HostTensor ids = must(HostTensor::allocate("ids", {DType::i64, Shape{1, 2}}), "ids");
  ids.as<int64_t>()[0] = 3;
  ids.as<int64_t>()[1] = 10;
  auto bad = run_workflow_on_device(wf, plan, {ex.get()}, {ids});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("is id 10, outside the 10 rows of layer 'emb'"), std::string::npos)
      << bad.error().message();
  ids.as<int64_t>()[1] = 9;
  auto good = run_workflow_on_device(wf, plan, {ex.get()}, {ids});
  ASSERT_TRUE(good.ok()) << good.error().message();
  auto direct = ex->run_host({ids});
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(std::memcmp(good->front().data(), direct->front().data(), direct->front().desc.bytes()), 0);
}

}  // namespace device_workflow_test
}  // namespace ember::gpu
