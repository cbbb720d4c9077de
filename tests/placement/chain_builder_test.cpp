#include "placement/chain_builder.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace ember::placement {
namespace chain_builder_test {

std::vector<ChainReceiver> receivers(int n, const std::string& rack = "") {
  std::vector<ChainReceiver> out;
  for (int i = 0; i < n; ++i) {
    std::string name = "r";  // not "r" + to_string(i): GCC 12's bogus -Wrestrict on that
    name += std::to_string(i);
    out.push_back({name, rack});
  }
  return out;
}

std::vector<Chain> build(const std::vector<ChainSource>& s, const std::vector<ChainReceiver>& r,
                         const ChainOptions& o = {}) {
  auto got = build_chains(s, r, o);
  EXPECT_TRUE(got.ok()) << (got.ok() ? "" : got.error().to_string());
  return got.ok() ? *got : std::vector<Chain>{};
}

size_t total_hops(const std::vector<Chain>& chains) {
  size_t n = 0;
  for (const Chain& c : chains) n += c.hops.size();
  return n;
}

// Rack changes along source -> hops[0] -> ... -> hops.back().
size_t crossings(const Chain& c, const std::map<std::string, std::string>& rack_of) {
  size_t n = 0;
  std::string at = rack_of.at(c.source);
  for (const std::string& h : c.hops) {
    if (rack_of.at(h) != at) ++n;
    at = rack_of.at(h);
  }
  return n;
}

TEST(ChainBuilder, SevenReceiversOverTwoSourcesAreFourAndThree) {
  auto chains = build({{"s1"}, {"s0"}}, receivers(7));
  ASSERT_EQ(chains.size(), 2u);
  EXPECT_EQ(chains[0].source, "s0");  // source-name order
  EXPECT_EQ(chains[0].hops, (std::vector<std::string>{"r0", "r1", "r2", "r3"}));
  EXPECT_EQ(chains[1].source, "s1");
  EXPECT_EQ(chains[1].hops, (std::vector<std::string>{"r4", "r5", "r6"}));
}

TEST(ChainBuilder, ManySourcesEvenAndEveryReceiverOnce) {
  auto chains = build({{"a"}, {"b"}, {"c"}, {"d"}}, receivers(10));
  ASSERT_EQ(chains.size(), 4u);
  std::set<std::string> seen;
  for (const Chain& c : chains) {
    EXPECT_GE(c.hops.size(), 2u);
    EXPECT_LE(c.hops.size(), 3u);
    seen.insert(c.hops.begin(), c.hops.end());
  }
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_EQ(total_hops(chains), 10u);
  // More sources than receivers: only as many chains as receivers, one hop each.
  auto few = build({{"a"}, {"b"}, {"c"}}, receivers(2));
  ASSERT_EQ(few.size(), 2u);
  EXPECT_EQ(few[0].hops.size(), 1u);
  EXPECT_EQ(few[1].hops.size(), 1u);
}

TEST(ChainBuilder, RacksContiguousSourceRackFirstMinimalCrossings) {
  // Receivers interleaved across racks A, B, C; sources in A and B.
  std::vector<ChainReceiver> r = {{"a1", "A"}, {"b1", "B"}, {"c1", "C"}, {"a2", "A"},
                                  {"b2", "B"}, {"c2", "C"}, {"a3", "A"}, {"b3", "B"}};
  std::map<std::string, std::string> rack_of = {{"sA", "A"}, {"sB", "B"}};
  for (const auto& x : r) rack_of[x.name] = x.rack;
  auto chains = build({{"sB", "B"}, {"sA", "A"}}, r);
  ASSERT_EQ(chains.size(), 2u);
  EXPECT_EQ(chains[0], (Chain{"sA", {"a1", "a2", "a3", "c1"}}));
  EXPECT_EQ(chains[1], (Chain{"sB", {"b1", "b2", "b3", "c2"}}));
  // Each chain enters each foreign rack once; both must leave their rack (3 local, 4 slots).
  EXPECT_EQ(crossings(chains[0], rack_of) + crossings(chains[1], rack_of), 2u);

  // One source, many racks: every rack contiguous, own rack first, one crossing per foreign rack.
  std::vector<ChainReceiver> r2 = {{"x2", "X"}, {"h1", "H"}, {"y1", "Y"}, {"x1", "X"}, {"h2", "H"}, {"y2", "Y"}};
  rack_of["sH"] = "H";
  for (const auto& x : r2) rack_of[x.name] = x.rack;
  auto one = build({{"sH", "H"}}, r2);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].hops, (std::vector<std::string>{"h1", "h2", "x1", "x2", "y1", "y2"}));
  EXPECT_EQ(crossings(one[0], rack_of), 2u);
}

TEST(ChainBuilder, ExtraSlotGoesToTheRackThatNeedsIt) {
  // 5 receivers over 2 sources: 3 + 2. Rack B has 3 receivers, so sB gets the extra slot even
  // though sA sorts first; every receiver stays in its rack.
  std::vector<ChainReceiver> r = {{"a1", "A"}, {"a2", "A"}, {"b1", "B"}, {"b2", "B"}, {"b3", "B"}};
  auto chains = build({{"sA", "A"}, {"sB", "B"}}, r);
  ASSERT_EQ(chains.size(), 2u);
  EXPECT_EQ(chains[0], (Chain{"sA", {"a1", "a2"}}));
  EXPECT_EQ(chains[1], (Chain{"sB", {"b1", "b2", "b3"}}));
  // Evenness wins over locality: 4 receivers in A, 0 in B -> 2 + 2.
  auto skew = build({{"sA", "A"}, {"sB", "B"}}, receivers(4, "A"));
  ASSERT_EQ(skew.size(), 2u);
  EXPECT_EQ(skew[0].hops.size(), 2u);
  EXPECT_EQ(skew[1].hops.size(), 2u);
}

TEST(ChainBuilder, OneReceiver) {
  auto chains = build({{"s"}}, {{"r"}});
  ASSERT_EQ(chains.size(), 1u);
  EXPECT_EQ(chains[0], (Chain{"s", {"r"}}));
}

TEST(ChainBuilder, NoSourceIsUnavailableNoReceiverIsEmpty) {
  auto none = build_chains({}, receivers(3));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), ErrorCode::unavailable);
  EXPECT_TRUE(build({}, {}).empty());
  EXPECT_TRUE(build({{"s"}}, {}).empty());
}

TEST(ChainBuilder, RepositoryOnlyWhenNoNodeHoldsTheBytes) {
  auto chains = build({{"repo", "", true}, {"n1"}}, receivers(4));
  ASSERT_EQ(chains.size(), 1u);
  EXPECT_EQ(chains[0].source, "n1");
  EXPECT_EQ(chains[0].hops.size(), 4u);
  auto from_repo = build({{"repo", "", true}}, receivers(4));
  ASSERT_EQ(from_repo.size(), 1u);
  EXPECT_EQ(from_repo[0].source, "repo");
}

TEST(ChainBuilder, ReceiverThatIsASourceIsDropped) {
  auto chains = build({{"n1"}}, {{"n1"}, {"n2"}});
  ASSERT_EQ(chains.size(), 1u);
  EXPECT_EQ(chains[0], (Chain{"n1", {"n2"}}));
  EXPECT_TRUE(build({{"n1"}}, {{"n1"}}).empty());
}

TEST(ChainBuilder, BadNamesAreInvalidArgument) {
  for (auto got : {build_chains({{"s"}}, {{"a"}, {"a"}}), build_chains({{"s"}}, {{""}}),
                   build_chains({{""}}, {{"a"}}), build_chains({{"s"}, {"s"}}, {{"a"}})}) {
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.error().code(), ErrorCode::invalid_argument);
  }
}

TEST(ChainBuilder, DeterministicWhateverTheInputOrder) {
  std::vector<ChainSource> s = {{"s2", "B"}, {"s1", "A"}, {"s3", ""}};
  std::vector<ChainReceiver> r = {{"r5", "A"}, {"r1", "C"}, {"r3", "B"}, {"r2", ""}, {"r4", "A"}, {"r6", "C"},
                                  {"r7", "B"}};
  auto first = build(s, r);
  std::reverse(s.begin(), s.end());
  std::reverse(r.begin(), r.end());
  EXPECT_EQ(build(s, r), first);
  EXPECT_EQ(total_hops(first), 7u);
}

TEST(ChainBuilder, MaxChainLengthSplitsEvenlyFromTheSameSource) {
  auto chains = build({{"s"}}, receivers(7), ChainOptions{3});
  ASSERT_EQ(chains.size(), 3u);
  EXPECT_EQ(chains[0], (Chain{"s", {"r0", "r1", "r2"}}));
  EXPECT_EQ(chains[1], (Chain{"s", {"r3", "r4"}}));
  EXPECT_EQ(chains[2], (Chain{"s", {"r5", "r6"}}));
  // At or under the cap: not split.
  EXPECT_EQ(build({{"s"}}, receivers(3), ChainOptions{3}).size(), 1u);
  // Two sources, each of its 4 + 3 split under a cap of 2.
  auto two = build({{"a"}, {"b"}}, receivers(7), ChainOptions{2});
  ASSERT_EQ(two.size(), 4u);
  EXPECT_EQ(two[0].source, "a");
  EXPECT_EQ(two[1].source, "a");
  EXPECT_EQ(two[2], (Chain{"b", {"r4", "r5"}}));
  EXPECT_EQ(two[3], (Chain{"b", {"r6"}}));
}

}  // namespace chain_builder_test
}  // namespace ember::placement
