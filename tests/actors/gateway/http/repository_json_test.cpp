// actors/gateway/http/repository_json: the optional load and distribute bodies (empty means the
// defaults; every bad one gets its exact message; distribute modes are validated here, at the
// edge), and the index and distribute answers.
#include "actors/gateway/http/repository_json.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace ember {
namespace repository_json_test {

using nlohmann::json;

model_state state_of(std::string name, ModelReadiness readiness, std::string reason = "") {
  model_state s;
  s.model.name = std::move(name);
  s.model.version = 1;
  s.state = readiness;
  s.reason = std::move(reason);
  return s;
}

replica_info fetched(std::string node, SourceTier source, std::string peer, uint64_t load_us) {
  replica_info r;
  r.node = std::move(node);
  r.source = source;
  r.source_peer = std::move(peer);
  r.bytes_fetched = 7400;
  r.load_us = load_us;
  return r;
}

std::string load_error(std::string_view body) {
  auto r = parse_load_parameters(body);
  EXPECT_FALSE(r.ok()) << "accepted: " << body;
  return r.ok() ? std::string() : r.error().message();
}

std::string distribute_error(std::string_view body) {
  auto r = parse_distribute_request(body, "mlp");
  EXPECT_FALSE(r.ok()) << "accepted: " << body;
  return r.ok() ? std::string() : r.error().message();
}

TEST(RepositoryJson, AnEmptyOrDefaultLoadBodyAsksForTheManagersDefault) {
  for (std::string_view body : {"", "  \r\n", "{}", R"({"parameters": {}})", R"({"parameters": {"other": 1}})"}) {
    auto r = parse_load_parameters(body);
    ASSERT_TRUE(r.ok()) << body << ": " << r.error().message();
    EXPECT_EQ(*r, 0u) << body;
  }
}

TEST(RepositoryJson, ALoadBodyMayAskForReplicas) {
  auto r = parse_load_parameters(R"({"parameters": {"replicas": 3}})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 3u);
  EXPECT_EQ(*parse_load_parameters(R"({"parameters": {"replicas": 1024}})"), 1024u);
}

TEST(RepositoryJson, EveryKindOfBadLoadBodyGetsItsOwnMessage) {
  EXPECT_EQ(load_error("{"), "not valid JSON");
  EXPECT_EQ(load_error("[]"), "the request body must be a JSON object");
  EXPECT_EQ(load_error(R"({"parameters": 2})"), "field 'parameters' must be an object");
  for (std::string_view replicas : {"0", "1025", "-1", "2.5", "\"2\"", "null"}) {
    EXPECT_EQ(load_error(R"({"parameters": {"replicas": )" + std::string(replicas) + "}}"),
              "parameter 'replicas' must be an integer in 1..1024");
  }
}

TEST(RepositoryJson, AnEmptyDistributeBodyMeansEveryNodeTheLatestVersionAndChains) {
  for (std::string_view body : {"", "\n", "{}"}) {
    auto r = parse_distribute_request(body, "mlp");
    ASSERT_TRUE(r.ok()) << body;
    EXPECT_EQ(r->model, (model_key{"mlp", 0}));
    EXPECT_TRUE(r->nodes.empty());
    EXPECT_EQ(r->mode, DistributeMode::chain);
  }
}

TEST(RepositoryJson, ADistributeBodyNamesNodesModeAndVersion) {
  auto r = parse_distribute_request(R"({"nodes": ["a", "b"], "mode": "unicast", "version": "2"})", "mlp");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->model, (model_key{"mlp", 2}));
  EXPECT_EQ(r->nodes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r->mode, DistributeMode::unicast);
  EXPECT_EQ(parse_distribute_request(R"({"mode": "auto"})", "m")->mode, DistributeMode::automatic);
  EXPECT_EQ(parse_distribute_request(R"({"mode": "chain"})", "m")->mode, DistributeMode::chain);
}

TEST(RepositoryJson, DistributeModesAreValidatedAtTheEdge) {
  EXPECT_EQ(distribute_error(R"({"mode": "multicast"})"), "mode must be chain, unicast or auto, not 'multicast'");
  EXPECT_EQ(distribute_error(R"({"mode": "Chain"})"), "mode must be chain, unicast or auto, not 'Chain'");
  EXPECT_EQ(distribute_error(R"({"mode": ""})"), "mode must be chain, unicast or auto, not ''");
  EXPECT_EQ(distribute_error(R"({"mode": 1})"), "field 'mode' must be \"chain\", \"unicast\" or \"auto\"");
}

TEST(RepositoryJson, EveryOtherKindOfBadDistributeBodyGetsItsOwnMessage) {
  EXPECT_EQ(distribute_error("{nodes}"), "not valid JSON");
  EXPECT_EQ(distribute_error(R"(["a"])"), "the request body must be a JSON object");
  EXPECT_EQ(distribute_error(R"({"nodes": "a"})"), "field 'nodes' must be a list of node names");
  EXPECT_EQ(distribute_error(R"({"nodes": ["a", 2]})"), "field 'nodes' must hold node names");
  EXPECT_EQ(distribute_error(R"({"nodes": [""]})"), "field 'nodes' must hold node names");
  for (std::string_view version : {"2", "\"\"", "\"2a\"", "\"-1\"", "\"4294967296\"", "\" 2\""}) {
    EXPECT_EQ(distribute_error(R"({"version": )" + std::string(version) + "}"),
              "field 'version' must be a string of digits");
  }
}

TEST(RepositoryJson, TheIndexSaysReadyLoadingOrUnavailableWithReasons) {
  const model_state ready = state_of("mlp", ModelReadiness::ready);
  const model_state loading = state_of("mlp", ModelReadiness::loading);
  const model_state unloaded = state_of("bert", ModelReadiness::unloaded);
  const model_state failed = state_of("broken", ModelReadiness::failed, "weights.safetensors: truncated");
  EXPECT_EQ(repository_state(ready), "READY");
  EXPECT_EQ(repository_state(loading), "LOADING");
  EXPECT_EQ(repository_state(unloaded), "UNAVAILABLE");
  EXPECT_EQ(repository_state(failed), "UNAVAILABLE");
  EXPECT_EQ(json::parse(render_repository_index({ready, failed})), json::parse(R"([
      {"name": "mlp", "version": "1", "state": "READY"},
      {"name": "broken", "version": "1", "state": "UNAVAILABLE", "reason": "weights.safetensors: truncated"}])"));
  EXPECT_EQ(render_repository_index({}), "[]");
}

TEST(RepositoryJson, ADistributionSaysWhereEachNodeGotItsBytesAndAnEvictionSaysEvicted) {
  distribute_result r;
  r.model = {"mlp", 2};
  r.mode = DistributeMode::unicast;
  r.blob_bytes = 7400;
  r.seconds = 0.5;
  r.chains = {"manager -> a"};
  r.nodes = {fetched("a", SourceTier::peer, "b", 250'000), fetched("c", SourceTier::repository, "", 1'000'000)};
  r.errors = {"d: unreachable"};
  EXPECT_EQ(json::parse(render_distribute_result(r)), json::parse(R"({
      "model": "mlp", "version": "2", "mode": "unicast", "bytes": 7400, "seconds": 0.5,
      "chains": ["manager -> a"], "errors": ["d: unreachable"],
      "nodes": [{"node": "a", "source": "peer:b", "bytes": 7400, "seconds": 0.25},
                {"node": "c", "source": "repository", "bytes": 7400, "seconds": 1.0}]})"));
  r.evicted = true;
  const json evicted = json::parse(render_distribute_result(r));
  EXPECT_EQ(evicted["mode"], "evict");
  EXPECT_EQ(evicted["nodes"][0]["source"], "evicted");
}

}  // namespace repository_json_test
}  // namespace ember
