// The general ops' part of the op table (ops.hpp documents each op): attributes, weights, shape
// inference and scratch sizes of unary ... topk. ops.cpp hands these ops over to the functions here.
#include <algorithm>
#include <cmath>
#include <limits>

#include "model/op_detail.hpp"

namespace ember::gpu {

using namespace op_detail;

namespace {

constexpr std::string_view kUnaryNames[] = {
    "sigmoid", "silu", "hard_sigmoid", "hard_swish", "clip", "exp",  "log",      "sqrt",     "reciprocal",
    "erf",     "neg",  "abs",          "leaky_relu", "elu",  "celu", "selu",     "softplus", "softsign",
    "sin",     "cos",  "floor",        "ceil",       "round", "sign", "not"};
static_assert(std::size(kUnaryNames) == static_cast<size_t>(UnaryFn::count));
constexpr std::string_view kBinaryNames[] = {"add",   "sub",     "mul",        "div",           "pow", "min",
                                             "max",   "mod",     "equal",      "less",          "greater",
                                             "less_equal", "greater_equal", "and", "or",   "xor"};
static_assert(std::size(kBinaryNames) == static_cast<size_t>(BinaryFn::count));
constexpr std::string_view kReduceNames[] = {"sum", "mean", "max", "min", "prod", "sum_square", "l1", "l2", "log_sum_exp"};
static_assert(std::size(kReduceNames) == static_cast<size_t>(ReduceFn::count));
constexpr std::string_view kPadModes[] = {"constant", "reflect", "edge"};
constexpr std::string_view kResizeModes[] = {"nearest", "linear"};
constexpr std::string_view kResizeCoords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"};
constexpr std::string_view kNearestRounds[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
constexpr std::string_view kArgFns[] = {"max", "min"};
constexpr std::string_view kTopkOutputs[] = {"indices", "values"};

constexpr float kFloatMax = std::numeric_limits<float>::max();

// ONNX's defaults for unary's parameters.
void unary_defaults(UnaryFn fn, float& alpha, float& beta) {
  switch (fn) {
    case UnaryFn::clip: alpha = -kFloatMax, beta = kFloatMax; break;
    case UnaryFn::hard_sigmoid: alpha = 0.2f, beta = 0.5f; break;
    case UnaryFn::hard_swish: alpha = 1.f / 6.f, beta = 0.5f; break;
    case UnaryFn::leaky_relu: alpha = 0.01f, beta = 0.f; break;
    case UnaryFn::elu:
    case UnaryFn::celu: alpha = 1.f, beta = 0.f; break;
    case UnaryFn::selu: alpha = 1.67326319217681884765625f, beta = 1.05070102214813232421875f; break;
    default: alpha = beta = 0.f; break;
  }
}

bool unary_has_params(UnaryFn fn) {
  switch (fn) {
    case UnaryFn::clip:
    case UnaryFn::hard_sigmoid:
    case UnaryFn::leaky_relu:
    case UnaryFn::elu:
    case UnaryFn::celu:
    case UnaryFn::selu: return true;
    default: return false;
  }
}

bool is_comparison(BinaryFn fn) { return fn >= BinaryFn::equal && fn <= BinaryFn::greater_equal; }
bool is_logical(BinaryFn fn) { return fn >= BinaryFn::and_; }

std::vector<int64_t> list_of(const int64_t* v, int n) { return std::vector<int64_t>(v, v + n); }
std::vector<int64_t> dims_of(const Shape& s) { return list_of(s.dims.data(), s.rank); }

// Copies `v` into `out` (capacity n); false when it does not fit.
bool fill(const std::vector<int64_t>& v, int64_t* out, size_t n) {
  if (v.size() > n) return false;
  std::copy(v.begin(), v.end(), out);
  return true;
}

Status dim_in_range(int64_t dim, int rank, const char* what) {
  if (dim < -rank || dim >= std::max(rank, 1)) {
    return invalid_argument(std::string(what) + " " + std::to_string(dim) + " is out of range for rank " +
                            std::to_string(rank));
  }
  return Status::OK();
}

Status need_int_ids(const TensorDesc& d, int which) {
  if (d.dtype != DType::i64 && d.dtype != DType::i32) {
    return invalid_argument("input " + std::to_string(which) + " is " + describe(d) + ", expected int64 or int32");
  }
  return Status::OK();
}

// The distinct axes of a list, normalised to [0, rank); an Error for one out of range or repeated.
Result<uint32_t> axis_mask(const int64_t* axes, int n, int rank) {
  uint32_t mask = 0;
  for (int i = 0; i < n; ++i) {
    EMBER_RETURN_IF_ERROR(dim_in_range(axes[i], rank, "axis"));
    const int a = normalize_dim(axes[i], rank);
    if (mask & (1u << a)) return invalid_argument("axis " + std::to_string(axes[i]) + " is listed twice");
    mask |= 1u << a;
  }
  return mask;
}

int64_t conv_transpose_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int64_t op) {
  return (in - 1) * s - 2 * p + d * (k - 1) + op + 1;
}

}  // namespace

std::string_view unary_fn_name(UnaryFn fn) { return kUnaryNames[static_cast<size_t>(fn)]; }
std::string_view binary_fn_name(BinaryFn fn) { return kBinaryNames[static_cast<size_t>(fn)]; }
std::string_view reduce_fn_name(ReduceFn fn) { return kReduceNames[static_cast<size_t>(fn)]; }

Result<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  Shape out;
  out.rank = std::max(a.rank, b.rank);
  for (int i = 0; i < out.rank; ++i) {
    const int ia = a.rank - out.rank + i, ib = b.rank - out.rank + i;
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      return invalid_argument("shapes " + a.to_string() + " and " + b.to_string() + " do not broadcast (dim " +
                              std::to_string(i) + ": " + std::to_string(da) + " vs " + std::to_string(db) + ")");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace op_detail {

std::pair<int, int> general_input_count(OpKind op) {
  switch (op) {
    case OpKind::constant: return {0, 0};
    case OpKind::binary:
    case OpKind::matmul:
    case OpKind::gather: return {2, 2};
    case OpKind::where: return {3, 3};
    case OpKind::concat: return {1, kMaxLayerInputs};
    case OpKind::expand: return {1, 2};
    default: return {1, 1};
  }
}

void parse_general_attrs(OpKind op, const json& attrs, AttrReader& r, LayerAttrs& a) {
  switch (op) {
    case OpKind::unary: {
      const auto fn = r.choice<UnaryFn>("fn", kUnaryNames, UnaryFn::sigmoid, true);
      a.fn = static_cast<uint8_t>(fn);
      unary_defaults(fn, a.alpha, a.beta);
      if (unary_has_params(fn)) {
        a.alpha = r.number("alpha", a.alpha, -kFloatMax, kFloatMax);
        a.beta = r.number("beta", a.beta, -kFloatMax, kFloatMax);
      }
      break;
    }
    case OpKind::binary: a.fn = static_cast<uint8_t>(r.choice<BinaryFn>("fn", kBinaryNames, BinaryFn::add, true)); break;
    case OpKind::reduce: {
      a.fn = static_cast<uint8_t>(r.choice<ReduceFn>("fn", kReduceNames, ReduceFn::sum, true));
      const auto axes = r.int_list("axes", false);
      a.num_axes = static_cast<int32_t>(axes.size());
      fill(axes, a.axes, Shape::kMaxRank);
      a.keepdims = r.boolean("keepdims", true);
      a.noop_with_empty_axes = r.boolean("noop_with_empty_axes", false);
      break;
    }
    case OpKind::constant: {
      const auto dt = parse_dtype(r.text("dtype", "float32"));
      if (!dt.ok()) r.fail("dtype", dt.error().message());
      else a.to = *dt;
      a.shape = Shape();
      for (int64_t d : r.int_list("shape", true, Shape::kMaxRank, 0)) a.shape[a.shape.rank++] = d;
      break;
    }
    case OpKind::cast: {
      const auto dt = parse_dtype(r.text("to", ""));
      if (!dt.ok()) r.fail("to", dt.error().message());
      else a.to = *dt;
      break;
    }
    case OpKind::transpose: {
      const auto perm = r.int_list("perm", true, Shape::kMaxRank, 0);
      a.num_axes = static_cast<int32_t>(perm.size());
      fill(perm, a.axes, Shape::kMaxRank);
      uint32_t seen = 0;
      for (int64_t p : perm) {
        if (p >= static_cast<int64_t>(perm.size()) || (seen & (1u << p))) {
          r.fail("perm", "must be a permutation of 0.." + std::to_string(perm.size() - 1));
          break;
        }
        seen |= 1u << p;
      }
      break;
    }
    case OpKind::concat:
    case OpKind::gather: a.dim = static_cast<int32_t>(r.integer("dim", 0, true, -Shape::kMaxRank)); break;
    case OpKind::slice: {
      const auto axes = r.int_list("axes", true, Shape::kMaxRank, -Shape::kMaxRank);
      const auto starts = r.int_list("starts", true, Shape::kMaxRank, INT64_MIN, true);
      const auto ends = r.int_list("ends", true, Shape::kMaxRank, INT64_MIN, true);
      auto steps = r.int_list("steps", false, Shape::kMaxRank, INT64_MIN, true);
      if (steps.empty()) steps.assign(axes.size(), 1);
      if (starts.size() != axes.size() || ends.size() != axes.size() || steps.size() != axes.size()) {
        r.fail("axes", "axes, starts, ends and steps must have one entry per sliced axis");
        break;
      }
      if (std::count(steps.begin(), steps.end(), 0)) r.fail("steps", "a step may not be 0");
      a.num_axes = static_cast<int32_t>(axes.size());
      fill(axes, a.axes, Shape::kMaxRank);
      fill(starts, a.starts, Shape::kMaxRank);
      fill(ends, a.ends, Shape::kMaxRank);
      fill(steps, a.steps, Shape::kMaxRank);
      break;
    }
    case OpKind::expand: {
      a.shape = Shape();
      for (int64_t d : r.int_list("shape", true, Shape::kMaxRank, 0)) a.shape[a.shape.rank++] = d;
      const auto like = r.int_list("like_dims", false, Shape::kMaxRank, -1);
      if (!like.empty() && static_cast<int>(like.size()) != a.shape.rank) {
        r.fail("like_dims", "needs one entry per dim of shape");
      }
      for (size_t i = 0; i < like.size() && i < Shape::kMaxRank; ++i) a.like_dims[i] = static_cast<int8_t>(like[i]);
      break;
    }
    case OpKind::pad: {
      const auto pads = r.int_list("pads", true, 2 * Shape::kMaxRank, -kMaxAttrValue);
      if (pads.size() % 2) r.fail("pads", "needs a begin and an end pad per dim");
      a.num_pads = static_cast<int32_t>(pads.size());
      fill(pads, a.pads, 2 * Shape::kMaxRank);
      a.fn = static_cast<uint8_t>(r.choice<PadMode>("mode", kPadModes, PadMode::constant));
      a.alpha = r.number("value", 0.f, -kFloatMax, kFloatMax);
      break;
    }
    case OpKind::resize: {
      a.fn = static_cast<uint8_t>(r.choice<ResizeMode>("mode", kResizeModes, ResizeMode::nearest));
      a.coords = static_cast<uint8_t>(
          r.choice<ResizeCoords>("coordinate_transformation_mode", kResizeCoords, ResizeCoords::half_pixel));
      a.nearest_round =
          static_cast<uint8_t>(r.choice<NearestRound>("nearest_mode", kNearestRounds, NearestRound::round_prefer_floor));
      const auto scales = r.float_list("scales", false, Shape::kMaxRank);
      const auto sizes = r.int_list("sizes", false, Shape::kMaxRank, 0);
      for (size_t i = 0; i < scales.size(); ++i) {
        if (!(scales[i] > 0.f && scales[i] <= 1e4f)) r.fail("scales", "each scale must be in (0, 10000]");
        a.scales[i] = scales[i];
      }
      a.shape = Shape();
      for (int64_t d : sizes) a.shape[a.shape.rank++] = d;
      if (scales.empty() == sizes.empty()) r.fail("scales", "give either scales or sizes");
      a.num_axes = static_cast<int32_t>(std::max(scales.size(), sizes.size()));
      break;
    }
    case OpKind::conv_transpose2d:
      a.in_channels = r.integer("in_channels", 0, true, 1);
      a.out_channels = r.integer("out_channels", 0, true, 1);
      r.pair("kernel_size", a.kernel, true, 1, 1);
      r.pair("stride", a.stride, false, 1, 1);
      r.pair("padding", a.padding, false, 0, 0);
      r.pair("dilation", a.dilation, false, 1, 1);
      r.pair("output_padding", a.output_padding, false, 0, 0);
      a.groups = r.integer("groups", 1, false, 1);
      a.bias = r.boolean("bias", true);
      if (r.error().ok() && (a.in_channels % a.groups || a.out_channels % a.groups)) {
        r.fail("groups", "in_channels and out_channels must be divisible by groups");
      }
      if (r.error().ok() && (a.output_padding[0] >= std::max(a.stride[0], a.dilation[0]) ||
                             a.output_padding[1] >= std::max(a.stride[1], a.dilation[1]))) {
        r.fail("output_padding", "must be smaller than stride or dilation");
      }
      break;
    case OpKind::group_norm:
      a.num_groups = r.integer("num_groups", 1, true, 1);
      a.num_features = r.integer("num_features", 0, true, 1);
      a.eps = r.number("eps", 1e-5f, 0.f, 1.f);
      if (r.error().ok() && a.num_features % a.num_groups) r.fail("num_groups", "must divide num_features");
      break;
    case OpKind::rms_norm:
      a.num_features = r.integer("normalized_shape", 0, true, 1);
      a.eps = r.number("eps", 1e-6f, 0.f, 1.f);
      break;
    case OpKind::argmax:
      a.dim = static_cast<int32_t>(r.integer("dim", 0, false, -Shape::kMaxRank));
      a.keepdims = r.boolean("keepdims", true);
      a.select_last_index = r.boolean("select_last_index", false);
      a.fn = static_cast<uint8_t>(r.choice<uint8_t>("fn", kArgFns, uint8_t{0}));
      break;
    case OpKind::topk:
      a.k = r.integer("k", 1, true, 0);
      a.dim = static_cast<int32_t>(r.integer("dim", -1, false, -Shape::kMaxRank));
      a.largest = r.boolean("largest", true);
      a.values_output = r.choice<uint8_t>("output", kTopkOutputs, uint8_t{1}) == 1;
      break;
    case OpKind::where:
    case OpKind::matmul: break;
    default: r.fail("op", "not a general op");
  }
  (void)attrs;
}

void general_attrs_to_json(OpKind op, const LayerAttrs& a, json& out) {
  auto pair = [](const int64_t v[2]) { return v[0] == v[1] ? json(v[0]) : json::array({v[0], v[1]}); };
  switch (op) {
    case OpKind::unary:
      out = {{"fn", unary_fn_name(static_cast<UnaryFn>(a.fn))}};
      if (unary_has_params(static_cast<UnaryFn>(a.fn))) out["alpha"] = a.alpha, out["beta"] = a.beta;
      break;
    case OpKind::binary: out = {{"fn", binary_fn_name(static_cast<BinaryFn>(a.fn))}}; break;
    case OpKind::reduce:
      out = {{"fn", reduce_fn_name(static_cast<ReduceFn>(a.fn))},
             {"axes", list_of(a.axes, a.num_axes)},
             {"keepdims", a.keepdims},
             {"noop_with_empty_axes", a.noop_with_empty_axes}};
      break;
    case OpKind::constant: out = {{"dtype", dtype_name(a.to)}, {"shape", dims_of(a.shape)}}; break;
    case OpKind::cast: out = {{"to", dtype_name(a.to)}}; break;
    case OpKind::transpose: out = {{"perm", list_of(a.axes, a.num_axes)}}; break;
    case OpKind::concat:
    case OpKind::gather: out = {{"dim", a.dim}}; break;
    case OpKind::slice:
      out = {{"axes", list_of(a.axes, a.num_axes)},
             {"starts", list_of(a.starts, a.num_axes)},
             {"ends", list_of(a.ends, a.num_axes)},
             {"steps", list_of(a.steps, a.num_axes)}};
      break;
    case OpKind::expand: {
      out = {{"shape", dims_of(a.shape)}};
      std::vector<int64_t> like(a.like_dims, a.like_dims + a.shape.rank);
      if (std::any_of(like.begin(), like.end(), [](int64_t d) { return d >= 0; })) out["like_dims"] = like;
      break;
    }
    case OpKind::pad:
      out = {{"pads", list_of(a.pads, a.num_pads)}, {"mode", kPadModes[a.fn]}, {"value", a.alpha}};
      break;
    case OpKind::resize: {
      out = {{"mode", kResizeModes[a.fn]},
             {"coordinate_transformation_mode", kResizeCoords[a.coords]},
             {"nearest_mode", kNearestRounds[a.nearest_round]}};
      if (a.shape.rank > 0) out["sizes"] = dims_of(a.shape);
      else out["scales"] = std::vector<float>(a.scales, a.scales + a.num_axes);
      break;
    }
    case OpKind::conv_transpose2d:
      out = {{"in_channels", a.in_channels}, {"out_channels", a.out_channels}, {"kernel_size", pair(a.kernel)},
             {"stride", pair(a.stride)},     {"padding", pair(a.padding)},       {"dilation", pair(a.dilation)},
             {"output_padding", pair(a.output_padding)}, {"groups", a.groups}, {"bias", a.bias}};
      break;
    case OpKind::group_norm:
      out = {{"num_groups", a.num_groups}, {"num_features", a.num_features}, {"eps", a.eps}};
      break;
    case OpKind::rms_norm: out = {{"normalized_shape", a.num_features}, {"eps", a.eps}}; break;
    case OpKind::argmax:
      out = {{"dim", a.dim}, {"keepdims", a.keepdims}, {"select_last_index", a.select_last_index},
             {"fn", kArgFns[a.fn]}};
      break;
    case OpKind::topk:
      out = {{"k", a.k}, {"dim", a.dim}, {"largest", a.largest}, {"output", kTopkOutputs[a.values_output ? 1 : 0]}};
      break;
    default: out = json::object(); break;
  }
}

std::vector<WeightSpec> general_weight_specs(OpKind op, const LayerAttrs& a) {
  switch (op) {
    case OpKind::constant: return {{"value", a.shape, true, a.to}};
    case OpKind::conv_transpose2d:
      return {{"weight", Shape{a.in_channels, a.out_channels / a.groups, a.kernel[0], a.kernel[1]}},
              {"bias", Shape{a.out_channels}, a.bias}};
    case OpKind::group_norm: return {{"weight", Shape{a.num_features}}, {"bias", Shape{a.num_features}}};
    case OpKind::rms_norm: return {{"weight", Shape{a.num_features}}};
    default: return {};
  }
}

Result<TensorDesc> infer_general(OpKind op, const LayerAttrs& a, std::span<const TensorDesc> in) {
  switch (op) {
    case OpKind::unary: {
      const TensorDesc& x = in[0];
      if (static_cast<UnaryFn>(a.fn) == UnaryFn::not_) {
        if (x.dtype != DType::u8) return invalid_argument("input 0 is " + describe(x) + ", expected uint8");
      } else {
        EMBER_RETURN_IF_ERROR(need_float(x, 0));
      }
      return x;
    }
    case OpKind::binary: {
      const auto fn = static_cast<BinaryFn>(a.fn);
      if (in[0].dtype != in[1].dtype) {
        return invalid_argument("inputs are " + describe(in[0]) + " and " + describe(in[1]) + ", expected one dtype");
      }
      const DType t = in[0].dtype;
      if (is_logical(fn) ? t != DType::u8
                         : is_comparison(fn) ? (t != DType::f32 && t != DType::i64 && t != DType::i32) : t != DType::f32) {
        return invalid_argument(std::string(binary_fn_name(fn)) + " does not take " + describe(in[0]));
      }
      EMBER_ASSIGN_OR_RETURN(Shape s, broadcast_shapes(in[0].shape, in[1].shape));
      return TensorDesc{is_comparison(fn) || is_logical(fn) ? DType::u8 : DType::f32, s};
    }
    case OpKind::where: {
      if (in[0].dtype != DType::u8) return invalid_argument("input 0 (condition) is " + describe(in[0]) + ", expected uint8");
      if (in[1].dtype != in[2].dtype) {
        return invalid_argument("inputs 1 and 2 are " + describe(in[1]) + " and " + describe(in[2]) + ", expected one dtype");
      }
      EMBER_ASSIGN_OR_RETURN(Shape s, broadcast_shapes(in[0].shape, in[1].shape));
      EMBER_ASSIGN_OR_RETURN(s, broadcast_shapes(s, in[2].shape));
      return TensorDesc{in[1].dtype, s};
    }
    case OpKind::constant: return TensorDesc{a.to, a.shape};
    case OpKind::matmul: {
      EMBER_RETURN_IF_ERROR(need_float(in[0], 0));
      EMBER_RETURN_IF_ERROR(need_float(in[1], 1));
      Shape sa = in[0].shape, sb = in[1].shape;
      if (sa.rank < 1 || sb.rank < 1) return invalid_argument("matmul needs inputs of rank 1 or more");
      const bool va = sa.rank == 1, vb = sb.rank == 1;
      if (va) sa = Shape{1, sa[0]};
      if (vb) sb = Shape{sb[0], 1};
      const int64_t k = sa.last();
      if (sb[sb.rank - 2] != k) {
        return invalid_argument("cannot multiply " + in[0].shape.to_string() + " by " + in[1].shape.to_string() +
                                " (inner dims " + std::to_string(k) + " and " + std::to_string(sb[sb.rank - 2]) + ")");
      }
      Shape ba, bb;
      ba.rank = sa.rank - 2;
      bb.rank = sb.rank - 2;
      for (int i = 0; i < ba.rank; ++i) ba[i] = sa[i];
      for (int i = 0; i < bb.rank; ++i) bb[i] = sb[i];
      EMBER_ASSIGN_OR_RETURN(Shape out, broadcast_shapes(ba, bb));
      if (out.rank + 2 > Shape::kMaxRank) return invalid_argument("matmul output has too many dims");
      if (!va) out[out.rank++] = sa[sa.rank - 2];
      if (!vb) out[out.rank++] = sb.last();
      return TensorDesc{DType::f32, out};
    }
    case OpKind::transpose: {
      const TensorDesc& x = in[0];
      if (a.num_axes != x.shape.rank) {
        return invalid_argument("perm has " + std::to_string(a.num_axes) + " entries for input " + x.shape.to_string());
      }
      uint32_t seen = 0;  // every layer's source (model.json, an importer) is checked here, once
      for (int i = 0; i < x.shape.rank; ++i) {
        const int64_t p = a.axes[i];
        if (p < 0 || p >= x.shape.rank || (seen & (1u << p))) {
          return invalid_argument("perm is not a permutation of 0.." + std::to_string(x.shape.rank - 1) +
                                  " (entry " + std::to_string(i) + " is " + std::to_string(p) + ")");
        }
        seen |= 1u << p;
      }
      TensorDesc out{x.dtype, x.shape};
      for (int i = 0; i < x.shape.rank; ++i) out.shape[i] = x.shape[static_cast<int>(a.axes[i])];
      return out;
    }
    case OpKind::concat: {
      const TensorDesc& x = in[0];
      EMBER_RETURN_IF_ERROR(dim_in_range(a.dim, x.shape.rank, "dim"));
      if (x.shape.rank == 0) return invalid_argument("cannot concatenate scalars");
      const int d = normalize_dim(a.dim, x.shape.rank);
      TensorDesc out = x;
      for (size_t i = 1; i < in.size(); ++i) {
        const TensorDesc& y = in[i];
        bool fits = y.dtype == x.dtype && y.shape.rank == x.shape.rank;
        for (int j = 0; fits && j < x.shape.rank; ++j) fits = j == d || y.shape[j] == x.shape[j];
        if (!fits) {
          return invalid_argument("input " + std::to_string(i) + " " + describe(y) + " does not fit input 0 " +
                                  describe(x) + " along dim " + std::to_string(d));
        }
        out.shape[d] += y.shape[d];
      }
      return out;
    }
    case OpKind::slice: {
      const TensorDesc& x = in[0];
      if (auto m = axis_mask(a.axes, a.num_axes, x.shape.rank); !m.ok()) return m.error();
      TensorDesc out = x;
      for (int i = 0; i < a.num_axes; ++i) {
        const int d = normalize_dim(a.axes[i], x.shape.rank);
        const int64_t n = x.shape[d], step = a.steps[i];
        int64_t start = a.starts[i] < 0 ? a.starts[i] + n : a.starts[i];
        int64_t end = a.ends[i] < 0 ? a.ends[i] + n : a.ends[i];
        if (step > 0) {
          start = std::clamp<int64_t>(start, 0, n);
          end = std::clamp<int64_t>(end, 0, n);
          out.shape[d] = end > start ? (end - start + step - 1) / step : 0;
        } else {
          start = std::clamp<int64_t>(start, -1, n - 1);
          end = std::clamp<int64_t>(end, -1, n - 1);
          out.shape[d] = start > end ? (start - end - step - 1) / -step : 0;
        }
      }
      return out;
    }
    case OpKind::gather: {
      const TensorDesc &x = in[0], &idx = in[1];
      EMBER_RETURN_IF_ERROR(need_int_ids(idx, 1));
      if (x.shape.rank == 0) return invalid_argument("cannot gather from a scalar");
      EMBER_RETURN_IF_ERROR(dim_in_range(a.dim, x.shape.rank, "dim"));
      const int d = normalize_dim(a.dim, x.shape.rank);
      if (x.shape.rank - 1 + idx.shape.rank > Shape::kMaxRank) return invalid_argument("gather output has too many dims");
      TensorDesc out{x.dtype, Shape()};
      for (int i = 0; i < d; ++i) out.shape[out.shape.rank++] = x.shape[i];
      for (int i = 0; i < idx.shape.rank; ++i) out.shape[out.shape.rank++] = idx.shape[i];
      for (int i = d + 1; i < x.shape.rank; ++i) out.shape[out.shape.rank++] = x.shape[i];
      return out;
    }
    case OpKind::expand: {
      Shape target = a.shape;
      for (int i = 0; i < target.rank; ++i) {
        if (a.like_dims[i] < 0) continue;
        if (in.size() < 2 || a.like_dims[i] >= in[1].shape.rank) {
          return invalid_argument("like_dims[" + std::to_string(i) + "] names a dim the second input does not have");
        }
        target[i] = in[1].shape[a.like_dims[i]];
      }
      EMBER_ASSIGN_OR_RETURN(Shape s, broadcast_shapes(in[0].shape, target));
      return TensorDesc{in[0].dtype, s};
    }
    case OpKind::pad: {
      const TensorDesc& x = in[0];
      if (a.num_pads != 2 * x.shape.rank) {
        return invalid_argument("pads has " + std::to_string(a.num_pads) + " entries for input " + x.shape.to_string() +
                                ", expected " + std::to_string(2 * x.shape.rank));
      }
      TensorDesc out = x;
      for (int i = 0; i < x.shape.rank; ++i) {
        const int64_t b = a.pads[i], e = a.pads[i + x.shape.rank];
        out.shape[i] = x.shape[i] + b + e;
        if (out.shape[i] < 0) return invalid_argument("pads crop dim " + std::to_string(i) + " of " + x.shape.to_string() + " below 0");
        if (static_cast<PadMode>(a.fn) == PadMode::reflect && (b >= x.shape[i] || e >= x.shape[i])) {
          return invalid_argument("reflect padding of dim " + std::to_string(i) + " must be smaller than its size " +
                                  std::to_string(x.shape[i]));
        }
        if (static_cast<PadMode>(a.fn) == PadMode::edge && x.shape[i] == 0 && out.shape[i] > 0) {
          return invalid_argument("edge padding of an empty dim");
        }
      }
      return out;
    }
    case OpKind::resize: {
      const TensorDesc& x = in[0];
      EMBER_RETURN_IF_ERROR(need_float(x, 0));
      if (a.num_axes != x.shape.rank) {
        return invalid_argument("resize lists " + std::to_string(a.num_axes) + " scales or sizes for input " +
                                x.shape.to_string());
      }
      TensorDesc out = x;
      for (int i = 0; i < x.shape.rank; ++i) {
        out.shape[i] = a.shape.rank > 0 && a.shape[i] > 0
                           ? a.shape[i]
                           : static_cast<int64_t>(std::floor(static_cast<double>(x.shape[i]) * a.scales[i]));
        if (out.shape[i] != x.shape[i] && i < x.shape.rank - 2) {
          return invalid_argument("resize may change only the last two dims; dim " + std::to_string(i) + " of " +
                                  x.shape.to_string() + " would become " + std::to_string(out.shape[i]));
        }
        if (out.shape[i] > kMaxAttrValue) return invalid_argument("resize output dim " + std::to_string(i) + " is too large");
      }
      return out;
    }
    case OpKind::conv_transpose2d: {
      const TensorDesc& x = in[0];
      EMBER_RETURN_IF_ERROR(need_float(x, 0));
      EMBER_RETURN_IF_ERROR(need_rank(x, 4, 0));
      EMBER_RETURN_IF_ERROR(need_dim(x, 1, a.in_channels, "in_channels"));
      TensorDesc out = x;
      out.shape[1] = a.out_channels;
      for (int i = 0; i < 2; ++i) {
        out.shape[2 + i] = conv_transpose_out(x.shape[2 + i], a.kernel[i], a.stride[i], a.padding[i], a.dilation[i],
                                              a.output_padding[i]);
        if (out.shape[2 + i] < 1) return invalid_argument("input " + x.shape.to_string() + " gives an empty output");
      }
      return out;
    }
    case OpKind::group_norm: {
      const TensorDesc& x = in[0];
      EMBER_RETURN_IF_ERROR(need_float(x, 0));
      if (x.shape.rank < 2) return invalid_argument("input must have at least 2 dims");
      EMBER_RETURN_IF_ERROR(need_dim(x, 1, a.num_features, "num_features"));
      return x;
    }
    case OpKind::rms_norm: {
      const TensorDesc& x = in[0];
      EMBER_RETURN_IF_ERROR(need_float(x, 0));
      if (x.shape.rank < 1) return invalid_argument("input must have at least one dim");
      EMBER_RETURN_IF_ERROR(need_dim(x, -1, a.num_features, "normalized_shape"));
      return x;
    }
    case OpKind::reduce: {
      const TensorDesc& x = in[0];
      EMBER_RETURN_IF_ERROR(need_float(x, 0));
      EMBER_ASSIGN_OR_RETURN(uint32_t mask, axis_mask(a.axes, a.num_axes, x.shape.rank));
      if (a.num_axes == 0 && !a.noop_with_empty_axes) mask = (1u << x.shape.rank) - 1;
      TensorDesc out{DType::f32, Shape()};
      for (int i = 0; i < x.shape.rank; ++i) {
        if (!(mask & (1u << i))) out.shape[out.shape.rank++] = x.shape[i];
        else if (a.keepdims) out.shape[out.shape.rank++] = 1;
      }
      for (int i = 0; i < x.shape.rank; ++i) {
        const auto fn = static_cast<ReduceFn>(a.fn);
        if ((mask & (1u << i)) && x.shape[i] == 0 && (fn == ReduceFn::max || fn == ReduceFn::min)) {
          return invalid_argument("cannot take the max or min of an empty dim");
        }
      }
      return out;
    }
    case OpKind::cast: return TensorDesc{a.to, in[0].shape};
    case OpKind::argmax:
    case OpKind::topk: {
      const TensorDesc& x = in[0];
      EMBER_RETURN_IF_ERROR(need_float(x, 0));
      if (x.shape.rank == 0) return invalid_argument("input must have at least one dim");
      EMBER_RETURN_IF_ERROR(dim_in_range(a.dim, x.shape.rank, "dim"));
      const int d = normalize_dim(a.dim, x.shape.rank);
      if (x.shape[d] == 0) return invalid_argument("dim " + std::to_string(d) + " of " + x.shape.to_string() + " is empty");
      TensorDesc out{DType::i64, x.shape};
      if (op == OpKind::topk) {
        if (a.k > x.shape[d]) {
          return invalid_argument("k " + std::to_string(a.k) + " exceeds dim " + std::to_string(d) + " of " +
                                  x.shape.to_string());
        }
        out.shape[d] = a.k;
        if (a.values_output) out.dtype = x.dtype;
        return out;
      }
      if (a.keepdims) {
        out.shape[d] = 1;
        return out;
      }
      out.shape = Shape();
      for (int i = 0; i < x.shape.rank; ++i)
        if (i != d) out.shape[out.shape.rank++] = x.shape[i];
      return out;
    }
    default: break;
  }
  return internal_error("infer_general: not a general op");
}

uint64_t general_workspace_bytes(OpKind op, const LayerAttrs& a, std::span<const TensorDesc> in) {
  switch (op) {
    case OpKind::conv_transpose2d: {
      const Shape& s = in[0].shape;  // columns of one image: [out/groups * kh * kw, h * w]
      return static_cast<uint64_t>(a.out_channels / a.groups * a.kernel[0] * a.kernel[1] * s[2] * s[3]) * 4;
    }
    case OpKind::topk: {
      const Shape& s = in[0].shape;  // one int64 index per element, to sort each row's positions
      return static_cast<uint64_t>(s.numel()) * 8;
    }
    default: return 0;
  }
}

}  // namespace op_detail

}  // namespace ember::gpu
