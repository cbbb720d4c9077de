// The Body/Shadow split (gpu/shadow_split.hpp): for every reference architecture, a range of
// blocks computed on two devices, the batch split between them, answers what the Body computes
// alone; a Shadow that faults leaves its rows to the Body.
#include "gpu/shadow_split.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "model/layer_blocks.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::gpu {
namespace shadow_split_test {

using testing::TempDir;

class EveryArchitectureSplit : public ::testing::TestWithParam<const char*> {};

TEST_P(EveryArchitectureSplit, TheBatchSplitBetweenBodyAndShadowAnswersWhatTheBodyDoesAlone) {
  TempDir dir;
  auto m = testing::tiny_model(GetParam(), dir.path());
  auto body_device = testing::sim_device(256 << 20, 0), shadow_device = testing::sim_device(256 << 20, 1);
  constexpr int64_t kBatch = 4;
  const auto inputs = testing::arch_inputs(*m, kBatch, 6, 41);
  // The Body swapped in by groups of 1 KiB (a layer each): its weights in many segments, which views clip.
  SwapInOptions groups;
  groups.group_bytes = 1 << 10;
  auto whole_ex = testing::must(LayerExecutor::swap_in(*body_device, m, {0, m->num_layers()}, groups), "swapping in");
  ASSERT_TRUE(whole_ex->wait_weights().ok());
  ASSERT_GT(whole_ex->weight_groups(), 2u);
  const auto whole = testing::must(whole_ex->run_host(inputs), "running the whole batch");
  const auto blocks = layer_blocks(m->graph());
  // The first block, a middle one, and the last two together.
  std::vector<LayerRange> ranges{blocks.front(), blocks[blocks.size() / 2]};
  if (blocks.size() >= 2) ranges.push_back({blocks[blocks.size() - 2].first, blocks.back().last});
  auto stream = body_device->create_stream();
  std::vector<uint32_t> ids;
  for (const auto& t : inputs) ids.push_back(*m->graph().find(t.name));
  for (const LayerRange r : ranges) {
    // The Body's parts are views of its whole executor (its weights, once); the Shadow holds only
    // the range, copied from the host.
    std::unique_ptr<LayerExecutor> before, after;
    if (r.first > 0) before = testing::must(LayerExecutor::view(*whole_ex, {0, r.first}), "before");
    if (r.last < m->num_layers())
      after = testing::must(LayerExecutor::view(*whole_ex, {r.last, m->num_layers()}), "after");
    auto body = testing::must(LayerExecutor::view(*whole_ex, r), "body");
    EXPECT_EQ(body->weight_bytes(), m->range_bytes(r).length);
    auto shadow = testing::must(LayerExecutor::create(*shadow_device, m, r), "shadow");
    for (int64_t rows : {int64_t{1}, kBatch / 2, kBatch - 1}) {
      auto in = testing::must(upload(*body_device, *stream, inputs, ids), "uploading");
      ASSERT_TRUE(stream->synchronize().ok());
      SplitStats st;
      auto out = run_split({before.get(), body.get(), shadow.get(), after.get()}, in, rows, &st);
      ASSERT_TRUE(out.ok()) << GetParam() << " [" << r.first << ", " << r.last << "): " << out.error().message();
      EXPECT_FALSE(st.shadow_failed) << st.shadow_error;
      EXPECT_EQ(st.shadow_rows, rows);
      EXPECT_GT(st.sent_bytes, 0u);
      auto host = testing::must(download(*stream, *out, m->graph().value_names), "downloading");
      ASSERT_EQ(host.size(), whole.size());
      for (const auto& t : whole) {
        auto it = std::find_if(host.begin(), host.end(), [&](const HostTensor& h) { return h.name == t.name; });
        ASSERT_NE(it, host.end()) << t.name;
        EXPECT_LT(testing::relative_error(*it, t), 1e-5)
            << GetParam() << " [" << r.first << ", " << r.last << ") shadow rows " << rows << " " << t.name;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, EveryArchitectureSplit, ::testing::Values("mlp", "resnet50", "bert-base", "gpt2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// A Shadow whose device faults mid-offload: the Body computes its rows, the answer is still right.
TEST(ShadowSplit, AShadowThatFaultsLeavesItsRowsToTheBody) {
  TempDir dir;
  auto m = testing::tiny_model("resnet50", dir.path());
  auto body_device = testing::sim_device(256 << 20, 0), shadow_device = testing::sim_device(256 << 20, 1);
  const auto inputs = testing::arch_inputs(*m, 4, 6, 5);
  auto whole_ex = testing::must(LayerExecutor::create(*body_device, m, {0, m->num_layers()}), "creating");
  const auto whole = testing::must(whole_ex->run_host(inputs), "running the whole batch");
  const auto blocks = layer_blocks(m->graph());
  const LayerRange r = blocks[1];
  auto before = testing::must(LayerExecutor::view(*whole_ex, {0, r.first}), "before");
  auto body = testing::must(LayerExecutor::view(*whole_ex, r), "body");
  auto shadow = testing::must(LayerExecutor::create(*shadow_device, m, r), "shadow");
  auto after = testing::must(LayerExecutor::view(*whole_ex, {r.last, m->num_layers()}), "after");
  EXPECT_FALSE(LayerExecutor::view(*whole_ex, {0, m->num_layers() + 1}).ok()) << "a view beyond its parent";
  shadow_device->TEST_fail_after_kernels(0);  // its first kernel faults
  auto stream = body_device->create_stream();
  std::vector<uint32_t> ids;
  for (const auto& t : inputs) ids.push_back(*m->graph().find(t.name));
  auto in = testing::must(upload(*body_device, *stream, inputs, ids), "uploading");
  ASSERT_TRUE(stream->synchronize().ok());
  SplitStats st;
  auto out = run_split({before.get(), body.get(), shadow.get(), after.get()}, in, 2, &st);
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_TRUE(st.shadow_failed);
  EXPECT_TRUE(st.shadow_lost);
  EXPECT_EQ(st.shadow_rows, 0);
  EXPECT_FALSE(st.shadow_error.empty());
  auto host = testing::must(download(*stream, *out, m->graph().value_names), "downloading");
  ASSERT_EQ(host.size(), whole.size());
  EXPECT_LT(testing::relative_error(host[0], whole[0]), 1e-5);
  // A split that leaves the Body no rows, or a Shadow over another range, is refused.
  auto none = run_split({before.get(), body.get(), shadow.get(), after.get()}, in, 4);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), ErrorCode::invalid_argument);
  auto other = testing::must(LayerExecutor::create(*shadow_device, m, blocks[2]), "another range");
  auto wrong = run_split({before.get(), body.get(), other.get(), after.get()}, in, 2);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code(), ErrorCode::invalid_argument);
}

}  // namespace shadow_split_test
}  // namespace ember::gpu
