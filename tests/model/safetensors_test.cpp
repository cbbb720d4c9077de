#include "model/safetensors.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "tests/model/model_test_util.hpp"

namespace ember::gpu {
namespace safetensors_test {

// A file: 8-byte length, `header`, then `data_bytes` bytes of data.
std::string file_with(const std::string& header, size_t data_bytes) {
  std::string f(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) f[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return f + header + std::string(data_bytes, '\x01');
}

Result<SafetensorsIndex> parse(const std::string& f) {
  return parse_safetensors(reinterpret_cast<const uint8_t*>(f.data()), f.size(), f.size(), "w.safetensors");
}

TEST(Safetensors, RoundTripsWhatItWrites) {
  testing::TempDir dir;
  std::vector<float> a(6, 1.5f);
  std::vector<int64_t> b = {1, 2, 3};
  std::vector<TensorToWrite> tensors = {{"a", {DType::f32, Shape{2, 3}}, a.data()}, {"b", {DType::i64, Shape{3}}, b.data()}};
  ASSERT_TRUE(write_safetensors(dir / "t.safetensors", tensors, {{"k", "v"}}).ok());
  const std::string f = testing::read_file(dir / "t.safetensors");
  EXPECT_EQ(f.size() % 8, (6 * 4 + 3 * 8) % 8);
  auto index = parse(f);
  ASSERT_TRUE(index.ok()) << index.error().message();
  EXPECT_EQ(index->data_offset % 8, 0u);
  ASSERT_EQ(index->tensors.size(), 2u);
  EXPECT_EQ(index->tensors[0].name, "a");
  EXPECT_EQ(index->tensors[0].data, (ByteRange{0, 24}));
  EXPECT_EQ(index->tensors[1].desc.dtype, DType::i64);
  EXPECT_EQ(index->tensors[1].data, (ByteRange{24, 24}));
  EXPECT_EQ(index->metadata.at("k"), "v");
  float back[6];
  std::memcpy(back, f.data() + index->data_offset, sizeof(back));
  EXPECT_EQ(back[5], 1.5f);
  EXPECT_NE(index->find("b"), nullptr);
  EXPECT_EQ(index->find("c"), nullptr);
}

TEST(Safetensors, EmptyTensorsAndScalars) {
  auto index = parse(file_with(R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"e":{"dtype":"F32","shape":[0,3],"data_offsets":[4,4]}})", 4));
  ASSERT_TRUE(index.ok()) << index.error().message();
  EXPECT_EQ(index->tensors.size(), 2u);
}

struct Bad {
  std::string file;
  std::string expect;  // substring of the message
};

class SafetensorsErrors : public ::testing::TestWithParam<Bad> {};

TEST_P(SafetensorsErrors, AreCorruptOrUnsupportedAndNameTheField) {
  auto r = parse(GetParam().file);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error().code() == ErrorCode::corrupt || r.error().code() == ErrorCode::unsupported) << r.error().to_string();
  EXPECT_NE(r.error().message().find("w.safetensors"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find(GetParam().expect), std::string::npos) << r.error().message();
}

const std::string kOk = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

INSTANTIATE_TEST_SUITE_P(
    All, SafetensorsErrors,
    ::testing::Values(
        Bad{"abc", "shorter than the 8-byte header length"},
        Bad{file_with(kOk, 8).substr(0, 20), "truncated"},
        Bad{std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) + "{}", "exceeds"},
        Bad{file_with("{not json", 0), "not valid JSON"},
        Bad{file_with("[1,2]", 0), "must be a JSON object"},
        Bad{file_with(R"({"a":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", 8), "tensor 'a': field 'dtype'"},
        Bad{file_with(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "field 'shape'"},
        Bad{file_with(R"({"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1],"data_offsets":[0,4]}})", 4), "rank 7"},
        Bad{file_with(R"({"a":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,8]}})", 8), "too large"},
        Bad{file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8), "begin after end"},
        Bad{file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4), "truncated file"},
        Bad{file_with(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "needs 12"},
        Bad{file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8), "data_offsets"},
        Bad{file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12), "overlaps"},
        Bad{file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12), "hole"},
        Bad{file_with(kOk, 12), "trailing bytes"},
        Bad{file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8), "unknown field 'x'"},
        Bad{file_with(R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8), "__metadata__.k"},
        Bad{file_with(R"({"a":[1,2]})", 0), "expected an object"}));

TEST(Safetensors, HeaderLengthIsCheckedBeforeAnythingElse) {
  const std::string f = file_with(kOk, 8);
  auto n = read_safetensors_header_length(reinterpret_cast<const uint8_t*>(f.data()), 8, f.size(), "w");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, kOk.size());
  // Only the prefix is available: parse must say the header is not all there.
  auto r = parse_safetensors(reinterpret_cast<const uint8_t*>(f.data()), 8, f.size(), "w");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("truncated"), std::string::npos);
}

}  // namespace safetensors_test
}  // namespace ember::gpu
