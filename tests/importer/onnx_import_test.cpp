// The whole import (importer/onnx_import.cpp and converter.cpp): directories that load as a server
// loads them, tied weights written once per layer, names, and the refusal of everything at once.
#include "importer/onnx_import.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "model/model.hpp"
#include "tests/importer/onnx_builder.hpp"
#include "tests/must.hpp"

namespace ember::importer {
namespace onnx_import_test {

using ember::testing::must;
using testing::convert;
using testing::OnnxBuilder;
namespace fs = std::filesystem;

class Dir {
 public:
  Dir() {
    std::string tmpl = (fs::temp_directory_path() / "ember-import-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~Dir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::string write(const Dir& d, const OnnxBuilder& b, const std::string& name = "m.onnx") {
  std::ofstream(d / name, std::ios::binary) << b.bytes();
  return d / name;
}

// Two layers reading one weight (tied), then an output named through an Identity.
OnnxBuilder tied() {
  OnnxBuilder b;
  b.input("x", {"batch", 4}).output("out");
  b.ramp("shared", {4, 4});
  b.node("MatMul", {"x", "shared"}, {"h"}, "/enc/MatMul");
  b.node("Relu", {"h"}, {"r"}, "/enc/Relu");
  b.node("MatMul", {"r", "shared"}, {"d"}, "/dec/MatMul");
  b.node("Identity", {"d"}, {"out"});
  return b;
}

TEST(OnnxImport, TiedWeightsAreWrittenOncePerLayerAndTheDirectoryLoads) {
  Dir d;
  const Imported m = must(import_onnx_file(write(d, tied()), d / "model", {}));
  EXPECT_EQ(m.stats.duplicated_bytes, 64u);
  EXPECT_EQ(m.stats.parameters, 32u);
  ASSERT_EQ(m.weights.size(), 2u);
  EXPECT_EQ(m.weights[0].values, m.weights[1].values);  // one buffer, written twice

  auto model = must(gpu::Model::load(d / "model"));
  ASSERT_EQ(model->num_layers(), 3u);
  EXPECT_EQ(model->layer(2).name, "out");
  EXPECT_EQ(model->manifest().outputs[0].name, "out");
  EXPECT_EQ(model->manifest().name, "m");
  EXPECT_NE(model->manifest().description.find("imported from m.onnx (ONNX opset 13, made by onnx_builder"),
            std::string::npos);
  // Each layer owns its bytes: layer 0 and layer 2 hold a copy each, layer 1 none.
  EXPECT_EQ(model->layer_bytes(0).length, 64u);
  EXPECT_EQ(model->layer_bytes(1).length, 0u);
  EXPECT_EQ(model->layer_bytes(2), (gpu::ByteRange{64, 64}));
  EXPECT_EQ(model->weights_index().find("out.weight")->data.offset, 64u);
}

TEST(OnnxImport, EveryRefusedNodeIsListedWithItsOp) {
  // Pieces Ember lacks, in a chain: each refusal is reported, once.
  OnnxBuilder b;
  b.input("x", {"batch", 4, 8}).output("y");
  b.int_vector("pads", {0, 0, 1, 0, 0, 1});
  testing::set_string(b.node("Pad", {"x", "pads"}, {"t"}, "/attn/Pad"), "mode", "wrap");
  b.node("MatMul", {"x", "t"}, {"s"}, "/attn/MatMul");  // reads a refused value: not checked
  b.node("NonZero", {"s"}, {"g"}, "/gate/NonZero");     // an op Ember lacks: listed all the same
  b.node("Relu", {"g"}, {"y"}, "/relu");                // not checked either
  auto r = convert(b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::unsupported);
  EXPECT_EQ(r.error().message(),
            "test.onnx: cannot import 2 of 5 nodes (NonZero, Pad); 2 nodes that read their results were not "
            "checked:\n"
            "  node '/attn/Pad' (Pad): not supported: mode 'wrap' (Ember pads constant, reflect or edge)\n"
            "  node '/gate/NonZero' (NonZero): not supported yet: Ember's op set has no NonZero");
}

TEST(OnnxImport, OutputsThatAreNotComputedAreRefused) {
  OnnxBuilder constant;
  constant.input("x", {2}).output("y").output("c");
  constant.node("Relu", {"x"}, {"y"});
  constant.ramp("c", {2});
  auto r = convert(constant);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("graph output 'c' is a constant"), std::string::npos);

  OnnxBuilder passthrough;
  passthrough.input("x", {2}).output("y");
  passthrough.node("Identity", {"x"}, {"y"});
  r = convert(passthrough);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("nothing to compute"), std::string::npos) << r.error().message();
}

TEST(OnnxImport, NamesAreMadeValidAndUnique) {
  OnnxBuilder b;
  b.input("input 0", {2}).output("y");
  b.node("Relu", {"input 0"}, {"a"}, "same name");
  b.node("Relu", {"a"}, {"y"}, "same name");
  b.node("Relu", {"y"}, {"unused"}, "y");
  const Imported m = must(convert(b));
  EXPECT_EQ(m.manifest.inputs[0].name, "input_0");
  EXPECT_EQ(m.manifest.layers[0].name, "same_name");
  EXPECT_EQ(m.manifest.layers[1].name, "y");
  ImportOptions bad;
  bad.name = "no spaces";
  EXPECT_FALSE(convert(b, bad).ok());
}

TEST(OnnxImport, TextFromTheFileReachesModelJsonAsPrintableAscii) {
  OnnxBuilder b = tied();
  b.model.set_producer_name("torch\xff\xfe");  // not UTF-8, which JSON needs (a fuzzer's find)
  const Imported m = must(convert(b));
  EXPECT_NE(m.manifest.description.find("made by torch??"), std::string::npos) << m.manifest.description;
  EXPECT_TRUE(gpu::parse_manifest(gpu::manifest_to_json(m.manifest), "model.json").ok());
}

TEST(OnnxImport, AMissingFileAndABadBatchDimAreErrors) {
  Dir d;
  auto r = import_onnx_file(d / "none.onnx", d / "out", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::not_found);
  ImportOptions o;
  o.batch_dim = 6;
  EXPECT_FALSE(import_onnx_file(write(d, tied()), d / "out", o).ok());
  EXPECT_FALSE(fs::exists(d / "out"));
}

TEST(OnnxImport, InputShapeSpecsParse) {
  std::map<std::string, std::vector<int64_t>> shapes;
  EXPECT_TRUE(parse_input_shape("x=?,3,640,-1", shapes).ok());
  EXPECT_TRUE(parse_input_shape("a=b=7", shapes).ok());  // the name is everything before the last '='
  EXPECT_EQ(shapes["x"], (std::vector<int64_t>{-1, 3, 640, -1}));
  EXPECT_EQ(shapes["a=b"], (std::vector<int64_t>{7}));
  for (const char* bad : {"x", "=1", "y=", "y=1,,2", "y=0", "y=-2", "y=3x", "y=99999999999", "y=1,1,1,1,1,1,1", "x=1"}) {
    EXPECT_FALSE(parse_input_shape(bad, shapes).ok()) << bad;
  }
}

}  // namespace onnx_import_test
}  // namespace ember::importer
