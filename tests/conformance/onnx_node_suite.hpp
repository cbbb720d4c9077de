// The ONNX backend node tests run through Ember: the op conformance suite against references
// nobody here wrote (issue 34, "Conformance").
//
// The node tests are what ONNX itself checks a backend with: one folder per case, holding a
// model.onnx of (usually) one node and test_data_set_0/input_N.pb, output_N.pb as TensorProtos,
// the expected outputs computed by ONNX's numpy reference. Debian's libonnx-testdata ships them
// under /usr/share/libonnx-testdata/data/node (ONNX 1.12: opsets up to 17).
//
// One case goes the way a user's model does: importer::convert_onnx (no dim freed: the cases have
// fixed shapes), importer::write_model_dir into a scratch folder, Model::load from it, a
// LayerExecutor over every layer on the given device and run_host (what the node's executor engine
// runs a request with). Its inputs are read with the importer's own TensorProto reader and given
// at the dtype model.json declares; each output is compared with output_N.pb:
//   - floats (float32, float16, bfloat16 outputs) as ONNX's backend test runner compares them,
//     numpy.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-7) (the defaults of
//     onnx/backend/test/loader and case/node): |actual - expected| <= atol + rtol * |expected|
//     elementwise, NaN equal to NaN, infinities equal only to themselves;
//   - integers and booleans exactly;
//   - dtype and shape exactly (the runner asserts dtype equality too). ONNX bool is Ember's uint8.
//   A few cases compare at a wider tolerance, each with its reason (tolerance_for): ONNX's own
//   runner has the same per-case rtol/atol overrides.
// A case the importer refuses as it is gets a second attempt with its operands after the first
// made initializers holding the data set's values: a node test feeds everything as graph inputs,
// where a model holds a Conv's W, a BatchNormalization's statistics, a Reshape's shape or a Slice's
// starts as constants, which is what Ember's importer takes (it folds them into layer attributes
// and weights). The case then computes the same numbers; its result counts as passed or failed
// "with constant operands". Refused again, the case is refused with the second attempt's reason.
// A case ends as one of:
//   passed   every output within tolerance;
//   refused  the importer refused the model with an unsupported Error (an op, attribute, dtype or
//            shape Ember does not take): not a failure, but it must be a clean Error;
//   failed   anything else: a wrong answer, a run that fails (a model that imports must serve), a
//            load that fails, an import Error of another code (a valid ONNX model called malformed,
//            or the importer's own internal error), unreadable test data, or an exception.
//
// A case's op is the op_type of its node. A graph of several nodes counts under the op of the one
// node that is not a Constant; a "_expanded" case (the op's function body spelled out in primitive
// nodes) counts under the op of the case it expands.
//
// Blocking file I/O and device work on the caller's thread; no global state. Test code: tests/ only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/device.hpp"
#include "model/host_tensor.hpp"

namespace onnx {
class TensorProto;
}

namespace ember::conformance {

/// ONNX's backend test tolerance (onnx/backend/test/loader/__init__.py: rtol 1e-3, atol 1e-7).
inline constexpr double kRtol = 1e-3;
inline constexpr double kAtol = 1e-7;

enum class Outcome : uint8_t { passed, refused, failed };
std::string_view outcome_name(Outcome o);

struct CaseResult {
  std::string name;  // the folder's name, "test_add_bcast"
  std::string op;    // the ONNX op it counts under, "Add"
  int64_t opset = 0; // the model's opset of the default domain (0: none declared)
  bool constant_operands = false;  // the outcome is the second attempt's (see above)
  Outcome outcome = Outcome::failed;
  std::string detail;  // refused: the importer's reason; failed: what went wrong; passed: ""
  double seconds = 0;  // wall time of the whole case
};

/// $EMBER_ONNX_NODE_TESTS when set, else the folder CMake found at configure time (Debian's
/// libonnx-testdata), else "".
std::string node_tests_dir();

/// The case folders under `dir` (those holding a model.onnx), sorted by name.
std::vector<std::string> list_cases(const std::string& dir);

/// The op `case_dir`'s model counts under (see above); "" when model.onnx cannot be read.
std::string case_op(const std::string& case_dir);
/// The opset of the default domain `case_dir`'s model declares; 0 when none (or unreadable).
int64_t case_opset(const std::string& case_dir);

/// Runs one case on `device`, writing the imported model under `scratch_dir` (created; left for
/// the caller to remove). Never throws.
CaseResult run_case(const std::string& case_dir, const std::string& scratch_dir, gpu::Device& device);

/// The tolerance a case's float outputs are compared at, and why when it is not ONNX's default.
struct Tolerance {
  double rtol = kRtol, atol = kAtol;
  std::string_view reason;  // empty for the default
};
Tolerance tolerance_for(std::string_view case_name);

/// Compares Ember's output with the expected TensorProto as above: "" when they agree, else why
/// not (dtype, shape, or the worst element and its index). `where` names the file in messages.
std::string compare_output(const onnx::TensorProto& expected, const gpu::HostTensor& actual, const std::string& where,
                           const Tolerance& tolerance = {});

/// Totals and one row per op: the per-op table (markdown: a GitHub table; text: aligned columns
/// for a test log). Ops sorted by name; each row names its failed cases, how many of its refused
/// cases are models below the importer's opsets (importer::kMinOpset), and one refusal's reason
/// (the first of a case at a supported opset, where there is one).
std::string markdown_table(const std::vector<CaseResult>& results);
std::string text_table(const std::vector<CaseResult>& results);

}  // namespace ember::conformance
