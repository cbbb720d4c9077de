// The ONNX ops that compute element by element: the unary functions (Sigmoid, HardSwish, Clip,
// Exp, ... Not), the broadcasting binary ones (Add ... Pow, Min/Max, Mod, comparisons, And/Or/Xor),
// Where and Cast. On constants they fold (fold.hpp); on activations they become Ember's unary,
// binary, where and cast layers, a constant operand becoming a `constant` layer (operand()).
// Add of two float activations of one shape stays Ember's coarse `add` (a residual connection).
// Clip's bounds are attributes before opset 11, inputs from 11 on.
#include <cfloat>

#include "importer/fold.hpp"
#include "importer/lower.hpp"
#include "importer/onnx_attrs.hpp"
#include "importer/onnx_tensor.hpp"

namespace ember::importer {

namespace {

using gpu::BinaryFn;
using gpu::DType;
using gpu::OpKind;
using gpu::UnaryFn;

// ---- unary ----

// One ONNX unary op: its function and how its attributes set alpha and beta.
struct UnaryOp {
  std::string_view onnx;
  UnaryFn fn;
  const char* alpha_attr = nullptr;  // ONNX's name of the attribute that is LayerAttrs::alpha
  float alpha = 0.f;
  const char* beta_attr = nullptr;
  float beta = 0.f;
};

constexpr float kSeluAlpha = 1.67326319217681884765625f, kSeluGamma = 1.05070102214813232421875f;

constexpr UnaryOp kUnaryOps[] = {
    {"Sigmoid", UnaryFn::sigmoid},
    {"HardSigmoid", UnaryFn::hard_sigmoid, "alpha", 0.2f, "beta", 0.5f},
    {"HardSwish", UnaryFn::hard_swish, nullptr, 1.f / 6.f, nullptr, 0.5f},
    {"Exp", UnaryFn::exp},
    {"Log", UnaryFn::log},
    {"Sqrt", UnaryFn::sqrt},
    {"Reciprocal", UnaryFn::reciprocal},
    {"Erf", UnaryFn::erf},
    {"Neg", UnaryFn::neg},
    {"Abs", UnaryFn::abs},
    {"LeakyRelu", UnaryFn::leaky_relu, "alpha", 0.01f},
    {"Elu", UnaryFn::elu, "alpha", 1.f},
    {"Celu", UnaryFn::celu, "alpha", 1.f},
    {"Selu", UnaryFn::selu, "alpha", kSeluAlpha, "gamma", kSeluGamma},
    {"Softplus", UnaryFn::softplus},
    {"Softsign", UnaryFn::softsign},
    {"Sin", UnaryFn::sin},
    {"Cos", UnaryFn::cos},
    {"Floor", UnaryFn::floor},
    {"Ceil", UnaryFn::ceil},
    {"Round", UnaryFn::round},
    {"Sign", UnaryFn::sign},
    {"Not", UnaryFn::not_},
};

const UnaryOp* unary_op(std::string_view onnx) {
  for (const auto& u : kUnaryOps)
    if (u.onnx == onnx) return &u;
  return nullptr;
}

Status unary(Converter& c, const onnx::NodeProto& n, UnaryFn fn, float alpha, float beta) {
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.value_input(n, 0));
  if (x->is_constant()) return define_folded(c, n, 0, fold_unary(fn, alpha, beta, *x->constant));
  if (fn == UnaryFn::not_ && x->dtype != DType::u8) {
    return unsupported("input 0 is " + std::string(gpu::dtype_name(x->dtype)) + "; Not takes bool (uint8)");
  }
  if (fn != UnaryFn::not_) {
    EMBER_ASSIGN_OR_RETURN(x, c.activation_input(n, 0, "X"));
  }
  gpu::LayerAttrs attrs;
  attrs.fn = static_cast<uint8_t>(fn);
  attrs.alpha = alpha;
  attrs.beta = beta;
  return define_layer(c, n, OpKind::unary, attrs, {x});
}

Status convert_unary(Converter& c, const onnx::NodeProto& n) {
  const UnaryOp* u = unary_op(n.op_type());
  if (!u) return internal_error("no unary function for " + n.op_type());
  NodeAttrs a(n);
  const float alpha = u->alpha_attr ? a.number(u->alpha_attr, u->alpha) : u->alpha;
  const float beta = u->beta_attr ? a.number(u->beta_attr, u->beta) : u->beta;
  EMBER_RETURN_IF_ERROR(a.finish());
  if (u->fn == UnaryFn::celu && alpha == 0.f) return invalid_argument("Celu's alpha may not be 0");
  return unary(c, n, u->fn, alpha, beta);
}

// A scalar float bound of Clip (input `i`), or `fallback` when omitted.
Result<float> clip_bound(Converter& c, const onnx::NodeProto& n, int i, float fallback) {
  if (!c.input(n, i)) return fallback;
  EMBER_ASSIGN_OR_RETURN(auto k, c.constant_input(n, i, i == 1 ? "min" : "max"));
  if (k->numel() != 1) return invalid_argument("Clip's bound must be a scalar, got " + k->describe());
  if (k->kind == Constant::Kind::f32) return k->f[0];
  if (!k->fixed()) return unsupported("not supported: a Clip bound that depends on a free dim");
  return static_cast<float>(k->a[0]);
}

// Clip-6 (before opset 11) takes min and max as attributes; Clip-11 and later as inputs.
Status convert_clip(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  float lo = -FLT_MAX, hi = FLT_MAX;
  if (c.opset() < 11) {
    lo = a.number("min", lo);
    hi = a.number("max", hi);
  }
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_RETURN_IF_ERROR(inputs_before(c, n, 1, 11));
  if (c.opset() >= 11) {
    EMBER_ASSIGN_OR_RETURN(lo, clip_bound(c, n, 1, lo));
    EMBER_ASSIGN_OR_RETURN(hi, clip_bound(c, n, 2, hi));
  }
  return unary(c, n, UnaryFn::clip, lo, hi);
}

// ---- binary ----

struct BinaryOp {
  std::string_view onnx;
  BinaryFn fn;
};
constexpr BinaryOp kBinaryOps[] = {
    {"Add", BinaryFn::add},         {"Sub", BinaryFn::sub},       {"Mul", BinaryFn::mul},
    {"Div", BinaryFn::div},         {"Pow", BinaryFn::pow},       {"Min", BinaryFn::min},
    {"Max", BinaryFn::max},         {"Mod", BinaryFn::mod},       {"Equal", BinaryFn::equal},
    {"Less", BinaryFn::less},       {"Greater", BinaryFn::greater}, {"LessOrEqual", BinaryFn::less_equal},
    {"GreaterOrEqual", BinaryFn::greater_equal}, {"And", BinaryFn::and_}, {"Or", BinaryFn::or_},
    {"Xor", BinaryFn::xor_},
};

bool compares(BinaryFn fn) { return fn >= BinaryFn::equal && fn <= BinaryFn::greater_equal; }
bool logical(BinaryFn fn) { return fn >= BinaryFn::and_; }

// The dtype a constant operand of `fn` takes beside an activation of `other`.
DType int_operand_dtype(BinaryFn fn, DType other) {
  if (logical(fn)) return DType::u8;
  return other == DType::i32 || other == DType::u8 ? other : DType::i64;
}

// `v` as an activation: itself, or its constant's `constant` layer (named after `name`).
Result<const Value*> as_activation(Converter& c, const Value* v, DType int_dtype, const std::string& name) {
  if (v->is_activation()) return v;
  return c.constant_layer(v->constant, int_dtype, name);
}

// fn(x, y): folded when both are constants, else one layer. `xname`, `yname`: the ONNX values.
Result<Value> binary(Converter& c, BinaryFn fn, const Value* x, const Value* y, const std::string& xname,
                     const std::string& yname, const std::string& hint) {
  if (x->is_constant() && y->is_constant()) {
    EMBER_ASSIGN_OR_RETURN(Constant k, fold_binary(fn, *x->constant, *y->constant));
    c.count_folded();
    return Value::of_constant(std::move(k));
  }
  // Ember's add: two activations of one shape (a residual connection).
  if (fn == BinaryFn::add && x->is_activation() && y->is_activation() && x->dims == y->dims && x->dtype == DType::f32 &&
      y->dtype == DType::f32) {
    return c.add_layer(hint, OpKind::add, {}, {x, y}, {});
  }
  const DType other = x->is_activation() ? x->dtype : y->dtype;
  EMBER_ASSIGN_OR_RETURN(x, as_activation(c, x, int_operand_dtype(fn, other), xname));
  EMBER_ASSIGN_OR_RETURN(y, as_activation(c, y, int_operand_dtype(fn, other), yname));
  if (!compares(fn) && !logical(fn) && (x->dtype != DType::f32 || y->dtype != DType::f32)) {
    return unsupported("not supported: " + std::string(gpu::binary_fn_name(fn)) + " of " +
                       std::string(gpu::dtype_name(x->dtype)) + " and " + std::string(gpu::dtype_name(y->dtype)) +
                       " (Ember's arithmetic is float32)");
  }
  gpu::LayerAttrs attrs;
  attrs.fn = static_cast<uint8_t>(fn);
  return c.add_layer(hint, OpKind::binary, attrs, {x, y}, {});
}

Status convert_binary(Converter& c, const onnx::NodeProto& n) {
  BinaryFn fn = BinaryFn::add;
  for (const auto& b : kBinaryOps)
    if (b.onnx == n.op_type()) fn = b.fn;
  NodeAttrs a(n);
  if (fn == BinaryFn::mod) {
    // fmod 0 is Python's % (the sign of the divisor), which Ember's mod (C's fmod) is not.
    if (a.integer("fmod", 0) != 1) return unsupported("not supported yet: Mod with fmod 0 (Ember's mod is C's fmod)");
  }
  EMBER_RETURN_IF_ERROR(a.finish());
  const int inputs = n.input_size();
  const bool variadic = fn == BinaryFn::min || fn == BinaryFn::max;
  if (inputs < (variadic ? 1 : 2) || (!variadic && inputs > 2)) {
    return invalid_argument(n.op_type() + " takes two inputs, got " + std::to_string(inputs));
  }
  std::vector<const Value*> xs;
  for (int i = 0; i < inputs; ++i) {
    EMBER_ASSIGN_OR_RETURN(const Value* v, c.value_input(n, i));
    xs.push_back(v);
  }
  // Min/Max of one input is that input; of more than two, a chain.
  Value acc = *xs[0];
  std::string acc_name = n.input(0);
  for (int i = 1; i < inputs; ++i) {
    const std::string hint = layer_hint(n) + (i + 1 < inputs ? "_" + std::to_string(i) : "");
    EMBER_ASSIGN_OR_RETURN(acc, binary(c, fn, &acc, xs[static_cast<size_t>(i)], acc_name, n.input(i), hint));
  }
  if (inputs == 1) c.count_removed();
  c.define(n, 0, std::move(acc));
  return Status::OK();
}

// ---- Where ----

Status convert_where(Converter& c, const onnx::NodeProto& n) {
  EMBER_RETURN_IF_ERROR(NodeAttrs(n).finish());
  EMBER_ASSIGN_OR_RETURN(const Value* cond, c.value_input(n, 0));
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.value_input(n, 1));
  EMBER_ASSIGN_OR_RETURN(const Value* y, c.value_input(n, 2));
  if (cond->is_constant() && x->is_constant() && y->is_constant()) {
    return define_folded(c, n, 0, fold_where(*cond->constant, *x->constant, *y->constant));
  }
  if (cond->is_activation() && cond->dtype != DType::u8) {
    return unsupported("the condition is " + std::string(gpu::dtype_name(cond->dtype)) + ", expected bool (uint8)");
  }
  const DType other = x->is_activation() ? x->dtype : y->is_activation() ? y->dtype : DType::i64;
  EMBER_ASSIGN_OR_RETURN(cond, c.operand(n, 0, "condition", DType::u8));
  EMBER_ASSIGN_OR_RETURN(x, c.operand(n, 1, "X", other));
  EMBER_ASSIGN_OR_RETURN(y, c.operand(n, 2, "Y", other));
  return define_layer(c, n, OpKind::where, {}, {cond, x, y});
}

// ---- Cast ----

Status convert_cast(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  const int64_t to = a.integer("to", 0);
  a.ignore("saturate");  // opset 19's float8 casts only
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.value_input(n, 0));
  if (to == onnx::TensorProto::STRING || to == onnx::TensorProto::UNDEFINED ||
      !onnx::TensorProto::DataType_IsValid(static_cast<int>(to))) {
    return unsupported("not supported: a cast to " + onnx_type_name(static_cast<int32_t>(to)));
  }
  const bool to_float = to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE ||
                        to == onnx::TensorProto::FLOAT16 || to == onnx::TensorProto::BFLOAT16;
  if (x->is_constant()) {
    if (to == onnx::TensorProto::BOOL) {  // nonzero is true
      const Constant zero = x->constant->kind == Constant::Kind::f32 ? Constant::floats({}, {0.f}) : Constant::ints({}, {0});
      auto eq = fold_binary(BinaryFn::equal, *x->constant, zero);
      if (!eq.ok()) return eq.error();
      return define_folded(c, n, 0, fold_unary(UnaryFn::not_, 0.f, 0.f, *eq));
    }
    return define_folded(c, n, 0, fold_cast(*x->constant, to_float));
  }
  DType target = DType::f32;
  switch (to) {
    case onnx::TensorProto::FLOAT: target = DType::f32; break;
    case onnx::TensorProto::FLOAT16: target = DType::f16; break;
    case onnx::TensorProto::BFLOAT16: target = DType::bf16; break;
    case onnx::TensorProto::INT64: target = DType::i64; break;
    case onnx::TensorProto::INT32: target = DType::i32; break;
    case onnx::TensorProto::UINT8: target = DType::u8; break;
    case onnx::TensorProto::BOOL: {
      // Not(Equal(x, 0)): a cast to uint8 would truncate 0.5 to 0 where bool makes it true.
      Value widened;  // uint8 compares as int32; half precision as float32
      if (x->dtype == DType::u8 || x->dtype == DType::f16 || x->dtype == DType::bf16) {
        gpu::LayerAttrs w;
        w.to = x->dtype == DType::u8 ? DType::i32 : DType::f32;
        EMBER_ASSIGN_OR_RETURN(widened, c.add_layer(layer_hint(n) + ".widen", OpKind::cast, w, {x}, {}));
        x = &widened;
      }
      const auto zero = std::make_shared<const Constant>(x->dtype == DType::f32 ? Constant::floats({}, {0.f})
                                                                                 : Constant::ints({}, {0}));
      EMBER_ASSIGN_OR_RETURN(const Value* z, c.constant_layer(zero, x->dtype, layer_hint(n) + ".zero"));
      gpu::LayerAttrs eq;
      eq.fn = static_cast<uint8_t>(BinaryFn::equal);
      EMBER_ASSIGN_OR_RETURN(Value is_zero, c.add_layer(layer_hint(n) + ".is_zero", OpKind::binary, eq, {x, z}, {}));
      gpu::LayerAttrs no;
      no.fn = static_cast<uint8_t>(UnaryFn::not_);
      return define_layer(c, n, OpKind::unary, no, {&is_zero});
    }
    default:
      return unsupported("not supported: a cast of an activation to " + onnx_type_name(static_cast<int32_t>(to)) +
                         " (Ember's dtypes are float32, float16, bfloat16, int64, int32 and uint8)");
  }
  if (target == x->dtype) {
    c.define(n, 0, *x);
    c.count_removed();
    return Status::OK();
  }
  gpu::LayerAttrs attrs;
  attrs.to = target;
  return define_layer(c, n, OpKind::cast, attrs, {x});
}

}  // namespace

OpConversion elementwise_conversion(std::string_view op) {
  if (unary_op(op)) return convert_unary;
  for (const auto& b : kBinaryOps)
    if (b.onnx == op) return convert_binary;
  if (op == "Clip") return convert_clip;
  if (op == "Where") return convert_where;
  if (op == "Cast") return convert_cast;
  return nullptr;
}

}  // namespace ember::importer
