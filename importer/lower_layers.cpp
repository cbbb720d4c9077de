// The ONNX ops that become Ember layers: Conv, BatchNormalization, Relu, Tanh, Softmax, MaxPool,
// AveragePool, GlobalAveragePool, Gemm, MatMul, LayerNormalization, and the fused patterns of
// patterns.hpp. Each conversion reads the node's attributes (refusing any it does not read),
// checks what Ember's op cannot express (asymmetric pads, ceil_mode that changes the size, a
// padding-excluding average, a product of two activations ...) and appends one layer.
#include <cmath>

#include "importer/converter.hpp"
#include "importer/fold.hpp"
#include "importer/onnx_attrs.hpp"

namespace ember::importer {

namespace {

using gpu::OpKind;

std::string list_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Ember's attributes are integers in 0..INT32_MAX (model/ops.cpp).
Status in_range(const char* what, int64_t v, int64_t min) {
  if (v < min || v > INT32_MAX) return invalid_argument(std::string(what) + " " + std::to_string(v) + " is out of range");
  return Status::OK();
}

// The kernel, stride, padding and dilation of a 2-d window op from ONNX's attributes, for input x
// of rank 4. ONNX pads are [h_begin, w_begin, h_end, w_end]; Ember pads both sides alike.
Status read_window(NodeAttrs& a, const Value& x, const int64_t kernel[2], gpu::LayerAttrs& out, bool dilations) {
  const auto strides = a.ints("strides", {1, 1});
  const auto dil = dilations ? a.ints("dilations", {1, 1}) : std::vector<int64_t>{1, 1};
  auto pads = a.ints("pads", {0, 0, 0, 0});
  const std::string auto_pad = a.text("auto_pad", "NOTSET");
  if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4) {
    return invalid_argument("strides " + list_text(strides) + ", dilations " + list_text(dil) + " or pads " +
                            list_text(pads) + " do not fit a 2-d window");
  }
  for (int i = 0; i < 2; ++i) {
    EMBER_RETURN_IF_ERROR(in_range("kernel", kernel[i], 1));
    EMBER_RETURN_IF_ERROR(in_range("stride", strides[static_cast<size_t>(i)], 1));
    EMBER_RETURN_IF_ERROR(in_range("dilation", dil[static_cast<size_t>(i)], 1));
  }
  if (auto_pad == "VALID") {
    pads = {0, 0, 0, 0};
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (int i = 0; i < 2; ++i) {
      if (!x.dims.fixed(2 + i)) return unsupported("not supported yet: auto_pad " + auto_pad + " over a free spatial dim");
      const int64_t in = x.dims.a[2 + i], s = strides[static_cast<size_t>(i)];
      const int64_t total = std::max<int64_t>(0, ((in + s - 1) / s - 1) * s + (kernel[i] - 1) * dil[static_cast<size_t>(i)] + 1 - in);
      const int64_t begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[static_cast<size_t>(i)] = begin;
      pads[static_cast<size_t>(i) + 2] = total - begin;
    }
  } else if (auto_pad != "NOTSET") {
    return invalid_argument("auto_pad '" + auto_pad + "' is not an ONNX value");
  }
  for (int i = 0; i < 2; ++i) {
    if (pads[static_cast<size_t>(i)] != pads[static_cast<size_t>(i) + 2]) {
      return unsupported("not supported yet: asymmetric pads " + list_text(pads) +
                         " (Ember's windows pad both sides of a dim alike)");
    }
    EMBER_RETURN_IF_ERROR(in_range("pad", pads[static_cast<size_t>(i)], 0));
    out.kernel[i] = kernel[i];
    out.stride[i] = strides[static_cast<size_t>(i)];
    out.padding[i] = pads[static_cast<size_t>(i)];
    out.dilation[i] = dil[static_cast<size_t>(i)];
  }
  return Status::OK();
}

Status need_rank4(const Value& x, const char* op) {
  if (x.dims.rank() == 4) return Status::OK();
  return unsupported("not supported yet: " + std::string(op) + " over a rank-" + std::to_string(x.dims.rank()) +
                     " input; Ember's is 2-d (NCHW)");
}

// Pooling's attributes, shared by MaxPool and AveragePool; `extra_pad` is padding a fused Pad adds.
Status read_pool(NodeAttrs& a, const Value& x, gpu::LayerAttrs& out, bool dilations,
                 const int64_t extra_pad[2] = nullptr) {
  EMBER_RETURN_IF_ERROR(need_rank4(x, "pooling"));
  const auto k = a.ints("kernel_shape");
  if (k.size() != 2) return invalid_argument("kernel_shape " + list_text(k) + " does not fit a 2-d window");
  const int64_t kernel[2] = {k[0], k[1]};
  EMBER_RETURN_IF_ERROR(read_window(a, x, kernel, out, dilations));
  for (int i = 0; extra_pad && i < 2; ++i) {
    out.padding[i] += extra_pad[i];
    EMBER_RETURN_IF_ERROR(in_range("pad", out.padding[i], 0));
  }
  if (out.dilation[0] != 1 || out.dilation[1] != 1) return unsupported("not supported yet: dilated pooling");
  for (int i = 0; i < 2; ++i) {
    if (2 * out.padding[i] > out.kernel[i]) {
      return unsupported("not supported yet: pads larger than half the kernel");
    }
  }
  // ceil_mode rounds the output size up; it changes nothing when the windows fit exactly.
  if (a.integer("ceil_mode", 0) != 0) {
    for (int i = 0; i < 2; ++i) {
      bool exact = x.dims.fixed(2 + i);
      for (const gpu::Shape* s : {&x.dims.a, &x.dims.b}) {
        exact &= ((*s)[2 + i] + 2 * out.padding[i] - out.kernel[i]) % out.stride[i] == 0;
      }
      if (!exact) return unsupported("not supported yet: ceil_mode 1 where it changes the output size");
    }
  }
  return Status::OK();
}

Status define_layer(Converter& c, const onnx::NodeProto& n, OpKind op, const gpu::LayerAttrs& attrs,
                    const std::vector<const Value*>& inputs, const std::vector<RoleWeight>& weights = {}) {
  EMBER_ASSIGN_OR_RETURN(Value y, c.add_layer(layer_hint(n), op, attrs, inputs, weights));
  c.define(n, 0, std::move(y));
  return Status::OK();
}

Status convert_conv(Converter& c, const onnx::NodeProto& n) {
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "X"));
  EMBER_ASSIGN_OR_RETURN(auto w, c.constant_input(n, 1, "W"));
  if (x->dims.rank() != 4) {
    return unsupported("not supported yet: " + std::to_string(x->dims.rank() - 2) +
                       "-d convolution (Ember's op set has conv2d)");
  }
  if (w->dims.size() != 4) return invalid_argument("W is " + w->describe() + ", expected [M, C/group, kH, kW]");
  std::shared_ptr<const Constant> b;
  if (c.input(n, 2)) {
    EMBER_ASSIGN_OR_RETURN(b, c.constant_input(n, 2, "B"));
  }
  NodeAttrs a(n);
  gpu::LayerAttrs attrs;
  attrs.groups = a.integer("group", 1);
  const auto k = a.ints("kernel_shape", {w->dims[2], w->dims[3]});
  if (k != std::vector<int64_t>{w->dims[2], w->dims[3]}) {
    return invalid_argument("kernel_shape " + list_text(k) + " does not match W " + w->describe());
  }
  const int64_t kernel[2] = {w->dims[2], w->dims[3]};
  EMBER_RETURN_IF_ERROR(read_window(a, *x, kernel, attrs, true));
  EMBER_RETURN_IF_ERROR(a.finish());
  if (!x->dims.fixed(1)) return unsupported("not supported yet: a free channel dim");
  EMBER_RETURN_IF_ERROR(in_range("group", attrs.groups, 1));
  attrs.in_channels = x->dims.a[1];
  attrs.out_channels = w->dims[0];
  if (w->dims[1] * attrs.groups != attrs.in_channels || attrs.out_channels % attrs.groups) {
    return invalid_argument("W " + w->describe() + " with group " + std::to_string(attrs.groups) + " does not fit " +
                            std::to_string(attrs.in_channels) + " input channels");
  }
  attrs.bias = b != nullptr;
  std::vector<RoleWeight> weights = {{"weight", w}};
  if (b) weights.push_back({"bias", b});
  return define_layer(c, n, OpKind::conv2d, attrs, {x}, weights);
}

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

Status convert_softmax(Converter& c, const onnx::NodeProto& n) {
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "input"));
  NodeAttrs a(n);
  const int64_t axis = a.integer("axis", c.opset() >= 13 ? -1 : 1);
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(const int ax, normalize_axis(axis, x->dims.rank()));
  // Before opset 13, Softmax normalises over every dim from `axis` on, as one.
  if (c.opset() < 13 && ax != x->dims.rank() - 1) {
    return unsupported("not supported yet: opset " + std::to_string(c.opset()) + " Softmax over dims " +
                       std::to_string(ax) + ".. together (Ember's softmax is along one dim)");
  }
  gpu::LayerAttrs attrs;
  attrs.dim = ax;
  return define_layer(c, n, OpKind::softmax, attrs, {x});
}

Status convert_max_pool(Converter& c, const onnx::NodeProto& n) {
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "X"));
  EMBER_RETURN_IF_ERROR(c.require_unused(n, 1, "Indices"));
  NodeAttrs a(n);
  a.ignore("storage_order");  // the layout of Indices, which is unused
  gpu::LayerAttrs attrs;
  EMBER_RETURN_IF_ERROR(read_pool(a, *x, attrs, true));
  EMBER_RETURN_IF_ERROR(a.finish());
  return define_layer(c, n, OpKind::max_pool2d, attrs, {x});
}

// AveragePool `n` of x, after a fused Pad of zeros of `extra_pad` (nullptr: none).
Status avg_pool(Converter& c, const onnx::NodeProto& n, const Value* x, const int64_t extra_pad[2]) {
  NodeAttrs a(n);
  gpu::LayerAttrs attrs;
  EMBER_RETURN_IF_ERROR(read_pool(a, *x, attrs, false));
  const bool own_pads = attrs.padding[0] || attrs.padding[1];
  const bool counts_pad = a.integer("count_include_pad", 0) != 0;
  EMBER_RETURN_IF_ERROR(a.finish());
  if (!counts_pad && own_pads) {
    return unsupported("not supported yet: count_include_pad 0 with padding (Ember's avg_pool2d divides by the whole "
                       "window, padding included)");
  }
  if (extra_pad) {  // a Pad's zeros are counted whatever count_include_pad says: they are values
    NodeAttrs again(n);
    EMBER_RETURN_IF_ERROR(read_pool(again, *x, attrs, false, extra_pad));
  }
  return define_layer(c, n, OpKind::avg_pool2d, attrs, {x});
}

Status convert_avg_pool(Converter& c, const onnx::NodeProto& n) {
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "X"));
  return avg_pool(c, n, x, nullptr);
}

Status convert_global_avg_pool(Converter& c, const onnx::NodeProto& n) {
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "X"));
  EMBER_RETURN_IF_ERROR(NodeAttrs(n).finish());
  EMBER_RETURN_IF_ERROR(need_rank4(*x, "GlobalAveragePool"));
  return define_layer(c, n, OpKind::global_avg_pool, {}, {x});
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

Status convert_matmul(Converter& c, const onnx::NodeProto& n) {
  EMBER_ASSIGN_OR_RETURN(Product p, matmul_operands(c, n));
  gpu::LayerAttrs attrs;
  attrs.out_features = p.weight->dims[0];
  attrs.in_features = p.weight->dims[1];
  attrs.bias = false;
  return define_layer(c, n, OpKind::linear, attrs, {p.x}, {{"weight", p.weight}});
}

Status convert_gemm(Converter& c, const onnx::NodeProto& n) {
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "A"));
  EMBER_ASSIGN_OR_RETURN(auto b, c.constant_input(n, 1, "B"));
  std::shared_ptr<const Constant> bias;
  if (c.input(n, 2)) {
    EMBER_ASSIGN_OR_RETURN(bias, c.constant_input(n, 2, "C"));
  }
  NodeAttrs a(n);
  const float alpha = a.number("alpha", 1.f), beta = a.number("beta", 1.f);
  const bool trans_a = a.integer("transA", 0) != 0, trans_b = a.integer("transB", 0) != 0;
  EMBER_RETURN_IF_ERROR(a.finish());
  if (trans_a) return unsupported("not supported yet: transA 1 (a transposed activation)");
  if (x->dims.rank() != 2) return invalid_argument("A has rank " + std::to_string(x->dims.rank()) + ", Gemm takes 2");
  if (b->dims.size() != 2 || b->kind != Constant::Kind::f32) return invalid_argument("B is " + b->describe() + ", expected a float matrix");
  // Ember's weight is [N, K]: B as it is with transB, else transposed; alpha folded into it.
  std::shared_ptr<const Constant> w = b;
  if (!trans_b) {
    EMBER_ASSIGN_OR_RETURN(w, c.transposed(b));
  }
  if (alpha != 1.f) {
    Constant scaled = *w;
    for (float& v : scaled.f) v *= alpha;
    w = std::make_shared<const Constant>(std::move(scaled));
  }
  gpu::LayerAttrs attrs;
  attrs.out_features = w->dims[0];
  attrs.in_features = w->dims[1];
  attrs.bias = bias != nullptr;
  std::vector<RoleWeight> weights = {{"weight", w}};
  if (bias) {
    // C broadcasts to [M, N]: one row of biases, or one value.
    if (bias->dims.size() == 2 && bias->dims[0] != 1) return unsupported("not supported yet: a bias C " + bias->describe() + " that varies per row");
    EMBER_ASSIGN_OR_RETURN(auto v, bias_vector(*bias, attrs.out_features, beta));
    weights.push_back({"bias", v});
  }
  return define_layer(c, n, OpKind::linear, attrs, {x}, weights);
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
      {"Conv", convert_conv},
      {"BatchNormalization", convert_batch_norm},
      {"Relu", convert_unary<OpKind::relu>},
      {"Tanh", convert_unary<OpKind::tanh>},
      {"Softmax", convert_softmax},
      {"MaxPool", convert_max_pool},
      {"AveragePool", convert_avg_pool},
      {"GlobalAveragePool", convert_global_avg_pool},
      {"Gemm", convert_gemm},
      {"MatMul", convert_matmul},
      {"LayerNormalization", convert_layer_norm},
  };
  for (const auto& [name, fn] : kTable)
    if (name == op) return fn;
  return nullptr;
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
    return avg_pool(c, anchor, x, f.pad);
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
