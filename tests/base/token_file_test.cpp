// Secrets in files (base/token_file.hpp): one admin token, a list of API tokens, and their
// comparison in constant time.
#include "base/token_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace ember {
namespace token_file_test {

/// A file holding `text`, removed at the end of the test.
class File {
 public:
  explicit File(const std::string& text) {
    char name[] = "/tmp/ember-token-XXXXXX";
    const int fd = ::mkstemp(name);
    EXPECT_GE(fd, 0);
    ::close(fd);
    path_ = name;
    std::ofstream(path_, std::ios::binary) << text;
  }
  ~File() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(TokenFile, OneTokenWithoutItsSurroundingWhitespace) {
  File f("  s3cret\n\n");
  auto t = read_token_file(f.path(), "manager.admin_token_file");
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(*t, "s3cret");
  File empty(" \n\t");
  auto e = read_token_file(empty.path(), "manager.admin_token_file");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("manager.admin_token_file (" + empty.path() + "): the file is empty"),
            std::string::npos);
}

TEST(TokenFile, AListOfTokensSkipsBlankLinesAndComments) {
  File f("# API tokens\nalpha\r\n\n   beta-2  \n\t# old: gamma\nDelta_3\n");
  auto t = read_token_list(f.path(), "gateway.api_tokens_file");
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(*t, (std::vector<std::string>{"alpha", "beta-2", "Delta_3"}));
}

TEST(TokenFile, AListRefusesWhatCannotBeAToken) {
  struct Bad {
    std::string text;
    std::string error;
  };
  for (const Bad& b : {Bad{"", "no token in the file"}, Bad{"# only a comment\n\n", "no token in the file"},
                       Bad{"good\ntwo words\n", "line 2: a token holds a space"},
                       Bad{"caf\xc3\xa9\n", "line 1: a token holds a space or a character outside printable ASCII"}}) {
    File f(b.text);
    auto t = read_token_list(f.path(), "gateway.api_tokens_file");
    ASSERT_FALSE(t.ok()) << b.text;
    EXPECT_EQ(t.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(t.error().message().find(b.error), std::string::npos) << t.error().message();
  }
  auto missing = read_token_list("/nonexistent/api.tokens", "gateway.api_tokens_file");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ErrorCode::io_error);
  EXPECT_NE(missing.error().message().find("gateway.api_tokens_file (/nonexistent/api.tokens): cannot read"),
            std::string::npos);
}

TEST(TokenFile, AnApiTokenMayCarryTheAdminScope) {
  File f("# API tokens\nreader-1\nwriter-2 admin\n\n  writer-3\t admin  \r\n");
  auto t = read_api_tokens(f.path(), "gateway.api_tokens_file");
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(*t, (std::vector<ApiToken>{{"reader-1", false}, {"writer-2", true}, {"writer-3", true}}));
}

TEST(TokenFile, AnApiTokenListRefusesAnUnknownScopeAndWhatCannotBeAToken) {
  struct Bad {
    std::string text;
    std::string error;
  };
  for (const Bad& b : {Bad{"", "no token in the file"},
                       Bad{"good\nwriter Admin\n", "line 2: after the token only the scope 'admin' may follow"},
                       Bad{"writer admin extra\n", "line 1: after the token only the scope 'admin' may follow"},
                       Bad{"caf\xc3\xa9 admin\n", "line 1: a token holds a character outside printable ASCII"}}) {
    File f(b.text);
    auto t = read_api_tokens(f.path(), "gateway.api_tokens_file");
    ASSERT_FALSE(t.ok()) << b.text;
    EXPECT_EQ(t.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(t.error().message().find(b.error), std::string::npos) << t.error().message();
    EXPECT_NE(t.error().message().find("gateway.api_tokens_file (" + f.path() + ")"), std::string::npos);
  }
}

TEST(TokenFile, ConstantTimeEqualIsEquality) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal("s3cret", "s3cret"));
  EXPECT_FALSE(constant_time_equal("s3cret", "s3creT"));
  EXPECT_FALSE(constant_time_equal("s3cret", "s3cre"));
  EXPECT_FALSE(constant_time_equal("s3cre", "s3cret"));
  EXPECT_FALSE(constant_time_equal("", "x"));
  EXPECT_FALSE(constant_time_equal(std::string_view("a\0", 2), "a"));  // a trailing NUL is a difference
}

}  // namespace token_file_test
}  // namespace ember
