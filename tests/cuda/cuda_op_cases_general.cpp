// The general ops' cases of cuda_plugin_test (see cuda_op_cases.hpp): every UnaryFn, BinaryFn
// (comparisons on float32, int64 and int32) and ReduceFn, broadcasting and flat shapes, every pad
// mode, resize mode and coordinate mapping, cast pairs with the saturating and rounding edge values,
// matmul's strided, looped and 1-d paths, gather with negative and out-of-range indices, and the
// coarse ops' new paths (ceil_mode and dilated pools, count_include_pad, log-softmax, attention
// with a key-padding mask).
#include <cmath>
#include <cstring>
#include <limits>

#include "tests/cuda/cuda_op_cases.hpp"

namespace ember::gpu::cuda_plugin_test {
namespace general_cases {

TensorDesc of(DType d, Shape s) { return {d, s}; }
TensorDesc f(Shape s) { return {DType::f32, s}; }

template <class T>
std::vector<uint8_t> raw(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

LayerAttrs pool(int64_t k, int64_t s, int64_t p) {
  LayerAttrs a;
  a.kernel[0] = a.kernel[1] = k;
  a.stride[0] = a.stride[1] = s;
  a.padding[0] = a.padding[1] = p;
  return a;
}

LayerAttrs axes(std::initializer_list<int64_t> list) {
  LayerAttrs a;
  for (int64_t x : list) a.axes[a.num_axes++] = x;
  return a;
}

constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace general_cases

void add_general_op_cases(std::vector<OpCase>& cases) {
  using namespace general_cases;
  auto add = [&](std::string name, OpKind op, const LayerAttrs& a, std::vector<TensorDesc> in) -> OpCase& {
    cases.push_back({std::move(name), op, a, std::move(in)});
    return cases.back();
  };
  LayerAttrs a;

  // -- unary: every function; parameters as parse_attrs' defaults would set them -----------------
  for (int fn = 0; fn < static_cast<int>(UnaryFn::count); ++fn) {
    const auto u = static_cast<UnaryFn>(fn);
    a = {};
    a.fn = static_cast<uint8_t>(fn);
    switch (u) {
      case UnaryFn::clip: a.alpha = -0.5f, a.beta = 0.75f; break;
      case UnaryFn::hard_sigmoid: a.alpha = 0.2f, a.beta = 0.5f; break;
      case UnaryFn::hard_swish: a.alpha = 1.f / 6.f, a.beta = 0.5f; break;
      case UnaryFn::leaky_relu: a.alpha = 0.1f; break;
      case UnaryFn::elu: a.alpha = 1.f; break;
      case UnaryFn::celu: a.alpha = 1.5f; break;
      case UnaryFn::selu: a.alpha = 1.67326319217681884765625f, a.beta = 1.05070102214813232421875f; break;
      default: break;
    }
    const std::string name = "unary_" + std::string(unary_fn_name(u));
    if (u == UnaryFn::not_) {
      add(name, OpKind::unary, a, {of(DType::u8, {3, 7})});
      continue;
    }
    OpCase& c = add(name, OpKind::unary, a, {f({3, 50})});
    c.lo = -3.f, c.hi = 3.f;
    if (u == UnaryFn::log || u == UnaryFn::sqrt || u == UnaryFn::reciprocal) c.lo = 0.1f;
    // Exact halves: round's ties go to even, sign meets 0, floor and ceil meet integers.
    if (u == UnaryFn::round || u == UnaryFn::sign || u == UnaryFn::floor || u == UnaryFn::ceil) c.halves = true;
  }

  // -- binary: arithmetic broadcast and flat, comparisons on three dtypes, logic -----------------
  for (int fn = 0; fn < static_cast<int>(BinaryFn::count); ++fn) {
    const auto b = static_cast<BinaryFn>(fn);
    a = {};
    a.fn = static_cast<uint8_t>(fn);
    const std::string name = "binary_" + std::string(binary_fn_name(b));
    if (b >= BinaryFn::and_) {
      add(name, OpKind::binary, a, {of(DType::u8, {2, 3, 4}), of(DType::u8, {3, 1})});
    } else if (b >= BinaryFn::equal) {
      add(name + "_f32", OpKind::binary, a, {f({2, 3, 4}), f({3, 1})}).halves = true;
      add(name + "_i64", OpKind::binary, a, {of(DType::i64, {4, 1, 5}), of(DType::i64, {3, 5})}).ids = {{-3, 3}};
    } else {
      OpCase& c = add(name, OpKind::binary, a, {f({2, 3, 4}), f({3, 1})});
      if (b == BinaryFn::pow) c.lo = 0.1f;
      if (b == BinaryFn::div || b == BinaryFn::mod) c.lo = 0.25f;
    }
  }
  a = {};
  a.fn = static_cast<uint8_t>(BinaryFn::add);
  add("binary_add_flat", OpKind::binary, a, {f({4, 9}), f({4, 9})});
  add("binary_add_scalar", OpKind::binary, a, {f({5, 6}), f(Shape{})});
  add("binary_add_both_stretch", OpKind::binary, a, {f({1, 4, 1, 6}), f({3, 1, 5, 1})});
  a.fn = static_cast<uint8_t>(BinaryFn::greater_equal);
  add("binary_greater_equal_i32", OpKind::binary, a, {of(DType::i32, {6, 7}), of(DType::i32, {7})}).ids = {{-2, 2}};

  // -- where: cond uint8 and both operands broadcast; each element size ------------------------
  add("where_f32", OpKind::where, {}, {of(DType::u8, {2, 1, 4}), f({3, 4}), f({2, 3, 1})});
  add("where_i64", OpKind::where, {}, {of(DType::u8, {5, 6}), of(DType::i64, {5, 6}), of(DType::i64, {1})});
  add("where_f16_flat", OpKind::where, {}, {of(DType::u8, {33}), of(DType::f16, {33}), of(DType::f16, {33})});
  add("where_u8", OpKind::where, {}, {of(DType::u8, {4, 1}), of(DType::u8, {4, 3}), of(DType::u8, {3})});

  // -- constant: its weight in its own dtype --------------------------------------------------------
  for (DType d : {DType::f32, DType::i64, DType::f16}) {
    a = {};
    a.to = d, a.shape = Shape{2, 5};
    add("constant_" + std::string(dtype_name(d)), OpKind::constant, a, {});
  }

  // -- matmul: strided batch, broadcast batch, looped batch, 1-d operands -----------------------
  add("matmul_batched", OpKind::matmul, {}, {f({2, 3, 4, 5}), f({2, 3, 5, 6})});
  add("matmul_a_broadcast", OpKind::matmul, {}, {f({4, 5}), f({2, 3, 5, 6})});
  add("matmul_b_broadcast", OpKind::matmul, {}, {f({2, 3, 4, 5}), f({1, 5, 6})});
  add("matmul_irregular_batch", OpKind::matmul, {}, {f({2, 1, 4, 5}), f({1, 3, 5, 6})});
  add("matmul_vector_matrix", OpKind::matmul, {}, {f({5}), f({2, 5, 6})});
  add("matmul_matrix_vector", OpKind::matmul, {}, {f({2, 3, 5}), f({5})});
  add("matmul_dot", OpKind::matmul, {}, {f({17}), f({17})});

  // -- transpose, concat, slice, gather, expand ---------------------------------------------------
  a = axes({2, 0, 1});
  add("transpose_f32", OpKind::transpose, a, {f({2, 3, 4})});
  a = axes({1, 0});
  add("transpose_i64", OpKind::transpose, a, {of(DType::i64, {3, 4})});
  a = axes({0, 1});
  add("transpose_identity_u8", OpKind::transpose, a, {of(DType::u8, {3, 4})});
  a = axes({0, 2, 1, 3});
  add("transpose_f16", OpKind::transpose, a, {of(DType::f16, {2, 3, 4, 5})});

  a = {};
  a.dim = 1;
  add("concat_middle", OpKind::concat, a, {f({2, 3, 4}), f({2, 1, 4}), f({2, 0, 4}), f({2, 5, 4})});
  a.dim = 0;
  add("concat_outer", OpKind::concat, a, {f({2, 3}), f({4, 3})});
  a.dim = -1;
  add("concat_last_i64", OpKind::concat, a, {of(DType::i64, {3, 2}), of(DType::i64, {3, 5}), of(DType::i64, {3, 1})});

  a = axes({0, 2});
  a.starts[0] = 1, a.ends[0] = 4, a.steps[0] = 2;
  a.starts[1] = -1, a.ends[1] = -100, a.steps[1] = -2;  // reversed, end clamps to before the start
  add("slice_stepped_reversed", OpKind::slice, a, {f({5, 6, 7})});
  a = axes({-1});
  a.starts[0] = -3, a.ends[0] = int64_t{1} << 40, a.steps[0] = 1;  // "to the end"
  add("slice_tail_i64", OpKind::slice, a, {of(DType::i64, {4, 6})});
  a = axes({0});
  a.starts[0] = 1, a.ends[0] = 3, a.steps[0] = 1;
  add("slice_contiguous", OpKind::slice, a, {f({4, 6})});

  a = {};
  a.dim = 1;  // indices over [-6, 5] of a dim of 5: -6 and 5 are out of range and give zeros
  add("gather_i64_middle", OpKind::gather, a, {f({4, 5, 3}), of(DType::i64, {2, 3})}).ids = {{-6, 5}};
  a.dim = 0;
  add("gather_i32_rows_of_i64", OpKind::gather, a, {of(DType::i64, {6, 4}), of(DType::i32, {7})}).ids = {{-7, 6}};
  a.dim = -1;
  add("gather_scalar_index", OpKind::gather, a, {f({3, 8}), of(DType::i64, Shape{})}).ids = {{-2, -2}};

  a = {};
  a.shape = Shape{2, 3, 4};
  add("expand_f32", OpKind::expand, a, {f({3, 1})});
  a.shape = Shape{1, 4};
  a.like_dims[0] = 0;
  add("expand_like_i64", OpKind::expand, a, {of(DType::i64, {1, 4}), f({6, 2})});

  // -- pad: each mode, negative pads crop ----------------------------------------------------------
  a = {};
  a.num_pads = 6;  // begins {0, 1, 2}, ends {1, 0, -1}
  a.pads[1] = 1, a.pads[2] = 2, a.pads[3] = 1, a.pads[5] = -1;
  a.alpha = 0.5f;
  add("pad_constant_crop", OpKind::pad, a, {f({2, 3, 4})});
  a = {};
  a.num_pads = 8, a.fn = static_cast<uint8_t>(PadMode::reflect);
  a.pads[2] = 2, a.pads[3] = 3, a.pads[6] = 1, a.pads[7] = 2;
  add("pad_reflect", OpKind::pad, a, {f({1, 2, 5, 6})});
  a = {};
  a.num_pads = 4, a.fn = static_cast<uint8_t>(PadMode::edge);
  a.pads[0] = 2, a.pads[1] = 1, a.pads[2] = 0, a.pads[3] = 3;
  add("pad_edge", OpKind::pad, a, {f({3, 4})});
  a = {};
  a.num_pads = 4, a.alpha = 7.f;  // not float32: zero-filled
  a.pads[0] = a.pads[1] = a.pads[2] = a.pads[3] = 1;
  add("pad_constant_i64", OpKind::pad, a, {of(DType::i64, {3, 4})});

  // -- resize: power-of-two ratios for nearest (ties exact in any float order), odd ones for linear
  auto resize = [&](std::string name, ResizeMode mode, ResizeCoords coords, NearestRound round, Shape in,
                    std::vector<float> scales, Shape sizes) {
    LayerAttrs r;
    r.fn = static_cast<uint8_t>(mode), r.coords = static_cast<uint8_t>(coords);
    r.nearest_round = static_cast<uint8_t>(round);
    r.num_axes = in.rank;
    for (size_t i = 0; i < scales.size(); ++i) r.scales[i] = scales[i];
    r.shape = sizes;
    add(std::move(name), OpKind::resize, r, {f(in)});
  };
  using RC = ResizeCoords;
  using NR = NearestRound;
  resize("resize_nearest_half_pixel_up", ResizeMode::nearest, RC::half_pixel, NR::round_prefer_floor, {1, 2, 3, 4},
         {1, 1, 2, 2}, {});
  resize("resize_nearest_half_pixel_down_floor_ties", ResizeMode::nearest, RC::half_pixel, NR::round_prefer_floor,
         {2, 8, 6}, {1, 0.5f, 0.5f}, {});
  resize("resize_nearest_half_pixel_down_ceil_ties", ResizeMode::nearest, RC::half_pixel, NR::round_prefer_ceil,
         {2, 8, 6}, {1, 0.5f, 0.5f}, {});
  resize("resize_nearest_asymmetric_floor", ResizeMode::nearest, RC::asymmetric, NR::floor, {1, 1, 3, 5}, {},
         {1, 1, 6, 10});
  resize("resize_nearest_asymmetric_ceil", ResizeMode::nearest, RC::asymmetric, NR::ceil, {1, 1, 3, 5}, {},
         {1, 1, 6, 10});
  resize("resize_nearest_align_corners", ResizeMode::nearest, RC::align_corners, NR::round_prefer_floor, {1, 3, 5},
         {}, {1, 5, 9});
  resize("resize_linear_half_pixel", ResizeMode::linear, RC::half_pixel, NR::round_prefer_floor, {1, 2, 5, 7}, {},
         {1, 2, 8, 3});
  resize("resize_linear_pytorch_half_pixel", ResizeMode::linear, RC::pytorch_half_pixel, NR::round_prefer_floor,
         {1, 2, 5, 7}, {}, {1, 2, 1, 11});
  resize("resize_linear_align_corners", ResizeMode::linear, RC::align_corners, NR::round_prefer_floor, {2, 4, 4},
         {1, 1.5f, 2.25f}, {});
  resize("resize_linear_asymmetric_1d", ResizeMode::linear, RC::asymmetric, NR::round_prefer_floor, {6}, {2.f}, {});

  // -- conv_transpose2d, group_norm, rms_norm ---------------------------------------------------
  a = pool(3, 2, 1);
  a.in_channels = 4, a.out_channels = 6, a.output_padding[0] = a.output_padding[1] = 1;
  add("conv_transpose2d_gemm", OpKind::conv_transpose2d, a, {f({2, 4, 5, 5})});
  a = pool(3, 1, 2);
  a.in_channels = 4, a.out_channels = 6, a.groups = 2, a.dilation[0] = a.dilation[1] = 2, a.bias = false;
  a.kernel[1] = 2, a.stride[1] = 3;
  add("conv_transpose2d_grouped_dilated", OpKind::conv_transpose2d, a, {f({2, 4, 4, 5})});

  a = {};
  a.num_groups = 3, a.num_features = 6;
  add("group_norm", OpKind::group_norm, a, {f({2, 6, 4, 4})});
  a.num_groups = 6;
  add("group_norm_instance", OpKind::group_norm, a, {f({2, 6, 5})});
  a.num_groups = 2, a.num_features = 4;
  add("group_norm_rank2", OpKind::group_norm, a, {f({3, 4})});
  a = {};
  a.num_features = 64, a.eps = 1e-6f;
  add("rms_norm", OpKind::rms_norm, a, {f({3, 7, 64})});

  // -- reduce: every function along a middle axis (thread per output) and the last (block per output)
  for (int fn = 0; fn < static_cast<int>(ReduceFn::count); ++fn) {
    const std::string name = "reduce_" + std::string(reduce_fn_name(static_cast<ReduceFn>(fn)));
    a = axes({1});
    a.fn = static_cast<uint8_t>(fn);
    OpCase& middle = add(name + "_middle", OpKind::reduce, a, {f({3, 4, 5})});
    if (static_cast<ReduceFn>(fn) == ReduceFn::prod) middle.lo = 0.5f, middle.hi = 1.5f;
    a = axes({-1, 0});
    a.fn = static_cast<uint8_t>(fn), a.keepdims = false;
    OpCase& last = add(name + "_last", OpKind::reduce, a, {f({3, 4, 70})});
    if (static_cast<ReduceFn>(fn) == ReduceFn::prod) last.lo = 0.9f, last.hi = 1.1f;
  }
  a = {};
  a.fn = static_cast<uint8_t>(ReduceFn::mean);
  add("reduce_mean_all", OpKind::reduce, a, {f({4, 5, 6})});
  a.fn = static_cast<uint8_t>(ReduceFn::sum_square), a.noop_with_empty_axes = true;
  add("reduce_sum_square_noop", OpKind::reduce, a, {f({4, 5})});

  // -- cast: the pairs of the half-precision path, and every edge the contract names -------------
  const std::vector<float> to_int = {NAN,  kInf, -kInf, 0.5f, -0.5f, 2.7f,   -2.7f, 1e20f,
                                     -1e20f, 3e9f, -3e9f, 255.5f, 256.f, -1.f,  127.9f, 0.f};
  const std::vector<float> to_half = {kInf,  -kInf, 65504.f, 65519.f, 65520.f, 1e-8f, 6e-8f, -3.14159265f,
                                      1.00048828125f, 1.00146484375f, 3e38f, -1e-40f, 0.f, -0.f, 1.f / 3.f, 7.f};
  auto cast = [&](DType from, DType to, Shape s) -> OpCase& {
    LayerAttrs c;
    c.to = to;
    return add("cast_" + std::string(dtype_name(from)) + "_to_" + std::string(dtype_name(to)), OpKind::cast, c,
               {of(from, s)});
  };
  for (DType to : {DType::i64, DType::i32, DType::u8}) {
    cast(DType::f32, to, {16}).given = {raw(to_int)};
  }
  for (DType to : {DType::f16, DType::bf16}) {
    cast(DType::f32, to, {16}).given = {raw(to_half)};
    OpCase& wide = cast(DType::f32, to, {3, 40});  // past float16's range too
    wide.name += "_wide", wide.lo = -70000.f, wide.hi = 70000.f;
  }
  const std::pair<DType, DType> pairs[] = {
      {DType::f16, DType::f32}, {DType::bf16, DType::f32}, {DType::f16, DType::bf16}, {DType::bf16, DType::f16},
      {DType::f16, DType::i32}, {DType::bf16, DType::u8},  {DType::i64, DType::f32},  {DType::i32, DType::i64},
      {DType::u8, DType::f32},  {DType::i64, DType::i32},  {DType::i64, DType::f16},  {DType::f32, DType::f32}};
  for (const auto& [from, to] : pairs) cast(from, to, {5, 13});

  // -- argmax and topk: continuous values, and halves whose ties pick by index --------------------
  a = {};
  a.dim = 1;
  add("argmax_middle", OpKind::argmax, a, {f({3, 5, 4})});
  a.dim = -1, a.fn = 1, a.keepdims = false;
  add("argmin_last", OpKind::argmax, a, {f({6, 9})});
  a.fn = 0;
  add("argmax_ties_first", OpKind::argmax, a, {f({6, 9})}).halves = true;
  a.select_last_index = true;
  add("argmax_ties_last", OpKind::argmax, a, {f({6, 9})}).halves = true;
  a.fn = 1;
  add("argmin_ties_last", OpKind::argmax, a, {f({6, 9})}).halves = true;

  a = {};
  a.k = 5, a.dim = -1;
  add("topk_values", OpKind::topk, a, {f({3, 300})});
  a.values_output = false;
  add("topk_indices", OpKind::topk, a, {f({3, 300})});
  a.dim = 0, a.k = 3, a.largest = false;
  add("topk_smallest_indices_dim0", OpKind::topk, a, {f({10, 3, 2})});
  a.dim = 1, a.k = 7;
  add("topk_smallest_ties", OpKind::topk, a, {f({4, 9})}).halves = true;
  a.largest = true, a.values_output = true;
  add("topk_ties_values", OpKind::topk, a, {f({4, 9})}).halves = true;

  // -- the coarse ops' new paths -----------------------------------------------------------------
  a = pool(3, 2, 0);
  a.ceil_mode = true;
  add("max_pool2d_ceil", OpKind::max_pool2d, a, {f({1, 2, 8, 8})});
  a = pool(3, 1, 2);
  a.dilation[0] = a.dilation[1] = 2;
  add("max_pool2d_dilated", OpKind::max_pool2d, a, {f({2, 3, 9, 9})});
  a = pool(3, 2, 1);
  a.ceil_mode = true;  // the last window is clipped at in + pad: a smaller divisor
  add("avg_pool2d_ceil", OpKind::avg_pool2d, a, {f({1, 2, 8, 8})});
  a.count_include_pad = false;
  add("avg_pool2d_ceil_exclude_pad", OpKind::avg_pool2d, a, {f({1, 2, 8, 8})});
  a = pool(2, 2, 1);
  a.count_include_pad = false;
  add("avg_pool2d_exclude_pad", OpKind::avg_pool2d, a, {f({2, 3, 7, 6})});

  a = {};
  a.dim = -1, a.log = true;
  add("log_softmax_last", OpKind::softmax, a, {f({4, 517})});
  a.dim = 1;
  add("log_softmax_middle", OpKind::softmax, a, {f({2, 5, 3})});

  // Masks: batch 1 pads its last three keys, batch 2 all of them (its probabilities are all 0).
  a = {};
  a.embed_dim = 16, a.num_heads = 4;
  add("attention_mask_u8", OpKind::attention, a, {f({3, 5, 16}), of(DType::u8, {3, 5})}).given = {
      {}, {1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0}};
  // With causal: batch 1's first query may see only key 0, which is padded.
  a = {};
  a.embed_dim = 8, a.num_heads = 2, a.causal = true;
  add("attention_mask_i64_causal", OpKind::attention, a, {f({2, 4, 8}), of(DType::i64, {2, 4})}).given = {
      {}, raw(std::vector<int64_t>{1, 1, 1, 0, 0, 1, 1, 1})};
  // 32 slices along heads (two batches of 16); a float mask whose -0.0 pads too.
  a = {};
  a.embed_dim = 64, a.num_heads = 32;
  add("attention_mask_f32_many_heads", OpKind::attention, a, {f({2, 6, 64}), f({2, 6})}).given = {
      {}, raw(std::vector<float>{1.f, 0.5f, -0.f, 0.f, 2.f, 1.f, 0.f, 1.f, 1.f, 1.f, -0.f, 1.f})};
}

}  // namespace ember::gpu::cuda_plugin_test
