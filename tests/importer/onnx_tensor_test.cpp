// Reading initializers (importer/onnx_tensor.cpp): raw, typed and external data, the element types
// read as float32 or int64, and every way a tensor can lie about its size or reach out of the
// model's folder.
#include "importer/onnx_tensor.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/importer/onnx_builder.hpp"
#include "tests/must.hpp"

namespace ember::importer {
namespace onnx_tensor_test {

using ember::testing::must;
using testing::convert;
using testing::OnnxBuilder;
namespace fs = std::filesystem;

std::string error_of(const onnx::TensorProto& t, const std::string& dir = "") {
  auto c = read_tensor(t, dir, "initializer 'w'");
  return c.ok() ? "(read)" : c.error().message();
}

onnx::TensorProto floats(std::vector<int64_t> dims) {
  onnx::TensorProto t;
  t.set_name("w");
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  return t;
}

TEST(OnnxTensor, RawAndTypedDataRead) {
  onnx::TensorProto t = floats({2, 2});
  const float v[4] = {1, -2, 3.5f, 4};
  t.set_raw_data(std::string(reinterpret_cast<const char*>(v), sizeof v));
  const Constant c = must(read_tensor(t, "", "w"));
  EXPECT_EQ(c.kind, Constant::Kind::f32);
  EXPECT_EQ(c.dims, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(c.f, (std::vector<float>{1, -2, 3.5f, 4}));

  onnx::TensorProto i;
  i.set_data_type(onnx::TensorProto::INT32);
  i.add_dims(3);
  for (int x : {7, -1, 0}) i.add_int32_data(x);
  const Constant ci = must(read_tensor(i, "", "w"));
  EXPECT_EQ(ci.kind, Constant::Kind::i64);
  EXPECT_EQ(ci.a, (std::vector<int64_t>{7, -1, 0}));
  EXPECT_TRUE(ci.fixed());
}

TEST(OnnxTensor, HalfPrecisionIsReadAsFloat32) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::FLOAT16);
  t.add_dims(4);
  const uint16_t h[4] = {0x3c00, 0xc000, 0x3555, 0x0001};  // 1, -2, ~0.333, the smallest subnormal
  t.set_raw_data(std::string(reinterpret_cast<const char*>(h), sizeof h));
  const Constant c = must(read_tensor(t, "", "w"));
  EXPECT_FLOAT_EQ(c.f[0], 1.f);
  EXPECT_FLOAT_EQ(c.f[1], -2.f);
  EXPECT_NEAR(c.f[2], 1.f / 3, 1e-3);
  EXPECT_FLOAT_EQ(c.f[3], 5.9604645e-8f);

  onnx::TensorProto bf;
  bf.set_data_type(onnx::TensorProto::BFLOAT16);
  bf.add_dims(1);
  bf.add_int32_data(0x4049);  // 3.140625
  EXPECT_FLOAT_EQ(must(read_tensor(bf, "", "w")).f[0], 3.140625f);
}

TEST(OnnxTensor, DataThatLiesAboutItsDimsIsRefused) {
  onnx::TensorProto raw = floats({4});
  raw.set_raw_data(std::string(12, '\0'));
  EXPECT_EQ(error_of(raw), "initializer 'w': raw_data holds 12 bytes but the dims float32[4] of FLOAT need 16");

  onnx::TensorProto typed = floats({2, 3});
  for (int i = 0; i < 5; ++i) typed.add_float_data(1.f);
  EXPECT_EQ(error_of(typed), "initializer 'w': holds 5 values but the dims float32[2, 3] need 6");

  onnx::TensorProto negative = floats({-1});
  EXPECT_EQ(error_of(negative), "initializer 'w': dim -1 is negative");

  onnx::TensorProto huge = floats({1 << 20, 1 << 20});  // 2^40 elements and no data: refused before allocating
  EXPECT_NE(error_of(huge).find("more than 2147483648 elements"), std::string::npos) << error_of(huge);

  onnx::TensorProto text;
  text.set_data_type(onnx::TensorProto::STRING);
  EXPECT_NE(error_of(text).find("element type STRING is not read"), std::string::npos);

  // Through the whole importer: the file is refused, naming the initializer.
  OnnxBuilder b;
  b.input("x", {2}).output("y");
  b.weight("fc.weight", {4}, {1, 2, 3});
  b.node("Relu", {"x"}, {"y"});
  auto r = convert(b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "test.onnx: initializer 'fc.weight': raw_data holds 12 bytes but the dims float32[4] of FLOAT need 16");
}

class ExternalData : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ember-onnx-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
    dir_ = root_ / "model";
    fs::create_directories(dir_ / "data");
    const float v[3] = {1, 2, 3};
    std::ofstream(dir_ / "data" / "w.bin", std::ios::binary).write("pad!", 4).write(reinterpret_cast<const char*>(v), 12);
    std::ofstream(root_ / "secret.bin", std::ios::binary).write(reinterpret_cast<const char*>(v), 12);
  }
  void TearDown() override { fs::remove_all(root_); }

  static onnx::TensorProto external(const std::string& location, const std::string& offset, const std::string& length) {
    onnx::TensorProto t = floats({3});
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const char* k, const std::string& v) {
      if (v.empty()) return;
      auto* e = t.add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    add("location", location);
    add("offset", offset);
    add("length", length);
    return t;
  }

  fs::path root_, dir_;
};

TEST_F(ExternalData, AFileInsideTheModelsFolderIsRead) {
  const Constant c = must(read_tensor(external("data/w.bin", "4", "12"), dir_.string(), "w"));
  EXPECT_EQ(c.f, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(must(read_tensor(external("./data/../data/w.bin", "4", ""), dir_.string(), "w")).f[2], 3.f);
}

TEST_F(ExternalData, PathsThatLeaveTheModelsFolderAreRefused) {
  EXPECT_NE(error_of(external("../secret.bin", "", ""), dir_.string()).find("'../secret.bin' leads out of the model's folder"),
            std::string::npos);
  EXPECT_NE(error_of(external("data/../../secret.bin", "", ""), dir_.string()).find("leads out of the model's folder"),
            std::string::npos);
  EXPECT_NE(error_of(external((root_ / "secret.bin").string(), "", ""), dir_.string()).find("leads out of the model's folder"),
            std::string::npos);
  fs::create_symlink(root_ / "secret.bin", dir_ / "link.bin");
  const std::string via_link = error_of(external("link.bin", "", ""), dir_.string());
  EXPECT_NE(via_link.find("resolves to " + fs::canonical(root_ / "secret.bin").string() + ", outside the model's folder"),
            std::string::npos)
      << via_link;
}

TEST_F(ExternalData, OffsetsAndLengthsThatDoNotFitAreRefused) {
  EXPECT_NE(error_of(external("data/w.bin", "8", ""), dir_.string()).find("is past the end of data/w.bin (16 bytes)"),
            std::string::npos);
  EXPECT_NE(error_of(external("data/w.bin", "0", "8"), dir_.string()).find("length 8 but the dims need 12 bytes"),
            std::string::npos);
  EXPECT_NE(error_of(external("data/w.bin", "-4", ""), dir_.string()).find("offset -4 is negative"), std::string::npos);
  EXPECT_NE(error_of(external("data/w.bin", "four", ""), dir_.string()).find("'offset' is not a number"),
            std::string::npos);
  EXPECT_NE(error_of(external("data/none.bin", "", ""), dir_.string()).find("external data file 'data/none.bin'"),
            std::string::npos);
  // Bytes without a folder: no file may be read.
  EXPECT_NE(error_of(external("data/w.bin", "4", ""), "").find("needs the model's folder"), std::string::npos);
}

TEST_F(ExternalData, AModelWithExternalWeightsImportsFromItsFile) {
  OnnxBuilder b;
  b.input("x", {"batch", 3}).output("y");
  *b.model.mutable_graph()->add_initializer() = external("data/w.bin", "4", "12");
  b.model.mutable_graph()->mutable_initializer(0)->set_name("w");
  b.model.mutable_graph()->mutable_initializer(0)->clear_dims();
  b.model.mutable_graph()->mutable_initializer(0)->add_dims(3);
  b.model.mutable_graph()->mutable_initializer(0)->add_dims(1);
  b.node("MatMul", {"x", "w"}, {"y"});
  const std::string file = (dir_ / "m.onnx").string();
  std::ofstream(file, std::ios::binary) << b.bytes();
  const Imported m = must(import_onnx_file(file, (root_ / "out").string(), {}));
  EXPECT_EQ(*m.weights[0].values, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(m.manifest.name, "m");
  EXPECT_TRUE(fs::exists(root_ / "out" / "model.json"));
}

}  // namespace onnx_tensor_test
}  // namespace ember::importer
