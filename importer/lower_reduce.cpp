// The ONNX ops that reduce along axes: ReduceSum/Mean/Max/Min/Prod/SumSquare/L1/L2/LogSumExp
// (Ember's reduce), ArgMax/ArgMin (argmax), TopK (one topk layer per output read: values,
// indices; k an attribute before opset 10), Softmax and LogSoftmax (softmax). Before opset 13
// Softmax and LogSoftmax normalise over every dim from `axis` on as one; that equals Ember's
// per-dim softmax only when `axis` is the last dim or every dim after it is 1, and is refused
// otherwise.
#include "importer/fold.hpp"
#include "importer/lower.hpp"
#include "importer/onnx_attrs.hpp"

namespace ember::importer {

namespace {

using gpu::OpKind;
using gpu::ReduceFn;

Status define_output(Converter& c, const onnx::NodeProto& n, int i, OpKind op, const gpu::LayerAttrs& attrs,
                     const Value* x, const std::string& hint) {
  EMBER_ASSIGN_OR_RETURN(Value y, c.add_layer(hint, op, attrs, {x}, {}));
  c.define(n, i, std::move(y));
  return Status::OK();
}

constexpr std::pair<std::string_view, ReduceFn> kReduceOps[] = {
    {"ReduceSum", ReduceFn::sum},        {"ReduceMean", ReduceFn::mean},
    {"ReduceMax", ReduceFn::max},        {"ReduceMin", ReduceFn::min},
    {"ReduceProd", ReduceFn::prod},      {"ReduceSumSquare", ReduceFn::sum_square},
    {"ReduceL1", ReduceFn::l1},          {"ReduceL2", ReduceFn::l2},
    {"ReduceLogSumExp", ReduceFn::log_sum_exp},
};

Status convert_reduce(Converter& c, const onnx::NodeProto& n) {
  ReduceFn fn = ReduceFn::sum;
  for (const auto& [name, f] : kReduceOps)
    if (name == n.op_type()) fn = f;
  NodeAttrs a(n);
  gpu::LayerAttrs attrs;
  attrs.keepdims = a.integer("keepdims", 1) != 0;
  // ReduceSum takes its axes as an input from opset 13, the others from 18 (beyond this importer).
  const bool axes_input = fn == ReduceFn::sum && c.opset() >= 13;
  std::vector<int64_t> axes;
  if (!axes_input) axes = a.ints("axes");
  if (axes_input) attrs.noop_with_empty_axes = a.integer("noop_with_empty_axes", 0) != 0;
  EMBER_RETURN_IF_ERROR(a.finish());
  if (axes_input && c.input(n, 1)) {
    EMBER_ASSIGN_OR_RETURN(auto k, c.constant_input(n, 1, "axes"));
    EMBER_ASSIGN_OR_RETURN(axes, fixed_ints(*k, "axes"));
  }
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "data"));
  if (axes.size() > static_cast<size_t>(gpu::Shape::kMaxRank)) return invalid_argument("more axes than dims");
  attrs.fn = static_cast<uint8_t>(fn);
  attrs.num_axes = static_cast<int32_t>(axes.size());
  for (size_t i = 0; i < axes.size(); ++i) {
    EMBER_ASSIGN_OR_RETURN(attrs.axes[i], normalize_axis(axes[i], x->dims.rank()));
  }
  if (axes.empty() && attrs.noop_with_empty_axes) {
    c.define(n, 0, *x);
    c.count_removed();
    return Status::OK();
  }
  return define_output(c, n, 0, OpKind::reduce, attrs, x, layer_hint(n));
}

Status convert_argmax(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  gpu::LayerAttrs attrs;
  const int64_t axis = a.integer("axis", 0);
  attrs.keepdims = a.integer("keepdims", 1) != 0;
  if (a.since("select_last_index", 12, c.opset())) attrs.select_last_index = a.integer("select_last_index", 0) != 0;
  attrs.fn = n.op_type() == "ArgMin" ? 1 : 0;
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "data"));
  EMBER_ASSIGN_OR_RETURN(attrs.dim, normalize_axis(axis, x->dims.rank()));
  return define_output(c, n, 0, OpKind::argmax, attrs, x, layer_hint(n));
}

// TopK-1 (before opset 10) takes k as an attribute, TopK-10 as input K; both return the largest
// elements, sorted. largest and sorted arrive with TopK-11.
Status convert_topk(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  gpu::LayerAttrs attrs;
  const int64_t axis = a.integer("axis", -1);
  attrs.largest = true;
  if (a.since("largest", 11, c.opset())) attrs.largest = a.integer("largest", 1) != 0;
  if (a.since("sorted", 11, c.opset())) a.ignore("sorted");  // Ember's topk always sorts, which sorted 0 allows
  std::vector<int64_t> ks;
  if (c.opset() < 10) {
    if (!a.has("k")) return invalid_argument("attribute 'k' is required before opset 10");
    ks = {a.integer("k", 0)};
  }
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_RETURN_IF_ERROR(inputs_before(c, n, 1, 10));
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "X"));
  std::string k_text = ks.empty() ? "" : list_text(ks);
  if (c.opset() >= 10) {
    EMBER_ASSIGN_OR_RETURN(auto k, c.constant_input(n, 1, "K"));
    EMBER_ASSIGN_OR_RETURN(ks, fixed_ints(*k, "K"));
    k_text = k->describe();
  }
  if (ks.size() != 1 || ks[0] < 0 || ks[0] > kMaxDim) return invalid_argument("K must be one count, got " + k_text);
  attrs.k = ks[0];
  EMBER_ASSIGN_OR_RETURN(attrs.dim, normalize_axis(axis, x->dims.rank()));
  // Each output that is read is a layer of its own.
  for (int i = 0; i < 2 && i < n.output_size(); ++i) {
    if (n.output(i).empty()) continue;
    attrs.values_output = i == 0;
    EMBER_RETURN_IF_ERROR(define_output(c, n, i, OpKind::topk, attrs, x, n.output(i)));
  }
  return Status::OK();
}

Status convert_softmax(Converter& c, const onnx::NodeProto& n) {
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "input"));
  NodeAttrs a(n);
  const int64_t axis = a.integer("axis", c.opset() >= 13 ? -1 : 1);
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(const int ax, normalize_axis(axis, x->dims.rank()));
  // Before opset 13, Softmax normalises over every dim from `axis` on, as one.
  if (c.opset() < 13) {
    bool trailing_ones = true;
    for (int i = ax + 1; i < x->dims.rank(); ++i) trailing_ones &= x->dims.fixed(i) && x->dims.a[i] == 1;
    if (!trailing_ones) {
      return unsupported("not supported yet: opset " + std::to_string(c.opset()) + " " + n.op_type() + " over dims " +
                         std::to_string(ax) + ".. together (Ember's softmax is along one dim)");
    }
  }
  gpu::LayerAttrs attrs;
  attrs.dim = ax;
  attrs.log = n.op_type() == "LogSoftmax";
  return define_output(c, n, 0, OpKind::softmax, attrs, x, layer_hint(n));
}

}  // namespace

OpConversion reduce_conversion(std::string_view op) {
  for (const auto& [name, fn] : kReduceOps)
    if (name == op) return convert_reduce;
  if (op == "ArgMax" || op == "ArgMin") return convert_argmax;
  if (op == "TopK") return convert_topk;
  if (op == "Softmax" || op == "LogSoftmax") return convert_softmax;
  return nullptr;
}

}  // namespace ember::importer
