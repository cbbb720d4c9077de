#include "importer/lower.hpp"

namespace ember::importer {

std::string list_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

Status inputs_before(const Converter& c, const onnx::NodeProto& n, int count, int64_t version) {
  if (c.opset() >= version || n.input_size() <= count) return Status::OK();
  return invalid_argument(n.op_type() + " takes " + std::to_string(count) + (count == 1 ? " input" : " inputs") +
                          " before opset " + std::to_string(version) + " (the model declares opset " +
                          std::to_string(c.opset()) + "), this node " + std::to_string(n.input_size()));
}

Status define_folded(Converter& c, const onnx::NodeProto& n, int i, Result<Constant> value) {
  if (!value.ok()) return value.error();
  c.define(n, i, Value::of_constant(std::move(*value)));
  c.count_folded();
  return Status::OK();
}

Status define_alias(Converter& c, const onnx::NodeProto& n, int i, const Value& v) {
  c.define(n, i, v);
  c.count_removed();
  return Status::OK();
}

Status define_layer(Converter& c, const onnx::NodeProto& n, gpu::OpKind op, const gpu::LayerAttrs& attrs,
                    const std::vector<const Value*>& inputs, const std::vector<RoleWeight>& weights) {
  EMBER_ASSIGN_OR_RETURN(Value y, c.add_layer(layer_hint(n), op, attrs, inputs, weights));
  c.define(n, 0, std::move(y));
  return Status::OK();
}

}  // namespace ember::importer
