// Layer blocks (model/layer_blocks.hpp): for every reference architecture, the blocks tile the
// model, and a cut point is where exactly one computed value crosses (residual blocks stay whole).
#include "model/layer_blocks.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/model/model_test_util.hpp"

namespace ember::gpu {
namespace layer_blocks_test {

using testing::TempDir;

class EveryArchitectureBlocks : public ::testing::TestWithParam<const char*> {};

// Every value crossing a cut point is one tensor; a block's inner values are read inside it only.
TEST_P(EveryArchitectureBlocks, CutPointsAreWhereOneValueCrosses) {
  TempDir dir;
  auto m = testing::tiny_model(GetParam(), dir.path());
  const Graph& g = m->graph();
  const auto blocks = layer_blocks(g);
  ASSERT_FALSE(blocks.empty());
  EXPECT_EQ(blocks.front().first, 0u);
  EXPECT_EQ(blocks.back().last, g.num_layers());
  for (size_t i = 1; i < blocks.size(); ++i) EXPECT_EQ(blocks[i].first, blocks[i - 1].last);
  for (uint32_t k : cut_points(g)) {
    const auto in = g.range_inputs({k, g.num_layers()});
    const auto crossing = std::count_if(in.begin(), in.end(), [&](uint32_t v) { return g.producer(v) >= 0; });
    EXPECT_EQ(crossing, 1) << GetParam() << " cut " << k;
  }
  EXPECT_GE(blocks.size(), 2u) << GetParam() << " has no cut point at all";
}

INSTANTIATE_TEST_SUITE_P(Tiny, EveryArchitectureBlocks, ::testing::Values("mlp", "resnet50", "bert-base", "gpt2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace layer_blocks_test
}  // namespace ember::gpu
