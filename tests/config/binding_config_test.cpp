// The `binding:` section (config/binding_config.cpp), read through parse_cluster_config and checked
// through validate(), as processes read it. deploy/ember.yaml's binding: section is checked against
// the defaults by cluster_config_test.cpp (TheExampleFileIsTheDefaults).
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "config/cluster_config.hpp"
#include "tests/config/bad_case.hpp"

namespace ember {
namespace binding_config_test {

void expect_binding_defaults(const BindingConfig& b) {
  EXPECT_EQ(b.mode, BindingMode::late);
  EXPECT_EQ(b.scheduler, SwapScheduler::torpor);
  EXPECT_EQ(b.eviction, EvictionRule::torpor);
  EXPECT_EQ(b.group_bytes, 0u);
  EXPECT_DOUBLE_EQ(b.heavy_factor, 1.3);
  EXPECT_DOUBLE_EQ(b.slo_factor, 2.0);
  EXPECT_EQ(b.slo_deadline_us, 0u);
  EXPECT_DOUBLE_EQ(b.slo_percentile, 0.98);
  EXPECT_EQ(b.workspace_bytes, 0u);
  EXPECT_EQ(b.window_us, 10'000'000u);
  EXPECT_EQ(b.repartition_us, 1'000'000u);
  EXPECT_EQ(b.alpha_period_us, 10'000'000u);
  EXPECT_EQ(b.seed, 1u);
  EXPECT_TRUE(b.inline_runs);
  EXPECT_EQ(b.bodies, BodyScalingMode::free);
  EXPECT_FALSE(b.shadows);
  EXPECT_FALSE(b.adaptive_batching);
  EXPECT_EQ(b.burst_window_us, 100'000u);
  EXPECT_EQ(b.scaling_period_us, 1'000'000u);
}

Result<BindingConfig> parse_binding(const std::string& body) {
  auto c = parse_cluster_config("binding:\n" + body, "ember.yaml");
  if (!c.ok()) return c.error();
  return c->binding;
}

TEST(BindingConfig, AbsentOrEmptySectionGivesDefaults) {
  for (const char* yaml : {"", "binding:\n", "binding: {}\n", "binding: ~\n", "node:\n  max_queue: 5\n"}) {
    auto c = parse_cluster_config(yaml, "ember.yaml");
    ASSERT_TRUE(c.ok()) << yaml << ": " << c.error().message();
    expect_binding_defaults(c->binding);
  }
  expect_binding_defaults(BindingConfig{});
  EXPECT_TRUE(validate(ClusterConfig{}, "defaults").ok());
}

TEST(BindingConfig, ReadsEveryKey) {
  auto b = parse_binding(R"(
  mode: pinned
  scheduler: random
  eviction: lru
  group: 4MiB
  heavy_factor: 1.5
  slo_factor: 3
  slo_deadline: 200ms
  slo_percentile: 0.99
  workspace: 512MiB
  window: 20s
  repartition: 2s
  alpha_period: 40s
  seed: 42
  inline: false
)");
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(b->mode, BindingMode::pinned);
  EXPECT_EQ(b->scheduler, SwapScheduler::random);
  EXPECT_EQ(b->eviction, EvictionRule::lru);
  EXPECT_EQ(b->group_bytes, 4ull << 20);
  EXPECT_DOUBLE_EQ(b->heavy_factor, 1.5);
  EXPECT_DOUBLE_EQ(b->slo_factor, 3.0);
  EXPECT_EQ(b->slo_deadline_us, 200'000u);
  EXPECT_DOUBLE_EQ(b->slo_percentile, 0.99);
  EXPECT_EQ(b->workspace_bytes, 512ull << 20);
  EXPECT_EQ(b->window_us, 20'000'000u);
  EXPECT_EQ(b->repartition_us, 2'000'000u);
  EXPECT_EQ(b->alpha_period_us, 40'000'000u);
  EXPECT_EQ(b->seed, 42u);
  EXPECT_FALSE(b->inline_runs);
}

TEST(BindingConfig, ReadsTheBurstKeys) {
  auto b = parse_binding(R"(
  bodies: model_level
  shadows: true
  adaptive_batching: true
  burst_window: 250ms
  scaling_period: 10s
)");
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(b->bodies, BodyScalingMode::model_level);
  EXPECT_TRUE(b->shadows);
  EXPECT_TRUE(b->adaptive_batching);
  EXPECT_EQ(b->burst_window_us, 250'000u);
  EXPECT_EQ(b->scaling_period_us, 10'000'000u);
}

TEST(BindingConfig, GroupAutoAndZeroBothMeanMeasured) {
  for (const char* group : {"auto", "0", "0MiB"}) {
    auto b = parse_binding(std::string("  group: ") + group + "\n");
    ASSERT_TRUE(b.ok()) << group << ": " << b.error().message();
    EXPECT_EQ(b->group_bytes, 0u) << group;
  }
}

TEST(BindingConfig, BoundariesThatPass) {
  struct Good {
    const char* body;
    const char* what;
  };
  const Good cases[] = {{"  group: 64KiB\n", "smallest group"},
                        {"  group: 1GiB\n", "largest group"},
                        {"  heavy_factor: 1\n", ""},
                        {"  heavy_factor: 100\n", ""},
                        {"  slo_factor: 1\n", ""},
                        {"  slo_factor: 1000\n", ""},
                        {"  slo_factor: 1e3\n", "exponent"},
                        {"  slo_deadline: 1ms\n", ""},
                        {"  slo_deadline: 24h\n", ""},
                        {"  slo_percentile: 0.5\n", ""},
                        {"  slo_percentile: 0.9999\n", ""},
                        {"  workspace: 1\n", "any size"},
                        {"  window: 1ms\n  repartition: 1ms\n  alpha_period: 1ms\n", "all at the minimum"},
                        {"  window: 24h\n  repartition: 24h\n  alpha_period: 24h\n", "all at the maximum"},
                        {"  window: 3s\n  repartition: 3s\n", "repartition equal to window"},
                        {"  seed: 0\n", ""},
                        {"  streams: 1\n", "one run at a time"},
                        {"  streams: 32\n", "the most"},
                        {"  io_batch: 0\n", "no I/O scheduler"},
                        {"  io_batch: 64\n", "the most"},
                        {"  staging: 0\n", "no staging"},
                        {"  staging: 1GiB\n", "the most"},
                        {"  seed: 18446744073709551615\n", "largest uint64"}};
  for (const Good& g : cases) {
    auto b = parse_binding(g.body);
    EXPECT_TRUE(b.ok()) << g.body << g.what << ": " << (b.ok() ? "" : b.error().message());
  }
  auto big = parse_binding("  seed: 18446744073709551615\n");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->seed, std::numeric_limits<uint64_t>::max());
}

using testing::BadCase;

class BindingConfigErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(BindingConfigErrors, NameTheFileAndKey) { testing::expect_refused_naming_file_and_key(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    BadValues, BindingConfigErrors,
    ::testing::Values(
        BadCase{"binding:\n  mode: lazy\n", "ember.yaml: binding.mode: 'lazy' is neither late nor pinned"},
        BadCase{"binding:\n  mode: Late\n", "binding.mode: 'Late' is neither late nor pinned"},
        BadCase{"binding:\n  mode: ''\n", "binding.mode: must not be empty"},
        BadCase{"binding:\n  scheduler: fifo\n", "binding.scheduler: 'fifo' is neither torpor nor random"},
        BadCase{"binding:\n  eviction: fifo\n", "binding.eviction: 'fifo' is neither torpor nor lru"},
        BadCase{"binding:\n  group: lots\n", "binding.group: 'lots' is neither auto nor a byte size"},
        BadCase{"binding:\n  group: -1MiB\n", "binding.group: '-1MiB' is neither auto nor a byte size"},
        BadCase{"binding:\n  group: 4KiB\n", "binding.group: 4.00 KiB is outside 64 KiB..1 GiB"},
        BadCase{"binding:\n  group: 65535\n", "binding.group: 64.0 KiB is outside 64 KiB..1 GiB"},
        BadCase{"binding:\n  group: 2GiB\n", "binding.group: 2.00 GiB is outside 64 KiB..1 GiB"},
        BadCase{"binding:\n  heavy_factor: heavy\n", "binding.heavy_factor: 'heavy' is not a number"},
        BadCase{"binding:\n  heavy_factor: 1.3x\n", "binding.heavy_factor: '1.3x' is not a number"},
        BadCase{"binding:\n  heavy_factor: inf\n", "binding.heavy_factor: 'inf' is not a number"},
        BadCase{"binding:\n  heavy_factor: nan\n", "binding.heavy_factor: 'nan' is not a number"},
        BadCase{"binding:\n  heavy_factor: 0.9\n", "binding.heavy_factor: 0.9 is outside 1..100"},
        BadCase{"binding:\n  heavy_factor: 100.5\n", "binding.heavy_factor: 100.5 is outside 1..100"},
        BadCase{"binding:\n  slo_factor: twice\n", "binding.slo_factor: 'twice' is not a number"},
        BadCase{"binding:\n  slo_factor: 0.5\n", "binding.slo_factor: 0.5 is outside 1..1000"},
        BadCase{"binding:\n  slo_factor: 1001\n", "binding.slo_factor: 1001 is outside 1..1000"},
        BadCase{"binding:\n  slo_deadline: soon\n", "binding.slo_deadline: cannot read 'soon'"},
        BadCase{"binding:\n  slo_deadline: 500us\n", "binding.slo_deadline: 500us is outside 1ms..24h"},
        BadCase{"binding:\n  slo_deadline: 25h\n", "binding.slo_deadline: 25h is outside 1ms..24h"},
        BadCase{"binding:\n  slo_percentile: 98%\n", "binding.slo_percentile: '98%' is not a number"},
        BadCase{"binding:\n  slo_percentile: 0\n", "binding.slo_percentile: 0 is not strictly between 0 and 1"},
        BadCase{"binding:\n  slo_percentile: 1\n", "binding.slo_percentile: 1 is not strictly between 0 and 1"},
        BadCase{"binding:\n  slo_percentile: 98\n", "binding.slo_percentile: 98 is not strictly between"},
        BadCase{"binding:\n  slo_percentile: -0.5\n", "binding.slo_percentile: -0.5 is not strictly between"},
        BadCase{"binding:\n  workspace: some\n", "binding.workspace: cannot read 'some'"},
        BadCase{"binding:\n  workspace: -1GiB\n", "binding.workspace: cannot read '-1GiB'"},
        BadCase{"binding:\n  window: 0\n", "binding.window: 0us is outside 1ms..24h"},
        BadCase{"binding:\n  window: 25h\n", "binding.window: 25h is outside 1ms..24h"},
        BadCase{"binding:\n  window: long\n", "binding.window: cannot read 'long'"},
        BadCase{"binding:\n  repartition: 500us\n", "binding.repartition: 500us is outside 1ms..24h"},
        BadCase{"binding:\n  repartition: often\n", "binding.repartition: cannot read 'often'"},
        BadCase{"binding:\n  alpha_period: 0ms\n", "binding.alpha_period: 0us is outside 1ms..24h"},
        BadCase{"binding:\n  alpha_period: 2d\n", "binding.alpha_period: cannot read '2d'"},
        BadCase{"binding:\n  streams: 0\n", "binding.streams: 0 is outside 1..32"},
        BadCase{"binding:\n  streams: 33\n", "binding.streams"},
        BadCase{"binding:\n  io_batch: 65\n", "binding.io_batch"},
        BadCase{"binding:\n  staging: 2GiB\n", "binding.staging: 2.00 GiB is outside 0..1 GiB"},
        BadCase{"binding:\n  staging: lots\n", "binding.staging: cannot read 'lots'"},
        BadCase{"binding:\n  seed: -1\n", "binding.seed: '-1' is not an integer in 0..18446744073709551615"},
        BadCase{"binding:\n  seed: 18446744073709551616\n", "binding.seed: '18446744073709551616' is not an integer"},
        BadCase{"binding:\n  seed: 1.5\n", "binding.seed: '1.5' is not an integer"},
        BadCase{"binding:\n  seed: lucky\n", "binding.seed: 'lucky' is not an integer"},
        BadCase{"binding:\n  inline: sometimes\n", "binding.inline: 'sometimes' is not a boolean (true or false)"},
        BadCase{"binding:\n  bodies: elastic\n", "binding.bodies: 'elastic' is neither free nor model_level"},
        BadCase{"binding:\n  shadows: maybe\n", "binding.shadows: 'maybe' is not a boolean"},
        BadCase{"binding:\n  adaptive_batching: 1.5\n", "binding.adaptive_batching: '1.5' is not a boolean"},
        BadCase{"binding:\n  burst_window: 0ms\n", "binding.burst_window: 0us is outside 1ms..24h"},
        BadCase{"binding:\n  scaling_period: soon\n", "binding.scaling_period: cannot read 'soon'"},
        BadCase{"binding:\n  mode: pinned\n  shadows: true\n", "binding.shadows scales what late binding places"},
        BadCase{"binding:\n  mode: pinned\n  bodies: model_level\n", "binding.bodies scales what late binding"}));

INSTANTIATE_TEST_SUITE_P(
    UnknownKeysAndShapes, BindingConfigErrors,
    ::testing::Values(
        BadCase{"binding:\n  modes: late\n", "binding.modes: unknown key (known: mode, scheduler, eviction, group,"},
        BadCase{"binding:\n  group_bytes: 2MiB\n", "binding.group_bytes: unknown key"},
        BadCase{"binding:\n  window_us: 10000000\n", "binding.window_us: unknown key"},
        BadCase{"bindings:\n  mode: late\n", "ember.yaml: bindings: unknown key"},
        BadCase{"binding: late\n", "ember.yaml: binding: must be a mapping"},
        BadCase{"binding: [late]\n", "ember.yaml: binding: must be a mapping"},
        BadCase{"binding:\n  mode:\n", "binding.mode: must be a scalar"},
        BadCase{"binding:\n  scheduler: [torpor]\n", "binding.scheduler: must be a scalar"},
        BadCase{"binding:\n  seed: 1\n  seed: 2\n", "binding.seed: appears twice"},
        BadCase{"binding: {}\nbinding: {}\n", "ember.yaml: binding: appears twice"}));

INSTANTIATE_TEST_SUITE_P(
    CrossField, BindingConfigErrors,
    ::testing::Values(
        BadCase{"binding:\n  repartition: 20s\n", "binding.repartition (20s) must not exceed binding.window (10s)"},
        BadCase{"binding:\n  window: 500ms\n", "binding.repartition (1s) must not exceed binding.window (500ms)"},
        BadCase{"binding:\n  window: 2s\n  repartition: 2001ms\n",
                "binding.repartition (2001ms) must not exceed binding.window (2s)"}));

// validate() checks a BindingConfig built in code (a NaN included), naming the source.
TEST(BindingConfig, ValidateChecksStructsBuiltInCode) {
  auto message = [](const BindingConfig& b) {
    ClusterConfig c;
    c.binding = b;
    const Status s = validate(c, "code");
    return s.ok() ? std::string("ok") : s.error().message();
  };
  BindingConfig b;
  b.heavy_factor = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(message(b).starts_with("code: binding.heavy_factor: ")) << message(b);
  b = BindingConfig{};
  b.slo_percentile = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(message(b).starts_with("code: binding.slo_percentile: ")) << message(b);
  b = BindingConfig{};
  b.group_bytes = 1;
  EXPECT_EQ(message(b), "code: binding.group: 1 B is outside 64 KiB..1 GiB (0 or auto: measured)");
  b = BindingConfig{};
  b.repartition_us = b.window_us + 1;
  EXPECT_EQ(message(b), "code: binding.repartition (10000001us) must not exceed binding.window (10s)");
  EXPECT_EQ(message(BindingConfig{}), "ok");
}

}  // namespace binding_config_test
}  // namespace ember
