// read_file (base/read_file.hpp): a whole file, the bound, and why one cannot be read.
#include "base/read_file.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace ember {
namespace read_file_test {

TEST(ReadFile, ReadsAWholeFileUpToItsBound) {
  const std::string path = ::testing::TempDir() + "/read_file_test.txt";
  const std::string body(100'000, 'x');
  std::ofstream(path, std::ios::binary) << body;
  auto text = read_file(path, 100'000, "a test file");
  ASSERT_TRUE(text.ok()) << text.error().message();
  EXPECT_EQ(*text, body);
  auto over = read_file(path, 99'999, "a test file");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(over.error().message().find("read_file_test.txt: larger than"), std::string::npos);
  EXPECT_NE(over.error().message().find("; not a test file"), std::string::npos) << over.error().message();
}

TEST(ReadFile, SaysWhyAFileCannotBeRead) {
  auto missing = read_file(::testing::TempDir() + "/no-such-file", 10, "x");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ErrorCode::not_found);
  EXPECT_NE(missing.error().message().find("cannot open: No such file or directory"), std::string::npos);
  auto dir = read_file(::testing::TempDir(), 10, "x");
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error().code(), ErrorCode::io_error);
  EXPECT_NE(dir.error().message().find("cannot read"), std::string::npos) << dir.error().message();
}

}  // namespace read_file_test
}  // namespace ember
