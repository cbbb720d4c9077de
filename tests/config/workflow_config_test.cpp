// workflow.json (config/workflow_config.hpp): a DAG of models parsed into an order where every step
// follows what it reads; fan-out and fan-in; every malformed file refused naming the field.
#include "config/workflow_config.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ember {
namespace workflow_config_test {

// StreamBox's Traffic shape: a detector feeding two classifiers, whose answers a third model joins.
// Written out of order on purpose.
constexpr const char* kTraffic = R"({
  "description": "a detector feeding two classifiers",
  "inputs": ["image"],
  "steps": [
    {"name": "join", "model": "merger", "inputs": {"a": "left.logits", "b": "right.logits"}},
    {"name": "left", "model": "classifier", "version": 2, "inputs": {"input": "detect.features"}},
    {"name": "detect", "model": "detector", "inputs": {"input": "image"}},
    {"name": "right", "model": "classifier", "inputs": {"input": "detect.features"}}
  ],
  "outputs": {"label": "join.out", "features": "detect.features", "echo": "image"}
})";

TEST(WorkflowConfig, AFanOutAndFanInWorkflowIsOrderedSoThatEachStepFollowsWhatItReads) {
  auto w = parse_workflow(kTraffic, "traffic", "traffic/workflow.json");
  ASSERT_TRUE(w.ok()) << w.error().message();
  EXPECT_EQ(w->name, "traffic");
  EXPECT_EQ(w->inputs, std::vector<std::string>{"image"});
  ASSERT_EQ(w->steps.size(), 4u);
  // detect first; then left and right in the file's order; join last.
  EXPECT_EQ(w->steps[0].name, "detect");
  EXPECT_EQ(w->steps[1].name, "left");
  EXPECT_EQ(w->steps[2].name, "right");
  EXPECT_EQ(w->steps[3].name, "join");
  EXPECT_TRUE(w->steps[0].after.empty());
  EXPECT_EQ(w->steps[1].after, std::vector<size_t>{0});
  EXPECT_EQ(w->steps[2].after, std::vector<size_t>{0});
  EXPECT_EQ(w->steps[3].after, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(w->steps[1].model, "classifier");
  EXPECT_EQ(w->steps[1].version, 2u);
  EXPECT_EQ(w->steps[2].version, 0u);
  ASSERT_EQ(w->steps[3].inputs.size(), 2u);
  EXPECT_EQ(w->steps[3].inputs[0].first, "a");
  EXPECT_EQ(w->steps[3].inputs[0].second, (WorkflowSource{"left", "logits"}));
  EXPECT_EQ(w->steps[0].inputs[0].second, (WorkflowSource{"", "image"}));
  ASSERT_EQ(w->outputs.size(), 3u);  // by name
  EXPECT_EQ(w->outputs[0].first, "echo");
  EXPECT_EQ(w->outputs[0].second.to_string(), "image");
  EXPECT_EQ(w->outputs[2].first, "label");
  EXPECT_EQ(w->outputs[2].second.to_string(), "join.out");
}

TEST(WorkflowConfig, TensorNamesMayHoldDotsAfterTheStep) {
  auto w = parse_workflow(R"({"inputs": ["x"], "steps": [{"name": "s", "model": "bert",
      "inputs": {"input_ids": "x"}}], "outputs": {"y": "s.encoder.last_hidden"}})",
                          "w", "w/workflow.json");
  ASSERT_TRUE(w.ok()) << w.error().message();
  EXPECT_EQ(w->outputs[0].second, (WorkflowSource{"s", "encoder.last_hidden"}));
}

struct BadWorkflow {
  const char* json;
  const char* says;
};

class WorkflowConfigErrors : public ::testing::TestWithParam<BadWorkflow> {};

TEST_P(WorkflowConfigErrors, NameTheFileAndTheField) {
  auto w = parse_workflow(GetParam().json, "traffic", "traffic/workflow.json");
  ASSERT_FALSE(w.ok()) << GetParam().json;
  EXPECT_EQ(w.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(w.error().message().find("traffic/workflow.json"), std::string::npos) << w.error().message();
  EXPECT_NE(w.error().message().find(GetParam().says), std::string::npos) << w.error().message();
}

#define STEP(name, model, from) \
  R"({"name": ")" name R"(", "model": ")" model R"(", "inputs": {"input": ")" from R"("}})"

INSTANTIATE_TEST_SUITE_P(
    Malformed, WorkflowConfigErrors,
    ::testing::Values(
        BadWorkflow{"[1, 2]", "must be a JSON object"}, BadWorkflow{"{\"inputs\": [", "not valid JSON"},
        BadWorkflow{R"({"inputs": ["x"], "steps": [)" STEP("a", "m", "x") R"(], "outputs": {"y": "a.o"}, "extra": 1})",
                    "extra: unknown key"},
        BadWorkflow{R"({"steps": [)" STEP("a", "m", "x") R"(], "outputs": {"y": "a.o"}})", "inputs: must be"},
        BadWorkflow{R"({"inputs": ["x", "x"], "steps": [)" STEP("a", "m", "x") R"(], "outputs": {"y": "a.o"}})",
                    "inputs[1]: 'x' twice"},
        BadWorkflow{R"({"inputs": ["a b"], "steps": [)" STEP("a", "m", "x") R"(], "outputs": {"y": "a.o"}})",
                    "inputs[0]: must be a tensor name"},
        BadWorkflow{R"({"inputs": ["x"], "steps": [], "outputs": {"y": "x"}})", "steps: must be a non-empty"},
        BadWorkflow{R"({"inputs": ["x"], "steps": [)" STEP("a", "m", "x") "," STEP("a", "m", "x") R"(],
                    "outputs": {"y": "a.o"}})",
                    "steps[1].name: 'a' twice"},
        BadWorkflow{R"({"inputs": ["x"], "steps": [)" STEP("x", "m", "x") R"(], "outputs": {"y": "x.o"}})",
                    "steps[0].name: 'x' is also a workflow input"},
        BadWorkflow{R"({"inputs": ["x"], "steps": [{"name": "a", "inputs": {"i": "x"}}], "outputs": {"y": "a.o"}})",
                    "steps[0].model: must be a model's name"},
        BadWorkflow{R"({"inputs": ["x"], "steps": [{"name": "a", "model": "m", "version": -1, "inputs": {"i": "x"}}],
                    "outputs": {"y": "a.o"}})",
                    "steps[0].version"},
        BadWorkflow{R"({"inputs": ["x"], "steps": [{"name": "a", "model": "m", "gpu": 1, "inputs": {"i": "x"}}],
                    "outputs": {"y": "a.o"}})",
                    "steps[0].gpu: unknown key"},
        BadWorkflow{R"({"inputs": ["x"], "steps": [{"name": "a", "model": "m"}], "outputs": {"y": "a.o"}})",
                    "steps[0].inputs: missing"},
        BadWorkflow{R"({"inputs": ["x"], "steps": [)" STEP("a", "m", "z") R"(], "outputs": {"y": "a.o"}})",
                    "steps[0].inputs.input: 'z' is no workflow input"},
        BadWorkflow{R"({"inputs": ["x"], "steps": [)" STEP("a", "m", "b.o") R"(], "outputs": {"y": "a.o"}})",
                    "steps[0].inputs.input: 'b.o' names no step 'b'"},
        BadWorkflow{R"({"inputs": ["x"], "steps": [)" STEP("a", "m", "a.o") R"(], "outputs": {"y": "a.o"}})",
                    "reads its own output"},
        BadWorkflow{R"({"inputs": ["x"], "steps": [)" STEP("a", "m", "b.o") "," STEP("b", "m", "a.o") R"(],
                    "outputs": {"y": "a.o"}})",
                    "the steps a, b read each other in a cycle"},
        BadWorkflow{R"({"inputs": ["x"], "steps": [)" STEP("a", "m", "x") "," STEP("b", "m", "x") R"(],
                    "outputs": {"y": "a.o"}})",
                    "steps[1]: step 'b' feeds no output"},
        BadWorkflow{R"({"inputs": ["x"], "steps": [)" STEP("a", "m", "x") R"(]})", "outputs: missing"},
        BadWorkflow{R"({"inputs": ["x"], "steps": [)" STEP("a", "m", "x") R"(], "outputs": {"y": 3}})",
                    "outputs.y: must be a string"},
        BadWorkflow{R"({"inputs": ["x"], "steps": [)" STEP("a", "m", "x") R"(], "outputs": {"y": "a."}})",
                    "outputs.y: 'a.' does not name a tensor"}));

TEST(WorkflowConfig, ABadWorkflowNameIsRefused) {
  auto w = parse_workflow(R"({"inputs": ["x"], "steps": [)" STEP("a", "m", "x") R"(], "outputs": {"y": "a.o"}})",
                          "traf.fic", "traf.fic/workflow.json");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message().find("is not a workflow name"), std::string::npos) << w.error().message();
}

}  // namespace workflow_config_test
}  // namespace ember
