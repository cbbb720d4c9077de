#include "placement/workflow_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace ember {
namespace workflow_plan_test {

// StreamBox's Traffic shape: a detector fans out to two classifiers, which fan in to a merger; the
// detector's features are also part of the answer.
WorkflowConfig traffic() {
  auto wf = parse_workflow(R"({
    "inputs": ["image", "unused"],
    "steps": [
      {"name": "join", "model": "merger", "inputs": {"a": "left.logits", "b": "right.logits"}},
      {"name": "detect", "model": "detector", "inputs": {"input": "image"}},
      {"name": "left", "model": "classifier", "inputs": {"input": "detect.features", "mask": "image"}},
      {"name": "right", "model": "classifier", "inputs": {"input": "detect.features"}}
    ],
    "outputs": {"label": "join.out", "features": "detect.features"}
  })",
                           "traffic", "traffic/workflow.json");
  EXPECT_TRUE(wf.ok()) << wf.error().message();
  return wf.ok() ? *wf : WorkflowConfig{};
}

size_t step(const WorkflowConfig& wf, const std::string& name) {
  for (size_t s = 0; s < wf.steps.size(); ++s) {
    if (wf.steps[s].name == name) return s;
  }
  ADD_FAILURE() << "no step " << name;
  return 0;
}

std::vector<std::string> names(const WorkflowConfig& wf, const std::vector<size_t>& steps) {
  std::vector<std::string> out;
  for (size_t s : steps) out.push_back(wf.steps[s].name);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(WorkflowPlan, SlotsAreTheInputsThenEveryStepOutputSomethingReads) {
  const WorkflowConfig wf = traffic();
  const WorkflowPlan plan(wf);
  // image, unused; detect.features, left.logits, right.logits, join.out.
  EXPECT_EQ(plan.slots(), 6u);
  const auto& detect = plan.step_outputs(step(wf, "detect"));
  ASSERT_EQ(detect.size(), 1u);
  EXPECT_EQ(detect[0].tensor, "features");
  EXPECT_EQ(plan.readers(detect[0].slot), 2u);  // left and right; left reads it once
  EXPECT_TRUE(plan.answered(detect[0].slot));
  EXPECT_EQ(plan.readers(0), 2u);  // image: detect and left's mask
  ASSERT_EQ(plan.answer().size(), 2u);
  const auto& left = plan.step_inputs(step(wf, "left"));
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].model_input, "input");
  EXPECT_EQ(left[0].slot, detect[0].slot);
  EXPECT_EQ(left[1].model_input, "mask");
  EXPECT_EQ(left[1].slot, 0u);
}

TEST(WorkflowProgress, AFanOutIsReadyTogetherAndIntermediatesGoAfterTheirLastReader) {
  const WorkflowConfig wf = traffic();
  const WorkflowPlan plan(wf);
  WorkflowProgress run(plan);
  EXPECT_EQ(names(wf, run.take_ready()), std::vector<std::string>{"detect"});
  EXPECT_TRUE(run.take_ready().empty()) << "a step was handed out twice";
  EXPECT_TRUE(run.complete(step(wf, "detect")).empty()) << "image is still read by left";
  EXPECT_EQ(names(wf, run.take_ready()), (std::vector<std::string>{"left", "right"}));

  // right finishes first: detect.features is still read by left (and is in the answer anyway).
  EXPECT_TRUE(run.complete(step(wf, "right")).empty());
  EXPECT_TRUE(run.take_ready().empty()) << "join needs left's logits too";
  EXPECT_EQ(run.complete(step(wf, "left")), std::vector<size_t>{0}) << "image's last reader was left";
  EXPECT_EQ(names(wf, run.take_ready()), std::vector<std::string>{"join"});
  const auto freed = run.complete(step(wf, "join"));
  EXPECT_EQ(freed.size(), 2u) << "both logits go once join has read them";
  EXPECT_TRUE(run.done());
  // What is left: the unused input and the answer's two tensors.
  std::vector<size_t> answer;
  for (const auto& a : plan.answer()) answer.push_back(a.slot);
  answer.push_back(1);
  std::sort(answer.begin(), answer.end());
  EXPECT_EQ(run.held_slots(), answer);
}

TEST(WorkflowProgress, AStepThatIsNotRunningCannotCompleteAndAFailedRequestKnowsWhatItHolds) {
  const WorkflowConfig wf = traffic();
  const WorkflowPlan plan(wf);
  WorkflowProgress run(plan);
  EXPECT_TRUE(run.complete(step(wf, "join")).empty());  // never taken: ignored
  EXPECT_FALSE(run.done());
  ASSERT_EQ(run.take_ready().size(), 1u);
  run.complete(step(wf, "detect"));
  run.complete(step(wf, "detect"));  // twice: ignored
  ASSERT_EQ(run.take_ready().size(), 2u);
  // left fails here: the caller frees what is held, the inputs and detect's features.
  EXPECT_EQ(run.held_slots(), (std::vector<size_t>{0, 1, plan.step_outputs(step(wf, "detect"))[0].slot}));
}

struct Value {
  std::string name;
  double value = 0;
};

/// The Traffic workflow's models as arithmetic: detector doubles, classifier adds one, merger
/// multiplies; each logs what it ran.
struct Models {
  std::vector<std::string> ran;
  std::string fail;  // this step's model fails
  Result<std::vector<Value>> operator()(const WorkflowConfig& wf, size_t step, std::vector<Value> in) {
    const WorkflowStep& s = wf.steps[step];
    ran.push_back(s.name);
    if (s.name == fail) return unavailable("the device went away");
    auto get = [&](const std::string& name) {
      for (const auto& v : in) {
        if (v.name == name) return v.value;
      }
      ADD_FAILURE() << s.name << " was not given " << name;
      return 0.0;
    };
    if (s.model == "detector") return std::vector<Value>{{"features", get("input") * 2}, {"boxes", 1}};
    if (s.model == "classifier") return std::vector<Value>{{"logits", get("input") + 1}};
    return std::vector<Value>{{"out", get("a") * get("b")}};
  }
};

TEST(RunWorkflow, TheAnswerIsTheStepsRunByHandInDependencyOrder) {
  const WorkflowConfig wf = traffic();
  const WorkflowPlan plan(wf);
  Models models;
  auto answer = run_workflow(wf, plan, std::vector<Value>{{"unused", 0}, {"image", 3}},
                             [&](size_t s, std::vector<Value> in) { return models(wf, s, std::move(in)); });
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  ASSERT_EQ(answer->size(), 2u);
  std::map<std::string, double> got;
  for (const auto& v : *answer) got[v.name] = v.value;
  EXPECT_EQ(got["label"], 49.0);  // (3*2 + 1) * (3*2 + 1)
  EXPECT_EQ(got["features"], 6.0);
  ASSERT_EQ(models.ran.size(), 4u);
  EXPECT_EQ(models.ran.front(), "detect");
  EXPECT_EQ(models.ran.back(), "join");
}

TEST(RunWorkflow, BadInputsMissingOutputsAndFailedStepsAreErrorsNamingThem) {
  const WorkflowConfig wf = traffic();
  const WorkflowPlan plan(wf);
  auto run = [&](std::vector<Value> in, Models& models) {
    return run_workflow(wf, plan, std::move(in),
                        [&](size_t s, std::vector<Value> given) { return models(wf, s, std::move(given)); });
  };
  Models models;
  auto missing = run({{"image", 1}}, models);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message(), "workflow 'traffic' takes input 'unused', which the request does not give");
  auto unknown = run({{"image", 1}, {"unused", 0}, {"other", 0}}, models);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message(), "input 'other' is not one of workflow 'traffic''s (it takes: image, unused)");
  auto twice = run({{"image", 1}, {"image", 2}, {"unused", 0}}, models);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().message(), "input 'image' is given twice");
  EXPECT_TRUE(models.ran.empty()) << "a step ran on a bad request";

  Models failing;
  failing.fail = "left";
  auto failed = run({{"image", 1}, {"unused", 0}}, failing);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code(), ErrorCode::unavailable);
  EXPECT_NE(failed.error().message().find("step 'left' (model classifier)"), std::string::npos)
      << failed.error().message();
  EXPECT_EQ(std::count(failing.ran.begin(), failing.ran.end(), "join"), 0) << "a step after the failure ran";

  auto renamed = parse_workflow(R"({"inputs": ["x"], "steps": [{"name": "d", "model": "detector",
      "inputs": {"input": "x"}}], "outputs": {"y": "d.scores"}})",
                                "w", "w/workflow.json");
  ASSERT_TRUE(renamed.ok()) << renamed.error().message();
  const WorkflowPlan renamed_plan(*renamed);
  Models plain;
  auto no_output = run_workflow(*renamed, renamed_plan, std::vector<Value>{{"x", 1}},
                                [&](size_t s, std::vector<Value> in) { return plain(*renamed, s, std::move(in)); });
  ASSERT_FALSE(no_output.ok());
  EXPECT_EQ(no_output.error().message(),
            "step 'd' (model detector): the model gives no output 'scores' (it gives: features, boxes)");
}

TEST(WorkflowCache, ParsesATextOnceAndAgainOnlyWhenItChanges) {
  WorkflowCache cache;
  const std::string text = R"({"inputs": ["x"], "steps": [{"name": "a", "model": "m", "inputs": {"input": "x"}}],
                                "outputs": {"y": "a.out"}})";
  auto first = cache.get("flow", text);
  ASSERT_TRUE(first.ok()) << first.error().message();
  EXPECT_EQ((*first)->plan.steps(), 1u);
  auto again = cache.get("flow", text);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), first->get()) << "the same text: the same parse";
  auto bad = cache.get("flow", R"({"inputs": ["x"]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("flow/workflow.json"), std::string::npos) << bad.error().message();
  auto back = cache.get("flow", text);
  ASSERT_TRUE(back.ok());
  EXPECT_NE(back->get(), first->get()) << "parsed anew after the bad text replaced it";
  EXPECT_EQ((*first)->config.steps.size(), 1u) << "a run holding the old parse keeps it";
}

}  // namespace workflow_plan_test
}  // namespace ember
