#include "cli/image_input.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "tests/must.hpp"

namespace ember::cli {
namespace image_input_test {

using ember::testing::must;

std::string pnm(const std::string& header, const std::string& raster) { return header + raster; }

std::string bytes(std::initializer_list<int> values) {
  std::string s;
  for (int v : values) s.push_back(static_cast<char>(v));
  return s;
}

TEST(ImageInput, ParsesAGrayP5WithComments) {
  const auto image = must(ImageInput::parse(pnm("P5\n# made by hand\n3 2 # width height\n255\n", bytes({0, 10, 20, 30, 40, 255}))));
  EXPECT_EQ(image.width(), 3);
  EXPECT_EQ(image.height(), 2);
  EXPECT_EQ(image.channels(), 1);
  EXPECT_EQ(image.sample(0, 1, 0), 10);
  EXPECT_EQ(image.sample(1, 0, 0), 30);
  EXPECT_EQ(image.sample(1, 2, 0), 255);
}

TEST(ImageInput, ParsesAnRgbP6AndIgnoresBytesAfterTheRaster) {
  const auto image = must(ImageInput::parse(pnm("P6 2 1 255 ", bytes({1, 2, 3, 4, 5, 6}) + "P6 next image")));
  EXPECT_EQ(image.channels(), 3);
  EXPECT_EQ(image.sample(0, 0, 2), 3);
  EXPECT_EQ(image.sample(0, 1, 0), 4);
}

TEST(ImageInput, RefusesAnotherMagicAsUnsupported) {
  for (const std::string& file : {std::string("P2\n1 1\n255\n0\n"), std::string("P3\n1 1\n255\n0 0 0\n"),
                                  std::string("GIF89a"), std::string("P"), std::string(), std::string("P4\n1 1\n\x00", 7)}) {
    auto r = ImageInput::parse(file);
    ASSERT_FALSE(r.ok()) << file;
    EXPECT_EQ(r.error().code(), ErrorCode::unsupported) << file;
    EXPECT_NE(r.error().message().find("binary PGM (P5) or PPM (P6)"), std::string::npos) << r.error().message();
  }
}

TEST(ImageInput, QuotesAnUnprintableMagicInHex) {
  auto r = ImageInput::parse("\x89PNG\r\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("it starts with '\\x89P'"), std::string::npos) << r.error().message();
}

TEST(ImageInput, RefusesAMaxvalOtherThan255) {
  for (const char* maxval : {"65535", "15", "254", "1"}) {
    auto r = ImageInput::parse(pnm(std::string("P5 1 1 ") + maxval + "\n", bytes({0, 0})));
    ASSERT_FALSE(r.ok()) << maxval;
    EXPECT_EQ(r.error().code(), ErrorCode::unsupported);
    EXPECT_NE(r.error().message().find(std::string("maxval ") + maxval), std::string::npos) << r.error().message();
  }
}

TEST(ImageInput, RefusesATruncatedFileAsCorrupt) {
  const std::pair<std::string, const char*> cases[] = {
      {pnm("P5\n3 2\n255\n", bytes({0, 1, 2, 3, 4})), "truncated: a 3x2 gray raster is 6 bytes, the file holds 5"},
      {pnm("P6\n2 1\n255\n", bytes({0, 1, 2})), "truncated: a 2x1 RGB raster is 6 bytes, the file holds 3"},
      {"P5\n3 2\n255", "no whitespace byte after maxval"},
      {"P5\n3 2\n", "header ends before its maxval"},
      {"P5\n3", "header ends before its height"},
      {"P5", "header ends before its width"},
      {"P5\n# a comment to the end", "header ends before its width"},
      {"P53 2 255\n", "no whitespace before the width"},
      {"P5 x 2 255\n", "width is not a decimal number"},
      {"P5 -3 2 255\n", "width is not a decimal number"},
      {"P5 0 2 255\n", "empty image (0x2)"},
      {"P5 40000 2 255\n", "width above 32768"},
      {"P5 3 99999999999999999999 255\n", "height above 32768"},
  };
  for (const auto& [file, message] : cases) {
    auto r = ImageInput::parse(file);
    ASSERT_FALSE(r.ok()) << file;
    EXPECT_EQ(r.error().code(), ErrorCode::corrupt) << file;
    EXPECT_NE(r.error().message().find(message), std::string::npos) << r.error().message();
  }
}

TEST(ImageInput, ReadNamesTheFile) {
  const std::string path = ::testing::TempDir() + "image_input_test.pgm";
  std::ofstream(path, std::ios::binary) << "P5 2 2 255\n" << bytes({1, 2});
  auto r = ImageInput::read(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message().rfind(path + ": truncated", 0), 0u) << r.error().message();
  std::ofstream(path, std::ios::binary) << "P5 2 2 255\n" << bytes({1, 2, 3, 4});
  EXPECT_EQ(must(ImageInput::read(path)).sample(1, 1, 0), 4);
  std::remove(path.c_str());
  auto missing = ImageInput::read(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ErrorCode::not_found);
}

TEST(ImageInput, GrayFillsThreeChannelsNormalisedToMinusOneOne) {
  const auto image = must(ImageInput::parse(pnm("P5 2 1 255\n", bytes({0, 255}))));
  const auto t = must(image.to_tensor({-1, 3, -1, -1}, {}));
  EXPECT_EQ(t.shape, (std::vector<int64_t>{1, 3, 1, 2}));
  EXPECT_EQ(t.data, (std::vector<float>{-1, 1, -1, 1, -1, 1}));
}

TEST(ImageInput, RgbFillsOneChannelWithItsLuma) {
  const auto image = must(ImageInput::parse(pnm("P6 1 1 255\n", bytes({255, 0, 0}))));
  const auto t = must(image.to_tensor({1, 1, 1, 1}, {{0.f}, {1.f}}));
  ASSERT_EQ(t.data.size(), 1u);
  EXPECT_NEAR(t.data[0], 0.299f, 1e-6);
}

TEST(ImageInput, NormalisesPerChannel) {
  const auto image = must(ImageInput::parse(pnm("P6 1 1 255\n", bytes({255, 0, 51}))));
  const Normalisation imagenet{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
  const auto t = must(image.to_tensor({1, 3, -1, -1}, imagenet));
  EXPECT_NEAR(t.data[0], (1.f - 0.485f) / 0.229f, 1e-5);
  EXPECT_NEAR(t.data[1], (0.f - 0.456f) / 0.224f, 1e-5);
  EXPECT_NEAR(t.data[2], (0.2f - 0.406f) / 0.225f, 1e-5);
}

// The expected values are PyTorch's torch.nn.functional.interpolate(mode="bilinear",
// align_corners=False) on the same samples (half-pixel centres, edges clamped), which agrees with
// OpenCV's INTER_LINEAR and ONNX Resize's linear half_pixel; the identity: 1 on [0, 255].
TEST(ImageInput, ResizesBilinearlyWithHalfPixelCentres) {
  const auto row = must(ImageInput::parse(pnm("P5 2 1 255\n", bytes({0, 255}))));
  const auto up = must(row.to_tensor({1, 1, 1, 4}, {{0.f}, {1.f / 255.f}}));
  ASSERT_EQ(up.data.size(), 4u);
  const float want_up[] = {0.f, 63.75f, 191.25f, 255.f};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(up.data[i], want_up[i], 1e-3) << i;

  const auto block = must(ImageInput::parse(pnm("P5 4 2 255\n", bytes({0, 100, 200, 40, 20, 120, 220, 60}))));
  const auto down = must(block.to_tensor({1, 1, 1, 2}, {{0.f}, {1.f / 255.f}}));
  ASSERT_EQ(down.shape, (std::vector<int64_t>{1, 1, 1, 2}));
  EXPECT_NEAR(down.data[0], (0 + 100 + 20 + 120) / 4.f, 1e-3);
  EXPECT_NEAR(down.data[1], (200 + 40 + 220 + 60) / 4.f, 1e-3);

  const auto tall = must(row.to_tensor({1, 1, 3, -1}, {{0.f}, {1.f / 255.f}}));  // height fixed, width free
  EXPECT_EQ(tall.shape, (std::vector<int64_t>{1, 1, 3, 2}));
  ASSERT_EQ(tall.data.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(tall.data[i], i % 2 ? 255.f : 0.f, 1e-3) << i;
}

TEST(ImageInput, RefusesShapesAndNormalisationsThatDoNotFit) {
  const auto image = must(ImageInput::parse(pnm("P5 1 1 255\n", bytes({7}))));
  const std::pair<std::vector<int64_t>, const char*> shapes[] = {
      {{1, 3, 48}, "not [N, C, H, W]"},
      {{2, 3, 48, 320}, "batch must be 1 or free"},
      {{1, 4, 48, 320}, "channels must be 1 or 3"},
      {{1, -1, 48, 320}, "channels must be 1 or 3"},
      {{1, 3, 0, 320}, "height and width must be sizes or free"},
  };
  for (const auto& [shape, message] : shapes) {
    auto r = image.to_tensor(shape, {});
    ASSERT_FALSE(r.ok()) << message;
    EXPECT_EQ(r.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(r.error().message().find(message), std::string::npos) << r.error().message();
  }
  auto two_means = image.to_tensor({1, 3, 1, 1}, {{0.5f, 0.5f}, {0.5f}});
  ASSERT_FALSE(two_means.ok());
  EXPECT_NE(two_means.error().message().find("mean has 2 values; give 1 or one per channel (3)"), std::string::npos);
  auto zero = image.to_tensor({1, 1, 1, 1}, {{0.5f}, {0.f}});
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().message().find("std must be finite and not 0"), std::string::npos);
}

}  // namespace image_input_test
}  // namespace ember::cli
