#include "base/status.hpp"

#include <gtest/gtest.h>

#include <memory>

namespace ember {
namespace status_test {

Result<int> half(int x) {
  if (x % 2) return invalid_argument(std::to_string(x) + " is odd");
  return x / 2;
}

Result<int> quarter(int x) {
  EMBER_ASSIGN_OR_RETURN(int h, half(x));
  EMBER_ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

Status check_positive(int x) {
  if (x <= 0) return invalid_argument("not positive");
  return Status::OK();
}

Status both(int a, int b) {
  EMBER_RETURN_IF_ERROR(check_positive(a));
  EMBER_RETURN_IF_ERROR(check_positive(b));
  return Status::OK();
}

TEST(Result, ValueOrError) {
  auto ok = quarter(8);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 2);
  auto bad = quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(bad.error().message(), "3 is odd");
}

TEST(Result, MoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

TEST(Status, ReturnIfError) {
  EXPECT_TRUE(both(1, 2).ok());
  EXPECT_FALSE(both(1, -2).ok());
  EXPECT_EQ(both(-1, 2).error().message(), "not positive");
}

TEST(Error, ContextAndNames) {
  Error e = corrupt("bad checksum").with_context("weights.safetensors");
  EXPECT_EQ(e.message(), "weights.safetensors: bad checksum");
  EXPECT_EQ(e.to_string(), "corrupt: weights.safetensors: bad checksum");
  EXPECT_EQ(to_string(ErrorCode::out_of_memory), "out_of_memory");
}

}  // namespace status_test
}  // namespace ember
