// The BPE model's flat tables (text/token_table.hpp): lookups, duplicates, growth past the reserve.
#include "text/token_table.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ember::text {
namespace token_table_test {

TEST(TokenTable, FindsWhatWasInsertedAndRefusesDuplicates) {
  TokenTable t;
  EXPECT_FALSE(t.find("a"));  // empty
  EXPECT_TRUE(t.insert("a", 7));
  EXPECT_TRUE(t.insert("", 8));
  EXPECT_TRUE(t.insert("\xE2\x96\x81the", 9));
  EXPECT_FALSE(t.insert("a", 10));
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(*t.find("a"), 7);
  EXPECT_EQ(*t.find(""), 8);
  EXPECT_EQ(*t.find("\xE2\x96\x81the"), 9);
  EXPECT_FALSE(t.find("ab"));
  EXPECT_EQ(t.token_at(2), "\xE2\x96\x81the");
  EXPECT_EQ(t.id_at(0), 7);
}

TEST(TokenTable, GrowsBeyondItsReserve) {
  TokenTable t;
  t.reserve(4);
  for (int i = 0; i < 50000; ++i) ASSERT_TRUE(t.insert("tok" + std::to_string(i), i));
  for (int i = 0; i < 50000; i += 7) ASSERT_EQ(*t.find("tok" + std::to_string(i)), i);
  EXPECT_FALSE(t.find("tok50000"));
  EXPECT_EQ(t.token_at(49999), "tok49999");
}

TEST(MergeTable, SetsFindsAndReplaces) {
  MergeTable m;
  EXPECT_EQ(m.find(1, 2), nullptr);
  for (int32_t a = 0; a < 300; ++a) {
    for (int32_t b = 0; b < 100; ++b) m.set(a, b, {a * 100 + b, a + b});
  }
  EXPECT_EQ(m.size(), 30000u);
  EXPECT_EQ(m.find(299, 99)->rank, 29999);
  EXPECT_EQ(m.find(7, 3)->id, 10);
  EXPECT_EQ(m.find(3, 7)->rank, 307);  // order matters
  EXPECT_EQ(m.find(300, 0), nullptr);
  m.set(7, 3, {1, 2});
  EXPECT_EQ(m.size(), 30000u);
  EXPECT_EQ(m.find(7, 3)->rank, 1);
}

}  // namespace token_table_test
}  // namespace ember::text
