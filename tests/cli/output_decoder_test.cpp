#include "cli/output_decoder.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/must.hpp"

namespace ember::cli {
namespace output_decoder_test {

using ember::testing::must;

OutputDecoder decoder(std::vector<std::string> labels, DecodeMode mode, int64_t top = 5, int64_t blank = 0) {
  return must(OutputDecoder::create(std::move(labels), {mode, top, blank}));
}

/// [1, T, C] of one-hot-ish columns: column t's largest value is at classes[t].
std::vector<float> columns(const std::vector<int64_t>& classes, int64_t c, float peak = 0.9f) {
  std::vector<float> data(classes.size() * static_cast<size_t>(c), 0.01f);
  for (size_t t = 0; t < classes.size(); ++t) data[t * static_cast<size_t>(c) + static_cast<size_t>(classes[t])] = peak;
  return data;
}

TEST(OutputDecoder, ParsesOneLabelPerLine) {
  EXPECT_EQ(OutputDecoder::parse_labels("cat\ndog\n"), (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(OutputDecoder::parse_labels("cat\r\ndog"), (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(OutputDecoder::parse_labels("a\n\n \n"), (std::vector<std::string>{"a", "", " "}));
  EXPECT_EQ(OutputDecoder::parse_labels("\xe4\xb8\x80\n"), (std::vector<std::string>{"\xe4\xb8\x80"}));
  EXPECT_TRUE(OutputDecoder::parse_labels("").empty());
}

TEST(OutputDecoder, TopOrdersEachRowsClassesByValue) {
  const auto d = decoder({"cat", "dog", "owl", "eel"}, DecodeMode::top, 3);
  const auto rows = must(d.decode({2, 4}, {0.1f, 0.7f, 0.1f, 0.05f, 3.f, -1.f, 4.f, 2.f}));
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_EQ(rows[0].top.size(), 3u);
  EXPECT_EQ(rows[0].top[0].label, "dog");
  EXPECT_FLOAT_EQ(rows[0].top[0].value, 0.7f);
  EXPECT_EQ(rows[0].top[1].index, 0);  // equal values: class order
  EXPECT_EQ(rows[0].top[2].index, 2);
  EXPECT_EQ(rows[1].top[0].label, "owl");
  EXPECT_EQ(rows[1].top[1].label, "cat");
  EXPECT_EQ(rows[1].top[2].label, "eel");
}

TEST(OutputDecoder, TopWithoutLabelsNamesClassesByNumberAndStopsAtC) {
  const auto rows = must(decoder({}, DecodeMode::top, 10).decode({3}, {1.f, 3.f, 2.f}));
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_EQ(rows[0].top.size(), 3u);
  EXPECT_EQ(rows[0].top[0].label, "1");
  EXPECT_EQ(rows[0].top[2].label, "0");
}

TEST(OutputDecoder, CtcCollapsesRepeatsAndDropsTheBlank) {
  // Classes: 0 blank, then h e l o. "hh e l _ l oo" reads "hello": a blank separates the two l's.
  const auto d = decoder({"h", "e", "l", "o"}, DecodeMode::ctc);
  const auto rows = must(d.decode({1, 8, 5}, columns({1, 1, 2, 3, 0, 3, 4, 4}, 5)));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].text, "hello");
  EXPECT_FLOAT_EQ(rows[0].score, 0.9f);
  const auto without_blank = must(d.decode({1, 3, 5}, columns({3, 3, 3}, 5)));
  EXPECT_EQ(without_blank[0].text, "l");  // l l l without a blank between is one l
  const auto empty = must(d.decode({1, 2, 5}, columns({0, 0}, 5)));
  EXPECT_EQ(empty[0].text, "");
  EXPECT_FLOAT_EQ(empty[0].score, 0.f);
}

TEST(OutputDecoder, CtcDecodesEveryRowAndTheScoreIsTheMeanOfTheKeptColumns) {
  // Labels as PaddleOCR's recognisers have them: the file's lines, then a space appended.
  const auto d = decoder({"E", "m", "2", " "}, DecodeMode::ctc);
  std::vector<float> data = columns({1, 0, 4, 3}, 5);
  data[2 * 5 + 4] = 0.5f;
  const std::vector<float> second = columns({2, 2, 0, 0}, 5);
  data.insert(data.end(), second.begin(), second.end());
  const auto rows = must(d.decode({2, 4, 5}, data));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].text, "E 2");
  EXPECT_NEAR(rows[0].score, (0.9f + 0.5f + 0.9f) / 3, 1e-6);
  EXPECT_EQ(rows[1].text, "m");
}

TEST(OutputDecoder, CtcBlankMayBeTheLastClass) {
  const auto d = decoder({"a", "b"}, DecodeMode::ctc, 5, 2);
  EXPECT_EQ(must(d.decode({1, 5, 3}, columns({0, 2, 0, 1, 1}, 3)))[0].text, "aab");
}

TEST(OutputDecoder, RefusesOptionsThatMeanNothing) {
  auto top = OutputDecoder::create({}, {DecodeMode::top, 0, 0});
  ASSERT_FALSE(top.ok());
  EXPECT_NE(top.error().message().find("top must be at least 1"), std::string::npos);
  auto blank = OutputDecoder::create({"a"}, {DecodeMode::ctc, 5, -1});
  ASSERT_FALSE(blank.ok());
  EXPECT_NE(blank.error().message().find("blank must be a class"), std::string::npos);
  auto no_labels = OutputDecoder::create({}, {DecodeMode::ctc, 5, 0});
  ASSERT_FALSE(no_labels.ok());
  EXPECT_NE(no_labels.error().message().find("ctc decoding needs labels"), std::string::npos);
}

TEST(OutputDecoder, RefusesOutputsAndLabelsThatDoNotFit) {
  const auto ctc = decoder({"a", "b"}, DecodeMode::ctc);
  const auto top = decoder({"a", "b", "c"}, DecodeMode::top);
  struct Case {
    const OutputDecoder& d;
    std::vector<int64_t> shape;
    size_t values;
    const char* message;
  };
  const Case cases[] = {
      {ctc, {1, 3}, 3, "ctc decoding needs an output [N, T, C]; this one is [1, 3]"},
      {ctc, {1, 2, 3, 1}, 6, "ctc decoding needs an output [N, T, C]; this one is [1, 2, 3, 1]"},
      {top, {1, 1, 3}, 3, "top decoding needs an output [C] or [N, C]; this one is [1, 1, 3]"},
      {ctc, {1, 2, 3}, 5, "output [1, 2, 3] needs 6 values, it carries 5"},
      {ctc, {1, -1, 3}, 3, "output [1, -1, 3] has an empty or unknown dimension"},
      {ctc, {1, 2, 4}, 8, "2 labels for an output of 4 classes (the blank and one class per label): expected 3"},
      {ctc, {1, 2, 2}, 4, "2 labels for an output of 2 classes (the blank and one class per label): expected 1"},
      {top, {2, 4}, 8, "3 labels for an output of 4 classes: expected 4"},
  };
  for (const auto& c : cases) {
    auto r = c.d.decode(c.shape, std::vector<float>(c.values, 0.f));
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_EQ(r.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(r.error().message().find(c.message), std::string::npos) << r.error().message();
  }
  auto blank = decoder({"a", "b"}, DecodeMode::ctc, 5, 3).decode({1, 1, 3}, {0.f, 0.f, 0.f});
  ASSERT_FALSE(blank.ok());
  EXPECT_NE(blank.error().message().find("blank 3 is not one of the 3 classes"), std::string::npos);
}

}  // namespace output_decoder_test
}  // namespace ember::cli
