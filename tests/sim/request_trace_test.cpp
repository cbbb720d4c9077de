// RequestTrace (sim/request_trace.hpp): the CSV a simulation replays; order, models, and every
// refusal naming its line.
#include "sim/request_trace.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace ember::sim {
namespace request_trace_test {

TEST(RequestTrace, ReadsRequestsSortsThemStablyAndNamesModelsInOrderOfAppearance) {
  auto t = parse_request_trace(
      "# made by a script\r\ntime_s,model\r\n0.5,bert\n0.25,mlp-2\n\n0.5,mlp-2\n# a comment\n0,bert\n1.000001,x.y_z\n",
      "t.csv");
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(t->models, (std::vector<std::string>{"bert", "mlp-2", "x.y_z"}));
  ASSERT_EQ(t->requests.size(), 5u);
  const std::vector<std::pair<uint64_t, uint32_t>> want = {{0, 0}, {250'000, 1}, {500'000, 0}, {500'000, 1},
                                                           {1'000'001, 2}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(t->requests[i].at_us, want[i].first) << i;
    EXPECT_EQ(t->requests[i].model, want[i].second) << i;  // the two at 0.5 s keep file order
  }
  EXPECT_EQ(t->duration_us(), 1'000'001u);
}

TEST(RequestTrace, AHeaderAloneIsAnEmptyTrace) {
  auto t = parse_request_trace("time_s,model\n", "t.csv");
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->requests.empty());
  EXPECT_EQ(t->duration_us(), 0u);
}

TEST(RequestTrace, RefusesWhatItCannotReplayNamingTheLine) {
  struct Case {
    const char* csv;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"", "t.csv: empty: no 'time_s,model' header"},
           {"# only a comment\n", "empty: no 'time_s,model' header"},
           {"time,model\n1,a\n", "t.csv:1: the first line must be the header"},
           {"time_s,model\n1\n", "t.csv:2: a request is 'time_s,model': two fields"},
           {"time_s,model\n1,a,b\n", "t.csv:2: a request is 'time_s,model'"},
           {"time_s,model\n0,a\n-1,a\n", "t.csv:3: '-1' is not a time in seconds"},
           {"time_s,model\nsoon,a\n", "'soon' is not a time"},
           {"time_s,model\n1e400,a\n", "'1e400' is not a time"},
           {"time_s,model\nnan,a\n", "'nan' is not a time"},
           {"time_s,model\n2600000,a\n", "'2600000' is not a time in seconds between 0 and 30 days"},
           {"time_s,model\n 1,a\n", "' 1' is not a time"},
           {"time_s,model\n1,\n", "t.csv:2: '' is not a model name"},
           {"time_s,model\n1,a b\n", "'a b' is not a model name"},
           {"time_s,model\n1,../etc\n", "'../etc' is not a model name"},
       }) {
    auto t = parse_request_trace(c.csv, "t.csv");
    ASSERT_FALSE(t.ok()) << c.csv;
    EXPECT_EQ(t.error().code(), ErrorCode::invalid_argument) << c.csv;
    EXPECT_NE(t.error().message().find(c.message), std::string::npos) << t.error().message();
  }
  auto big = parse_request_trace("time_s,model\n0,a\n1,a\n2,a\n", "t.csv", 2);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message().find("t.csv:4: more than 2 requests"), std::string::npos) << big.error().message();
  auto name = parse_request_trace("time_s,model\n0," + std::string(129, 'm') + "\n", "t.csv");
  ASSERT_FALSE(name.ok());
  EXPECT_NE(name.error().message().find("is not a model name"), std::string::npos);
}

TEST(RequestTrace, LoadsAFileAndSaysWhyOneCannotBeRead) {
  const std::string path = ::testing::TempDir() + "/request_trace_test.csv";
  std::ofstream(path) << "time_s,model\n2.5,a\n";
  auto t = load_request_trace(path);
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(t->requests.size(), 1u);
  EXPECT_EQ(t->requests[0].at_us, 2'500'000u);
  auto missing = load_request_trace(path + ".missing");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ErrorCode::not_found);
  EXPECT_NE(missing.error().message().find("cannot open"), std::string::npos);
  auto dir = load_request_trace(::testing::TempDir());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error().code(), ErrorCode::io_error);
}

}  // namespace request_trace_test
}  // namespace ember::sim
