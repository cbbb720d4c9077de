// Op table: attribute parsing, weight specs, shape inference and workspace sizes, one case per op.
#include "model/ops.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/op_detail.hpp"

namespace ember::gpu {

using nlohmann::json;
using namespace op_detail;

namespace {

constexpr std::string_view kOpNames[] = {
    "linear",  "conv2d",     "batch_norm", "relu",       "gelu",       "tanh",
    "layer_norm", "softmax", "attention",  "embedding",  "add",        "max_pool2d",
    "avg_pool2d", "global_avg_pool", "flatten", "reshape", "select",
    // the general ops
    "unary", "binary", "where", "constant", "matmul", "transpose", "concat", "slice", "gather", "expand",
    "pad", "resize", "conv_transpose2d", "group_norm", "rms_norm", "reduce", "cast", "argmax", "topk",
    // generation
    "kv_attention"};
static_assert(std::size(kOpNames) == static_cast<size_t>(OpKind::count), "every op needs a name");

// PyTorch's (and ONNX's) output size; with ceil_mode a last window may start past the input's end
// only within the padding (a window starting in the right padding is dropped).
int64_t pooled(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode = false) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  if (!ceil_mode || span < 0) return span < 0 ? 0 : span / s + 1;
  int64_t o = (span + s - 1) / s + 1;
  if ((o - 1) * s >= in + p) --o;
  return o;
}

Result<TensorDesc> infer_window(const LayerAttrs& a, const TensorDesc& x, int64_t out_channels) {
  EMBER_RETURN_IF_ERROR(need_float(x, 0));
  EMBER_RETURN_IF_ERROR(need_rank(x, 4, 0));
  TensorDesc out = x;
  out.shape[1] = out_channels;
  for (int i = 0; i < 2; ++i) {
    const int64_t in = x.shape[2 + i];
    const int64_t o = pooled(in, a.kernel[i], a.stride[i], a.padding[i], a.dilation[i], a.ceil_mode);
    if (o < 1) {
      return invalid_argument("input " + x.shape.to_string() + " is too small for kernel " +
                              std::to_string(a.kernel[i]) + " with padding " + std::to_string(a.padding[i]));
    }
    out.shape[2 + i] = o;
  }
  return out;
}

}  // namespace

std::string_view op_name(OpKind op) { return kOpNames[static_cast<size_t>(op)]; }

Result<OpKind> parse_op(std::string_view name) {
  for (size_t i = 0; i < std::size(kOpNames); ++i)
    if (kOpNames[i] == name) return static_cast<OpKind>(i);
  std::string known;
  for (auto n : kOpNames) known += (known.empty() ? "" : ", ") + std::string(n);
  return unsupported("unknown op '" + std::string(name) + "' (known: " + known + ")");
}

std::pair<int, int> input_count(OpKind op) {
  if (is_general(op)) return general_input_count(op);
  if (op == OpKind::attention || op == OpKind::reshape) return {1, 2};
  if (op == OpKind::kv_attention) return {3, 3};
  return op == OpKind::add ? std::pair{2, 2} : std::pair{1, 1};
}

Status parse_attrs(OpKind op, const json& attrs, LayerAttrs& a, const std::string& where) {
  if (!attrs.is_object()) return invalid_argument(where + ": attrs: expected an object");
  AttrReader r(attrs, where);
  if (is_general(op)) {
    parse_general_attrs(op, attrs, r, a);
    r.finish();
    return r.error();
  }
  switch (op) {
    case OpKind::linear:
      a.in_features = r.integer("in_features", 0, true, 1);
      a.out_features = r.integer("out_features", 0, true, 1);
      a.bias = r.boolean("bias", true);
      break;
    case OpKind::conv2d:
      a.in_channels = r.integer("in_channels", 0, true, 1);
      a.out_channels = r.integer("out_channels", 0, true, 1);
      r.pair("kernel_size", a.kernel, true, 1, 1);
      r.pair("stride", a.stride, false, 1, 1);
      r.pair("padding", a.padding, false, 0, 0);
      r.pair("dilation", a.dilation, false, 1, 1);
      a.groups = r.integer("groups", 1, false, 1);
      a.bias = r.boolean("bias", true);
      if (r.error().ok() && (a.in_channels % a.groups || a.out_channels % a.groups)) {
        r.fail("groups", "in_channels and out_channels must be divisible by groups");
      }
      break;
    case OpKind::batch_norm:
      a.num_features = r.integer("num_features", 0, true, 1);
      a.eps = r.number("eps", 1e-5f, 0.f, 1.f);
      break;
    case OpKind::layer_norm:
      a.num_features = r.integer("normalized_shape", 0, true, 1);
      a.eps = r.number("eps", 1e-5f, 0.f, 1.f);
      break;
    case OpKind::gelu: {
      const std::string approx = r.text("approximate", "none");
      if (approx != "none" && approx != "tanh") r.fail("approximate", "expected \"none\" or \"tanh\"");
      a.tanh_approximation = approx == "tanh";
      break;
    }
    case OpKind::softmax:
      a.dim = static_cast<int32_t>(r.integer("dim", -1, false, -Shape::kMaxRank));
      a.log = r.boolean("log", false);
      break;
    case OpKind::attention:
      a.embed_dim = r.integer("embed_dim", 0, true, 1);
      a.num_heads = r.integer("num_heads", 0, true, 1);
      a.causal = r.boolean("causal", false);
      a.bias = r.boolean("bias", true);
      if (r.error().ok() && a.embed_dim % a.num_heads) r.fail("num_heads", "must divide embed_dim");
      break;
    case OpKind::embedding:
      a.num_embeddings = r.integer("num_embeddings", 0, true, 1);
      a.embedding_dim = r.integer("embedding_dim", 0, true, 1);
      a.positional = r.boolean("positional", false);
      break;
    case OpKind::max_pool2d:
    case OpKind::avg_pool2d:
      r.pair("kernel_size", a.kernel, true, 1, 1);
      r.pair("stride", a.stride, false, 0, 1);
      if (!attrs.contains("stride")) {
        a.stride[0] = a.kernel[0];
        a.stride[1] = a.kernel[1];
      }
      r.pair("padding", a.padding, false, 0, 0);
      if (r.error().ok() && (2 * a.padding[0] > a.kernel[0] || 2 * a.padding[1] > a.kernel[1])) {
        r.fail("padding", "must be at most half the kernel size");
      }
      a.ceil_mode = r.boolean("ceil_mode", false);
      if (op == OpKind::max_pool2d) r.pair("dilation", a.dilation, false, 1, 1);
      else a.count_include_pad = r.boolean("count_include_pad", true);
      break;
    case OpKind::flatten:
      a.start_dim = static_cast<int32_t>(r.integer("start_dim", 1, false, -Shape::kMaxRank));
      a.end_dim = static_cast<int32_t>(r.integer("end_dim", -1, false, -Shape::kMaxRank));
      break;
    case OpKind::reshape: {
      auto dims = r.int_list("shape");
      int wildcards = 0;
      a.shape = Shape();
      for (int64_t d : dims) {
        if (d < -1) r.fail("shape", "dims must be >= -1");
        wildcards += d == -1;
        a.shape[a.shape.rank++] = d;
      }
      if (wildcards > 1) r.fail("shape", "at most one dim may be -1");
      const auto like = r.int_list("like_dims", false, Shape::kMaxRank, -1);
      if (!like.empty() && static_cast<int>(like.size()) != a.shape.rank) {
        r.fail("like_dims", "needs one entry per dim of shape");
      }
      for (size_t i = 0; i < like.size() && i < Shape::kMaxRank; ++i) a.like_dims[i] = static_cast<int8_t>(like[i]);
      break;
    }
    case OpKind::select:
      a.dim = static_cast<int32_t>(r.integer("dim", 0, true, -Shape::kMaxRank));
      a.index = r.integer("index", 0, true, INT32_MIN);
      break;
    case OpKind::kv_attention: parse_kv_attention_attrs(r, a); break;
    case OpKind::relu:
    case OpKind::tanh:
    case OpKind::add:
    case OpKind::global_avg_pool:
      break;
    default:
      return internal_error("parse_attrs: OpKind " + std::to_string(static_cast<int>(op)));
  }
  r.finish();
  return r.error();
}

void attrs_to_json(OpKind op, const LayerAttrs& a, json& out) {
  out = json::object();
  if (is_general(op)) return general_attrs_to_json(op, a, out);
  auto pair = [](const int64_t v[2]) { return v[0] == v[1] ? json(v[0]) : json::array({v[0], v[1]}); };
  switch (op) {
    case OpKind::linear:
      out = {{"in_features", a.in_features}, {"out_features", a.out_features}, {"bias", a.bias}};
      break;
    case OpKind::conv2d:
      out = {{"in_channels", a.in_channels}, {"out_channels", a.out_channels}, {"kernel_size", pair(a.kernel)},
             {"stride", pair(a.stride)},     {"padding", pair(a.padding)},       {"dilation", pair(a.dilation)},
             {"groups", a.groups},           {"bias", a.bias}};
      break;
    case OpKind::batch_norm: out = {{"num_features", a.num_features}, {"eps", a.eps}}; break;
    case OpKind::layer_norm: out = {{"normalized_shape", a.num_features}, {"eps", a.eps}}; break;
    case OpKind::gelu: out = {{"approximate", a.tanh_approximation ? "tanh" : "none"}}; break;
    case OpKind::softmax:
      out = {{"dim", a.dim}};
      if (a.log) out["log"] = true;
      break;
    case OpKind::attention:
      out = {{"embed_dim", a.embed_dim}, {"num_heads", a.num_heads}, {"causal", a.causal}, {"bias", a.bias}};
      break;
    case OpKind::embedding:
      out = {{"num_embeddings", a.num_embeddings}, {"embedding_dim", a.embedding_dim}, {"positional", a.positional}};
      break;
    case OpKind::max_pool2d:
    case OpKind::avg_pool2d:
      out = {{"kernel_size", pair(a.kernel)}, {"stride", pair(a.stride)}, {"padding", pair(a.padding)}};
      if (a.ceil_mode) out["ceil_mode"] = true;
      if (op == OpKind::max_pool2d && (a.dilation[0] != 1 || a.dilation[1] != 1)) out["dilation"] = pair(a.dilation);
      if (op == OpKind::avg_pool2d && !a.count_include_pad) out["count_include_pad"] = false;
      break;
    case OpKind::flatten: out = {{"start_dim", a.start_dim}, {"end_dim", a.end_dim}}; break;
    case OpKind::reshape: {
      out = {{"shape", std::vector<int64_t>(a.shape.dims.begin(), a.shape.dims.begin() + a.shape.rank)}};
      std::vector<int64_t> like(a.like_dims, a.like_dims + a.shape.rank);
      if (std::any_of(like.begin(), like.end(), [](int64_t d) { return d >= 0; })) out["like_dims"] = like;
      break;
    }
    case OpKind::select: out = {{"dim", a.dim}, {"index", a.index}}; break;
    case OpKind::kv_attention: kv_attention_attrs_to_json(a, out); break;
    default: break;
  }
}

std::vector<WeightSpec> weight_specs(OpKind op, const LayerAttrs& a) {
  if (is_general(op)) return general_weight_specs(op, a);
  switch (op) {
    case OpKind::linear:
      return {{"weight", Shape{a.out_features, a.in_features}}, {"bias", Shape{a.out_features}, a.bias}};
    case OpKind::conv2d:
      return {{"weight", Shape{a.out_channels, a.in_channels / a.groups, a.kernel[0], a.kernel[1]}},
              {"bias", Shape{a.out_channels}, a.bias}};
    case OpKind::batch_norm:
      return {{"weight", Shape{a.num_features}},
              {"bias", Shape{a.num_features}},
              {"running_mean", Shape{a.num_features}},
              {"running_var", Shape{a.num_features}}};
    case OpKind::layer_norm:
      return {{"weight", Shape{a.num_features}}, {"bias", Shape{a.num_features}}};
    case OpKind::attention:
      return {{"in_proj_weight", Shape{3 * a.embed_dim, a.embed_dim}},
              {"in_proj_bias", Shape{3 * a.embed_dim}, a.bias},
              {"out_proj_weight", Shape{a.embed_dim, a.embed_dim}},
              {"out_proj_bias", Shape{a.embed_dim}, a.bias}};
    case OpKind::embedding:
      return {{"weight", Shape{a.num_embeddings, a.embedding_dim}}};
    case OpKind::kv_attention:
      if (a.rope_dim == 0) return {};
      return {{"inv_freq", Shape{a.rope_dim / 2}, true, DType::f32}};
    default:
      return {};
  }
}

Result<TensorDesc> infer_output(OpKind op, const LayerAttrs& a, std::span<const TensorDesc> in) {
  auto [min_in, max_in] = input_count(op);
  if (static_cast<int>(in.size()) < min_in || static_cast<int>(in.size()) > max_in) {
    return invalid_argument("takes " + std::to_string(min_in) + " input(s), got " + std::to_string(in.size()));
  }
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].shape.has_wildcard()) return internal_error("infer_output: shape " + in[i].shape.to_string() + " has -1");
    int64_t n = 1;  // product of the dims, a 0 counted as 1: bounds the product of any subset
    for (int d = 0; d < in[i].shape.rank; ++d) {
      if (__builtin_mul_overflow(n, std::max<int64_t>(in[i].shape[d], 1), &n) || n > kMaxElements) {
        return invalid_argument("input " + std::to_string(i) + " " + in[i].shape.to_string() + " has more than " +
                                std::to_string(kMaxElements) + " elements");
      }
    }
  }
  if (is_general(op)) return infer_general(op, a, in);
  if (op == OpKind::kv_attention) return infer_kv_attention(a, in);
  const TensorDesc& x = in[0];
  switch (op) {
    case OpKind::linear: {
      EMBER_RETURN_IF_ERROR(need_float(x, 0));
      if (x.shape.rank < 1) return invalid_argument("input must have at least one dim");
      EMBER_RETURN_IF_ERROR(need_dim(x, -1, a.in_features, "in_features"));
      TensorDesc out = x;
      out.shape[out.shape.rank - 1] = a.out_features;
      return out;
    }
    case OpKind::conv2d: {
      EMBER_RETURN_IF_ERROR(need_rank(x, 4, 0));
      EMBER_RETURN_IF_ERROR(need_dim(x, 1, a.in_channels, "in_channels"));
      return infer_window(a, x, a.out_channels);
    }
    case OpKind::batch_norm:
      EMBER_RETURN_IF_ERROR(need_float(x, 0));
      if (x.shape.rank < 2) return invalid_argument("input must have at least 2 dims");
      EMBER_RETURN_IF_ERROR(need_dim(x, 1, a.num_features, "num_features"));
      return x;
    case OpKind::layer_norm:
      EMBER_RETURN_IF_ERROR(need_float(x, 0));
      if (x.shape.rank < 1) return invalid_argument("input must have at least one dim");
      EMBER_RETURN_IF_ERROR(need_dim(x, -1, a.num_features, "normalized_shape"));
      return x;
    case OpKind::relu:
    case OpKind::gelu:
    case OpKind::tanh:
      EMBER_RETURN_IF_ERROR(need_float(x, 0));
      return x;
    case OpKind::softmax: {
      EMBER_RETURN_IF_ERROR(need_float(x, 0));
      const int d = normalize_dim(a.dim, x.shape.rank);
      if (d < 0 || d >= x.shape.rank) {
        return invalid_argument("dim " + std::to_string(a.dim) + " is out of range for " + x.shape.to_string());
      }
      return x;
    }
    case OpKind::attention:
      EMBER_RETURN_IF_ERROR(need_float(x, 0));
      EMBER_RETURN_IF_ERROR(need_rank(x, 3, 0));
      EMBER_RETURN_IF_ERROR(need_dim(x, 2, a.embed_dim, "embed_dim"));
      if (in.size() == 2 && (in[1].shape.rank != 2 || in[1].shape[0] != x.shape[0] || in[1].shape[1] != x.shape[1])) {
        return invalid_argument("mask " + describe(in[1]) + " must be [batch, seq] of input " + x.shape.to_string());
      }
      return x;
    case OpKind::embedding: {
      if (x.dtype != DType::i64 && x.dtype != DType::i32) {
        return invalid_argument("input is " + describe(x) + ", expected int64 or int32 ids");
      }
      if (x.shape.rank < 1 || x.shape.rank >= Shape::kMaxRank) {
        return invalid_argument("input " + x.shape.to_string() + " must have 1 to 5 dims");
      }
      if (a.positional && x.shape.last() > a.num_embeddings) {
        return invalid_argument("sequence length " + std::to_string(x.shape.last()) + " exceeds the " +
                                std::to_string(a.num_embeddings) + " positions of the table");
      }
      TensorDesc out{DType::f32, x.shape};
      out.shape[out.shape.rank++] = a.embedding_dim;
      return out;
    }
    case OpKind::add:
      EMBER_RETURN_IF_ERROR(need_float(x, 0));
      EMBER_RETURN_IF_ERROR(need_float(in[1], 1));
      if (x.shape != in[1].shape) {
        return invalid_argument("inputs have different shapes " + x.shape.to_string() + " and " +
                                in[1].shape.to_string());
      }
      return x;
    case OpKind::max_pool2d:
    case OpKind::avg_pool2d:
      EMBER_RETURN_IF_ERROR(need_rank(x, 4, 0));
      return infer_window(a, x, x.shape[1]);
    case OpKind::global_avg_pool: {
      EMBER_RETURN_IF_ERROR(need_float(x, 0));
      EMBER_RETURN_IF_ERROR(need_rank(x, 4, 0));
      TensorDesc out = x;
      out.shape[2] = out.shape[3] = 1;
      return out;
    }
    case OpKind::flatten: {
      const int r = std::max(1, static_cast<int>(x.shape.rank));
      const int s = normalize_dim(a.start_dim, r), e = normalize_dim(a.end_dim, r);
      if (s < 0 || e >= r || s > e) {
        return invalid_argument("start_dim " + std::to_string(a.start_dim) + " / end_dim " + std::to_string(a.end_dim) +
                                " do not fit " + x.shape.to_string());
      }
      TensorDesc out{x.dtype, Shape()};
      for (int i = 0; i < s; ++i) out.shape[out.shape.rank++] = x.shape[i];
      out.shape[out.shape.rank++] = x.shape.prod(s, e + 1);
      for (int i = e + 1; i < x.shape.rank; ++i) out.shape[out.shape.rank++] = x.shape[i];
      return out;
    }
    case OpKind::reshape: {
      TensorDesc out{x.dtype, a.shape};
      for (int i = 0; i < out.shape.rank; ++i) {
        if (a.like_dims[i] < 0) continue;
        if (in.size() < 2 || a.like_dims[i] >= in[1].shape.rank) {
          return invalid_argument("like_dims[" + std::to_string(i) + "] names a dim the second input does not have");
        }
        out.shape[i] = in[1].shape[a.like_dims[i]];
      }
      int64_t known = 1;
      int wildcard = -1;
      for (int i = 0; i < out.shape.rank; ++i) {
        if (out.shape[i] == 0) {
          if (i >= x.shape.rank) return invalid_argument("shape dim " + std::to_string(i) + " is 0 but the input has no such dim");
          out.shape[i] = x.shape[i];
        }
        if (out.shape[i] == -1) wildcard = i;
        else if (__builtin_mul_overflow(known, out.shape[i], &known)) {
          return invalid_argument("cannot reshape " + x.shape.to_string() + " into " + a.shape.to_string());
        }
      }
      const int64_t n = x.shape.numel();
      if (wildcard >= 0) {
        if (known == 0 || n % known) {
          return invalid_argument("cannot reshape " + x.shape.to_string() + " into " + a.shape.to_string());
        }
        out.shape[wildcard] = n / known;
      } else if (known != n) {
        return invalid_argument("cannot reshape " + x.shape.to_string() + " (" + std::to_string(n) + " elements) into " +
                                out.shape.to_string());
      }
      return out;
    }
    case OpKind::select: {
      const int d = normalize_dim(a.dim, x.shape.rank);
      if (d < 0 || d >= x.shape.rank) {
        return invalid_argument("dim " + std::to_string(a.dim) + " is out of range for " + x.shape.to_string());
      }
      const int64_t size = x.shape[d];
      if (a.index < -size || a.index >= size) {
        return invalid_argument("index " + std::to_string(a.index) + " is out of range for dim " + std::to_string(d) +
                                " of " + x.shape.to_string());
      }
      TensorDesc out{x.dtype, Shape()};
      for (int i = 0; i < x.shape.rank; ++i)
        if (i != d) out.shape[out.shape.rank++] = x.shape[i];
      return out;
    }
    default: break;
  }
  return internal_error("infer_output: OpKind " + std::to_string(static_cast<int>(op)));
}

ConvPlan conv_plan(const LayerAttrs& a, const Shape& s) {
  const int64_t ho = pooled(s[2], a.kernel[0], a.stride[0], a.padding[0], a.dilation[0]);
  const int64_t wo = pooled(s[3], a.kernel[1], a.stride[1], a.padding[1], a.dilation[1]);
  if (a.groups > 1 && a.groups == s[1]) return ConvPlan::depthwise;
  if (s[0] > 1 && a.groups == 1 && ho * wo < kConvBatchedColumns) return ConvPlan::batched;
  const bool pointwise = a.kernel[0] == 1 && a.kernel[1] == 1 && a.stride[0] == 1 && a.stride[1] == 1 &&
                         a.padding[0] == 0 && a.padding[1] == 0;
  return pointwise ? ConvPlan::pointwise : ConvPlan::per_image;
}

bool widens_weights(OpKind op, const LayerAttrs& a) {
  return a.weights != DType::f32 && op != OpKind::embedding && !exact_weights(op) && !weight_specs(op, a).empty();
}

uint64_t workspace_bytes(OpKind op, const LayerAttrs& a, std::span<const TensorDesc> in) {
  uint64_t bytes = op_scratch_bytes(op, a, in);
  if (!widens_weights(op, a)) return bytes;
  for (const WeightSpec& w : weight_specs(op, a)) bytes += static_cast<uint64_t>(w.shape.numel()) * 4;
  if (!in.empty()) bytes += static_cast<uint64_t>(in[0].shape.numel()) * 2;
  return bytes;
}

uint64_t op_scratch_bytes(OpKind op, const LayerAttrs& a, std::span<const TensorDesc> in) {
  if (is_general(op)) return general_workspace_bytes(op, a, in);
  if (op == OpKind::kv_attention) return kv_attention_scratch_bytes(a, in);
  const Shape& s = in[0].shape;
  switch (op) {
    case OpKind::conv2d: {
      const int64_t ho = pooled(s[2], a.kernel[0], a.stride[0], a.padding[0], a.dilation[0]);
      const int64_t wo = pooled(s[3], a.kernel[1], a.stride[1], a.padding[1], a.dilation[1]);
      const int64_t k = (a.in_channels / a.groups) * a.kernel[0] * a.kernel[1];
      switch (conv_plan(a, s)) {
        case ConvPlan::pointwise:
        case ConvPlan::depthwise: return 0;
        case ConvPlan::per_image: return static_cast<uint64_t>(k * ho * wo) * 4;
        case ConvPlan::batched: return static_cast<uint64_t>((k + a.out_channels) * s[0] * ho * wo) * 4;
      }
      return 0;
    }
    case OpKind::attention: {
      const int64_t b = s[0], seq = s[1], e = a.embed_dim;
      const int64_t slices = std::min<int64_t>(b * a.num_heads, kAttentionParallelSlices);
      return static_cast<uint64_t>(b * seq * 3 * e + b * seq * e + slices * seq * seq) * 4;
    }
    default:
      return 0;
  }
}

double flops(OpKind op, const LayerAttrs& a, std::span<const TensorDesc> in, const TensorDesc& out) {
  const double n_out = static_cast<double>(out.shape.numel());
  switch (op) {
    case OpKind::linear: return 2.0 * n_out * static_cast<double>(a.in_features);
    case OpKind::conv2d:
      return 2.0 * n_out * static_cast<double>(a.in_channels / a.groups * a.kernel[0] * a.kernel[1]);
    case OpKind::attention: {
      const double b = static_cast<double>(in[0].shape[0]), s = static_cast<double>(in[0].shape[1]);
      const double e = static_cast<double>(a.embed_dim);
      return 2 * b * s * e * 3 * e + 4 * b * s * s * e + 2 * b * s * e * e;
    }
    default: return n_out;
  }
}

}  // namespace ember::gpu
