// The ONNX ops that move, reshape or compute on constants: folded at import when their operands
// are constants (fold.hpp), turned into Ember's reshape, flatten, select or add layers when they
// act on an activation in a way those express, removed when they change nothing (Identity,
// inference Dropout, a Cast to the type a value has), refused otherwise.
#include <algorithm>

#include "importer/lower.hpp"
#include "importer/fold.hpp"
#include "importer/onnx_attrs.hpp"
#include "importer/onnx_tensor.hpp"

namespace ember::importer {

namespace {

using gpu::OpKind;

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

// An activation given the dims `out` (same element count): nothing if they are its own, else a
// reshape layer.
Status reshape_activation(Converter& c, const onnx::NodeProto& n, const Value& x, const Dims& out) {
  if (out == x.dims) return define_alias(c, n, 0, x);
  for (int i = 0; i < out.rank(); ++i) {
    if (out.a[i] < 1 || out.b[i] < 1) return unsupported("not supported yet: a zero-size dim");
    if (out.a[i] > kMaxDim || out.b[i] > kMaxDim) return unsupported("not supported: a dim above " + std::to_string(kMaxDim));
  }
  EMBER_ASSIGN_OR_RETURN(Value y, c.reshape(layer_hint(n), x, out));
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
  return define_folded(c, n, 0, with_dims(*v.constant, dims_vector(out.a)));
}

Status convert_constant(Converter& c, const onnx::NodeProto& n) {
  return define_folded(c, n, 0, read_constant_node(n, c.model_dir(), "value"));
}

Status convert_identity(Converter& c, const onnx::NodeProto& n) {
  EMBER_RETURN_IF_ERROR(NodeAttrs(n).finish());
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.value_input(n, 0));
  return define_alias(c, n, 0, *x);
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
  return define_alias(c, n, 0, *x);
}

Status convert_shape(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  const int64_t start = a.integer("start", 0), end = a.integer("end", INT64_MAX);
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.value_input(n, 0));
  EMBER_ASSIGN_OR_RETURN(const Dims d, value_dims(*x));
  const Constant all = Constant::ints({d.rank()}, dims_vector(d.a), dims_vector(d.b));
  return define_folded(c, n, 0, fold_slice(all, {start}, {end}, {0}, {1}));
}

Status convert_size(Converter& c, const onnx::NodeProto& n) {
  EMBER_RETURN_IF_ERROR(NodeAttrs(n).finish());
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.value_input(n, 0));
  EMBER_ASSIGN_OR_RETURN(const Dims d, value_dims(*x));
  return define_folded(c, n, 0, Constant::ints({}, {d.a.numel()}, {d.b.numel()}));
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

// ConstantOfShape whose shape depends on the model's free dims (a mask of zeros [batch, seq]): the
// value as a scalar `constant` layer, expanded to the shape, each free dim taken from a value that
// has it (expand's like_dims).
Status constant_of_free_shape(Converter& c, const onnx::NodeProto& n, const Constant& shape, const Constant& fill,
                              int onnx_dtype) {
  if (shape.kind != Constant::Kind::i64 || shape.dims.size() != 1 || shape.numel() > gpu::Shape::kMaxRank) {
    return invalid_argument("the shape must be a 1-d integer tensor of at most 6 dims, got " + shape.describe());
  }
  gpu::LayerAttrs attrs;
  attrs.shape.rank = static_cast<int32_t>(shape.numel());
  std::vector<std::pair<int64_t, int64_t>> free;
  std::vector<int> at, where;
  for (int i = 0; i < attrs.shape.rank; ++i) {
    const int64_t da = shape.a[static_cast<size_t>(i)], db = shape.b[static_cast<size_t>(i)];
    if (da < 0 || db < 0) return invalid_argument("the shape has a negative dim");
    attrs.shape[i] = da == db ? da : 1;
    if (da != db) free.emplace_back(da, db), at.push_back(i);
  }
  const Value* like = c.dim_carrier(free, where);
  if (!like) return unsupported("not supported yet: a constant whose shape has free dims no value of the model has");
  for (size_t k = 0; k < at.size(); ++k) attrs.like_dims[at[k]] = static_cast<int8_t>(where[k]);
  const gpu::DType int_dtype = onnx_dtype == onnx::TensorProto::BOOL || onnx_dtype == onnx::TensorProto::UINT8
                                   ? gpu::DType::u8
                                   : onnx_dtype == onnx::TensorProto::INT32 ? gpu::DType::i32 : gpu::DType::i64;
  auto scalar = std::make_shared<const Constant>(fill.kind == Constant::Kind::f32 ? Constant::floats({}, {fill.f[0]})
                                                                                  : Constant::ints({}, {fill.a[0]}));
  EMBER_ASSIGN_OR_RETURN(const Value* value, c.constant_layer(scalar, int_dtype, layer_hint(n) + ".value"));
  return define_layer(c, n, gpu::OpKind::expand, attrs, {value, like});
}

Status convert_constant_of_shape(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  const onnx::TensorProto* t = a.tensor("value");
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(auto shape_c, c.constant_input(n, 0, "shape"));
  Constant fill = Constant::floats({}, {0.f});
  if (t) {
    EMBER_ASSIGN_OR_RETURN(fill, read_tensor(*t, "", "attribute 'value'"));
  }
  if (fill.numel() != 1) return invalid_argument("value must hold one element");
  if (!shape_c->fixed()) return constant_of_free_shape(c, n, *shape_c, fill, t ? t->data_type() : 0);
  EMBER_ASSIGN_OR_RETURN(auto dims, fixed_ints(*shape_c, "the shape"));
  int64_t count = 1;
  for (int64_t d : dims)
    if (d < 0 || __builtin_mul_overflow(count, d, &count) || count > (int64_t{1} << 24)) return unsupported("not supported: a constant of shape that large");
  if (dims.size() > static_cast<size_t>(gpu::Shape::kMaxRank)) return unsupported("rank above 6");
  if (fill.kind == Constant::Kind::f32) return define_folded(c, n, 0, Constant::floats(dims, std::vector<float>(static_cast<size_t>(count), fill.f[0])));
  return define_folded(c, n, 0, Constant::ints(dims, std::vector<int64_t>(static_cast<size_t>(count), fill.a[0])));
}

}  // namespace

OpConversion shape_conversion(std::string_view op) {
  static const std::pair<std::string_view, OpConversion> kTable[] = {
      {"Constant", convert_constant},
      {"Identity", convert_identity},
      {"Dropout", convert_dropout},
      {"Shape", convert_shape},
      {"Size", convert_size},
      {"Unsqueeze", convert_unsqueeze},
      {"Squeeze", convert_squeeze},
      {"Reshape", convert_reshape},
      {"Flatten", convert_flatten},
      {"ConstantOfShape", convert_constant_of_shape},
  };
  for (const auto& [name, fn] : kTable)
    if (name == op) return fn;
  return nullptr;
}

}  // namespace ember::importer
