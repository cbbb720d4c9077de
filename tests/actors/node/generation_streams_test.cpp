// GenerationStreams (actors/node/generation_streams.hpp): the router's streams by id, bounded, a
// duplicate id refused, a sink's streams dropped together.
#include "actors/node/generation_streams.hpp"

#include <gtest/gtest.h>

namespace ember {

TEST(GenerationStreams, RecordsQueuedThenJoinedAndTakesOnCancel) {
  GenerationStreams s;
  ASSERT_TRUE(s.add("a", {"m", 1}, 7, 3).ok());
  ASSERT_NE(s.find("a"), nullptr);
  EXPECT_EQ(s.find("a")->held, 3u);
  EXPECT_FALSE(s.find("a")->device);
  s.joined("a", 2);
  EXPECT_EQ(s.find("a")->device, std::optional<uint32_t>(2));
  s.joined("unknown", 1);  // nothing
  auto taken = s.take("a");
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->model, (model_key{"m", 1}));
  EXPECT_FALSE(s.take("a"));
  EXPECT_EQ(s.size(), 0u);
}

TEST(GenerationStreams, ADuplicateIdIsInvalidAndTheBoundIsUnavailable) {
  GenerationStreams s(2);
  ASSERT_TRUE(s.add("a", {"m", 1}, 7, 1).ok());
  Status dup = s.add("a", {"m", 1}, 8, 2);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().code(), ErrorCode::invalid_argument);
  ASSERT_TRUE(s.add("b", {"m", 1}, 7, 2).ok());
  Status full = s.add("c", {"m", 1}, 7, 3);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code(), ErrorCode::unavailable);
  s.take("a");
  EXPECT_TRUE(s.add("c", {"m", 1}, 7, 3).ok());
}

TEST(GenerationStreams, ASinkDownDropsEveryStreamItReceived) {
  GenerationStreams s;
  ASSERT_TRUE(s.add("a", {"m", 1}, 7, 1).ok());
  ASSERT_TRUE(s.add("b", {"m", 1}, 8, 2).ok());
  ASSERT_TRUE(s.add("c", {"n", 1}, 7, 3).ok());
  s.joined("c", 1);
  EXPECT_TRUE(s.has_sink(7));
  auto gone = s.sink_down(7);
  ASSERT_EQ(gone.size(), 2u);
  EXPECT_EQ(gone[0].first, "a");
  EXPECT_EQ(gone[1].first, "c");
  EXPECT_EQ(gone[1].second.device, std::optional<uint32_t>(1));
  EXPECT_FALSE(s.has_sink(7));
  EXPECT_TRUE(s.has_sink(8));
  EXPECT_EQ(s.size(), 1u);
}

}  // namespace ember
