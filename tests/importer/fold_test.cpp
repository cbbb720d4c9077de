// Folding on constants (importer/fold.cpp), numpy's rules in both probe lanes.
#include "importer/fold.hpp"

#include <gtest/gtest.h>

#include "tests/must.hpp"

namespace ember::importer {
namespace fold_test {

using ember::testing::must;

TEST(Fold, BroadcastingFollowsNumpy) {
  EXPECT_EQ(must(broadcast_dims({3, 1}, {4})), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(must(broadcast_dims({}, {2, 2})), (std::vector<int64_t>{2, 2}));
  EXPECT_FALSE(broadcast_dims({3}, {4}).ok());
}

TEST(Fold, IntegerArithmeticKeepsBothLanes) {
  // The batch at the two probes (2, 7) times a fixed 3.
  const Constant batch = Constant::ints({1}, {2}, {7});
  const Constant three = Constant::ints({}, {3});
  const Constant r = must(fold_arith(Arith::mul, batch, three));
  EXPECT_EQ(r.a, (std::vector<int64_t>{6}));
  EXPECT_EQ(r.b, (std::vector<int64_t>{21}));
  EXPECT_FALSE(r.fixed());
  EXPECT_EQ(must(fold_arith(Arith::div, Constant::ints({2}, {7, -7}), three)).a, (std::vector<int64_t>{2, -2}));
  EXPECT_FALSE(fold_arith(Arith::div, three, Constant::ints({}, {0})).ok());
  EXPECT_FALSE(fold_arith(Arith::add, three, Constant::floats({}, {1.f})).ok());  // types differ
  EXPECT_EQ(must(fold_arith(Arith::sub, Constant::floats({2}, {1, 2}), Constant::floats({}, {0.5f}))).f,
            (std::vector<float>{0.5f, 1.5f}));
}

TEST(Fold, GatherConcatSliceTranspose) {
  const Constant m = Constant::ints({2, 3}, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(must(fold_gather(m, Constant::ints({2}, {-1, 0}), 1)).a, (std::vector<int64_t>{2, 0, 5, 3}));
  EXPECT_EQ(must(fold_gather(m, Constant::ints({}, {1}), 0)).dims, (std::vector<int64_t>{3}));
  EXPECT_FALSE(fold_gather(m, Constant::ints({}, {2}), 0).ok());  // out of range
  EXPECT_FALSE(fold_gather(m, Constant::ints({}, {0}, {1}), 0).ok());  // an index that depends on a free dim

  const Constant a = Constant::ints({2}, {1, 2}), b = Constant::ints({1}, {3});
  EXPECT_EQ(must(fold_concat({&a, &b}, 0)).a, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_FALSE(fold_concat({&a, &m}, 0).ok());

  const Constant v = Constant::ints({5}, {0, 1, 2, 3, 4});
  EXPECT_EQ(must(fold_slice(v, {1}, {INT64_MAX}, {}, {2})).a, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(must(fold_slice(v, {-1}, {INT64_MIN}, {0}, {-1})).a, (std::vector<int64_t>{4, 3, 2, 1, 0}));
  EXPECT_EQ(must(fold_slice(v, {-2}, {10}, {}, {})).a, (std::vector<int64_t>{3, 4}));
  EXPECT_FALSE(fold_slice(v, {0}, {1}, {}, {0}).ok());

  const Constant t = must(fold_transpose(m, {}));
  EXPECT_EQ(t.dims, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(t.a, (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  EXPECT_FALSE(fold_transpose(m, {0, 0}).ok());
}

TEST(Fold, CastsAndTheirLimits) {
  EXPECT_EQ(must(fold_cast(Constant::floats({2}, {1.9f, -1.9f}), false)).a, (std::vector<int64_t>{1, -1}));
  EXPECT_EQ(must(fold_cast(Constant::ints({1}, {3}), true)).f, (std::vector<float>{3.f}));
  EXPECT_FALSE(fold_cast(Constant::ints({1}, {2}, {7}), true).ok());  // a free dim as a float
  EXPECT_FALSE(fold_cast(Constant::floats({1}, {1e30f}), false).ok());
}

TEST(Fold, GrowingAConstantPastItsOperandsIsBounded) {
  const Constant col = Constant::floats({1 << 13, 1}, std::vector<float>(1 << 13, 1.f));
  const Constant row = Constant::floats({1, 1 << 13}, std::vector<float>(1 << 13, 1.f));
  auto r = fold_arith(Arith::add, col, row);  // 2^26 elements from two of 2^13
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("folding would make a constant of 67108864 elements"), std::string::npos);
}

}  // namespace fold_test
}  // namespace ember::importer
