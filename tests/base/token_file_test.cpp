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

TEST(TokenFile, AnApiTokenWithoutWordsMayInferAndReadMetricsAndAdminMayDoEverything) {
  File f("# API tokens\nreader-1\nwriter-2 admin\n\n  writer-3\t admin  \r\n");
  auto t = read_api_tokens(f.path(), "gateway.api_tokens_file");
  ASSERT_TRUE(t.ok()) << t.error().message();
  ASSERT_EQ(t->size(), 3u);
  const ApiToken& reader = (*t)[0];
  EXPECT_EQ(reader.token, "reader-1");
  EXPECT_EQ(reader.name, "line-2");
  EXPECT_TRUE(reader.infer_all && reader.metrics && reader.may_infer("anything"));
  EXPECT_FALSE(reader.repository);
  EXPECT_EQ(reader.rate, 0);
  EXPECT_EQ(reader.concurrent, 0u);
  for (const ApiToken& writer : {(*t)[1], (*t)[2]}) {
    EXPECT_TRUE(writer.infer_all && writer.repository && writer.metrics) << writer.token;
  }
  EXPECT_EQ((*t)[2].token, "writer-3");
  EXPECT_EQ((*t)[2].name, "line-5");
}

TEST(TokenFile, AnApiTokenCarriesItsScopesAndRates) {
  File f("tenant-a infer=mlp,resnet rate=2.5 concurrent=4 name=tenant-a\n"
         "ops repository metrics\n"
         "scraper metrics rate=10 burst=1\n"
         "everyone infer rate=100\n");
  auto t = read_api_tokens(f.path(), "gateway.api_tokens_file");
  ASSERT_TRUE(t.ok()) << t.error().message();
  ASSERT_EQ(t->size(), 4u);
  const ApiToken& a = (*t)[0];
  EXPECT_EQ(a.name, "tenant-a");
  EXPECT_FALSE(a.infer_all);
  EXPECT_EQ(a.models, (std::vector<std::string>{"mlp", "resnet"}));
  EXPECT_TRUE(a.may_infer("mlp") && a.may_infer("resnet"));
  EXPECT_FALSE(a.may_infer("bert") || a.may_infer("ml"));
  EXPECT_FALSE(a.repository || a.metrics);  // naming a scope names all of them
  EXPECT_DOUBLE_EQ(a.rate, 2.5);
  EXPECT_EQ(a.burst, 3u);  // the rate rounded up
  EXPECT_EQ(a.concurrent, 4u);
  const ApiToken& ops = (*t)[1];
  EXPECT_TRUE(ops.repository && ops.metrics);
  EXPECT_FALSE(ops.infer_all || ops.may_infer("mlp"));
  EXPECT_EQ((*t)[2].burst, 1u);
  EXPECT_FALSE((*t)[2].may_infer("mlp"));
  EXPECT_TRUE((*t)[3].infer_all);
  EXPECT_FALSE((*t)[3].metrics);
  EXPECT_EQ((*t)[3].burst, 100u);
}

TEST(TokenFile, AnApiTokenListRefusesAnUnknownWordABadRateAndWhatCannotBeAToken) {
  struct Bad {
    std::string text;
    std::string error;
  };
  for (const Bad& b : {Bad{"", "no token in the file"},
                       Bad{"good\nwriter Admin\n", "line 2: 'Admin' is not a scope or a rate"},
                       Bad{"writer admin extra\n", "line 1: 'extra' is not a scope or a rate"},
                       Bad{"caf\xc3\xa9 admin\n", "line 1: a token holds a character outside printable ASCII"},
                       Bad{"t rate=0\n", "line 1: rate=0 is not a positive number"},
                       Bad{"t rate=-1\n", "rate=-1 is not a positive number"},
                       Bad{"t rate=fast\n", "rate=fast is not a positive number"},
                       Bad{"t concurrent=2.5\n", "concurrent=2.5 is not a positive whole number"},
                       Bad{"t burst=4\n", "burst= needs rate="},
                       Bad{"t infer=a,,b\n", "infer= names an empty model"},
                       Bad{"t infer infer=a\n", "'infer' twice"},
                       Bad{"t rate=1 rate=2\n", "'rate' twice"},
                       Bad{"t name=has/slash\n", "name=has/slash is not a name"},
                       Bad{"a name=x\nb name=x\n", "line 2: name=x is line 1's too"},
                       Bad{"a\n# again\na admin\n", "line 3: the same token as line 1"}}) {
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
