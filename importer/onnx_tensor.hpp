// Reading an ONNX TensorProto (an initializer, or a Constant node's value) into a Constant.
//
// The bytes come from raw_data (little-endian), from the typed field of the element type
// (float_data, int32_data, int64_data, double_data, uint64_data), or, for data_location EXTERNAL,
// from a file beside the model: external_data's "location" is resolved against the model's folder,
// and refused when it is absolute or leads out of that folder (through "..", or a symbolic link
// that points elsewhere), when "offset"/"length" do not fit the file, or when "length" is not what
// the dims need. Floating types (float, double, float16, bfloat16) are read as float32, integer
// types and bool as int64. A tensor whose data holds more or fewer elements than its dims say, a
// negative dim, or a string/complex type is an Error that names the tensor.
//
// Pure but for reading external files; anyone, any thread. Never trusts the tensor.
#pragma once

#include <string>

#include "base/status.hpp"
#include "importer/values.hpp"

namespace onnx {
class NodeProto;
class TensorProto;
}

namespace ember::importer {

/// The largest constant the importer reads, elements (8 GiB of float32). Larger tensors are refused
/// before anything is allocated.
inline constexpr int64_t kMaxConstantElements = int64_t{1} << 31;

/// Reads `t`. `model_dir`: the folder external data is resolved in; empty refuses external data.
/// `where` starts every message ("initializer 'fc.weight'").
Result<Constant> read_tensor(const onnx::TensorProto& t, const std::string& model_dir, const std::string& where);

/// The value of a Constant node: its one attribute of value, value_float(s) or value_int(s).
/// sparse_value and strings are unsupported.
Result<Constant> read_constant_node(const onnx::NodeProto& node, const std::string& model_dir, const std::string& where);

/// The ONNX name of an element type ("FLOAT", "INT64", ...; "type 42" when unknown).
std::string onnx_type_name(int32_t data_type);

}  // namespace ember::importer
