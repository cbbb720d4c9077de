// actors/gateway/model_catalog: a version's manifest is parsed once (again only when it changes),
// its metadata body rendered again only when its signature or its model's version list changed; its
// generation section (when it has one) parsed with it.
#include "actors/gateway/model_catalog.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/architectures.hpp"

namespace ember {
namespace model_catalog_test {

using nlohmann::json;

std::string manifest(const std::string& arch) {
  return gpu::manifest_to_json(gpu::build_architecture(arch, {true, 5, {}})->manifest());
}

TEST(ModelCatalog, AVersionsManifestIsParsedOnceHoweverOftenItsEntryArrives) {
  ModelCatalog c;
  const std::string mlp = manifest("mlp");
  c.put({"mlp", 1}, mlp);
  const auto body = c.metadata({"mlp", 1});
  ASSERT_TRUE(body);
  for (int i = 0; i < 100; ++i) c.put({"mlp", 1}, mlp);  // routing updates that moved replicas only
  EXPECT_EQ(c.metadata({"mlp", 1}), body);
  EXPECT_EQ(c.parses(), 1u);
  EXPECT_EQ(c.renders(), 1u);
  EXPECT_EQ(json::parse(*body)["inputs"][0]["shape"], json::parse("[-1, 16]"));
}

TEST(ModelCatalog, AChangedManifestIsParsedAgainAndOnlyThatVersionRendered) {
  ModelCatalog c;
  c.put({"m", 1}, manifest("mlp"));
  c.put({"m", 2}, manifest("mlp"));
  const auto v1 = c.metadata({"m", 1});
  const auto v2 = c.metadata({"m", 2});
  c.put({"m", 2}, manifest("bert-base"));
  EXPECT_EQ(c.parses(), 3u);
  EXPECT_EQ(c.metadata({"m", 1}), v1) << "version 1 did not change";
  const auto changed = c.metadata({"m", 2});
  ASSERT_NE(changed, v2);
  EXPECT_EQ(json::parse(*changed)["inputs"][0]["name"], "input_ids");
  EXPECT_EQ(c.renders(), 3u);
}

TEST(ModelCatalog, AVersionComingOrGoingRerendersItsSiblingsWithoutParsingThem) {
  ModelCatalog c;
  c.put({"m", 1}, manifest("mlp"));
  c.put({"other", 1}, manifest("mlp"));
  const auto other = c.metadata({"other", 1});
  EXPECT_EQ(json::parse(*c.metadata({"m", 1}))["versions"], json::parse(R"(["1"])"));
  c.put({"m", 3}, manifest("mlp"));
  EXPECT_EQ(json::parse(*c.metadata({"m", 1}))["versions"], json::parse(R"(["1", "3"])"));
  EXPECT_EQ(json::parse(*c.metadata({"m", 3}))["versions"], json::parse(R"(["1", "3"])"));
  c.remove({"m", 1});
  EXPECT_FALSE(c.metadata({"m", 1}));
  EXPECT_EQ(json::parse(*c.metadata({"m", 3}))["versions"], json::parse(R"(["3"])"));
  EXPECT_EQ(c.metadata({"other", 1}), other) << "another model was rendered again";
  EXPECT_EQ(c.parses(), 3u);
  EXPECT_EQ(c.size(), 2u);
}

TEST(ModelCatalog, AManifestThatDoesNotParseStillHasMetadataWithNoTensors) {
  ModelCatalog c;
  c.put({"broken", 1}, "{not json");
  const json j = json::parse(*c.metadata({"broken", 1}));
  EXPECT_EQ(j["name"], "broken");
  EXPECT_EQ(j["inputs"], json::array());
  EXPECT_EQ(j["outputs"], json::array());
  EXPECT_FALSE(c.metadata({"unknown", 1}));
}

TEST(ModelCatalog, AVersionWithAGenerationSectionIsGenerative) {
  gpu::GenerationSpec spec;
  spec.family = "gpt2";
  spec.context_length = 128;
  spec.vocab_size = 50;
  spec.num_kv_layers = 2;
  spec.num_kv_heads = 2;
  spec.head_dim = 8;
  spec.tokenizer = "tokenizer.json";
  nlohmann::ordered_json section;
  gpu::generation_to_json(spec, section);
  json with = json::parse(manifest("mlp"));
  with["generation"] = json::parse(section.dump());
  json broken = with;
  broken["generation"]["context_length"] = -1;

  ModelCatalog c;
  c.put({"lm", 1}, with.dump());
  c.put({"plain", 1}, manifest("mlp"));
  c.put({"bad", 1}, broken.dump());
  ASSERT_TRUE(c.generation({"lm", 1}));
  EXPECT_EQ(*c.generation({"lm", 1}), spec);
  EXPECT_FALSE(c.generation({"plain", 1}));
  EXPECT_FALSE(c.generation({"bad", 1}));  // does not parse: not served as generative
  EXPECT_FALSE(c.generation({"unknown", 1}));
  c.remove({"lm", 1});
  EXPECT_FALSE(c.generation({"lm", 1}));
}

}  // namespace model_catalog_test
}  // namespace ember
