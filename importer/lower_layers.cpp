// The ONNX ops that become Ember's layers with weights, or its coarse activation layers:
// BatchNormalization, InstanceNormalization, LayerNormalization, Relu, Tanh, Gemm and MatMul, and
// the fused patterns of patterns.hpp. Each conversion reads the node's attributes (refusing any it
// does not read), checks what Ember's op cannot express and appends its layers. A product by a
// constant matrix is Ember's linear (the weight transposed once, alpha folded in); a product of
// two activations is matmul, with a transpose layer for transA/transB and binary layers for alpha
// and the bias C. The window ops (Conv, pools) are lower_conv.cpp's.
#include <cmath>

#include "importer/converter.hpp"
#include "importer/fold.hpp"
#include "importer/lower.hpp"
#include "importer/onnx_attrs.hpp"

namespace ember::importer {

namespace {

using gpu::OpKind;

Status convert_batch_norm(Converter& c, const onnx::NodeProto& n) {
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "X"));
  EMBER_ASSIGN_OR_RETURN(auto scale, c.constant_input(n, 1, "scale"));
  EMBER_ASSIGN_OR_RETURN(auto bias, c.constant_input(n, 2, "B"));
  EMBER_ASSIGN_OR_RETURN(auto mean, c.constant_input(n, 3, "input_mean"));
  EMBER_ASSIGN_OR_RETURN(auto var, c.constant_input(n, 4, "input_var"));
  NodeAttrs a(n);
  gpu::LayerAttrs attrs;
  attrs.eps = a.number("epsilon", 1e-5f);
  a.ignore("momentum");  // updates running statistics in training only
  if (a.integer("training_mode", 0) != 0) return unsupported("not supported: training_mode 1 (the importer converts inference)");
  EMBER_RETURN_IF_ERROR(a.finish());
  for (int i = 1; i < 5; ++i) EMBER_RETURN_IF_ERROR(c.require_unused(n, i, "a running statistic"));
  if (x->dims.rank() < 2 || !x->dims.fixed(1)) return unsupported("not supported yet: a free or missing channel dim");
  if (!(attrs.eps >= 0.f && attrs.eps <= 1.f)) return unsupported("not supported yet: epsilon outside [0, 1]");
  attrs.num_features = x->dims.a[1];
  return define_layer(c, n, OpKind::batch_norm, attrs, {x},
                      {{"weight", scale}, {"bias", bias}, {"running_mean", mean}, {"running_var", var}});
}

template <OpKind kOp>
Status convert_unary(Converter& c, const onnx::NodeProto& n) {
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "X"));
  EMBER_RETURN_IF_ERROR(NodeAttrs(n).finish());
  return define_layer(c, n, kOp, {}, {x});
}

// A bias for `out_features` outputs from a constant that varies along the last dim at most; a
// single value is repeated.
Result<std::shared_ptr<const Constant>> bias_vector(const Constant& b, int64_t out_features, float scale) {
  for (size_t i = 0; i + 1 < b.dims.size(); ++i) {
    if (b.dims[i] != 1) return unsupported("not supported yet: a bias " + b.describe() + " that varies along more than the last dim");
  }
  const int64_t n = b.numel();
  if (b.kind != Constant::Kind::f32 || (n != out_features && n != 1)) {
    return invalid_argument("bias " + b.describe() + " does not fit " + std::to_string(out_features) + " outputs");
  }
  std::vector<float> v(static_cast<size_t>(out_features));
  for (int64_t i = 0; i < out_features; ++i) v[static_cast<size_t>(i)] = scale * b.f[static_cast<size_t>(n == 1 ? 0 : i)];
  return std::make_shared<const Constant>(Constant::floats({out_features}, std::move(v)));
}

// MatMul(x, B) with B a constant [K, N]: x and Ember's weight, B transposed to [N, K].
struct Product {
  const Value* x = nullptr;
  std::shared_ptr<const Constant> weight;
};

Result<Product> matmul_operands(Converter& c, const onnx::NodeProto& n) {
  const Value* a = c.input(n, 0);
  const Value* b = c.input(n, 1);
  if (!a || !b) return invalid_argument("MatMul takes two inputs");
  if (a->is_activation() && b->is_activation()) {
    return unsupported("not supported yet: a product of two activations (Ember's linear multiplies by a constant weight)");
  }
  if (!b->is_constant()) return unsupported("not supported yet: a constant left operand");
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "A"));
  if (b->constant->dims.size() != 2 || b->constant->kind != Constant::Kind::f32) {
    return unsupported("not supported yet: a right operand " + b->constant->describe() + " (Ember's linear takes a matrix)");
  }
  EMBER_RETURN_IF_ERROR(NodeAttrs(n).finish());
  EMBER_ASSIGN_OR_RETURN(auto w, c.transposed(b->constant));
  return Product{x, std::move(w)};
}

// A product of two values where Ember's linear does not apply: one matmul layer, constants as
// `constant` layers.
Result<Value> matmul_layer(Converter& c, const onnx::NodeProto& n, const Value* x, const Value* y, const std::string& hint) {
  if (x->is_constant() && y->is_constant()) return unsupported("not supported yet: a product of two constants");
  if (x->is_constant()) {
    EMBER_ASSIGN_OR_RETURN(x, c.constant_layer(x->constant, gpu::DType::f32, n.input(0)));
  }
  if (y->is_constant()) {
    EMBER_ASSIGN_OR_RETURN(y, c.constant_layer(y->constant, gpu::DType::f32, n.input(1)));
  }
  if (x->dtype != gpu::DType::f32 || y->dtype != gpu::DType::f32) {
    return unsupported("not supported: a product of " + std::string(gpu::dtype_name(x->dtype)) + " and " +
                       std::string(gpu::dtype_name(y->dtype)) + " (Ember's matmul is float32)");
  }
  return c.add_layer(hint, OpKind::matmul, {}, {x, y}, {});
}

// x * W with W a constant float matrix and x an activation: Ember's linear.
bool is_linear(const Value* x, const Value* w) {
  return x && w && x->is_activation() && w->is_constant() && w->constant->dims.size() == 2 &&
         w->constant->kind == Constant::Kind::f32;
}

Status convert_matmul(Converter& c, const onnx::NodeProto& n) {
  if (is_linear(c.input(n, 0), c.input(n, 1))) {
    EMBER_ASSIGN_OR_RETURN(Product p, matmul_operands(c, n));
    gpu::LayerAttrs attrs;
    attrs.out_features = p.weight->dims[0];
    attrs.in_features = p.weight->dims[1];
    attrs.bias = false;
    return define_layer(c, n, OpKind::linear, attrs, {p.x}, {{"weight", p.weight}});
  }
  EMBER_RETURN_IF_ERROR(NodeAttrs(n).finish());
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.value_input(n, 0));
  EMBER_ASSIGN_OR_RETURN(const Value* y, c.value_input(n, 1));
  EMBER_ASSIGN_OR_RETURN(Value out, matmul_layer(c, n, x, y, layer_hint(n)));
  c.define(n, 0, std::move(out));
  return Status::OK();
}

// `k` times `scale`.
std::shared_ptr<const Constant> scaled(const std::shared_ptr<const Constant>& k, float scale) {
  if (scale == 1.f) return k;
  Constant s = *k;
  for (float& v : s.f) v *= scale;
  return std::make_shared<const Constant>(std::move(s));
}

// y + beta * C (C broadcasting), as a binary layer.
Result<Value> add_bias(Converter& c, const onnx::NodeProto& n, const Value& y, const std::shared_ptr<const Constant>& bias,
                       float beta) {
  if (bias->kind != Constant::Kind::f32) return invalid_argument("C is " + bias->describe() + ", expected floats");
  EMBER_ASSIGN_OR_RETURN(const Value* k, c.constant_layer(scaled(bias, beta), gpu::DType::f32, n.input(2)));
  gpu::LayerAttrs add;
  add.fn = static_cast<uint8_t>(gpu::BinaryFn::add);
  return c.add_layer(layer_hint(n), OpKind::binary, add, {&y, k}, {});
}

// A 2-d activation transposed.
Result<Value> transpose2(Converter& c, const Value* x, const std::string& hint) {
  if (x->dims.rank() != 2) return invalid_argument("an operand of rank " + std::to_string(x->dims.rank()) + ", Gemm takes 2");
  gpu::LayerAttrs attrs;
  attrs.num_axes = 2;
  attrs.axes[0] = 1;
  attrs.axes[1] = 0;
  return c.add_layer(hint, OpKind::transpose, attrs, {x}, {});
}

Status convert_gemm(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  const float alpha = a.number("alpha", 1.f), beta = a.number("beta", 1.f);
  const bool trans_a = a.integer("transA", 0) != 0, trans_b = a.integer("transB", 0) != 0;
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.value_input(n, 0));
  EMBER_ASSIGN_OR_RETURN(const Value* bv, c.value_input(n, 1));
  std::shared_ptr<const Constant> bias;
  if (c.input(n, 2)) {
    EMBER_ASSIGN_OR_RETURN(bias, c.constant_input(n, 2, "C"));
  }
  if (x->is_activation() && x->dims.rank() != 2) return invalid_argument("A has rank " + std::to_string(x->dims.rank()) + ", Gemm takes 2");
  Value xt;
  if (trans_a && x->is_activation()) {
    EMBER_ASSIGN_OR_RETURN(xt, transpose2(c, x, layer_hint(n) + ".transA"));
    x = &xt;
  }
  if (is_linear(x, bv) && !trans_a) {
    const auto& b = bv->constant;
    // Ember's weight is [N, K]: B as it is with transB, else transposed; alpha folded into it.
    std::shared_ptr<const Constant> w = b;
    if (!trans_b) {
      EMBER_ASSIGN_OR_RETURN(w, c.transposed(b));
    }
    w = scaled(w, alpha);
    gpu::LayerAttrs attrs;
    attrs.out_features = w->dims[0];
    attrs.in_features = w->dims[1];
    // C broadcasts to [M, N]: one row of biases (or one value) is linear's bias; else a binary add.
    const bool row_bias = bias && (bias->dims.size() < 2 || bias->dims[0] == 1);
    attrs.bias = row_bias;
    std::vector<RoleWeight> weights = {{"weight", w}};
    if (row_bias) {
      EMBER_ASSIGN_OR_RETURN(auto v, bias_vector(*bias, attrs.out_features, beta));
      weights.push_back({"bias", v});
    }
    EMBER_ASSIGN_OR_RETURN(Value y, c.add_layer(layer_hint(n) + (bias && !row_bias ? ".linear" : ""), OpKind::linear, attrs, {x}, weights));
    if (bias && !row_bias) {
      EMBER_ASSIGN_OR_RETURN(y, add_bias(c, n, y, bias, beta));
    }
    c.define(n, 0, std::move(y));
    return Status::OK();
  }
  if (trans_a && x->is_constant()) return unsupported("not supported yet: transA 1 of a constant A");
  Value bt;
  if (trans_b) {
    if (bv->is_constant()) {
      EMBER_ASSIGN_OR_RETURN(auto t, c.transposed(bv->constant));
      bt = Value::of_constant(*t);
    } else {
      EMBER_ASSIGN_OR_RETURN(bt, transpose2(c, bv, layer_hint(n) + ".transB"));
    }
    bv = &bt;
  }
  const bool more = alpha != 1.f || bias;
  EMBER_ASSIGN_OR_RETURN(Value y, matmul_layer(c, n, x, bv, layer_hint(n) + (more ? ".matmul" : "")));
  if (alpha != 1.f) {
    const auto k = std::make_shared<const Constant>(Constant::floats({}, {alpha}));
    EMBER_ASSIGN_OR_RETURN(const Value* kv, c.constant_layer(k, gpu::DType::f32, layer_hint(n) + ".alpha"));
    gpu::LayerAttrs mul;
    mul.fn = static_cast<uint8_t>(gpu::BinaryFn::mul);
    EMBER_ASSIGN_OR_RETURN(y, c.add_layer(layer_hint(n) + (bias ? ".scaled" : ""), OpKind::binary, mul, {&y, kv}, {}));
  }
  if (bias) {
    EMBER_ASSIGN_OR_RETURN(y, add_bias(c, n, y, bias, beta));
  }
  c.define(n, 0, std::move(y));
  return Status::OK();
}

Status convert_instance_norm(Converter& c, const onnx::NodeProto& n) {
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "input"));
  EMBER_ASSIGN_OR_RETURN(auto scale, c.constant_input(n, 1, "scale"));
  EMBER_ASSIGN_OR_RETURN(auto bias, c.constant_input(n, 2, "B"));
  NodeAttrs a(n);
  gpu::LayerAttrs attrs;
  attrs.eps = a.number("epsilon", 1e-5f);
  EMBER_RETURN_IF_ERROR(a.finish());
  if (x->dims.rank() < 3 || !x->dims.fixed(1)) return unsupported("not supported yet: a free or missing channel dim");
  if (!(attrs.eps >= 0.f && attrs.eps <= 1.f)) return unsupported("not supported yet: epsilon outside [0, 1]");
  attrs.num_features = attrs.num_groups = x->dims.a[1];  // one group per channel
  return define_layer(c, n, OpKind::group_norm, attrs, {x}, {{"weight", scale}, {"bias", bias}});
}

Status convert_layer_norm(Converter& c, const onnx::NodeProto& n) {
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "X"));
  EMBER_ASSIGN_OR_RETURN(auto scale, c.constant_input(n, 1, "Scale"));
  std::shared_ptr<const Constant> bias;
  if (c.input(n, 2)) {
    EMBER_ASSIGN_OR_RETURN(bias, c.constant_input(n, 2, "B"));
  }
  NodeAttrs a(n);
  const int64_t axis = a.integer("axis", -1);
  gpu::LayerAttrs attrs;
  attrs.eps = a.number("epsilon", 1e-5f);
  a.ignore("stash_type");  // the precision of the mean and variance; Ember's are float32
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_RETURN_IF_ERROR(c.require_unused(n, 1, "Mean"));
  EMBER_RETURN_IF_ERROR(c.require_unused(n, 2, "InvStdDev"));
  EMBER_ASSIGN_OR_RETURN(const int ax, normalize_axis(axis, x->dims.rank()));
  if (ax != x->dims.rank() - 1) {
    return unsupported("not supported yet: normalising over dims " + std::to_string(ax) +
                       ".. together (Ember's layer_norm normalises the last dim)");
  }
  if (!x->dims.fixed(ax)) return unsupported("not supported yet: normalising over a free dim");
  if (!(attrs.eps >= 0.f && attrs.eps <= 1.f)) return unsupported("not supported yet: epsilon outside [0, 1]");
  attrs.num_features = x->dims.a[ax];
  // Checked before a zero bias of that size is made: the scale's data bounds it.
  if (scale->dims != std::vector<int64_t>{attrs.num_features}) {
    return invalid_argument("Scale is " + scale->describe() + ", expected [" + std::to_string(attrs.num_features) + "]");
  }
  if (!bias) bias = std::make_shared<const Constant>(Constant::floats({attrs.num_features}, std::vector<float>(static_cast<size_t>(attrs.num_features), 0.f)));
  return define_layer(c, n, OpKind::layer_norm, attrs, {x}, {{"weight", scale}, {"bias", bias}});
}

}  // namespace

OpConversion layer_conversion(std::string_view op) {
  static const std::pair<std::string_view, OpConversion> kTable[] = {
      {"BatchNormalization", convert_batch_norm},
      {"InstanceNormalization", convert_instance_norm},
      {"Relu", convert_unary<OpKind::relu>},
      {"Tanh", convert_unary<OpKind::tanh>},
      {"Gemm", convert_gemm},
      {"MatMul", convert_matmul},
      {"LayerNormalization", convert_layer_norm},
  };
  for (const auto& [name, fn] : kTable)
    if (name == op) return fn;
  return conv_conversion(op);
}

Status convert_fusion(Converter& c, const Fusion& f) {
  const onnx::NodeProto& anchor = c.graph().node(f.anchor);
  if (f.kind == Fusion::Kind::linear_bias) {
    const onnx::NodeProto& mm = c.graph().node(f.matmul);
    auto p = matmul_operands(c, mm);
    if (!p.ok()) return p.error().with_context(node_label(mm, f.matmul) + ", which it adds a bias to");
    gpu::LayerAttrs attrs;
    attrs.out_features = p->weight->dims[0];
    attrs.in_features = p->weight->dims[1];
    const Value* bias_value = c.input(anchor, anchor.input(0) == f.bias ? 0 : 1);
    if (!bias_value || !bias_value->is_constant()) return internal_error("the bias of a fused linear is not constant");
    EMBER_ASSIGN_OR_RETURN(auto bias, bias_vector(*bias_value->constant, attrs.out_features, 1.f));
    EMBER_ASSIGN_OR_RETURN(Value y, c.add_layer(layer_hint(mm), OpKind::linear, attrs, {p->x}, {{"weight", p->weight}, {"bias", bias}}));
    c.define(anchor, 0, std::move(y));
    return Status::OK();
  }
  if (f.kind == Fusion::Kind::pad_avg_pool) {
    const onnx::NodeProto& pad = c.graph().node(f.nodes.front());
    EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(pad, 0, "data"));
    return avg_pool_after_pad(c, anchor, x, f.pad);
  }
  const Value* x = nullptr;
  for (int n : f.nodes) {
    const auto& node = c.graph().node(n);
    for (int i = 0; i < node.input_size() && !x; ++i)
      if (node.input(i) == f.input) x = c.input(node, i);
  }
  if (!x || !x->is_activation() || x->dtype != gpu::DType::f32) {
    return unsupported("not supported yet: GELU of a value that is not a float32 activation");
  }
  gpu::LayerAttrs attrs;
  attrs.tanh_approximation = f.kind == Fusion::Kind::gelu_tanh;
  EMBER_ASSIGN_OR_RETURN(Value y, c.add_layer(layer_hint(anchor), OpKind::gelu, attrs, {x}, {}));
  c.define(anchor, 0, std::move(y));
  return Status::OK();
}

}  // namespace ember::importer
