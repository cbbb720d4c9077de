// Reading and checking an ONNX graph's structure (importer/onnx_graph.cpp): malformed files each get
// a clear error; unordered but orderable graphs are put in order.
#include "importer/onnx_graph.hpp"

#include <gtest/gtest.h>

#include "tests/importer/onnx_builder.hpp"
#include "tests/must.hpp"

namespace ember::importer {
namespace onnx_graph_test {

using ember::testing::must;
using testing::convert;
using testing::OnnxBuilder;

std::string error_of(const std::string& bytes) {
  auto g = read_onnx(bytes, "m.onnx");
  return g.ok() ? "(read)" : g.error().message();
}

OnnxBuilder chain() {
  OnnxBuilder b;
  b.input("x", {"batch", 4}).output("y");
  b.ramp("w", {4, 4});
  b.node("MatMul", {"x", "w"}, {"h"}, "/a");
  b.node("Relu", {"h"}, {"y"}, "/b");
  return b;
}

TEST(OnnxGraph, ATruncatedFileDoesNotParse) {
  const std::string bytes = chain().bytes();
  for (size_t keep : {bytes.size() / 2, bytes.size() - 1, size_t{3}}) {
    auto g = read_onnx(bytes.substr(0, keep), "m.onnx");
    ASSERT_FALSE(g.ok()) << keep;
    EXPECT_EQ(g.error().code(), ErrorCode::corrupt) << keep;
    EXPECT_NE(g.error().message().find("m.onnx: not an ONNX model: the protobuf does not parse"), std::string::npos)
        << g.error().message();
  }
  EXPECT_NE(error_of("").find("it has no graph"), std::string::npos);
}

TEST(OnnxGraph, OpsetsOutside9To17AndOtherDomainsAreRefused) {
  for (int64_t opset : {9, 10, 17}) {
    OnnxBuilder b(opset);
    b.input("x", {2}).output("y");
    b.node("Relu", {"x"}, {"y"});
    auto g = read_onnx(b.bytes(), "m.onnx");
    ASSERT_TRUE(g.ok()) << opset << ": " << g.error().message();
    EXPECT_EQ(g->opset, opset);
  }
  for (int64_t opset : {8, 18}) {
    OnnxBuilder b(opset);
    b.input("x", {2}).output("y");
    b.node("Relu", {"x"}, {"y"});
    auto g = read_onnx(b.bytes(), "m.onnx");
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.error().code(), ErrorCode::unsupported);
    EXPECT_NE(g.error().message().find("opset " + std::to_string(opset) +
                                       " of the default domain; this build imports opsets 9 to 17"),
              std::string::npos)
        << g.error().message();
  }
  OnnxBuilder none;
  none.model.mutable_opset_import(0)->set_domain("com.microsoft");
  EXPECT_NE(error_of(none.bytes()).find("declares no opset for the default domain"), std::string::npos);
  // Valid ONNX of other domains only (ONNX's training ops): unsupported; no domain at all: malformed.
  auto other = read_onnx(none.bytes(), "m.onnx");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code(), ErrorCode::unsupported) << other.error().message();
  EXPECT_NE(other.error().message().find("only for 'com.microsoft'"), std::string::npos) << other.error().message();
  none.model.clear_opset_import();
  auto neither = read_onnx(none.bytes(), "m.onnx");
  ASSERT_FALSE(neither.ok());
  EXPECT_EQ(neither.error().code(), ErrorCode::invalid_argument) << neither.error().message();

  OnnxBuilder custom = chain();
  custom.model.mutable_graph()->mutable_node(1)->set_domain("com.microsoft");
  auto r = convert(custom);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("node '/b' (Relu): not supported: domain 'com.microsoft'"), std::string::npos)
      << r.error().message();
}

TEST(OnnxGraph, ADanglingInputIsNamed) {
  OnnxBuilder b = chain();
  b.model.mutable_graph()->mutable_node(1)->set_input(0, "nothing_makes_this");
  EXPECT_NE(error_of(b.bytes()).find("node '/b' (Relu) reads 'nothing_makes_this', which no node, graph input or "
                                     "initializer produces"),
            std::string::npos)
      << error_of(b.bytes());
}

TEST(OnnxGraph, ACycleIsRefusedWithItsNodes) {
  OnnxBuilder b;
  b.input("x", {2}).output("y");
  b.node("Add", {"x", "c"}, {"a"}, "/loop_a");
  b.node("Relu", {"a"}, {"c"}, "/loop_b");
  b.node("Relu", {"a"}, {"y"}, "/out");
  const std::string msg = error_of(b.bytes());
  EXPECT_NE(msg.find("the graph has a cycle: 3 nodes cannot be ordered"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node '/loop_a' (Add)"), std::string::npos) << msg;
}

TEST(OnnxGraph, NodesOutOfOrderArePutInOrder) {
  OnnxBuilder b = chain();
  b.model.mutable_graph()->mutable_node()->SwapElements(0, 1);  // Relu listed before the MatMul it reads
  const OnnxGraph g = must(read_onnx(b.bytes(), "m.onnx"));
  EXPECT_EQ(g.order, (std::vector<int>{1, 0}));
  const Imported m = must(convert(b));
  ASSERT_EQ(m.manifest.layers.size(), 2u);
  EXPECT_EQ(m.manifest.layers[0].op, gpu::OpKind::linear);
  EXPECT_EQ(m.manifest.layers[1].op, gpu::OpKind::relu);
}

TEST(OnnxGraph, AValueProducedTwiceIsRefused) {
  OnnxBuilder b = chain();
  b.node("Relu", {"x"}, {"h"}, "/again");
  EXPECT_NE(error_of(b.bytes()).find("value 'h' is produced twice, by node '/a' (MatMul) and by node '/again' (Relu)"),
            std::string::npos)
      << error_of(b.bytes());
}

TEST(OnnxGraph, NodesNoOutputNeedsAreNotLive) {
  OnnxBuilder b = chain();
  b.node("Erf", {"x"}, {"unused"}, "/dead");
  const OnnxGraph g = must(read_onnx(b.bytes(), "m.onnx"));
  EXPECT_EQ(g.live, (std::vector<bool>{true, true, false}));
  const Imported m = must(convert(b));  // the Erf, which Ember lacks, is not needed: no refusal
  EXPECT_EQ(m.stats.removed, 1u);
}

}  // namespace onnx_graph_test
}  // namespace ember::importer
