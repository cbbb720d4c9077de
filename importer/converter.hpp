// The conversion of one checked ONNX graph (onnx_graph.hpp) into a manifest and its weights: the
// walk over the nodes in topological order, the values it knows (values.hpp), the layers it
// appends, and the refusals it collects. Each op's own conversion lives in lower_layers.cpp (ops
// that become Ember layers) and lower_shapes.cpp (ops that reshape, or compute on constants, or
// vanish); both are functions of this class's small interface below.
//
// The walk, per node in order:
//   1. not needed by any graph output: skipped (counted as removed);
//   2. part of a fused pattern (patterns.hpp): skipped, except the pattern's last node, which
//      converts the whole pattern;
//   3. reads a value of a refused node: its outputs are refused too, and it is counted as not
//      checked, unless the importer has no conversion for its op at all (then it is listed, so the
//      list of missing ops is as whole as it can be without the refused node's results);
//   4. otherwise the op's conversion defines every output the graph needs or returns why it cannot,
//      and the node is listed as refused.
// Refusals do not stop the walk: the Error of run() lists every refused node.
//
// Single use, one thread: construct, run() once.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "importer/onnx_graph.hpp"
#include "importer/onnx_import.hpp"
#include "importer/patterns.hpp"
#include "importer/values.hpp"
#include "model/ops.hpp"

namespace ember::importer {

class Converter;

/// One op's conversion: defines the node's outputs (Converter::define) or returns the reason it
/// cannot (the message is shown after the node's label).
using OpConversion = Status (*)(Converter& c, const onnx::NodeProto& node);

/// The conversion of `op_type`, or nullptr: lower_layers.cpp (norms, matrix products; with
/// lower_conv.cpp's convolutions and pools), lower_shapes.cpp (reshapes, folding, vanishing ops), lower_elementwise.cpp (unary,
/// binary, Where, Cast), lower_tensor.cpp (Transpose, Concat, Split, Slice, Gather, Expand, Pad,
/// Resize), lower_reduce.cpp (reductions, ArgMax, TopK, Softmax). The tables are disjoint.
OpConversion layer_conversion(std::string_view op_type);
OpConversion conv_conversion(std::string_view op_type);  // lower_conv.cpp, reached through layer_conversion
OpConversion shape_conversion(std::string_view op_type);
OpConversion elementwise_conversion(std::string_view op_type);
OpConversion tensor_conversion(std::string_view op_type);
OpConversion reduce_conversion(std::string_view op_type);
/// lower_layers.cpp: converts a fused pattern at its last node.
Status convert_fusion(Converter& c, const Fusion& fusion);

/// A weight bound to a role of a layer: a constant whose dims are the role's shape, float32 unless
/// the role takes another dtype (a `constant` layer's value: integers are written in that dtype).
struct RoleWeight {
  std::string_view role;
  std::shared_ptr<const Constant> value;
};

class Converter {
 public:
  Converter(const OnnxGraph& graph, const ImportOptions& options, std::string model_dir, std::string source);

  Result<Imported> run();

  // ---- for the op conversions ----
  const OnnxGraph& graph() const { return graph_; }
  int64_t opset() const { return graph_.opset; }
  /// The folder external data is read from ("" refuses it).
  const std::string& model_dir() const { return model_dir_; }

  /// Input `i` of `node`; nullptr when omitted (an empty name, or i past the inputs).
  const Value* input(const onnx::NodeProto& node, int i) const;
  /// Input `i`, of either kind; an Error when it is omitted.
  Result<const Value*> value_input(const onnx::NodeProto& node, int i) const;
  /// Input `i`, which must be a constant; `role` names it in the error ("weight", "shape").
  Result<std::shared_ptr<const Constant>> constant_input(const onnx::NodeProto& node, int i, const char* role) const;
  /// Input `i`, which must be a float32 activation.
  Result<const Value*> activation_input(const onnx::NodeProto& node, int i, const char* role) const;
  /// Input `i` as an activation of any dtype: an activation as it is, a constant as the output of
  /// a `constant` layer (one per constant and dtype, made on first use; float constants are
  /// float32, integer ones `int_dtype`: int64, int32 or uint8). A constant whose integers depend on
  /// a free dim cannot be a layer's value and is refused.
  Result<const Value*> operand(const onnx::NodeProto& node, int i, const char* role,
                               gpu::DType int_dtype = gpu::DType::i64);
  /// The activation holding `k` (see operand()); `hint` names the layer.
  Result<const Value*> constant_layer(const std::shared_ptr<const Constant>& k, gpu::DType int_dtype,
                                      std::string_view hint);
  /// Defines output `i` of `node` (no-op for an omitted output).
  void define(const onnx::NodeProto& node, int i, Value value);
  /// Output `i` must be omitted or read by nothing (e.g. BatchNormalization's running statistics).
  Status require_unused(const onnx::NodeProto& node, int i, const char* what) const;

  /// Appends a layer reading `inputs`, named after `name_hint`, with `weights` in weight_specs
  /// order (absent optional roles left out). Infers its output in both probe lanes; an op the
  /// inputs do not fit is an Error with gpu::infer_output's reason.
  Result<Value> add_layer(std::string_view name_hint, gpu::OpKind op, const gpu::LayerAttrs& attrs,
                          const std::vector<const Value*>& inputs, const std::vector<RoleWeight>& weights);
  /// A reshape layer giving activation `x` the dims `out` (same element count in both lanes): fixed
  /// dims as they are, a free dim that stays in place copied, at most one other free dim inferred.
  Result<Value> reshape(std::string_view name_hint, const Value& x, const Dims& out);
  /// An activation defined so far that has, for each (a, b) of `dims`, a dim of size a in lane a and
  /// b in lane b (dims that depend on the model's free dims), the model's inputs first; nullptr if
  /// none. `where` gets the index of each.
  const Value* dim_carrier(const std::vector<std::pair<int64_t, int64_t>>& dims, std::vector<int>& where) const;
  /// The output shape `op` would give these inputs, in both lanes (nothing appended).
  Result<Dims> infer(gpu::OpKind op, const gpu::LayerAttrs& attrs, const std::vector<const Value*>& inputs) const;

  /// `w` (a float matrix) transposed, once per constant: layers that read one weight transposed
  /// (tied MatMul weights) share the transposed buffer, as they share an untransposed one.
  Result<std::shared_ptr<const Constant>> transposed(const std::shared_ptr<const Constant>& w);

  void count_folded() { ++stats_.folded; }
  void count_removed() { ++stats_.removed; }

 private:
  struct Refusal {
    std::string op_type;
    std::string label;
    Error error;
  };
  Status define_inputs();
  Status read_initializers();
  void convert_node(int index);
  void refuse(const onnx::NodeProto& node, int index, const Error& error);
  Status declare_outputs();
  Error refusal_error() const;
  std::string unique_name(std::string_view hint);

  const OnnxGraph& graph_;
  const ImportOptions& options_;
  const std::string model_dir_;
  const std::string source_;
  std::map<std::string, Value, std::less<>> values_;
  std::set<std::string, std::less<>> names_;  // Ember value names taken (inputs, layers, reserved outputs)
  std::map<std::string, int, std::less<>> symbols_;  // a free dim's name (dim_param) -> its symbol
  int next_symbol_ = 0;
  // A weight of layer `layer`, named once layer names are final (declare_outputs).
  struct PendingWeight {
    size_t layer = 0;
    std::string role;
    gpu::Shape shape;
    std::shared_ptr<const std::vector<float>> values;  // float32
    gpu::DType dtype = gpu::DType::f32;
    std::shared_ptr<const std::vector<uint8_t>> raw;   // any other dtype
  };
  gpu::Manifest manifest_;
  std::vector<PendingWeight> weights_;
  std::vector<Fusion> fusions_;
  std::map<int, size_t> fusion_of_;  // node -> its fusion
  std::map<std::string, std::string, std::less<>> output_names_;  // graph output -> its Ember name
  // Source -> (source, transposed); holding the source keeps its address from being reused.
  std::map<const Constant*, std::pair<std::shared_ptr<const Constant>, std::shared_ptr<const Constant>>> transposed_;
  // (constant, dtype) -> the activation of its `constant` layer; holding the constant keeps its
  // address from being reused.
  std::map<std::pair<const Constant*, gpu::DType>, std::pair<std::shared_ptr<const Constant>, Value>> constant_layers_;
  std::set<const void*> written_;  // weight buffers already written once (for duplicated_bytes)
  std::vector<Refusal> refusals_;
  uint32_t unchecked_ = 0;  // nodes skipped because they read a refused node's results
  ImportStats stats_;
};

/// What a layer converted from `node` is named after: the node's name, or its first output's.
std::string layer_hint(const onnx::NodeProto& node);

/// A name model.json accepts: characters outside [A-Za-z0-9_.:/-] become '_', at most 200 chars.
std::string ember_name(std::string_view onnx_name);

}  // namespace ember::importer
