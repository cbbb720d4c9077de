#include "model/manifest.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "model/architectures.hpp"

namespace ember::gpu {
namespace manifest_test {

using nlohmann::json;

json tiny(const std::string& arch) {
  auto b = build_architecture(arch, {true, 1, {}});
  return json::parse(manifest_to_json(b->manifest()));
}

TEST(Manifest, EveryArchitectureRoundTrips) {
  for (auto arch : architecture_names()) {
    for (bool small : {true, false}) {
      auto b = build_architecture(arch, {small, 1, {}});
      ASSERT_TRUE(b.ok());
      const std::string text = manifest_to_json(b->manifest());
      auto m = parse_manifest(text, "model.json");
      ASSERT_TRUE(m.ok()) << arch << ": " << m.error().message();
      EXPECT_EQ(manifest_to_json(*m), text) << arch;
      EXPECT_EQ(m->layers.size(), b->manifest().layers.size());
    }
  }
}

TEST(Manifest, AModelsAutoscaleKeysRoundTripAndOverrideTheClusterDefaults) {
  json j = tiny("mlp");
  j["serving"]["autoscale"] = {{"policy", "arrival_rate"}, {"max_replicas", 16}, {"headroom", 1.5},
                               {"idle_timeout", "5min"}, {"upscale_delay", "250ms"}};
  auto m = parse_manifest(j.dump(), "model.json");
  ASSERT_TRUE(m.ok()) << m.error().message();
  const AutoscaleOverrides& o = m->serving.autoscale;
  EXPECT_EQ(o.policy, ScalingPolicy::arrival_rate);
  EXPECT_EQ(o.max_replicas, 16u);
  EXPECT_EQ(o.idle_timeout_us, 300'000'000u);
  EXPECT_FALSE(o.min_replicas.has_value());
  auto again = parse_manifest(manifest_to_json(*m), "model.json");
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(again->serving.autoscale, o);

  AutoscaleConfig cluster;
  cluster.min_replicas = 2;
  cluster.downscale_delay_us = 5'000'000;
  auto merged = with_overrides(cluster, o, "model.json", "serving.autoscale");
  ASSERT_TRUE(merged.ok()) << merged.error().message();
  EXPECT_EQ(merged->policy, ScalingPolicy::arrival_rate);
  EXPECT_EQ(merged->max_replicas, 16u);
  EXPECT_EQ(merged->min_replicas, 2u) << "the cluster's, where the model says nothing";
  EXPECT_EQ(merged->downscale_delay_us, 5'000'000u);
  EXPECT_EQ(merged->upscale_delay_us, 250'000u);
  cluster.min_replicas = 20;
  auto clash = with_overrides(cluster, o, "model.json", "serving.autoscale");
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.error().message(),
            "model.json: serving.autoscale.max_replicas: 16 is below serving.autoscale.min_replicas (20)");
}

TEST(Manifest, PaddedSequencesNameFreeInputsAndRoundTrip) {
  json j = tiny("bert-base");  // input_ids [-1, -1] int64
  j["serving"]["max_batch"] = 8;
  j["serving"]["dynamic_batching"] = {{"pad", {{"input_ids", 0}}}};
  auto m = parse_manifest(j.dump(), "model.json");
  ASSERT_TRUE(m.ok()) << m.error().message();
  ASSERT_EQ(m->serving.pad_inputs.size(), 1u);
  EXPECT_EQ(m->serving.pad_inputs[0].first, "input_ids");
  auto again = parse_manifest(manifest_to_json(*m), "model.json");
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(again->serving.pad_inputs, m->serving.pad_inputs);
  auto error = [&](json pad) {
    j["serving"]["dynamic_batching"] = {{"pad", pad}};
    auto bad = parse_manifest(j.dump(), "model.json");
    return bad.ok() ? std::string("(parsed)") : bad.error().message();
  };
  EXPECT_EQ(error({{"tokens", 0}}), "model.json: serving.dynamic_batching.pad.tokens: the model has no such input");
  EXPECT_EQ(error({{"input_ids", 0.5}}), "model.json: serving.dynamic_batching.pad.input_ids: 0.500000 is not a int64 value");
  EXPECT_EQ(error({{"input_ids", "zero"}}), "model.json: serving.dynamic_batching.pad.input_ids: the pad value must be a number");
  EXPECT_EQ(error(json::array()), "model.json: serving.dynamic_batching.pad: must be an object {input name: pad value}");
  json fixed = tiny("mlp");  // input [-1, 784]: no free sequence dim
  fixed["serving"]["dynamic_batching"] = {{"pad", {{fixed["inputs"][0]["name"].get<std::string>(), 0}}}};
  auto no_seq = parse_manifest(fixed.dump(), "model.json");
  ASSERT_FALSE(no_seq.ok());
  EXPECT_NE(no_seq.error().message().find("must have free batch and sequence dims"), std::string::npos)
      << no_seq.error().message();
}

TEST(Manifest, DynamicBatchingIsOffUnlessAskedForAndRoundTrips) {
  json j = tiny("mlp");
  auto plain = parse_manifest(j.dump(), "model.json");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->serving.dynamic_batching);
  j["serving"]["max_batch"] = 16;
  j["serving"]["dynamic_batching"] = {{"preferred_batch", 8}, {"max_queue_delay_us", 500}};
  auto m = parse_manifest(j.dump(), "model.json");
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_TRUE(m->serving.dynamic_batching);
  EXPECT_EQ(m->serving.preferred_batch, 8u);
  EXPECT_EQ(m->serving.max_queue_delay_us, 500u);
  auto again = parse_manifest(manifest_to_json(*m), "model.json");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->serving.dynamic_batching);
  EXPECT_EQ(again->serving.preferred_batch, 8u);
  EXPECT_EQ(again->serving.max_queue_delay_us, 500u);
  j["serving"]["dynamic_batching"] = json::object();
  auto defaults = parse_manifest(j.dump(), "model.json");
  ASSERT_TRUE(defaults.ok());
  EXPECT_TRUE(defaults->serving.dynamic_batching);
  EXPECT_EQ(defaults->serving.preferred_batch, 0u);
  EXPECT_EQ(parse_manifest(manifest_to_json(*defaults), "model.json")->serving.dynamic_batching, true);

  auto error = [&](json db) {
    j["serving"]["dynamic_batching"] = db;
    auto bad = parse_manifest(j.dump(), "model.json");
    return bad.ok() ? std::string("(parsed)") : bad.error().message();
  };
  EXPECT_EQ(error(true), "model.json: serving.dynamic_batching: must be an object (empty for the defaults)");
  EXPECT_EQ(error({{"preferred_batch", 17}}),
            "model.json: serving.dynamic_batching.preferred_batch: must be an integer in 1..max_batch (16)");
  EXPECT_NE(error({{"max_queue_delay_us", -1}}).find("max_queue_delay_us: must be an integer"), std::string::npos);
  EXPECT_NE(error({{"delay", 1}}).find("serving.dynamic_batching"), std::string::npos);
}

TEST(Manifest, GraphRangesFollowTheDataflow) {
  auto m = parse_manifest(tiny("resnet50").dump(), "model.json");
  ASSERT_TRUE(m.ok());
  auto g = build_graph(*m, "model.json");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->range_inputs({0, g->num_layers()}), std::vector<uint32_t>{0});
  EXPECT_EQ(g->range_outputs({0, g->num_layers()}), std::vector<uint32_t>{g->layer_value(g->num_layers() - 1)});
  // Cutting inside a residual block hands on both the branch and the block's input.
  const auto add = *g->find("layer1.0.add");
  const auto cut = static_cast<uint32_t>(g->producer(add));
  auto handed = g->range_outputs({0, cut});
  EXPECT_EQ(handed.size(), 2u);
  EXPECT_EQ(g->range_inputs({cut, g->num_layers()}), handed);
}

struct Mutation {
  const char* name;
  std::function<void(json&)> edit;
  const char* expect;
};

class ManifestErrors : public ::testing::TestWithParam<Mutation> {};

TEST_P(ManifestErrors, NameTheFileAndField) {
  json j = tiny("mlp");
  GetParam().edit(j);
  auto m = parse_manifest(j.dump(), "dir/model.json");
  ASSERT_FALSE(m.ok()) << GetParam().name;
  EXPECT_NE(m.error().message().find("dir/model.json"), std::string::npos) << m.error().message();
  EXPECT_NE(m.error().message().find(GetParam().expect), std::string::npos) << m.error().message();
}

INSTANTIATE_TEST_SUITE_P(
    All, ManifestErrors,
    ::testing::Values(
        Mutation{"format", [](json& j) { j["format"] = "onnx"; }, "field 'format'"},
        Mutation{"version", [](json& j) { j["format_version"] = 9; }, "format_version"},
        Mutation{"top key", [](json& j) { j["layres"] = json::array(); }, "unknown field 'layres'"},
        Mutation{"name", [](json& j) { j["name"] = "bad name!"; }, "field 'name'"},
        Mutation{"no layers", [](json& j) { j["layers"] = json::array(); }, "field 'layers'"},
        Mutation{"input dtype", [](json& j) { j["inputs"][0]["dtype"] = "complex64"; }, "inputs[0]: field 'dtype'"},
        Mutation{"input shape", [](json& j) { j["inputs"][0]["shape"] = {-1, 0}; }, "inputs[0]: field 'shape'"},
        Mutation{"unknown op", [](json& j) { j["layers"][1]["op"] = "swish"; }, "layers[1] 'relu1': field 'op'"},
        Mutation{"missing input", [](json& j) { j["layers"][2]["inputs"] = {"nowhere"}; },
                 "layers[2] 'fc2' (linear): field 'inputs': 'nowhere' is neither"},
        Mutation{"later input", [](json& j) { j["layers"][0]["inputs"] = {"fc3"}; }, "layers[0] 'fc1' (linear): field 'inputs'"},
        Mutation{"arity", [](json& j) { j["layers"][1]["inputs"] = {"fc1", "fc1"}; }, "takes 1 input(s), got 2"},
        Mutation{"duplicate", [](json& j) { j["layers"][1]["name"] = "fc1"; }, "already used"},
        Mutation{"unknown attr", [](json& j) { j["layers"][0]["attrs"]["in_feature"] = 3; }, "unknown attribute 'in_feature'"},
        Mutation{"missing attr", [](json& j) { j["layers"][0]["attrs"].erase("out_features"); }, "attrs.out_features"},
        Mutation{"attr type", [](json& j) { j["layers"][0]["attrs"]["bias"] = "yes"; }, "attrs.bias"},
        Mutation{"attr range", [](json& j) { j["layers"][0]["attrs"]["in_features"] = 0; }, "attrs.in_features"},
        Mutation{"weights role", [](json& j) { j["layers"][0]["weights"]["gamma"] = "x"; }, "weights.gamma"},
        Mutation{"weights missing", [](json& j) { j["layers"][0]["weights"].erase("weight"); }, "weights.weight"},
        Mutation{"bias when none", [](json& j) { j["layers"][0]["attrs"]["bias"] = false; }, "weights.bias"},
        Mutation{"shape chain", [](json& j) { j["layers"][2]["attrs"]["in_features"] = 31; },
                 "layers[2] 'fc2' (linear): input has shape [2, 32] but dim 1 (in_features) must be 31"},
        Mutation{"output missing", [](json& j) { j["outputs"][0]["name"] = "fc9"; }, "outputs[0]"},
        Mutation{"output shape", [](json& j) { j["outputs"][0]["shape"] = {-1, 5}; }, "outputs[0] 'fc3': declared"},
        Mutation{"serving pct", [](json& j) { j["serving"]["slo_percentile"] = 98; }, "serving.slo_percentile"},
        Mutation{"serving batch", [](json& j) { j["serving"]["max_batch"] = 0; }, "serving.max_batch"},
        Mutation{"autoscale shape", [](json& j) { j["serving"]["autoscale"] = 3; },
                 "serving.autoscale: must be an object"},
        Mutation{"autoscale key", [](json& j) { j["serving"]["autoscale"]["replicas"] = 3; }, "serving.autoscale"},
        Mutation{"autoscale policy", [](json& j) { j["serving"]["autoscale"]["policy"] = "fast"; },
                 "serving.autoscale.policy: 'fast' is not one of"},
        Mutation{"autoscale count", [](json& j) { j["serving"]["autoscale"]["max_replicas"] = -1; },
                 "serving.autoscale.max_replicas: must be an integer in 0..4096"},
        Mutation{"autoscale min over max",
                 [](json& j) {
                   j["serving"]["autoscale"]["min_replicas"] = 4;
                   j["serving"]["autoscale"]["max_replicas"] = 2;
                 },
                 "model.json: serving.autoscale.max_replicas: 2 is below serving.autoscale.min_replicas (4)"},
        Mutation{"autoscale number", [](json& j) { j["serving"]["autoscale"]["headroom"] = "lots"; },
                 "serving.autoscale.headroom: must be a number"},
        Mutation{"autoscale range", [](json& j) { j["serving"]["autoscale"]["headroom"] = 0.5; },
                 "serving.autoscale.headroom: 0.5 is outside 1..10"},
        Mutation{"autoscale duration", [](json& j) { j["serving"]["autoscale"]["idle_timeout"] = 60; },
                 "serving.autoscale.idle_timeout: must be a duration"},
        Mutation{"autoscale duration text", [](json& j) { j["serving"]["autoscale"]["upscale_delay"] = "soon"; },
                 "serving.autoscale.upscale_delay"},
        Mutation{"not object", [](json& j) { j = json::array(); }, "must be a JSON object"}),
    [](const ::testing::TestParamInfo<Mutation>& info) {
      std::string n = info.param.name;
      for (char& c : n)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

TEST(Manifest, DeepNestingIsRefusedNotRecursedInto) {
  json j = tiny("mlp");
  std::string text = j.dump();
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  text.replace(text.find("[-1,16]"), 7, deep);
  auto m = parse_manifest(text, "model.json");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message().find("nested deeper than"), std::string::npos) << m.error().message();
}

TEST(Manifest, HugeAttributesAreRejectedNotWrapped) {
  json j = tiny("mlp");
  j["layers"][0]["attrs"]["in_features"] = 18446744073709551615ull;
  auto m = parse_manifest(j.dump(), "model.json");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message().find("attrs.in_features"), std::string::npos) << m.error().message();
}

TEST(Manifest, NotJson) {
  auto m = parse_manifest("{\"format\": ", "x/model.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().message(), "x/model.json: not valid JSON");
}

TEST(Manifest, ShapeErrorsInDeepLayersNameTheLayer) {
  json j = tiny("bert-base");
  for (auto& l : j["layers"]) {
    if (l["name"] == "encoder.layers.1.linear2") l["attrs"]["in_features"] = 100;
  }
  auto m = parse_manifest(j.dump(), "model.json");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message().find("'encoder.layers.1.linear2' (linear)"), std::string::npos) << m.error().message();
}

TEST(Manifest, InferRangeChecksRealShapes) {
  auto m = parse_manifest(tiny("gpt2").dump(), "model.json");
  ASSERT_TRUE(m.ok());
  auto g = build_graph(*m, "model.json");
  std::vector<std::optional<TensorDesc>> values(g->value_names.size());
  values[0] = TensorDesc{DType::i64, Shape{3, 33}};  // the tiny model has 32 positions
  Status st = infer_range(*m, *g, {0, g->num_layers()}, values);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("sequence length 33 exceeds the 32 positions"), std::string::npos)
      << st.error().message();
  values[0] = TensorDesc{DType::i64, Shape{3, 32}};
  ASSERT_TRUE(infer_range(*m, *g, {0, g->num_layers()}, values).ok());
  EXPECT_EQ(values[g->outputs[0]]->shape, (Shape{3, 32, 100}));
}

}  // namespace manifest_test
}  // namespace ember::gpu
