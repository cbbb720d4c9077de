// Fault kinds and targets as words: each parses back to itself, and an unknown one is refused with
// the valid ones listed (the console and the tests' helpers refuse it there, before it travels).
#include "actors/fault_messages.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ember {
namespace {

const std::vector<std::string> kKindWords = {"kill",     "drop",       "delay",          "duplicate",
                                             "heal",     "fail-alloc", "fault-kernel",   "corrupt-chunk",
                                             "throttle", "stall",      "stop-heartbeats"};

TEST(FaultMessages, EveryKindWordParsesBackToItself) {
  for (const auto& word : kKindWords) {
    auto kind = parse_fault_kind(word);
    ASSERT_TRUE(kind.ok()) << word << ": " << kind.error().message();
    EXPECT_EQ(to_string(*kind), word);
  }
}

TEST(FaultMessages, AnUnknownKindIsRefusedWithTheValidOnesListed) {
  for (const std::string word : {"explode", "", "Kill", "fail_alloc", "kill "}) {
    auto kind = parse_fault_kind(word);
    ASSERT_FALSE(kind.ok()) << "'" << word << "'";
    EXPECT_EQ(kind.error().code(), ErrorCode::invalid_argument);
    const std::string& message = kind.error().message();
    if (!word.empty()) {
      EXPECT_NE(message.find("no fault kind '" + word + "'"), std::string::npos) << message;
    }
    for (const auto& valid : kKindWords) EXPECT_NE(message.find(valid), std::string::npos) << valid << ": " << message;
  }
}

TEST(FaultMessages, EveryTargetWordParsesBackToItself) {
  for (const std::string word : {"router", "cache", "hop", "data", "hops", "executor:0", "executor:12"}) {
    fault_command f;
    ASSERT_TRUE(parse_fault_target(f, word).ok()) << word;
    EXPECT_EQ(target_name(f), word);
  }
  fault_command f;
  ASSERT_TRUE(parse_fault_target(f, "executor:3").ok());
  EXPECT_EQ(f.target, FaultTarget::executor);
  EXPECT_EQ(f.executor, 3u);
}

TEST(FaultMessages, AnUnknownTargetIsRefusedWithTheValidOnesListed) {
  for (const std::string word :
       {"cache:0", "executor:", "executor:x", "executor:-1", "executor:1x", "Router", "", "executor:99999999999"}) {
    fault_command f;
    auto parsed = parse_fault_target(f, word);
    ASSERT_FALSE(parsed.ok()) << "'" << word << "'";
    EXPECT_EQ(parsed.error().code(), ErrorCode::invalid_argument);
    EXPECT_EQ(parsed.error().message(),
              "a fault targets router, cache, executor:N, hop, data or hops, not '" + word + "'");
    EXPECT_EQ(f.target, FaultTarget::router);  // untouched
  }
}

}  // namespace
}  // namespace ember
