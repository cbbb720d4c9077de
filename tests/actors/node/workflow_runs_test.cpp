// WorkflowRuns (plain C++, no actors): a request's steps come out as orders as they become ready,
// each reading what earlier steps kept on a device there (and preferring that device); kept values
// are released on their devices once their last reader answered; the answer (or the first error,
// in the failing step's words) is heard once; a failed run releases what it holds at once and what
// its running steps keep as they answer. The router running these orders is late_binding_test's
// (NodeWorkflows) subject.
#include "actors/node/workflow_runs.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace ember {
namespace workflow_runs_test {

/// detect (detector) feeds left and right (classifier), which join (merger) reads; the answer is
/// join's output and detect's features.
constexpr const char* kTraffic = R"({
  "inputs": ["image"],
  "steps": [
    {"name": "join", "model": "merger", "inputs": {"a": "left.logits", "b": "right.logits"}},
    {"name": "detect", "model": "detector", "inputs": {"input": "image"}},
    {"name": "left", "model": "classifier", "inputs": {"input": "detect.features", "mask": "image"}},
    {"name": "right", "model": "classifier", "inputs": {"input": "detect.features"}}
  ],
  "outputs": {"label": "join.out", "features": "detect.features"}
})";

tensor_msg tensor(const std::string& name, uint8_t fill) { return {name, 0, {2}, {fill, fill}}; }

gpu::KeptValue kept(const std::string& name, uint64_t handle) {
  gpu::KeptValue v;
  v.name = name;
  v.handle = handle;
  v.desc.shape = {2};
  return v;
}

struct Fixture {
  WorkflowRuns runs{"n1", nullptr};
  std::shared_ptr<const ParsedWorkflow> workflow;
  std::vector<Result<infer_reply>> answers;
  Fixture() {
    auto parsed = runs.parse("traffic", kTraffic);
    EXPECT_TRUE(parsed.ok()) << parsed.error().message();
    workflow = *parsed;
  }
  size_t step(const std::string& name) const {
    for (size_t s = 0; s < workflow->config.steps.size(); ++s)
      if (workflow->config.steps[s].name == name) return s;
    ADD_FAILURE() << "no step " << name;
    return 0;
  }
  std::vector<model_key> models() const {
    std::vector<model_key> m;
    for (const auto& s : workflow->config.steps) m.push_back({s.model, 1});
    return m;
  }
  Result<WorkflowRuns::Orders> start(std::vector<tensor_msg> inputs, std::vector<std::string> asked = {}) {
    infer_request req;
    req.model = {"traffic", 1};
    req.id = "r1";
    req.inputs = std::move(inputs);
    req.outputs = std::move(asked);
    return runs.start(
        workflow, models(), std::move(req), [this](Result<infer_reply> r) { answers.push_back(r); }, 100);
  }
  std::vector<std::string> names(const std::vector<WorkflowRuns::Step>& steps) const {
    std::vector<std::string> out;
    for (const auto& s : steps) out.push_back(workflow->config.steps[s.step].name);
    std::sort(out.begin(), out.end());
    return out;
  }
};

WorkflowRuns::StepAnswer replied(std::vector<tensor_msg> outputs, std::vector<gpu::KeptValue> keep = {}) {
  WorkflowRuns::StepAnswer a;
  a.reply = infer_reply{};
  a.reply->outputs = std::move(outputs);
  a.reply->compute_us = 10;
  a.kept = std::move(keep);
  return a;
}

TEST(WorkflowRuns, StepsComeOutAsTheyBecomeReadyReadKeptValuesWhereTheyAreAndAnswerOnce) {
  Fixture f;
  auto first = f.start({tensor("image", 1)});
  ASSERT_TRUE(first.ok()) << first.error().message();
  ASSERT_EQ(f.names(first->submit), (std::vector<std::string>{"detect"}));
  const auto& detect = first->submit[0];
  EXPECT_EQ(detect.request->model, (model_key{"detector", 1}));
  ASSERT_EQ(detect.request->inputs.size(), 1u);
  EXPECT_EQ(detect.request->inputs[0].name, "input");                          // named as the model's input
  EXPECT_EQ(detect.keep, (std::vector<std::string>{"features"}));              // left and right read it on the device
  EXPECT_EQ(detect.request->outputs, (std::vector<std::string>{"features"}));  // and the answer reads it
  EXPECT_FALSE(detect.prefer);
  // detect answers on device 1, keeping its features there: left and right read them in place.
  auto second =
      f.runs.step_done(detect.run, detect.step, 1, replied({tensor("features", 2)}, {kept("features", 7)}), 150);
  EXPECT_TRUE(second.release.empty());
  ASSERT_EQ(f.names(second.submit), (std::vector<std::string>{"left", "right"}));
  for (const auto& s : second.submit) {
    ASSERT_EQ(s.device_inputs.size(), 1u);
    EXPECT_EQ(s.device_inputs[0].name, "input");
    EXPECT_EQ(s.device_inputs[0].value.handle, 7u);
    EXPECT_EQ(s.device_inputs[0].device, 1u);
    EXPECT_EQ(s.prefer, 1u) << "a step would rather run where its kept inputs are";
  }
  const size_t left = f.step("left");
  const auto& l = second.submit[0].step == left ? second.submit[0] : second.submit[1];
  ASSERT_EQ(l.request->inputs.size(), 1u);  // the mask comes from the host
  EXPECT_EQ(l.request->inputs[0].name, "mask");
  // left answers on device 0: the features still have a reader (right).
  auto third = f.runs.step_done(l.run, left, 0, replied({}, {kept("logits", 8)}), 200);
  EXPECT_TRUE(third.release.empty());
  EXPECT_TRUE(third.submit.empty());
  // right answers on device 1: join goes next. The features stay kept: the answer reads them.
  auto fourth = f.runs.step_done(l.run, f.step("right"), 1, replied({}, {kept("logits", 9)}), 210);
  EXPECT_TRUE(fourth.release.empty());
  ASSERT_EQ(f.names(fourth.submit), (std::vector<std::string>{"join"}));
  EXPECT_EQ(fourth.submit[0].device_inputs.size(), 2u);
  EXPECT_TRUE(f.answers.empty());
  // join answers: everything kept goes, and the answer is heard, named as the workflow's outputs.
  auto last = f.runs.step_done(l.run, f.step("join"), 0, replied({tensor("out", 3)}), 300);
  std::map<uint32_t, std::vector<uint64_t>> released;
  for (const auto& r : last.release)
    released[r.device].insert(released[r.device].end(), r.handles.begin(), r.handles.end());
  for (auto& [device, handles] : released) std::sort(handles.begin(), handles.end());
  EXPECT_EQ(released, (std::map<uint32_t, std::vector<uint64_t>>{{0, {8}}, {1, {7, 9}}}));
  ASSERT_EQ(f.answers.size(), 1u);
  ASSERT_TRUE(f.answers[0].ok());
  const infer_reply& answer = *f.answers[0];
  EXPECT_EQ(answer.id, "r1");
  EXPECT_EQ(answer.node, "n1");
  EXPECT_EQ(answer.compute_us, 40u);
  std::vector<std::string> names;
  for (const auto& t : answer.outputs) names.push_back(t.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"features", "label"}));
  EXPECT_EQ(f.runs.size(), 0u);
}

TEST(WorkflowRuns, InputsMustBeTheWorkflowsEachOnce) {
  Fixture f;
  auto unknown = f.start({tensor("image", 1), tensor("audio", 1)});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(unknown.error().message().find("it takes: image"), std::string::npos) << unknown.error().message();
  auto twice = f.start({tensor("image", 1), tensor("image", 2)});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message().find("given twice"), std::string::npos);
  auto missing = f.start({});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("does not give"), std::string::npos);
  EXPECT_TRUE(f.answers.empty()) << "a refused request is answered by the refusal, not by the run";
  EXPECT_EQ(f.runs.size(), 0u);
}

TEST(WorkflowRuns, AFailingStepFailsTheRunByNameReleasesWhatItHoldsAndWhatRunningStepsKeepAsTheyAnswer) {
  Fixture f;
  auto first = f.start({tensor("image", 1)});
  ASSERT_TRUE(first.ok());
  const uint64_t run = first->submit[0].run;
  auto second =
      f.runs.step_done(run, f.step("detect"), 0, replied({tensor("features", 2)}, {kept("features", 5)}), 150);
  ASSERT_EQ(second.submit.size(), 2u);
  WorkflowRuns::StepAnswer broken;
  broken.error = device_fault("sim:0 faulted");
  broken.kept = {kept("logits", 6)};  // kept before it failed: nobody reads it
  auto failed = f.runs.step_done(run, f.step("left"), 0, broken, 200);
  ASSERT_EQ(f.answers.size(), 1u);
  ASSERT_FALSE(f.answers[0].ok());
  EXPECT_EQ(f.answers[0].error().code(), ErrorCode::device_fault);
  EXPECT_NE(f.answers[0].error().message().find("step 'left' (model classifier)"), std::string::npos)
      << f.answers[0].error().message();
  std::vector<uint64_t> released;
  for (const auto& r : failed.release) released.insert(released.end(), r.handles.begin(), r.handles.end());
  std::sort(released.begin(), released.end());
  EXPECT_EQ(released, (std::vector<uint64_t>{5, 6}));
  EXPECT_TRUE(f.runs.failed(run));
  EXPECT_EQ(f.runs.size(), 1u) << "right still runs";
  // right answers after all: what it kept goes at once, nothing more is submitted, no second answer.
  auto late = f.runs.step_done(run, f.step("right"), 0, replied({}, {kept("logits", 7)}), 250);
  ASSERT_EQ(late.release.size(), 1u);
  EXPECT_EQ(late.release[0].handles, (std::vector<uint64_t>{7}));
  EXPECT_TRUE(late.submit.empty());
  EXPECT_EQ(f.answers.size(), 1u);
  EXPECT_EQ(f.runs.size(), 0u);
  // An answer for a run long gone only releases what it kept.
  auto orphan = f.runs.step_done(run, f.step("join"), 1, replied({}, {kept("out", 9)}), 300);
  ASSERT_EQ(orphan.release.size(), 1u);
  EXPECT_EQ(orphan.release[0].device, 1u);
}

TEST(WorkflowRuns, AStepThatCannotRunFailsTheRunAndTheRouterGoingAwayFailsEveryRun) {
  Fixture f;
  auto first = f.start({tensor("image", 1)});
  ASSERT_TRUE(first.ok());
  auto refused = f.runs.step_failed(first->submit[0].run, first->submit[0].step, unavailable("the queue is full"));
  EXPECT_TRUE(refused.release.empty());
  ASSERT_EQ(f.answers.size(), 1u);
  EXPECT_EQ(f.answers[0].error().code(), ErrorCode::unavailable);
  EXPECT_NE(f.answers[0].error().message().find("step 'detect'"), std::string::npos);
  EXPECT_EQ(f.runs.size(), 0u);
  auto a = f.start({tensor("image", 1)});
  auto b = f.start({tensor("image", 2)});
  ASSERT_TRUE(a.ok() && b.ok());
  f.runs.step_done(a->submit[0].run, f.step("detect"), 0, replied({tensor("features", 2)}, {kept("features", 3)}), 150);
  auto gone = f.runs.fail_all(unavailable("the router died"));
  ASSERT_EQ(gone.release.size(), 1u);
  EXPECT_EQ(gone.release[0].handles, (std::vector<uint64_t>{3}));
  EXPECT_EQ(f.answers.size(), 3u);
  EXPECT_EQ(f.runs.size(), 0u);
}

}  // namespace workflow_runs_test
}  // namespace ember
