// Conformance.OnnxNode: every ONNX backend node test of libonnx-testdata through the importer and a
// SimDevice (onnx_node_suite.hpp says how a case runs, is compared and ends). A case Ember refuses
// at import is not a failure; a case it imports must pass. The per-op table is printed; with
// EMBER_CONFORMANCE_MARKDOWN=FILE it is also written to FILE as markdown (docs/reference/
// onnx-conformance.md is made so). EMBER_CONFORMANCE_FILTER=TEXT runs only the cases whose name
// holds TEXT. Skips, and says so, when the test data is not installed. Conformance.OnnxNodeCuda runs
// the same on a GPU when one answers. Measured on 2 shared cores: the whole suite runs in well
// under a second of case time (the cases are tiny), so it runs serially.
//
// The other cases check the comparison itself on hand-made tensors, so that a suite that passes
// means what onnx_node_suite.hpp says.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "gpu/device_registry.hpp"
#include "gpu/sim_device.hpp"
#include "onnx/onnx.pb.h"
#include "tests/conformance/onnx_node_suite.hpp"
#include "tests/must.hpp"

namespace ember::conformance {
namespace onnx_node_test {

namespace fs = std::filesystem;
using testing::must;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "ember-conformance-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs every case (EMBER_CONFORMANCE_FILTER: those whose name holds it) on `device`, fails the
// test on each failed case, prints the table and writes it as markdown when asked.
void run_suite(const std::string& dir, gpu::Device& device) {
  const std::string filter = env("EMBER_CONFORMANCE_FILTER");
  ScratchDir scratch;
  std::vector<CaseResult> results;
  double seconds = 0;
  for (const std::string& c : list_cases(dir)) {
    if (!filter.empty() && fs::path(c).filename().string().find(filter) == std::string::npos) continue;
    const std::string model_dir = scratch.path() + "/" + fs::path(c).filename().string();
    results.push_back(run_case(c, model_dir, device));
    std::error_code ec;
    fs::remove_all(model_dir, ec);
    const CaseResult& r = results.back();
    seconds += r.seconds;
    if (r.outcome == Outcome::failed) ADD_FAILURE() << r.name << " (" << r.op << "): " << r.detail;
  }
  ASSERT_FALSE(results.empty()) << "no case in " << dir << " matches '" << filter << "'";
  std::cout << "on " << device.info().name << ": " << text_table(results) << "cases ran in " << seconds << " s\n";
  if (const std::string md = env("EMBER_CONFORMANCE_MARKDOWN"); !md.empty()) {
    std::ofstream out(md);
    out << markdown_table(results);
    ASSERT_TRUE(out.good()) << "cannot write " << md;
  }
}

TEST(Conformance, OnnxNode) {
  const std::string dir = node_tests_dir();
  if (dir.empty() || !fs::is_directory(dir)) {
    GTEST_SKIP() << "no ONNX node tests (install libonnx-testdata or set EMBER_ONNX_NODE_TESTS): '" << dir << "'";
  }
  SimDeviceConfig config;
  config.memory_bytes = 1ull << 30;
  config.compute_threads = 2;
  auto device = must(gpu::SimDevice::create(config, 0), "creating a SimDevice");
  run_suite(dir, *device);
}

// The same cases on a CUDA device, when this build has the plugin and a GPU answers (skipped, with
// the reason, otherwise). EMBER_CONFORMANCE_MARKDOWN is written by whichever case runs last.
TEST(Conformance, OnnxNodeCuda) {
  const std::string dir = node_tests_dir();
  if (dir.empty() || !fs::is_directory(dir)) GTEST_SKIP() << "no ONNX node tests";
  ::setenv("EMBER_CUDA_MEMORY", "1GiB", 0);  // CTest runs cases as parallel processes
  DevicesConfig config;
  config.kind = DeviceKind::automatic;
  config.count = 1;
  auto opened = gpu::open_devices(config);
  ASSERT_TRUE(opened.ok()) << opened.error().to_string();
  if (opened->devices.at(0)->info().kind != DeviceKind::cuda) GTEST_SKIP() << opened->cuda_unavailable_reason;
  run_suite(dir, *opened->devices[0]);
}

TEST(Conformance, CaseOpIsTheNodesOp) {
  const std::string dir = node_tests_dir();
  if (dir.empty() || !fs::is_directory(dir)) GTEST_SKIP() << "no ONNX node tests";
  EXPECT_EQ(case_op(dir + "/test_add_bcast"), "Add");
  // An expanded case counts under the op it spells out; Constant nodes beside the op do not count.
  EXPECT_EQ(case_op(dir + "/test_softmax_axis_0_expanded"), "Softmax");
  EXPECT_EQ(case_op(dir + "/test_resize_downsample_sizes_nearest_tf_half_pixel_for_nn"), "Resize");
}

// A node test feeds a Conv's W as a graph input; Ember's importer takes it as a constant, so the
// case passes on its second attempt, and says so. A case that imports as it is says nothing.
TEST(Conformance, OperandsBecomeConstantsOnlyWhenRefusedAsTheyAre) {
  const std::string dir = node_tests_dir();
  if (dir.empty() || !fs::is_directory(dir)) GTEST_SKIP() << "no ONNX node tests";
  auto device = must(gpu::SimDevice::create(SimDeviceConfig{}, 0), "creating a SimDevice");
  ScratchDir scratch;
  const CaseResult conv = run_case(dir + "/test_conv_with_strides_padding", scratch.path() + "/conv", *device);
  EXPECT_EQ(conv.outcome, Outcome::passed) << conv.detail;
  EXPECT_TRUE(conv.constant_operands);
  EXPECT_EQ(conv.op, "Conv");
  EXPECT_EQ(conv.opset, 11);
  const CaseResult relu = run_case(dir + "/test_relu", scratch.path() + "/relu", *device);
  EXPECT_EQ(relu.outcome, Outcome::passed) << relu.detail;
  EXPECT_FALSE(relu.constant_operands);
}

onnx::TensorProto floats(std::vector<int64_t> dims, std::vector<float> values, int32_t type = onnx::TensorProto::FLOAT) {
  onnx::TensorProto t;
  t.set_data_type(type);
  for (int64_t d : dims) t.add_dims(d);
  for (float v : values) t.add_float_data(v);
  return t;
}

gpu::HostTensor host(gpu::DType dtype, gpu::Shape shape, std::vector<double> values) {
  auto t = must(gpu::HostTensor::allocate("y", {dtype, shape}));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case gpu::DType::f32: t.as<float>()[i] = static_cast<float>(values[i]); break;
      case gpu::DType::i64: t.as<int64_t>()[i] = static_cast<int64_t>(values[i]); break;
      case gpu::DType::u8: t.as<uint8_t>()[i] = static_cast<uint8_t>(values[i]); break;
      default: ADD_FAILURE() << "dtype not made here";
    }
  }
  return t;
}

// numpy.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-7).
TEST(Conformance, FloatsCompareAsOnnxBackendTestDoes) {
  const auto want = floats({3}, {1000.f, -2.f, 0.f});
  EXPECT_EQ(compare_output(want, host(gpu::DType::f32, {3}, {1000.9, -2.0019, 0.9e-7}), "o"), "");
  EXPECT_NE(compare_output(want, host(gpu::DType::f32, {3}, {1001.1, -2.f, 0.f}), "o"), "");
  EXPECT_NE(compare_output(want, host(gpu::DType::f32, {3}, {1000.f, -2.f, 2e-7}), "o"), "");
  const std::string why = compare_output(want, host(gpu::DType::f32, {3}, {1000.f, -2.1, 0.f}), "out");
  EXPECT_NE(why.find("out: 1 of 3 elements differ; worst at 1"), std::string::npos) << why;
}

// The per-case overrides are few and each says why; every other case is at ONNX's default.
TEST(Conformance, ToleranceIsOnnxsUnlessACaseSaysWhy) {
  EXPECT_EQ(tolerance_for("test_add").rtol, kRtol);
  EXPECT_EQ(tolerance_for("test_add").atol, kAtol);
  EXPECT_TRUE(tolerance_for("test_add").reason.empty());
  const Tolerance bf16 = tolerance_for("test_cast_FLOAT_to_BFLOAT16");
  EXPECT_EQ(bf16.rtol, 1.0 / 128);
  EXPECT_NE(bf16.reason.find("truncates"), std::string_view::npos);
  const auto want = floats({1}, {0.81640625f});  // truncated; rounded to nearest even it is 0.8203125
  EXPECT_NE(compare_output(want, host(gpu::DType::f32, {1}, {0.8203125}), "o"), "");
  EXPECT_EQ(compare_output(want, host(gpu::DType::f32, {1}, {0.8203125}), "o", bf16), "");
}

TEST(Conformance, NanAndInfinityMatchOnlyThemselves) {
  const auto want = floats({3}, {NAN, INFINITY, -INFINITY});
  EXPECT_EQ(compare_output(want, host(gpu::DType::f32, {3}, {NAN, INFINITY, -INFINITY}), "o"), "");
  EXPECT_NE(compare_output(want, host(gpu::DType::f32, {3}, {0.0, INFINITY, -INFINITY}), "o"), "");
  EXPECT_NE(compare_output(want, host(gpu::DType::f32, {3}, {NAN, 3e38, -INFINITY}), "o"), "");
  EXPECT_NE(compare_output(floats({1}, {1.f}), host(gpu::DType::f32, {1}, {NAN}), "o"), "");
}

TEST(Conformance, IntegersAndBooleansCompareExactly) {
  onnx::TensorProto ints;
  ints.set_data_type(onnx::TensorProto::INT64);
  ints.add_dims(2);
  ints.add_int64_data(int64_t{1} << 60);
  ints.add_int64_data(-3);
  const std::string why = compare_output(ints, host(gpu::DType::i64, {2}, {0, -3}), "o");
  EXPECT_NE(why.find("1 of 2 elements differ; first at 0: 0, expected 1152921504606846976"), std::string::npos) << why;
  auto same = host(gpu::DType::i64, {2}, {0, -3});
  same.as<int64_t>()[0] = int64_t{1} << 60;
  EXPECT_EQ(compare_output(ints, same, "o"), "");
  same.as<int64_t>()[0] += 1;  // one apart at 2^60: equal as doubles, not as integers
  EXPECT_NE(compare_output(ints, same, "o"), "");

  onnx::TensorProto bools;
  bools.set_data_type(onnx::TensorProto::BOOL);
  bools.add_dims(2);
  bools.add_int32_data(1);
  bools.add_int32_data(0);
  EXPECT_EQ(compare_output(bools, host(gpu::DType::u8, {2}, {1, 0}), "o"), "");
  EXPECT_NE(compare_output(bools, host(gpu::DType::u8, {2}, {1, 1}), "o"), "");
}

TEST(Conformance, DtypeAndShapeMustMatch) {
  const auto want = floats({2, 1}, {1.f, 2.f});
  EXPECT_EQ(compare_output(want, host(gpu::DType::f32, {2, 1}, {1, 2}), "o"), "");
  EXPECT_NE(compare_output(want, host(gpu::DType::f32, {2}, {1, 2}), "o").find("shape [2], expected [2, 1]"), std::string::npos);
  EXPECT_NE(compare_output(want, host(gpu::DType::i64, {2, 1}, {1, 2}), "o").find("dtype int64, expected float32"),
            std::string::npos);
  auto dbl = floats({1}, {}, onnx::TensorProto::DOUBLE);
  dbl.add_double_data(0);
  EXPECT_NE(compare_output(dbl, host(gpu::DType::f32, {1}, {0}), "o").find("no dtype"), std::string::npos);
}

}  // namespace onnx_node_test
}  // namespace ember::conformance
