#include "text/stop_matcher.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/must.hpp"

namespace ember::text {
namespace stop_matcher_test {

using ember::testing::must;

struct Outcome {
  std::string text;  // everything sent, flush included
  int32_t stop_index = -1;
  bool operator==(const Outcome&) const = default;
};

Outcome run(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
  StopMatcher m = must(StopMatcher::create(stops));
  Outcome out;
  for (const std::string& piece : pieces) {
    StopMatcher::Emit e = m.push(piece);
    out.text += e.text;
    if (e.stopped) out.stop_index = e.stop_index;
  }
  out.text += m.flush();
  return out;
}

// What the header promises, computed on the whole text at once: the stop string completed first
// (earliest end), the longest of those ending at the same byte, and the text before it.
Outcome reference(const std::vector<std::string>& stops, const std::string& text) {
  for (size_t end = 1; end <= text.size(); ++end) {
    int32_t best = -1;
    for (size_t k = 0; k < stops.size(); ++k) {
      const std::string& s = stops[k];
      if (s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0 &&
          (best < 0 || s.size() > stops[static_cast<size_t>(best)].size()))
        best = static_cast<int32_t>(k);
    }
    if (best >= 0) return {text.substr(0, end - stops[static_cast<size_t>(best)].size()), best};
  }
  return {text, -1};
}

TEST(StopMatcher, AStopSplitAcrossPiecesIsFoundAndNeverSent) {
  EXPECT_EQ(run({"\n\n"}, {"abc\n", "\ndef"}), (Outcome{"abc", 0}));
  EXPECT_EQ(run({"END"}, {"the E", "N", "D and more"}), (Outcome{"the ", 0}));
  EXPECT_EQ(run({"END"}, {"the E", "N", "d and more"}), (Outcome{"the ENd and more", -1}));
}

TEST(StopMatcher, OnlyATailThatMayBecomeAStopIsHeld) {
  StopMatcher m = must(StopMatcher::create({"END", "xyz"}));
  StopMatcher::Emit e = m.push("hello E");
  EXPECT_EQ(e.text, "hello ");
  EXPECT_FALSE(e.stopped);
  EXPECT_EQ(m.held_bytes(), 1u);
  e = m.push("N");
  EXPECT_EQ(e.text, "");
  EXPECT_EQ(m.held_bytes(), 2u);
  e = m.push("x");  // "ENx": no longer "END", but "x" may start "xyz"
  EXPECT_EQ(e.text, "EN");
  EXPECT_EQ(m.held_bytes(), 1u);
  e = m.push("!");
  EXPECT_EQ(e.text, "x!");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, FlushReturnsTheHeldTail) {
  StopMatcher m = must(StopMatcher::create({"END"}));
  EXPECT_EQ(m.push("the EN").text, "the ");
  EXPECT_EQ(m.flush(), "EN");
  EXPECT_FALSE(m.stopped());
  // After a flush the matcher starts over: "D" alone is no stop.
  EXPECT_EQ(m.push("D").text, "D");
}

TEST(StopMatcher, AStopAtTheVeryStart) {
  EXPECT_EQ(run({"Hi"}, {"Hi there"}), (Outcome{"", 0}));
  EXPECT_EQ(run({"Hi"}, {"H", "i there"}), (Outcome{"", 0}));
}

TEST(StopMatcher, NothingAfterAStop) {
  StopMatcher m = must(StopMatcher::create({"."}));
  StopMatcher::Emit e = m.push("One. Two.");
  EXPECT_EQ(e.text, "One");
  EXPECT_TRUE(e.stopped);
  e = m.push("Three");
  EXPECT_EQ(e.text, "");
  EXPECT_TRUE(e.stopped);
  EXPECT_EQ(e.stop_index, 0);
  EXPECT_EQ(m.flush(), "");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, OverlappingCandidates) {
  // "bc" is completed before "abcd" could be.
  EXPECT_EQ(run({"abcd", "bc"}, {"xabcd"}), (Outcome{"xa", 1}));
  // Both completed by the same byte: the longer one, which starts first, wins.
  EXPECT_EQ(run({"bc", "abc"}, {"xab", "c"}), (Outcome{"x", 1}));
  // A held prefix that fails falls back to a shorter border (KMP): "aab" in "aaab".
  EXPECT_EQ(run({"aab"}, {"a", "a", "a", "b"}), (Outcome{"a", 0}));
  EXPECT_EQ(run({"abab"}, {"aba", "abab"}), (Outcome{"aba", 0}));
  // One stop a prefix of another: the shorter is completed first.
  EXPECT_EQ(run({"ab", "abc"}, {"zab", "c"}), (Outcome{"z", 0}));
}

TEST(StopMatcher, MultibyteUtf8Stops) {
  const std::string stop = "\xE3\x80\x82";  // U+3002 IDEOGRAPHIC FULL STOP
  EXPECT_EQ(run({stop}, {"\xE4\xBD\xA0\xE5\xA5\xBD", "\xE3\x80", "\x82more"}), (Outcome{"\xE4\xBD\xA0\xE5\xA5\xBD", 0}));
  // A stop sharing its lead byte with a character that is not it.
  EXPECT_EQ(run({stop}, {"a\xE3\x80", "\x81", "b"}), (Outcome{"a\xE3\x80\x81" "b", -1}));
  // Emoji stop (4 bytes) cut in every way.
  const std::string text = "ok \xF0\x9F\x9B\x91 no";  // U+1F6D1
  for (size_t cut = 0; cut <= text.size(); ++cut)
    EXPECT_EQ(run({"\xF0\x9F\x9B\x91"}, {text.substr(0, cut), text.substr(cut)}), (Outcome{"ok ", 0})) << cut;
}

TEST(StopMatcher, AnUnfinishedCharacterIsHeldUntilItCompletes) {
  StopMatcher m = must(StopMatcher::create({"xyz"}));
  EXPECT_EQ(m.push("caf\xC3").text, "caf");
  EXPECT_EQ(m.push("\xA9 ok").text, "\xC3\xA9 ok");
  EXPECT_EQ(m.push("\xE2\x82").text, "");  // two bytes of the three of U+20AC
  EXPECT_EQ(m.push("\xAC").text, "\xE2\x82\xAC");
  // Bytes that are not UTF-8 are passed on rather than held forever.
  EXPECT_EQ(m.push("\x80\xFF").text, "\x80\xFF");
  EXPECT_EQ(m.push("\xC3" "a").text, "\xC3" "a");
  // At the end, an unfinished character comes out of flush as it is.
  EXPECT_EQ(m.push("\xF0\x9F").text, "");
  EXPECT_EQ(m.flush(), "\xF0\x9F");
}

TEST(StopMatcher, AnEmptyListPassesEverything) {
  EXPECT_EQ(run({}, {"a", "bc", ""}), (Outcome{"abc", -1}));
  StopMatcher m = must(StopMatcher::create({}));
  EXPECT_EQ(m.push("abc").text, "abc");
}

TEST(StopMatcher, TheResultDoesNotDependOnThePieces) {
  // Random texts over a small alphabet (so stops occur and overlap), random stop lists and random
  // cuts, against the whole-text reference. Fixed seed: the same cases every run.
  std::mt19937 rng(35);
  const std::string alphabet = "ab\xC3\xA9";  // 'a', 'b' and the two bytes of U+00E9
  auto random_string = [&](size_t lo, size_t hi) {
    std::string s;
    const size_t n = std::uniform_int_distribution<size_t>(lo, hi)(rng);
    while (s.size() < n) {
      const size_t c = std::uniform_int_distribution<size_t>(0, 2)(rng);
      s += c == 2 ? std::string("\xC3\xA9") : std::string(1, alphabet[c]);
    }
    return s;
  };
  for (int round = 0; round < 2000; ++round) {
    std::vector<std::string> stops;
    const size_t n_stops = std::uniform_int_distribution<size_t>(1, 4)(rng);
    for (size_t k = 0; k < n_stops; ++k) stops.push_back(random_string(1, 5));
    const std::string text = random_string(0, 40);
    std::vector<std::string> pieces;
    for (size_t at = 0; at < text.size();) {
      const size_t len = std::uniform_int_distribution<size_t>(0, 6)(rng);  // empty pieces too
      pieces.push_back(text.substr(at, len));
      at += len;
    }
    const Outcome expected = reference(stops, text);
    ASSERT_EQ(run(stops, pieces), expected) << "round " << round << " text '" << text << "'";
    ASSERT_EQ(run(stops, {text}), expected) << "round " << round;
  }
}

TEST(StopMatcher, ListsOverTheLimitsAreRefused) {
  std::vector<std::string> many(kMaxStopStrings, "x");
  EXPECT_TRUE(StopMatcher::create(many).ok());
  many.push_back("y");
  auto too_many = StopMatcher::create(many);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(too_many.error().message().find("at most 16"), std::string::npos) << too_many.error().message();

  EXPECT_TRUE(StopMatcher::create({std::string(kMaxStopStringBytes, 'a')}).ok());
  auto too_long = StopMatcher::create({"ok", std::string(kMaxStopStringBytes + 1, 'a')});
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error().message().find("stop string 1 is 257 bytes"), std::string::npos)
      << too_long.error().message();

  auto empty = StopMatcher::create({"a", ""});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message().find("stop string 1 is empty"), std::string::npos) << empty.error().message();
}

TEST(StopMatcher, TheHeldTailIsBounded) {
  // A long stop string whose prefix keeps almost matching: held stays under its length plus a
  // character.
  const std::string stop = std::string(kMaxStopStringBytes - 1, 'a') + "b";
  StopMatcher m = must(StopMatcher::create({stop}));
  std::string sent;
  for (int i = 0; i < 1000; ++i) {
    sent += m.push("a").text;
    EXPECT_LT(m.held_bytes(), kMaxStopStringBytes);
  }
  sent += m.flush();
  EXPECT_EQ(sent, std::string(1000, 'a'));
}

}  // namespace stop_matcher_test
}  // namespace ember::text
