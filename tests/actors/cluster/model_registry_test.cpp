// ModelRegistry and the readiness lifecycle (plain C++, no actors): every legal move of
// next_readiness(), every illegal one rejected by name, and the registry's flows checked against
// its invariants after each step.
#include "actors/cluster/model_registry.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "actors/cluster/model_repository.hpp"
#include "gpu/profiler.hpp"
#include "gpu/shadow_split.hpp"
#include "model/model_profile.hpp"
#include "placement/shadow_profile.hpp"
#include "tests/gpu/test_util.hpp"
#include "transport/checksum.hpp"

namespace ember {
namespace model_registry_test {

/// A node's answer: a replica on `device`.
replica_info on(const std::string& device) { return {{}, "n", device, SourceTier::repository, "", 0, 0}; }

using R = ModelReadiness;
using E = ReadinessEvent;

constexpr R kStates[] = {R::unloaded, R::loading, R::ready, R::failed};
constexpr E kEvents[] = {E::load_started,      E::replica_ready,  E::load_failed,      E::found_invalid,
                         E::last_replica_lost, E::scaled_to_zero, E::unload_requested, E::repaired};

TEST(ModelReadiness, EveryMoveDrawnInTheHeaderIsLegalAndEveryOtherIsRejectedByName) {
  // (from, event) -> to, exactly the header's diagram.
  const std::map<std::pair<R, E>, R> legal = {
      {{R::unloaded, E::load_started}, R::loading},     {{R::failed, E::load_started}, R::loading},
      {{R::loading, E::load_started}, R::loading},      {{R::ready, E::load_started}, R::ready},
      {{R::unloaded, E::replica_ready}, R::ready},      {{R::loading, E::replica_ready}, R::ready},
      {{R::ready, E::replica_ready}, R::ready},         {{R::failed, E::replica_ready}, R::ready},
      {{R::loading, E::load_failed}, R::unloaded},      {{R::ready, E::last_replica_lost}, R::unloaded},
      {{R::failed, E::repaired}, R::unloaded},          {{R::unloaded, E::found_invalid}, R::failed},
      {{R::loading, E::found_invalid}, R::failed},      {{R::ready, E::found_invalid}, R::failed},
      {{R::failed, E::found_invalid}, R::failed},       {{R::unloaded, E::unload_requested}, R::unloaded},
      {{R::loading, E::unload_requested}, R::unloaded}, {{R::ready, E::unload_requested}, R::unloaded},
      {{R::failed, E::unload_requested}, R::unloaded},  {{R::ready, E::scaled_to_zero}, R::unloaded},
  };
  size_t illegal = 0;
  for (R from : kStates) {
    for (E event : kEvents) {
      auto next = next_readiness(from, event);
      auto it = legal.find({from, event});
      if (it != legal.end()) {
        ASSERT_TRUE(next.ok()) << to_string(from) << " --" << to_string(event) << "--> " << next.error().message();
        EXPECT_EQ(*next, it->second) << to_string(from) << " --" << to_string(event) << "-->";
      } else {
        ++illegal;
        ASSERT_FALSE(next.ok()) << to_string(from) << " --" << to_string(event) << "--> was allowed";
        EXPECT_EQ(next.error().code(), ErrorCode::internal);
        EXPECT_EQ(next.error().message(), "illegal readiness move: " + std::string(to_string(from)) + " --" +
                                              std::string(to_string(event)) + "-->");
      }
    }
  }
  EXPECT_EQ(illegal, 4 * 8 - legal.size());
  EXPECT_EQ(illegal, 12u);
}

RepositoryEntry entry(const std::string& name, uint32_t version, const std::string& error = {}) {
  return RepositoryEntry{{name, version}, "/repo/" + name, "{}", 1 << 20, error};
}

/// A registry holding m/1 and m/2, and a waiter log.
struct Fixture {
  ModelRegistry r;
  std::vector<std::string> answers;
  Fixture() { (void)r.apply_scan("", {entry("m", 1), entry("m", 2)}); }
  ModelWaiter waiter() {
    return [this](const Result<model_state>& s) {
      answers.push_back(s.ok() ? std::string(to_string(s->state)) : s.error().message());
    };
  }
  ModelVersion& v(uint32_t version) { return *r.find({"m", version}); }
  void check() {
    auto s = r.check();
    EXPECT_TRUE(s.ok()) << s.error().message();
    EXPECT_EQ(r.illegal_moves(), 0u);
  }
};

TEST(ModelRegistry, VersionZeroMeansTheHighestAndUnknownNamesFindNothing) {
  Fixture f;
  ASSERT_NE(f.r.find({"m", 0}), nullptr);
  EXPECT_EQ(f.r.find({"m", 0})->key().version, 2u);
  EXPECT_EQ(f.r.find({"m", 1})->key().version, 1u);
  EXPECT_EQ(f.r.find({"m", 3}), nullptr);
  EXPECT_EQ(f.r.find({"n", 0}), nullptr);
  f.check();
}

TEST(ModelRegistry, AColdStartGoesLoadingThenReadyAndAnswersItsWaiters) {
  Fixture f;
  auto& v = f.v(1);
  EXPECT_EQ(v.state.state, R::unloaded);
  ASSERT_EQ(f.r.want({"m", 1}, 0, false, f.waiter()), (model_key{"m", 1}));
  const uint64_t attempt = f.r.load_started(v, 7);
  EXPECT_EQ(v.state.state, R::loading);
  f.check();
  EXPECT_FALSE(f.r.replica_ready({"m", 1}, 7, attempt + 1, on("gpu0")));  // another attempt's answer: stale
  EXPECT_FALSE(f.r.replica_ready({"m", 1}, 8, attempt, on("gpu0")));      // another node's: stale
  ASSERT_TRUE(f.r.replica_ready({"m", 1}, 7, attempt, on("gpu0")));
  EXPECT_EQ(v.state.state, R::ready);
  EXPECT_EQ(v.state.replicas, 1u);
  EXPECT_EQ(f.r.replicas_on(7), (std::vector<model_key>{{"m", 1}}));
  EXPECT_EQ(f.r.replicas_per_node().at(7), 1u);
  f.r.answer_waiters(v);
  EXPECT_EQ(f.answers, (std::vector<std::string>{"ready"}));
  f.check();
}

TEST(ModelRegistry, RetiringTheLastReplicaScalesToZeroNotOnPurposeAndAReinstatedOneServesAgain) {
  Fixture f;
  auto& v = f.v(1);
  ASSERT_TRUE(f.r.want({"m", 1}, 2, true, f.waiter()));
  const uint64_t a = f.r.load_started(v, 1), b = f.r.load_started(v, 2);
  ASSERT_TRUE(f.r.replica_ready({"m", 1}, 1, a, on("gpu0")));
  ASSERT_TRUE(f.r.replica_ready({"m", 1}, 2, b, on("gpu1")));
  EXPECT_EQ(f.r.retire({"m", 1}, 3), std::nullopt) << "no replica on node 3";
  EXPECT_EQ(f.r.retire({"m", 1}, 1), "gpu0");
  EXPECT_EQ(v.state.state, R::ready);
  EXPECT_EQ(v.wanted, 1u) << "a retired replica is not wanted back";
  EXPECT_EQ(f.r.retire({"m", 1}, 2), "gpu1");
  EXPECT_EQ(v.state.state, R::unloaded);
  EXPECT_FALSE(v.state.explicitly_unloaded) << "the next request places one again";
  EXPECT_EQ(v.wanted, 0u);
  f.check();
  ASSERT_TRUE(f.r.reinstate({"m", 1}, 2, "gpu1"));
  EXPECT_EQ(v.state.state, R::ready);
  EXPECT_EQ(v.replicas, (std::map<uint64_t, std::string>{{2, "gpu1"}}));
  f.check();
}

TEST(ModelRegistry, ALoadThatFailsOnANodeExcludesItAndLeavesTheModelUnloadedForAnotherTry) {
  Fixture f;
  auto& v = f.v(1);
  ASSERT_EQ(f.r.want({"m", 1}, 0, false, f.waiter()), (model_key{"m", 1}));
  const uint64_t attempt = f.r.load_started(v, 3);
  EXPECT_EQ(f.r.load_failed({"m", 1}, 3, attempt, out_of_memory("no room")),
            ModelRegistry::LoadFailure::retry_elsewhere);
  EXPECT_EQ(v.state.state, R::unloaded);
  EXPECT_EQ(v.failed_on, (std::set<uint64_t>{3}));
  EXPECT_TRUE(f.answers.empty());  // the waiter waits for the next node
  EXPECT_EQ(f.r.load_failed({"m", 1}, 3, attempt, out_of_memory("again")), ModelRegistry::LoadFailure::stale);
  f.check();
}

TEST(ModelRegistry, BadBytesFailTheWaitersAndTheModelOnceNoOtherLoadIsLeft) {
  Fixture f;
  auto& v = f.v(1);
  ASSERT_EQ(f.r.want({"m", 1}, 0, false, f.waiter()), (model_key{"m", 1}));
  const uint64_t a = f.r.load_started(v, 1);
  const uint64_t b = f.r.load_started(v, 2);
  EXPECT_EQ(f.r.load_failed({"m", 1}, 1, a, corrupt("bad digest")), ModelRegistry::LoadFailure::model_is_bad);
  EXPECT_EQ(f.answers, (std::vector<std::string>{"bad digest"}));
  EXPECT_EQ(v.state.state, R::loading);  // node 2 still loads
  f.check();
  EXPECT_EQ(f.r.load_failed({"m", 1}, 2, b, corrupt("bad digest too")), ModelRegistry::LoadFailure::model_is_bad);
  EXPECT_EQ(v.state.state, R::failed);
  EXPECT_EQ(v.state.reason, "bad digest too");
  f.check();
  // A later try may still succeed (the bytes were corrupted in transit).
  const uint64_t c = f.r.load_started(v, 2);
  EXPECT_EQ(v.state.state, R::loading);
  ASSERT_TRUE(f.r.replica_ready({"m", 1}, 2, c, on("gpu0")));
  EXPECT_EQ(v.state.state, R::ready);
  EXPECT_TRUE(v.state.reason.empty());
  f.check();
}

TEST(ModelRegistry, LosingTheLastReplicaGoesUnloadedOrLoadingWhenALoadRunsElsewhere) {
  Fixture f;
  auto& v = f.v(1);
  ASSERT_TRUE(f.r.replica_ready({"m", 1}, 1, f.r.load_started(v, 1), on("gpu0")));
  auto& w = f.v(2);
  ASSERT_TRUE(f.r.replica_ready({"m", 2}, 1, f.r.load_started(w, 1), on("gpu0")));
  (void)f.r.load_started(w, 2);  // a second replica of m/2 is on its way
  EXPECT_EQ(w.state.state, R::ready);
  EXPECT_EQ(f.r.node_lost(1), (std::set<model_key>{{"m", 1}, {"m", 2}}));
  EXPECT_EQ(v.state.state, R::unloaded);
  EXPECT_EQ(w.state.state, R::loading);
  f.check();
  EXPECT_EQ(f.r.node_lost(2), (std::set<model_key>{{"m", 2}}));
  EXPECT_EQ(w.state.state, R::unloaded);  // the load died with its node
  f.check();
  EXPECT_TRUE(f.r.node_lost(3).empty());
}

TEST(ModelRegistry, ReplacementsWantOneMoreReplicaExceptForUnloadedOrInvalidModels) {
  Fixture f;
  auto& v = f.v(1);
  ASSERT_TRUE(f.r.replica_ready({"m", 1}, 1, f.r.load_started(v, 1), on("gpu0")));
  auto changed = f.r.node_lost(1);
  EXPECT_EQ(f.r.want_replacements(changed), (std::vector<model_key>{{"m", 1}}));
  EXPECT_EQ(v.wanted, 1u);
  (void)f.r.unload({"m", 1});
  EXPECT_TRUE(f.r.want_replacements(changed).empty());
  f.check();
}

TEST(ModelRegistry, AScanMarksInvalidFilesFailedAndARepairingScanRestoresWhatItKept) {
  Fixture f;
  auto& v = f.v(1);
  ASSERT_TRUE(f.r.replica_ready({"m", 1}, 1, f.r.load_started(v, 1), on("gpu0")));
  auto changes = f.r.apply_scan("m", {entry("m", 1, "weights.safetensors: truncated"), entry("m", 2)});
  EXPECT_EQ(changes.changed, (std::set<model_key>{{"m", 1}, {"m", 2}}));
  EXPECT_EQ(v.state.state, R::failed);
  EXPECT_EQ(v.state.reason, "weights.safetensors: truncated");
  EXPECT_EQ(v.state.replicas, 1u);  // still recorded, never placed
  f.check();
  // While invalid, nothing moves it but a repair.
  EXPECT_TRUE(f.r.unload({"m", 1}).size() == 1);
  EXPECT_EQ(v.state.state, R::failed);
  ASSERT_TRUE(f.r.adopt({"m", 1}, 4));
  EXPECT_EQ(v.state.state, R::failed);
  f.check();
  (void)f.r.apply_scan("m", {entry("m", 1), entry("m", 2)});
  EXPECT_EQ(v.state.state, R::ready);  // repaired, and node 4's replica counts again
  EXPECT_TRUE(v.state.reason.empty());
  f.check();
}

TEST(ModelRegistry, AScanForgetsVanishedVersionsUnlessTheyServeAndFailsTheirWaiters) {
  Fixture f;
  ASSERT_EQ(f.r.want({"m", 2}, 0, false, f.waiter()), (model_key{"m", 2}));
  ASSERT_TRUE(f.r.replica_ready({"m", 1}, 1, f.r.load_started(f.v(1), 1), on("gpu0")));
  auto changes = f.r.apply_scan("m", {});
  EXPECT_EQ(changes.removed, (std::vector<model_key>{{"m", 2}}));
  EXPECT_EQ(f.answers, (std::vector<std::string>{"model m/2 was removed"}));
  ASSERT_NE(f.r.find({"m", 1}), nullptr);  // it serves: kept
  EXPECT_EQ(f.r.find({"m", 2}), nullptr);
  // A scan of another model leaves this one alone.
  EXPECT_TRUE(f.r.apply_scan("other", {}).removed.empty());
  EXPECT_EQ(f.r.entries("m").size(), 1u);
  f.check();
}

TEST(ModelRegistry, UnloadDropsEveryVersionOfTheNameAndAnExplicitLoadLiftsIt) {
  Fixture f;
  auto& v = f.v(1);
  ASSERT_TRUE(f.r.replica_ready({"m", 1}, 5, f.r.load_started(v, 5), on("gpu1")));
  (void)f.r.load_started(f.v(2), 6);
  ASSERT_EQ(f.r.want({"m", 2}, 0, false, f.waiter()), (model_key{"m", 2}));
  auto gone = f.r.unload({"m", 0});
  ASSERT_EQ(gone.size(), 2u);
  EXPECT_EQ(gone[0].replicas, (std::map<uint64_t, std::string>{{5, "gpu1"}}));
  EXPECT_EQ(gone[0].weights_bytes, 1u << 20);
  EXPECT_EQ(gone[0].state.state, R::unloaded);
  EXPECT_TRUE(gone[0].state.explicitly_unloaded);
  EXPECT_EQ(gone[0].state.reason, "unloaded by request");
  EXPECT_EQ(f.answers, (std::vector<std::string>{"model m/2 was unloaded"}));
  EXPECT_TRUE(f.r.unload({"n", 0}).empty());
  f.check();
  // Scale from zero is refused; an explicit load lifts the unload.
  EXPECT_FALSE(f.r.want({"m", 1}, 0, false, f.waiter()).has_value());
  EXPECT_EQ(f.answers.back(), "model m/1 was unloaded; load it with POST /v2/repository/models/m/load");
  EXPECT_EQ(f.r.want({"m", 1}, 2, true, f.waiter()), (model_key{"m", 1}));
  EXPECT_FALSE(v.state.explicitly_unloaded);
  EXPECT_EQ(v.wanted, 2u);
}

TEST(ModelRegistry, ARequestForAReplicaIsAnsweredAtOnceWhenItCanBeOrElseWaits) {
  Fixture f;
  EXPECT_FALSE(f.r.want({"n", 0}, 0, false, f.waiter()).has_value());
  EXPECT_FALSE(f.r.want({"m", 7}, 0, true, f.waiter()).has_value());
  (void)f.r.apply_scan("bad", {entry("bad", 1, "model.json: no layers")});
  EXPECT_FALSE(f.r.want({"bad", 0}, 0, true, f.waiter()).has_value());
  EXPECT_EQ(f.answers, (std::vector<std::string>{"unknown model 'n'", "the repository has no model 'm' version 7",
                                                 "model bad/1 cannot load: model.json: no layers"}));
  f.answers.clear();
  ASSERT_TRUE(f.r.replica_ready({"m", 2}, 1, f.r.load_started(f.v(2), 1), on("gpu0")));
  EXPECT_FALSE(f.r.want({"m", 0}, 0, false, f.waiter()).has_value());       // serving: answered
  EXPECT_EQ(f.r.want({"m", 0}, 2, true, f.waiter()), (model_key{"m", 2}));  // wants a second one
  EXPECT_EQ(f.answers, (std::vector<std::string>{"ready"}));
  EXPECT_EQ(f.v(2).waiters.size(), 1u);
  f.check();
}

TEST(ModelRegistry, APlacementRoundStartsOnlyForAValidIdleVersionThatLacksReplicas) {
  Fixture f;
  EXPECT_EQ(f.r.to_place({"m", 1}), &f.v(1));
  EXPECT_EQ(f.r.to_place({"m", 0}), nullptr);  // placement names exact versions
  ASSERT_EQ(f.r.want({"m", 1}, 0, false, f.waiter()), (model_key{"m", 1}));
  const uint64_t attempt = f.r.load_started(f.v(1), 1);
  EXPECT_EQ(f.r.to_place({"m", 1}), nullptr);  // a load is in flight
  ASSERT_TRUE(f.r.replica_ready({"m", 1}, 1, attempt, on("gpu0")));
  EXPECT_TRUE(f.answers.empty());
  EXPECT_EQ(f.r.to_place({"m", 1}), nullptr);  // it has what it wants: its waiter is answered
  EXPECT_EQ(f.answers, (std::vector<std::string>{"ready"}));
  // No node can take m/2: its waiters hear why, and the next round tries every node again.
  ASSERT_EQ(f.r.want({"m", 2}, 0, false, f.waiter()), (model_key{"m", 2}));
  f.v(2).failed_on = {1};
  f.r.placement_failed(f.v(2), unavailable("cannot place model m/2: no room"));
  EXPECT_EQ(f.answers.back(), "cannot place model m/2: no room");
  EXPECT_TRUE(f.v(2).failed_on.empty());
  (void)f.r.apply_scan("m", {entry("m", 1), entry("m", 2, "bad")});
  EXPECT_EQ(f.r.to_place({"m", 2}), nullptr);  // invalid files are never placed
  f.check();
}

TEST(ModelRegistry, AfterAJoinIdleModelsWithWaitersOrTooFewReplicasAreOfferedAgain) {
  Fixture f;
  f.v(1).failed_on = {1, 2};
  ASSERT_EQ(f.r.want({"m", 1}, 0, false, f.waiter()), (model_key{"m", 1}));
  f.v(2).wanted = 1;
  (void)f.r.load_started(f.v(2), 1);  // busy: not offered
  EXPECT_EQ(f.r.wanting_placement(), (std::vector<model_key>{{"m", 1}}));
  EXPECT_TRUE(f.v(1).failed_on.empty());
  f.check();
}

}  // namespace model_registry_test
}  // namespace ember

namespace ember {
namespace model_repository_test {

std::string sha_hex(const uint8_t* data, uint64_t bytes) {
  return transport::to_hex(transport::Sha256::of(data, bytes));
}

TEST(ModelRepository, ReadsAVersionsProfileAndRefusesAStaleOne) {
  gpu::testing::TempDir root;
  auto gpt = gpu::testing::tiny_model("gpt2", root / "gpt2/1");
  gpu::testing::tiny_model("mlp", root / "mlp/1");
  auto device = gpu::testing::sim_device();
  auto profile = gpu::measure_profile(gpt, *device, {1}, 8, sha_hex);
  ASSERT_TRUE(profile.ok()) << profile.error().to_string();
  ASSERT_TRUE(gpu::write_profile(root / "gpt2/1", *profile).ok());
  ASSERT_TRUE(gpu::write_profile(root / "mlp/1", *profile).ok());  // another model's profile

  auto entries = scan_repository(root.path());
  ASSERT_EQ(entries.size(), 2u);
  const RepositoryEntry& g = entries[0];
  ASSERT_EQ(g.key, (model_key{"gpt2", 1}));
  ASSERT_TRUE(g.profile) << g.profile_error;
  EXPECT_EQ(g.profile->layers.size(), gpt->num_layers());
  EXPECT_EQ(g.profile->layers[2].sha256, profile->layers[2].sha256);
  // What model-level scaling weighs the rate by: one replica's rows a second within the declared SLO.
  const auto& serving = gpt->manifest().serving;
  ASSERT_GT(serving.slo_deadline_us, 0u) << "premise: the tiny model declares an SLO";
  EXPECT_GT(g.capacity_rps, 0);
  EXPECT_DOUBLE_EQ(g.capacity_rps, placement::replica_capacity(*g.profile, static_cast<double>(serving.slo_deadline_us),
                                                         serving.dynamic_batching ? serving.max_batch : 1));
  const RepositoryEntry& m = entries[1];
  EXPECT_TRUE(m.error.empty()) << "a stale profile does not make the model invalid";
  EXPECT_FALSE(m.profile);
  EXPECT_NE(m.profile_error.find("stale"), std::string::npos) << m.profile_error;
  EXPECT_EQ(m.capacity_rps, 0) << "no capacity from a stale profile";
}

TEST(ModelRepository, WorkflowsAreFoldersWithWorkflowJsonParsedAndTheirErrorsKept) {
  gpu::testing::TempDir root;
  gpu::testing::tiny_model("mlp", root / "mlp/1");
  auto write = [&](const std::string& rel, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root / rel).parent_path());
    std::ofstream(root / rel) << text;
  };
  const std::string good =
      R"({"inputs": ["x"], "steps": [{"name": "a", "model": "mlp", "inputs": {"input": "x"}}],
          "outputs": {"y": "a.fc3"}})";
  write("pipeline/workflow.json", good);
  write("broken/workflow.json", R"({"inputs": ["x"], "steps": []})");
  write("mlp/workflow.json", good);  // beside a model: refused

  auto workflows = scan_workflows(root.path());
  ASSERT_EQ(workflows.size(), 3u);
  EXPECT_EQ(workflows[0].name, "broken");
  EXPECT_NE(workflows[0].error.find("broken/workflow.json"), std::string::npos) << workflows[0].error;
  EXPECT_EQ(workflows[1].name, "mlp");
  EXPECT_NE(workflows[1].error.find("also holds a model"), std::string::npos) << workflows[1].error;
  EXPECT_EQ(workflows[2].name, "pipeline");
  EXPECT_TRUE(workflows[2].error.empty()) << workflows[2].error;
  EXPECT_EQ(workflows[2].json, good);
  // A workflow folder is no model: the models are as before.
  auto models = scan_repository(root.path());
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].key, (model_key{"mlp", 1}));
}

}  // namespace model_repository_test
}  // namespace ember
