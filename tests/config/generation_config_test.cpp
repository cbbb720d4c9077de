// The `generation:` section (config/generation_config.cpp), read through parse_cluster_config and
// checked through validate(), as processes read it. deploy/ember.yaml's generation: section is
// checked against the defaults by cluster_config_test.cpp (TheExampleFileIsTheDefaults); a node
// refusing a kv_cache over its model pool is node_process_test's.
#include <gtest/gtest.h>

#include <string>

#include "config/cluster_config.hpp"
#include "tests/config/bad_case.hpp"

namespace ember {
namespace generation_config_test {

Result<GenerationConfig> parse_generation(const std::string& body) {
  auto c = parse_cluster_config("generation:\n" + body, "ember.yaml");
  if (!c.ok()) return c.error();
  return c->generation;
}

TEST(GenerationConfig, AbsentOrEmptySectionGivesDefaults) {
  for (const char* yaml : {"", "generation:\n", "generation: {}\n", "binding:\n  mode: late\n"}) {
    auto g = parse_cluster_config(yaml, "ember.yaml");
    ASSERT_TRUE(g.ok()) << yaml << ": " << g.error().message();
    EXPECT_EQ(g->generation.max_num_seqs, 256u);
    EXPECT_EQ(g->generation.max_num_batched_tokens, 2048u);
    EXPECT_EQ(g->generation.max_waiting, 1024u);
    EXPECT_DOUBLE_EQ(g->generation.kv_cache_fraction, 0.5);
    EXPECT_EQ(g->generation.kv_cache_bytes, 0u);
    EXPECT_EQ(g->generation.kv_swap_space, 4ull << 30);
  }
}

TEST(GenerationConfig, ReadsEveryKey) {
  auto g = parse_generation("  max_num_seqs: 8\n  max_num_batched_tokens: 512\n  max_waiting: 3\n"
                            "  kv_cache: 25%\n  kv_swap_space: 0\n");
  ASSERT_TRUE(g.ok()) << g.error().message();
  EXPECT_EQ(g->max_num_seqs, 8u);
  EXPECT_EQ(g->max_num_batched_tokens, 512u);
  EXPECT_EQ(g->max_waiting, 3u);
  EXPECT_DOUBLE_EQ(g->kv_cache_fraction, 0.25);
  EXPECT_EQ(g->kv_cache_bytes, 0u);
  EXPECT_EQ(g->kv_swap_space, 0u);
}

TEST(GenerationConfig, KvCacheIsAShareOrASize) {
  auto size = parse_generation("  kv_cache: 2GiB\n");
  ASSERT_TRUE(size.ok()) << size.error().message();
  EXPECT_EQ(size->kv_cache_bytes, 2ull << 30);
  for (auto [text, share] : {std::pair{"100%", 1.0}, std::pair{"0.5%", 0.005}, std::pair{"50%", 0.5}}) {
    auto g = parse_generation(std::string("  kv_cache: ") + text + "\n");
    ASSERT_TRUE(g.ok()) << text << ": " << g.error().message();
    EXPECT_DOUBLE_EQ(g->kv_cache_fraction, share) << text;
    EXPECT_EQ(g->kv_cache_bytes, 0u) << text;
  }
  // One step holds one token of every running sequence: the bounds may meet.
  EXPECT_TRUE(parse_generation("  max_num_seqs: 64\n  max_num_batched_tokens: 64\n").ok());
}

class GenerationConfigErrors : public ::testing::TestWithParam<testing::BadCase> {};

TEST_P(GenerationConfigErrors, AreRefusedNamingFileAndKey) { testing::expect_refused_naming_file_and_key(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    Values, GenerationConfigErrors,
    ::testing::Values(
        testing::BadCase{"generation:\n  max_num_seqs: 0\n", "generation.max_num_seqs: 0 is outside 1..65536"},
        testing::BadCase{"generation:\n  max_num_seqs: 65537\n", "generation.max_num_seqs: '65537' is not an integer"},
        testing::BadCase{"generation:\n  max_num_seqs: -1\n", "generation.max_num_seqs: '-1' is not an integer"},
        testing::BadCase{"generation:\n  max_num_seqs: many\n", "generation.max_num_seqs: 'many' is not an integer"},
        testing::BadCase{"generation:\n  max_num_seqs: 3000\n",
                         "generation.max_num_batched_tokens: 2048 is outside max_num_seqs (3000).."},
        testing::BadCase{"generation:\n  max_num_batched_tokens: 100\n",
                         "a step must hold one token of every sequence"},
        testing::BadCase{"generation:\n  max_num_batched_tokens: 2000000\n", "generation.max_num_batched_tokens"},
        testing::BadCase{"generation:\n  max_waiting: 0\n", "generation.max_waiting: 0 is outside 1..1000000"},
        testing::BadCase{"generation:\n  kv_cache: 0%\n", "generation.kv_cache: '0%' is not a share in (0%, 100%]"},
        testing::BadCase{"generation:\n  kv_cache: 101%\n", "generation.kv_cache: '101%' is not a share"},
        testing::BadCase{"generation:\n  kv_cache: half%\n", "generation.kv_cache: 'half%' is not a share"},
        testing::BadCase{"generation:\n  kv_cache: 0\n", "generation.kv_cache: '0' is neither a share"},
        testing::BadCase{"generation:\n  kv_cache: lots\n", "generation.kv_cache: 'lots' is neither a share"},
        testing::BadCase{"generation:\n  kv_swap_space: -1GiB\n", "generation.kv_swap_space: cannot read '-1GiB'"},
        testing::BadCase{"generation:\n  max_seqs: 4\n", "generation.max_seqs: unknown key (known: max_num_seqs,"},
        testing::BadCase{"generation: 4\n", "ember.yaml: generation: must be a mapping"},
        testing::BadCase{"generation:\n  kv_cache: [50%]\n", "generation.kv_cache: must be a scalar"},
        testing::BadCase{"generation:\n  max_waiting: 1\n  max_waiting: 2\n", "generation.max_waiting: appears twice"}));

}  // namespace generation_config_test
}  // namespace ember
