// The ONNX ops that move, reshape or compute on constants: folded at import when their operands
// are constants (fold.hpp), turned into Ember's reshape, flatten, select or add layers when they
// act on an activation in a way those express, removed when they change nothing (Identity,
// inference Dropout, a Cast to the type a value has), refused otherwise.
#include <algorithm>

#include "importer/converter.hpp"
#include "importer/fold.hpp"
#include "importer/onnx_attrs.hpp"
#include "importer/onnx_tensor.hpp"

namespace ember::importer {

namespace {

using gpu::OpKind;

Status fold(Converter& c, const onnx::NodeProto& n, Result<Constant> value) {
  if (!value.ok()) return value.error();
  c.define(n, 0, Value::of_constant(std::move(*value)));
  c.count_folded();
  return Status::OK();
}

Status alias(Converter& c, const onnx::NodeProto& n, const Value& v) {
  c.define(n, 0, v);
  c.count_removed();
  return Status::OK();
}

// The value every input of a node reads as a constant, or nullptr where one is not.
bool all_constant(const Converter& c, const onnx::NodeProto& n) {
  for (int i = 0; i < n.input_size(); ++i) {
    const Value* v = c.input(n, i);
    if (v && !v->is_constant()) return false;
  }
  return true;
}

// ONNX Reshape's output dims for `in` and a target (both lanes): 0 copies the input's dim (unless
// allowzero), one -1 is inferred.
Result<Dims> reshape_dims(const Dims& in, const Constant& target, bool allowzero) {
  if (target.kind != Constant::Kind::i64 || target.dims.size() != 1) {
    return invalid_argument("the shape must be a 1-d integer tensor, got " + target.describe());
  }
  if (target.numel() > gpu::Shape::kMaxRank) return unsupported("not supported yet: a reshape to rank above 6");
  Dims out;
  for (int lane = 0; lane < 2; ++lane) {
    const gpu::Shape& from = lane ? in.b : in.a;
    const std::vector<int64_t>& t = lane ? target.b : target.a;
    gpu::Shape& to = lane ? out.b : out.a;
    to.rank = static_cast<int32_t>(t.size());
    int wildcard = -1;
    int64_t known = 1;
    for (int i = 0; i < to.rank; ++i) {
      int64_t d = t[static_cast<size_t>(i)];
      if (d == 0 && allowzero) return unsupported("not supported yet: a zero-size dim (allowzero)");
      if (d == 0) {
        if (i >= from.rank) return invalid_argument("shape dim " + std::to_string(i) + " is 0 but the input has rank " + std::to_string(from.rank));
        d = from[i];
      }
      if (d == -1) {
        if (wildcard >= 0) return invalid_argument("the shape has two -1 dims");
        wildcard = i;
        continue;
      }
      if (d < 1 || __builtin_mul_overflow(known, d, &known)) return invalid_argument("shape dim " + std::to_string(d) + " is invalid");
      to[i] = d;
    }
    const int64_t n = from.numel();
    if (wildcard >= 0) {
      if (n % known) return invalid_argument("cannot reshape " + in.to_string() + " to the target " + target.describe());
      to[wildcard] = n / known;
    } else if (known != n) {
      return invalid_argument("cannot reshape " + in.to_string() + " to " + (lane ? "" : "the target ") + target.describe());
    }
  }
  return out;
}

// Ember's reshape target turning `in` into `out`: fixed dims as they are, a free dim that stays in
// place 0 (copy), and at most one other free dim -1.
Result<gpu::Shape> reshape_target(const Dims& in, const Dims& out) {
  gpu::Shape t;
  t.rank = out.rank();
  bool wildcard = false;
  for (int i = 0; i < out.rank(); ++i) {
    if (out.fixed(i)) {
      t[i] = out.a[i];
    } else if (i < in.rank() && in.a[i] == out.a[i] && in.b[i] == out.b[i]) {
      t[i] = 0;
    } else if (!wildcard) {
      wildcard = true;
      t[i] = -1;
    } else {
      return unsupported("not supported yet: a reshape to " + out.to_string() +
                         ", where more than one dim depends on the model's free dims");
    }
  }
  return t;
}

// An activation given the dims `out` (same element count): nothing if they are its own, else a
// reshape layer.
Status reshape_activation(Converter& c, const onnx::NodeProto& n, const Value& x, const Dims& out) {
  if (out == x.dims) return alias(c, n, x);
  for (int i = 0; i < out.rank(); ++i) {
    if (out.a[i] < 1 || out.b[i] < 1) return unsupported("not supported yet: a zero-size dim");
    if (out.a[i] > kMaxDim || out.b[i] > kMaxDim) return unsupported("not supported: a dim above " + std::to_string(kMaxDim));
  }
  gpu::LayerAttrs attrs;
  EMBER_ASSIGN_OR_RETURN(attrs.shape, reshape_target(x.dims, out));
  EMBER_ASSIGN_OR_RETURN(const Dims got, c.infer(OpKind::reshape, attrs, {&x}));
  if (!(got == out)) return internal_error("reshape to " + out.to_string() + " came out as " + got.to_string());
  EMBER_ASSIGN_OR_RETURN(Value y, c.add_layer(layer_hint(n), OpKind::reshape, attrs, {&x}, {}));
  c.define(n, 0, std::move(y));
  return Status::OK();
}

// A constant's dims as a Dims (fixed), or back.
Dims dims_of(const Constant& k) {
  gpu::Shape s;
  for (int64_t d : k.dims) s[s.rank++] = d;
  return Dims::fixed_shape(s);
}
std::vector<int64_t> dims_vector(const gpu::Shape& s) { return {s.dims.begin(), s.dims.begin() + s.rank}; }

// The Dims of a value of either kind.
Result<Dims> value_dims(const Value& v) {
  if (v.is_activation()) return v.dims;
  if (v.constant->dims.size() > static_cast<size_t>(gpu::Shape::kMaxRank)) return unsupported("rank above 6");
  return dims_of(*v.constant);
}

// A value with new dims: a folded constant or a reshaped activation.
Status give_dims(Converter& c, const onnx::NodeProto& n, const Value& v, const Dims& out) {
  if (v.is_activation()) return reshape_activation(c, n, v, out);
  return fold(c, n, with_dims(*v.constant, dims_vector(out.a)));
}

Status convert_constant(Converter& c, const onnx::NodeProto& n) {
  return fold(c, n, read_constant_node(n, c.model_dir(), "value"));
}

Status convert_identity(Converter& c, const onnx::NodeProto& n) {
  EMBER_RETURN_IF_ERROR(NodeAttrs(n).finish());
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.value_input(n, 0));
  return alias(c, n, *x);
}

Status convert_dropout(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  a.ignore("seed");
  a.ignore("ratio");  // opset < 12: ratio is an attribute; it does not act at inference
  EMBER_RETURN_IF_ERROR(a.finish());
  if (const Value* training = c.input(n, 2)) {
    if (!training->is_constant() || training->constant->kind != Constant::Kind::i64 ||
        training->constant->numel() != 1 || training->constant->a[0] != 0) {
      return unsupported("not supported: training_mode that is not a constant false");
    }
  }
  EMBER_RETURN_IF_ERROR(c.require_unused(n, 1, "the mask"));
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.value_input(n, 0));
  return alias(c, n, *x);
}

Status convert_cast(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  const int64_t to = a.integer("to", 0);
  a.ignore("saturate");
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(const Value* px, c.value_input(n, 0));
  const Value& x = *px;
  const bool to_float = to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE ||
                        to == onnx::TensorProto::FLOAT16 || to == onnx::TensorProto::BFLOAT16;
  if (to == onnx::TensorProto::STRING || !onnx::TensorProto::DataType_IsValid(static_cast<int>(to)) ||
      to == onnx::TensorProto::UNDEFINED) {
    return unsupported("not supported: a cast to " + onnx_type_name(static_cast<int32_t>(to)));
  }
  if (x.is_constant()) return fold(c, n, fold_cast(*x.constant, to_float));
  if ((to == onnx::TensorProto::FLOAT && x.dtype == gpu::DType::f32) ||
      (to == onnx::TensorProto::INT64 && x.dtype == gpu::DType::i64)) {
    return alias(c, n, x);
  }
  return unsupported("not supported yet: a cast of a " + std::string(gpu::dtype_name(x.dtype)) + " activation to " +
                     onnx_type_name(static_cast<int32_t>(to)));
}

Status convert_shape(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  const int64_t start = a.integer("start", 0), end = a.integer("end", INT64_MAX);
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.value_input(n, 0));
  EMBER_ASSIGN_OR_RETURN(const Dims d, value_dims(*x));
  const Constant all = Constant::ints({d.rank()}, dims_vector(d.a), dims_vector(d.b));
  return fold(c, n, fold_slice(all, {start}, {end}, {0}, {1}));
}

Status convert_size(Converter& c, const onnx::NodeProto& n) {
  EMBER_RETURN_IF_ERROR(NodeAttrs(n).finish());
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.value_input(n, 0));
  EMBER_ASSIGN_OR_RETURN(const Dims d, value_dims(*x));
  return fold(c, n, Constant::ints({}, {d.a.numel()}, {d.b.numel()}));
}

Status convert_gather(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  const int64_t axis = a.integer("axis", 0);
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(const Value* pdata, c.value_input(n, 0));
  const Value& data = *pdata;
  EMBER_ASSIGN_OR_RETURN(auto indices, c.constant_input(n, 1, "indices"));
  if (data.is_constant()) return fold(c, n, fold_gather(*data.constant, *indices, axis));
  // One fixed index of an activation's dim: Ember's select.
  if (!indices->dims.empty() || indices->kind != Constant::Kind::i64 || !indices->fixed()) {
    return unsupported("not supported yet: Gather of several indices from an activation");
  }
  EMBER_ASSIGN_OR_RETURN(const int ax, normalize_axis(axis, data.dims.rank()));
  if (!data.dims.fixed(ax)) return unsupported("not supported yet: Gather along a free dim");
  gpu::LayerAttrs attrs;
  attrs.dim = ax;
  attrs.index = indices->a[0];
  if (attrs.index < INT32_MIN || attrs.index > INT32_MAX) return invalid_argument("Gather index out of range");
  EMBER_ASSIGN_OR_RETURN(Value y, c.add_layer(layer_hint(n), OpKind::select, attrs, {&data}, {}));
  c.define(n, 0, std::move(y));
  return Status::OK();
}

// Unsqueeze's and Squeeze's axes: the attribute before opset 13, the second input from 13 on.
Result<std::vector<int64_t>> axes_of(Converter& c, const onnx::NodeProto& n, NodeAttrs& a, bool required) {
  if (c.opset() < 13) {
    if (required && !a.has("axes")) return invalid_argument("attribute 'axes' is missing");
    return a.ints("axes");
  }
  if (!c.input(n, 1)) {
    if (required) return invalid_argument("input 1 (axes) is missing");
    return std::vector<int64_t>{};
  }
  EMBER_ASSIGN_OR_RETURN(auto axes, c.constant_input(n, 1, "axes"));
  return fixed_ints(*axes, "axes");
}

Status convert_unsqueeze(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  EMBER_ASSIGN_OR_RETURN(auto axes, axes_of(c, n, a, true));
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(const Value* px, c.value_input(n, 0));
  const Value& x = *px;
  EMBER_ASSIGN_OR_RETURN(const Dims in, value_dims(x));
  const int rank = in.rank() + static_cast<int>(axes.size());
  if (rank > gpu::Shape::kMaxRank) return unsupported("not supported yet: rank above 6");
  std::vector<bool> inserted(static_cast<size_t>(rank), false);
  for (int64_t axis : axes) {
    EMBER_ASSIGN_OR_RETURN(const int ax, normalize_axis(axis, rank));
    if (inserted[static_cast<size_t>(ax)]) return invalid_argument("axis " + std::to_string(axis) + " repeats");
    inserted[static_cast<size_t>(ax)] = true;
  }
  Dims out;
  out.a.rank = out.b.rank = rank;
  for (int i = 0, k = 0; i < rank; ++i) {
    out.a[i] = inserted[static_cast<size_t>(i)] ? 1 : in.a[k];
    out.b[i] = inserted[static_cast<size_t>(i)] ? 1 : in.b[k];
    k += inserted[static_cast<size_t>(i)] ? 0 : 1;
  }
  return give_dims(c, n, x, out);
}

Status convert_squeeze(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  EMBER_ASSIGN_OR_RETURN(auto axes, axes_of(c, n, a, false));
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(const Value* px, c.value_input(n, 0));
  const Value& x = *px;
  EMBER_ASSIGN_OR_RETURN(const Dims in, value_dims(x));
  std::vector<bool> drop(static_cast<size_t>(in.rank()), false);
  if (axes.empty()) {
    for (int i = 0; i < in.rank(); ++i) {
      // A free dim might be 1 in a request, and ONNX would drop it then: that cannot be fixed here.
      if (!in.fixed(i)) return unsupported("not supported yet: Squeeze without axes of a value with free dims");
      drop[static_cast<size_t>(i)] = in.a[i] == 1;
    }
  }
  for (int64_t axis : axes) {
    EMBER_ASSIGN_OR_RETURN(const int ax, normalize_axis(axis, in.rank()));
    if (!in.fixed(ax) || in.a[ax] != 1) return invalid_argument("axis " + std::to_string(axis) + " of " + in.to_string() + " is not 1");
    drop[static_cast<size_t>(ax)] = true;
  }
  Dims out;
  for (int i = 0; i < in.rank(); ++i) {
    if (drop[static_cast<size_t>(i)]) continue;
    out.a[out.a.rank++] = in.a[i];
    out.b[out.b.rank++] = in.b[i];
  }
  return give_dims(c, n, x, out);
}

Status convert_reshape(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  const bool allowzero = a.integer("allowzero", 0) != 0;
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(const Value* px, c.value_input(n, 0));
  const Value& x = *px;
  EMBER_ASSIGN_OR_RETURN(auto target, c.constant_input(n, 1, "shape"));
  EMBER_ASSIGN_OR_RETURN(const Dims in, value_dims(x));
  EMBER_ASSIGN_OR_RETURN(const Dims out, reshape_dims(in, *target, allowzero));
  return give_dims(c, n, x, out);
}

Status convert_flatten(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  const int64_t axis = a.integer("axis", 1);
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(const Value* px, c.value_input(n, 0));
  const Value& x = *px;
  EMBER_ASSIGN_OR_RETURN(const Dims in, value_dims(x));
  const int64_t ax = axis < 0 ? axis + in.rank() : axis;
  if (ax < 0 || ax > in.rank()) return invalid_argument("axis " + std::to_string(axis) + " is out of range for " + in.to_string());
  Dims out;
  out.a.rank = out.b.rank = 2;
  out.a[0] = in.a.prod(0, static_cast<int>(ax));
  out.b[0] = in.b.prod(0, static_cast<int>(ax));
  out.a[1] = in.a.prod(static_cast<int>(ax), in.rank());
  out.b[1] = in.b.prod(static_cast<int>(ax), in.rank());
  if (x.is_activation() && ax == 1 && in.rank() > 2) {  // Ember's flatten, as torch.flatten(x, 1)
    gpu::LayerAttrs attrs;
    attrs.start_dim = 1;
    attrs.end_dim = -1;
    EMBER_ASSIGN_OR_RETURN(Value y, c.add_layer(layer_hint(n), OpKind::flatten, attrs, {&x}, {}));
    if (!(y.dims == out)) return internal_error("flatten came out as " + y.dims.to_string());
    c.define(n, 0, std::move(y));
    return Status::OK();
  }
  return give_dims(c, n, x, out);
}

Status convert_concat(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  const int64_t axis = a.integer("axis", 0);
  EMBER_RETURN_IF_ERROR(a.finish());
  if (!all_constant(c, n)) return unsupported("not supported yet: Concat of activations is not in Ember's op set");
  std::vector<const Constant*> parts;
  for (int i = 0; i < n.input_size(); ++i)
    if (const Value* v = c.input(n, i)) parts.push_back(v->constant.get());
  return fold(c, n, fold_concat(parts, axis));
}

Status convert_slice(Converter& c, const onnx::NodeProto& n) {
  EMBER_RETURN_IF_ERROR(NodeAttrs(n).finish());
  EMBER_ASSIGN_OR_RETURN(const Value* data, c.value_input(n, 0));
  if (!data->is_constant()) return unsupported("not supported yet: Slice of an activation is not in Ember's op set");
  EMBER_ASSIGN_OR_RETURN(auto starts_c, c.constant_input(n, 1, "starts"));
  EMBER_ASSIGN_OR_RETURN(auto ends_c, c.constant_input(n, 2, "ends"));
  EMBER_ASSIGN_OR_RETURN(auto starts, fixed_ints(*starts_c, "starts"));
  EMBER_ASSIGN_OR_RETURN(auto ends, fixed_ints(*ends_c, "ends"));
  std::vector<int64_t> axes, steps;
  if (c.input(n, 3)) {
    EMBER_ASSIGN_OR_RETURN(auto k, c.constant_input(n, 3, "axes"));
    EMBER_ASSIGN_OR_RETURN(axes, fixed_ints(*k, "axes"));
  }
  if (c.input(n, 4)) {
    EMBER_ASSIGN_OR_RETURN(auto k, c.constant_input(n, 4, "steps"));
    EMBER_ASSIGN_OR_RETURN(steps, fixed_ints(*k, "steps"));
  }
  return fold(c, n, fold_slice(*data->constant, starts, ends, axes, steps));
}

Status convert_transpose(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  const auto perm = a.ints("perm");
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(const Value* px, c.value_input(n, 0));
  const Value& x = *px;
  if (!x.is_constant()) return unsupported("not supported yet: Transpose of an activation is not in Ember's op set");
  return fold(c, n, fold_transpose(*x.constant, perm));
}

Status convert_constant_of_shape(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  const onnx::TensorProto* t = a.tensor("value");
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(auto shape_c, c.constant_input(n, 0, "shape"));
  EMBER_ASSIGN_OR_RETURN(auto dims, fixed_ints(*shape_c, "the shape"));
  Constant fill = Constant::floats({}, {0.f});
  if (t) {
    EMBER_ASSIGN_OR_RETURN(fill, read_tensor(*t, "", "attribute 'value'"));
  }
  if (fill.numel() != 1) return invalid_argument("value must hold one element");
  int64_t count = 1;
  for (int64_t d : dims)
    if (d < 0 || __builtin_mul_overflow(count, d, &count) || count > (int64_t{1} << 24)) return unsupported("not supported: a constant of shape that large");
  if (dims.size() > static_cast<size_t>(gpu::Shape::kMaxRank)) return unsupported("rank above 6");
  if (fill.kind == Constant::Kind::f32) return fold(c, n, Constant::floats(dims, std::vector<float>(static_cast<size_t>(count), fill.f[0])));
  return fold(c, n, Constant::ints(dims, std::vector<int64_t>(static_cast<size_t>(count), fill.a[0])));
}

template <Arith kOp>
Status convert_arith(Converter& c, const onnx::NodeProto& n) {
  EMBER_RETURN_IF_ERROR(NodeAttrs(n).finish());
  const Value* x = c.input(n, 0);
  const Value* y = c.input(n, 1);
  if (!x || !y) return invalid_argument("takes two inputs");
  if (x->is_constant() && y->is_constant()) return fold(c, n, fold_arith(kOp, *x->constant, *y->constant));
  // Ember's add: two activations of one shape (a residual connection).
  if (kOp == Arith::add && x->is_activation() && y->is_activation() && x->dims == y->dims &&
      x->dtype == gpu::DType::f32 && y->dtype == gpu::DType::f32) {
    EMBER_ASSIGN_OR_RETURN(Value out, c.add_layer(layer_hint(n), OpKind::add, {}, {x, y}, {}));
    c.define(n, 0, std::move(out));
    return Status::OK();
  }
  const std::string what = x->is_activation() && y->is_activation()
                               ? "of activations of shapes " + x->dims.to_string() + " and " + y->dims.to_string()
                               : "of an activation and a constant";
  return unsupported("not supported yet: broadcasting binary ops (" + n.op_type() + " " + what +
                     ") are not in Ember's op set");
}

}  // namespace

OpConversion shape_conversion(std::string_view op) {
  static const std::pair<std::string_view, OpConversion> kTable[] = {
      {"Constant", convert_constant},
      {"Identity", convert_identity},
      {"Dropout", convert_dropout},
      {"Cast", convert_cast},
      {"Shape", convert_shape},
      {"Size", convert_size},
      {"Gather", convert_gather},
      {"Unsqueeze", convert_unsqueeze},
      {"Squeeze", convert_squeeze},
      {"Reshape", convert_reshape},
      {"Flatten", convert_flatten},
      {"Concat", convert_concat},
      {"Slice", convert_slice},
      {"Transpose", convert_transpose},
      {"ConstantOfShape", convert_constant_of_shape},
      {"Add", convert_arith<Arith::add>},
      {"Sub", convert_arith<Arith::sub>},
      {"Mul", convert_arith<Arith::mul>},
      {"Div", convert_arith<Arith::div>},
  };
  for (const auto& [name, fn] : kTable)
    if (name == op) return fn;
  return nullptr;
}

}  // namespace ember::importer
