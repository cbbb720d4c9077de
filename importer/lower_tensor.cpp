// The ONNX ops that move elements: Transpose, Concat, Split, Slice, Gather, Expand, Pad, Resize
// (and the deprecated Upsample). On constants the first five fold (fold.hpp); on activations each
// becomes Ember's layer of the same name, a constant operand a `constant` layer. What Ember's ops
// cannot express is refused with the reason: bounds or pads that depend on a free dim, Pad's wrap
// mode, Resize's cubic mode, exclude_outside and the tf_* coordinate modes. Before opset 10 (Slice)
// and 11 (Pad, Resize) the ops take their old forms, read per their versions below.
#include <algorithm>

#include "importer/fold.hpp"
#include "importer/lower.hpp"
#include "importer/onnx_attrs.hpp"

namespace ember::importer {

namespace {

using gpu::DType;
using gpu::OpKind;

// The integers of optional constant input `i`, or `fallback` when it is omitted.
Result<std::vector<int64_t>> ints_input(Converter& c, const onnx::NodeProto& n, int i, const char* role,
                                        std::vector<int64_t> fallback = {}) {
  if (!c.input(n, i)) return fallback;
  EMBER_ASSIGN_OR_RETURN(auto k, c.constant_input(n, i, role));
  return fixed_ints(*k, role);
}

Status convert_transpose(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  auto perm = a.ints("perm");
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.value_input(n, 0));
  if (x->is_constant()) return define_folded(c, n, 0, fold_transpose(*x->constant, perm));
  const int rank = x->dims.rank();
  if (perm.empty())
    for (int i = 0; i < rank; ++i) perm.push_back(rank - 1 - i);
  if (static_cast<int>(perm.size()) != rank) {
    return invalid_argument("perm " + list_text(perm) + " does not fit rank " + std::to_string(rank));
  }
  bool identity = true;
  gpu::LayerAttrs attrs;
  attrs.num_axes = rank;
  for (int i = 0; i < rank; ++i) {
    identity &= perm[static_cast<size_t>(i)] == i;
    attrs.axes[i] = perm[static_cast<size_t>(i)];
  }
  if (identity) {
    c.define(n, 0, *x);
    c.count_removed();
    return Status::OK();
  }
  return define_layer(c, n, OpKind::transpose, attrs, {x});
}

// Concat of activations `parts` along `dim`: one layer, or a tree of them past kMaxLayerInputs.
Result<Value> concat(Converter& c, const std::string& hint, std::vector<const Value*> parts, int dim) {
  gpu::LayerAttrs attrs;
  attrs.dim = dim;
  if (parts.size() <= static_cast<size_t>(gpu::kMaxLayerInputs)) return c.add_layer(hint, OpKind::concat, attrs, parts, {});
  std::vector<Value> groups;  // reserved: the pointers below stay valid
  groups.reserve((parts.size() + gpu::kMaxLayerInputs - 1) / gpu::kMaxLayerInputs);
  for (size_t i = 0; i < parts.size(); i += gpu::kMaxLayerInputs) {
    const size_t end = std::min(parts.size(), i + gpu::kMaxLayerInputs);
    std::vector<const Value*> group(parts.begin() + static_cast<std::ptrdiff_t>(i), parts.begin() + static_cast<std::ptrdiff_t>(end));
    EMBER_ASSIGN_OR_RETURN(Value g, concat(c, hint + "_part" + std::to_string(groups.size()), group, dim));
    groups.push_back(std::move(g));
  }
  std::vector<const Value*> next;
  for (const Value& g : groups) next.push_back(&g);
  return concat(c, hint, next, dim);
}

Status convert_concat(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  const int64_t axis = a.integer("axis", 0);
  EMBER_RETURN_IF_ERROR(a.finish());
  const Value* first = nullptr;  // an activation, if any
  bool constants = true;
  for (int i = 0; i < n.input_size(); ++i) {
    EMBER_ASSIGN_OR_RETURN(const Value* v, c.value_input(n, i));
    if (v->is_activation() && !first) first = v;
    constants &= v->is_constant();
  }
  if (constants) {
    std::vector<const Constant*> parts;
    for (int i = 0; i < n.input_size(); ++i) parts.push_back(c.input(n, i)->constant.get());
    return define_folded(c, n, 0, fold_concat(parts, axis));
  }
  EMBER_ASSIGN_OR_RETURN(const int dim, normalize_axis(axis, first->dims.rank()));
  std::vector<const Value*> parts;
  for (int i = 0; i < n.input_size(); ++i) {
    const Value* v = c.input(n, i);
    // An empty constant adds nothing (torch.onnx.export writes them for empty lists).
    if (v->is_constant() && v->constant->numel() == 0) continue;
    EMBER_ASSIGN_OR_RETURN(const Value* p, c.operand(n, i, "input", first->dtype));
    parts.push_back(p);
  }
  EMBER_ASSIGN_OR_RETURN(Value y, concat(c, layer_hint(n), parts, dim));
  c.define(n, 0, std::move(y));
  return Status::OK();
}

// A slice layer of x along one axis, or x itself when it keeps everything.
Result<Value> slice_one(Converter& c, const std::string& hint, const Value* x, int axis, int64_t start, int64_t end) {
  gpu::LayerAttrs attrs;
  attrs.num_axes = 1;
  attrs.axes[0] = axis;
  attrs.starts[0] = start;
  attrs.ends[0] = end;
  attrs.steps[0] = 1;
  return c.add_layer(hint, OpKind::slice, attrs, {x}, {});
}

Status convert_split(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  const int64_t axis = a.integer("axis", 0);
  std::vector<int64_t> split;
  if (c.opset() < 13) split = a.ints("split");
  EMBER_RETURN_IF_ERROR(a.finish());
  if (c.opset() >= 13) {
    EMBER_ASSIGN_OR_RETURN(split, ints_input(c, n, 1, "split"));
  }
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.value_input(n, 0));
  const Dims d = x->is_constant() ? Dims{} : x->dims;
  const int rank = x->is_constant() ? static_cast<int>(x->constant->dims.size()) : d.rank();
  EMBER_ASSIGN_OR_RETURN(const int ax, normalize_axis(axis, rank));
  int64_t size = 0;
  if (x->is_constant()) {
    size = x->constant->dims[static_cast<size_t>(ax)];
  } else {
    if (!d.fixed(ax)) return unsupported("not supported yet: Split along a dim that depends on the model's free dims");
    size = d.a[ax];
  }
  const int outputs = n.output_size();
  if (split.empty()) {
    if (outputs < 1 || size % outputs) {
      return invalid_argument("dim " + std::to_string(size) + " does not split into " + std::to_string(outputs) + " equal parts");
    }
    split.assign(static_cast<size_t>(outputs), size / outputs);
  }
  int64_t total = 0;
  for (int64_t s : split) total += s < 0 ? INT32_MIN : s;
  if (static_cast<int>(split.size()) != outputs || total != size) {
    return invalid_argument("split " + list_text(split) + " does not cut dim " + std::to_string(size) + " into " +
                            std::to_string(outputs) + " outputs");
  }
  int64_t at = 0;
  for (int i = 0; i < outputs; ++i) {
    const int64_t len = split[static_cast<size_t>(i)];
    if (!n.output(i).empty()) {
      if (x->is_constant()) {
        EMBER_RETURN_IF_ERROR(define_folded(c, n, i, fold_slice(*x->constant, {at}, {at + len}, {ax}, {1})));
      } else if (len == size) {
        c.define(n, i, *x);
      } else {
        EMBER_ASSIGN_OR_RETURN(Value y, slice_one(c, n.output(i), x, ax, at, at + len));
        c.define(n, i, std::move(y));
      }
    }
    at += len;
  }
  return Status::OK();
}

// Slice-1 (before opset 10) takes starts, ends and axes as attributes and has no steps; Slice-10
// and later take all four as inputs. The bounds mean the same in both.
Status convert_slice(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset() < 10) {
    if (!a.has("starts") || !a.has("ends")) return invalid_argument("attributes 'starts' and 'ends' are required before opset 10");
    starts = a.ints("starts");
    ends = a.ints("ends");
    axes = a.ints("axes");
  }
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_RETURN_IF_ERROR(inputs_before(c, n, 1, 10));
  EMBER_ASSIGN_OR_RETURN(const Value* data, c.value_input(n, 0));
  if (c.opset() >= 10) {
    EMBER_ASSIGN_OR_RETURN(auto starts_c, c.constant_input(n, 1, "starts"));
    EMBER_ASSIGN_OR_RETURN(auto ends_c, c.constant_input(n, 2, "ends"));
    EMBER_ASSIGN_OR_RETURN(starts, fixed_ints(*starts_c, "starts"));
    EMBER_ASSIGN_OR_RETURN(ends, fixed_ints(*ends_c, "ends"));
    EMBER_ASSIGN_OR_RETURN(axes, ints_input(c, n, 3, "axes"));
    EMBER_ASSIGN_OR_RETURN(steps, ints_input(c, n, 4, "steps"));
  }
  if (data->is_constant()) return define_folded(c, n, 0, fold_slice(*data->constant, starts, ends, axes, steps));
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return invalid_argument("starts, ends, axes and steps differ in length");
  }
  if (starts.size() > static_cast<size_t>(gpu::Shape::kMaxRank)) return invalid_argument("more axes than dims");
  gpu::LayerAttrs attrs;
  attrs.num_axes = static_cast<int32_t>(starts.size());
  for (size_t i = 0; i < starts.size(); ++i) {
    EMBER_ASSIGN_OR_RETURN(const int ax, normalize_axis(axes[i], data->dims.rank()));
    if (steps[i] == 0) return invalid_argument("a step of 0");
    attrs.axes[i] = ax;
    // Bounds past any dim mean "to the end"; Ember's attributes are clamped the same way.
    attrs.starts[i] = std::clamp<int64_t>(starts[i], -kMaxDim - 1, kMaxDim);
    attrs.ends[i] = std::clamp<int64_t>(ends[i], -kMaxDim - 1, kMaxDim);
    attrs.steps[i] = std::clamp<int64_t>(steps[i], -kMaxDim, kMaxDim);
  }
  return define_layer(c, n, OpKind::slice, attrs, {data});
}

Status convert_gather(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  const int64_t axis = a.integer("axis", 0);
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_ASSIGN_OR_RETURN(const Value* data, c.value_input(n, 0));
  EMBER_ASSIGN_OR_RETURN(const Value* indices, c.value_input(n, 1));
  if (indices->is_constant() && indices->constant->kind != Constant::Kind::i64) {
    return invalid_argument("indices must be integers, got " + indices->constant->describe());
  }
  if (data->is_constant() && indices->is_constant()) return define_folded(c, n, 0, fold_gather(*data->constant, *indices->constant, axis));
  const int rank = data->is_constant() ? static_cast<int>(data->constant->dims.size()) : data->dims.rank();
  EMBER_ASSIGN_OR_RETURN(const int ax, normalize_axis(axis, rank));
  // One fixed index of a fixed dim of an activation: Ember's select.
  if (data->is_activation() && indices->is_constant() && indices->constant->dims.empty() && indices->constant->fixed() &&
      data->dims.fixed(ax) && indices->constant->a[0] >= -data->dims.a[ax] && indices->constant->a[0] < data->dims.a[ax]) {
    gpu::LayerAttrs attrs;
    attrs.dim = ax;
    attrs.index = indices->constant->a[0];
    return define_layer(c, n, OpKind::select, attrs, {data});
  }
  EMBER_ASSIGN_OR_RETURN(data, c.operand(n, 0, "data"));
  EMBER_ASSIGN_OR_RETURN(indices, c.operand(n, 1, "indices"));
  if (indices->dtype != DType::i64 && indices->dtype != DType::i32) {
    return unsupported("indices are " + std::string(gpu::dtype_name(indices->dtype)) + ", expected int64 or int32");
  }
  gpu::LayerAttrs attrs;
  attrs.dim = ax;
  return define_layer(c, n, OpKind::gather, attrs, {data, indices});
}

Status convert_expand(Converter& c, const onnx::NodeProto& n) {
  EMBER_RETURN_IF_ERROR(NodeAttrs(n).finish());
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.value_input(n, 0));
  EMBER_ASSIGN_OR_RETURN(auto shape, c.constant_input(n, 1, "shape"));
  if (shape->kind != Constant::Kind::i64 || shape->dims.size() != 1) {
    return invalid_argument("the shape must be a 1-d integer tensor, got " + shape->describe());
  }
  if (shape->numel() > gpu::Shape::kMaxRank) return unsupported("not supported: an Expand to rank above 6");
  if (x->is_constant() && shape->fixed()) return define_folded(c, n, 0, fold_expand(*x->constant, shape->a));
  gpu::LayerAttrs attrs;
  attrs.shape.rank = static_cast<int32_t>(shape->numel());
  // A target dim that differs between the lanes is a free dim: Ember takes it from a value that has it.
  std::vector<std::pair<int64_t, int64_t>> free;
  std::vector<int> at;
  for (int i = 0; i < attrs.shape.rank; ++i) {
    const int64_t da = shape->a[static_cast<size_t>(i)], db = shape->b[static_cast<size_t>(i)];
    if (da < 0 || db < 0 || da > kMaxDim || db > kMaxDim) return invalid_argument("shape " + list_text(shape->a) + " is invalid");
    attrs.shape[i] = da == db ? da : 1;
    if (da != db) {
      free.emplace_back(da, db);
      at.push_back(i);
    }
  }
  std::vector<const Value*> inputs;
  EMBER_ASSIGN_OR_RETURN(const Value* xv, c.operand(n, 0, "input"));
  inputs.push_back(xv);
  if (!free.empty()) {
    std::vector<int> where;
    const Value* like = c.dim_carrier(free, where);
    if (!like) {
      return unsupported("not supported yet: an Expand to a shape whose free dims no value of the model has");
    }
    for (size_t k = 0; k < at.size(); ++k) attrs.like_dims[at[k]] = static_cast<int8_t>(where[k]);
    inputs.push_back(like);
  }
  return define_layer(c, n, OpKind::expand, attrs, inputs);
}

// Pad-2 (before opset 11) takes pads and the fill value as attributes; Pad-11 and later as inputs
// (constant_value of the data's type, axes from opset 18).
Status convert_pad(Converter& c, const onnx::NodeProto& n) {
  NodeAttrs a(n);
  const std::string mode = a.text("mode", "constant");
  gpu::LayerAttrs attrs;
  std::vector<int64_t> pads;
  if (c.opset() < 11) {
    if (!a.has("pads")) return invalid_argument("attribute 'pads' is required before opset 11");
    pads = a.ints("pads");
    attrs.alpha = a.number("value", 0.f);
  }
  EMBER_RETURN_IF_ERROR(a.finish());
  EMBER_RETURN_IF_ERROR(inputs_before(c, n, 1, 11));
  if (mode == "constant") attrs.fn = static_cast<uint8_t>(gpu::PadMode::constant);
  else if (mode == "reflect") attrs.fn = static_cast<uint8_t>(gpu::PadMode::reflect);
  else if (mode == "edge") attrs.fn = static_cast<uint8_t>(gpu::PadMode::edge);
  else return unsupported("not supported: mode '" + mode + "' (Ember pads constant, reflect or edge)");
  if (c.opset() >= 11) {
    if (c.input(n, 3)) return unsupported("not supported yet: Pad with axes");
    EMBER_ASSIGN_OR_RETURN(auto pads_c, c.constant_input(n, 1, "pads"));
    EMBER_ASSIGN_OR_RETURN(pads, fixed_ints(*pads_c, "pads"));
    if (const Value* v = c.input(n, 2)) {
      if (!v->is_constant() || v->constant->numel() != 1) return unsupported("not supported: a constant_value that is not a constant scalar");
      attrs.alpha = v->constant->kind == Constant::Kind::f32 ? v->constant->f[0] : static_cast<float>(v->constant->a[0]);
    }
  }
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.operand(n, 0, "data"));
  if (pads.size() != static_cast<size_t>(2 * x->dims.rank())) {
    return invalid_argument("pads " + list_text(pads) + " do not fit rank " + std::to_string(x->dims.rank()));
  }
  if (x->dtype != DType::f32 && attrs.alpha != 0.f) {
    return unsupported("not supported yet: padding a " + std::string(gpu::dtype_name(x->dtype)) + " value with a nonzero constant");
  }
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) {
    c.define(n, 0, *x);
    c.count_removed();
    return Status::OK();
  }
  attrs.num_pads = static_cast<int32_t>(pads.size());
  for (size_t i = 0; i < pads.size(); ++i) {
    if (pads[i] < -kMaxDim || pads[i] > kMaxDim) return invalid_argument("pad " + std::to_string(pads[i]) + " is out of range");
    attrs.pads[i] = pads[i];
  }
  return define_layer(c, n, OpKind::pad, attrs, {x});
}

// Resize-11 and later: X, roi, scales, sizes, the coordinate mapping and the nearest rounding as
// attributes. Resize-10, and Upsample at any opset (its last version is 10, deprecated since): X
// and scales, mode only, coordinates asymmetric (x / scale), and nearest rounding per
// dim: down where the dim grows or keeps its size, up where it shrinks (ONNX's Resize-10 test
// data, test_resize_downsample_nearest, and ONNX Runtime's mode for versions before 11). Ember's
// resize rounds both resized dims alike, so an old nearest resize that grows one and shrinks the
// other is refused. A dim whose scale is 1 maps to whole coordinates, which round alike either way.
Status convert_resize(Converter& c, const onnx::NodeProto& n) {
  const bool upsample = n.op_type() == "Upsample";
  const bool old = upsample || c.opset() < 11;
  NodeAttrs a(n);
  const std::string mode = a.text("mode", "nearest");
  std::string coords = "asymmetric", round = "floor";
  if (!upsample) {
    for (const char* name : {"coordinate_transformation_mode", "nearest_mode", "exclude_outside", "cubic_coeff_a",
                             "extrapolation_value"}) {
      a.since(name, 11, c.opset());  // refused by name on a Resize-10
    }
  }
  if (!old) {
    coords = a.text("coordinate_transformation_mode", "half_pixel");
    round = a.text("nearest_mode", "round_prefer_floor");
    if (a.integer("exclude_outside", 0) != 0) return unsupported("not supported: exclude_outside 1 (cubic only)");
    a.ignore("cubic_coeff_a");        // read by cubic mode only, which is refused
    a.ignore("extrapolation_value");  // read by tf_crop_and_resize only, which is refused
  }
  EMBER_RETURN_IF_ERROR(a.finish());
  if (old && n.input_size() > 2) {
    return invalid_argument(n.op_type() + (upsample ? "" : " before opset 11") + " takes X and scales, this node " +
                            std::to_string(n.input_size()) + " inputs");
  }
  gpu::LayerAttrs attrs;
  if (mode == "nearest") attrs.fn = static_cast<uint8_t>(gpu::ResizeMode::nearest);
  else if (mode == "linear" || mode == "bilinear") attrs.fn = static_cast<uint8_t>(gpu::ResizeMode::linear);
  else return unsupported("not supported: mode '" + mode + "' (Ember resizes nearest or linear)");
  static const std::pair<const char*, gpu::ResizeCoords> kCoords[] = {
      {"half_pixel", gpu::ResizeCoords::half_pixel},
      {"pytorch_half_pixel", gpu::ResizeCoords::pytorch_half_pixel},
      {"align_corners", gpu::ResizeCoords::align_corners},
      {"asymmetric", gpu::ResizeCoords::asymmetric}};
  static const std::pair<const char*, gpu::NearestRound> kRounds[] = {
      {"round_prefer_floor", gpu::NearestRound::round_prefer_floor},
      {"round_prefer_ceil", gpu::NearestRound::round_prefer_ceil},
      {"floor", gpu::NearestRound::floor},
      {"ceil", gpu::NearestRound::ceil}};
  bool known = false;
  for (const auto& [name, v] : kCoords)
    if (coords == name) known = true, attrs.coords = static_cast<uint8_t>(v);
  if (!known) return unsupported("not supported: coordinate_transformation_mode '" + coords + "'");
  known = false;
  for (const auto& [name, v] : kRounds)
    if (round == name) known = true, attrs.nearest_round = static_cast<uint8_t>(v);
  if (!known) return invalid_argument("nearest_mode '" + round + "' is not an ONNX value");
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "X"));
  const int rank = x->dims.rank();
  if (!old && c.input(n, 1) && coords == "tf_crop_and_resize") return unsupported("not supported: roi");
  const int scales_at = old ? 1 : 2;
  std::shared_ptr<const Constant> scales, sizes;
  if (c.input(n, scales_at)) {
    EMBER_ASSIGN_OR_RETURN(scales, c.constant_input(n, scales_at, "scales"));
    if (scales->numel() == 0 && !old) scales = nullptr;  // an empty tensor stands for "absent"
  }
  if (!old && c.input(n, 3)) {
    EMBER_ASSIGN_OR_RETURN(sizes, c.constant_input(n, 3, "sizes"));
    if (sizes->numel() == 0) sizes = nullptr;
  }
  if (old && !scales) return invalid_argument("input 1 (scales) is missing");
  if (!scales == !sizes) return invalid_argument("give exactly one of scales and sizes");
  attrs.num_axes = rank;
  if (scales) {
    if (scales->kind != Constant::Kind::f32 || scales->numel() != rank) {
      return invalid_argument("scales " + scales->describe() + " do not fit rank " + std::to_string(rank));
    }
    bool grows = false, shrinks = false;
    for (int i = 0; i < rank; ++i) {
      attrs.scales[i] = scales->f[static_cast<size_t>(i)];
      if (!(attrs.scales[i] > 0.f && attrs.scales[i] <= 1e4f)) return unsupported("not supported: a scale outside (0, 10000]");
      grows |= attrs.scales[i] > 1.f;
      shrinks |= attrs.scales[i] < 1.f;
    }
    if (old && mode == "nearest" && shrinks) {
      if (grows) {
        return unsupported("not supported: nearest scales " + scales->describe() + " that grow one dim and shrink another (" +
                           n.op_type() + (upsample ? "" : " before opset 11") +
                           " rounds down in one and up in the other; Ember's resize rounds both alike)");
      }
      attrs.nearest_round = static_cast<uint8_t>(gpu::NearestRound::ceil);
    }
  } else {
    if (sizes->kind != Constant::Kind::i64 || sizes->numel() != rank) {
      return invalid_argument("sizes " + sizes->describe() + " do not fit rank " + std::to_string(rank));
    }
    attrs.shape.rank = rank;
    for (int i = 0; i < rank; ++i) {
      const int64_t sa = sizes->a[static_cast<size_t>(i)], sb = sizes->b[static_cast<size_t>(i)];
      if (sa == x->dims.a[i] && sb == x->dims.b[i]) {
        attrs.shape[i] = 0;  // unchanged, free or not
      } else if (sa == sb && sa >= 1 && sa <= kMaxDim) {
        attrs.shape[i] = sa;
      } else {
        return unsupported("not supported yet: output sizes " + list_text(sizes->a) +
                           " where a resized dim depends on the model's free dims");
      }
    }
  }
  return define_layer(c, n, OpKind::resize, attrs, {x});
}

}  // namespace

OpConversion tensor_conversion(std::string_view op) {
  static const std::pair<std::string_view, OpConversion> kTable[] = {
      {"Transpose", convert_transpose}, {"Concat", convert_concat}, {"Split", convert_split},
      {"Slice", convert_slice},         {"Gather", convert_gather}, {"Expand", convert_expand},
      {"Pad", convert_pad},             {"Resize", convert_resize}, {"Upsample", convert_resize},
  };
  for (const auto& [name, fn] : kTable)
    if (name == op) return fn;
  return nullptr;
}

}  // namespace ember::importer
