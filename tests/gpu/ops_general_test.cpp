// Conformance of the general elementwise ops on SimDevice (unary, binary, where, constant, matmul,
// cast): each runs as a one-layer model and is compared with a naive loop written here from numpy's
// definition (broadcasting: scalars, rank mismatch, dims of 1 on both sides, an empty dim; every
// function; several dtypes), and cast with the compiler's own float16 (_Float16) and known
// bfloat16 bit patterns. Data movement: ops_general_shape_test.cpp. Tolerance: 1e-5 relative
// to the largest output for float results, exact for everything that only moves or compares.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <limits>

#include "tests/gpu/ops_general_test_util.hpp"

namespace ember::gpu {
namespace ops_general_test {

using namespace testing;

// Broadcasting cases: equal shapes, a scalar either side, rank mismatch, ones on both sides.
const std::pair<Shape, Shape> kBroadcastCases[] = {
    {Shape{2, 3, 5}, Shape{2, 3, 5}}, {Shape{2, 3, 5}, Shape{}},     {Shape{}, Shape{3, 5}},
    {Shape{5}, Shape{2, 3, 5}},       {Shape{2, 1, 5}, Shape{3, 1}}, {Shape{1, 3, 1}, Shape{2, 1, 4}},
    {Shape{64, 1024}, Shape{1024}}};  // past the parallel threshold

TEST(OpsGeneral, UnaryEveryFunction) {
  TempDir dir;
  for (int f = 0; f < static_cast<int>(UnaryFn::not_); ++f) {
    const auto fn = static_cast<UnaryFn>(f);
    SCOPED_TRACE(std::string(unary_fn_name(fn)));
    nlohmann::json j = {{"fn", unary_fn_name(fn)}};
    if (fn == UnaryFn::clip) j["alpha"] = -0.5, j["beta"] = 0.7;
    if (fn == UnaryFn::celu) j["alpha"] = 1.5;
    const LayerAttrs a = attrs_of(OpKind::unary, j);
    const bool positive = fn == UnaryFn::log || fn == UnaryFn::sqrt || fn == UnaryFn::reciprocal;
    HostTensor x = positive ? randf(Shape{5, 7001}, 7, 0.1f, 3.f) : randf(Shape{5, 7001}, 7, -3.f, 3.f);
    if (fn == UnaryFn::round || fn == UnaryFn::floor || fn == UnaryFn::ceil || fn == UnaryFn::sign) {
      const float edges[] = {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 0.f, -1.f, 2.f};  // halves round to even
      std::memcpy(x.data(), edges, sizeof(edges));
    }
    LayerRun r;
    ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::unary, a, {x}));
    auto ref = [&](double v) -> double {
      const double sig = 1 / (1 + std::exp(-v));
      switch (fn) {
        case UnaryFn::sigmoid: return sig;
        case UnaryFn::silu: return v * sig;
        case UnaryFn::hard_sigmoid: return std::max(0.0, std::min(1.0, 0.2 * v + 0.5));
        case UnaryFn::hard_swish: return v * std::max(0.0, std::min(1.0, v / 6 + 0.5));
        case UnaryFn::clip: return std::min(std::max(v, -0.5), 0.7);
        case UnaryFn::exp: return std::exp(v);
        case UnaryFn::log: return std::log(v);
        case UnaryFn::sqrt: return std::sqrt(v);
        case UnaryFn::reciprocal: return 1 / v;
        case UnaryFn::erf: return std::erf(v);
        case UnaryFn::neg: return -v;
        case UnaryFn::abs: return std::abs(v);
        case UnaryFn::leaky_relu: return v >= 0 ? v : 0.01 * v;
        case UnaryFn::elu: return v > 0 ? v : std::exp(v) - 1;
        case UnaryFn::celu: return std::max(0.0, v) + std::min(0.0, 1.5 * (std::exp(v / 1.5) - 1));
        case UnaryFn::selu: return 1.0507009873554805 * (v > 0 ? v : 1.6732632423543772 * (std::exp(v) - 1));
        case UnaryFn::softplus: return std::log(1 + std::exp(v));
        case UnaryFn::softsign: return v / (1 + std::abs(v));
        case UnaryFn::sin: return std::sin(v);
        case UnaryFn::cos: return std::cos(v);
        case UnaryFn::floor: return std::floor(v);
        case UnaryFn::ceil: return std::ceil(v);
        case UnaryFn::round: return std::nearbyint(v);
        case UnaryFn::sign: return v > 0 ? 1 : v < 0 ? -1 : 0;
        default: return 0;
      }
    };
    std::vector<float> want;
    for (float v : values<float>(x)) want.push_back(static_cast<float>(ref(v)));
    expect_close(r.out, want);
  }
  // not: uint8 0/1.
  LayerRun r;
  ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::unary, attrs_of(OpKind::unary, {{"fn", "not"}}),
                                    {tensor<uint8_t>(DType::u8, Shape{4}, {0, 1, 1, 0})}));
  expect_equal<uint8_t>(r.out, {1, 0, 0, 1});
}

// The reference of one BinaryFn on doubles (comparisons and logic give 0/1).
double binary_ref(BinaryFn fn, double a, double b) {
  switch (fn) {
    case BinaryFn::add: return static_cast<float>(a) + static_cast<float>(b);
    case BinaryFn::sub: return static_cast<float>(a) - static_cast<float>(b);
    case BinaryFn::mul: return static_cast<float>(a) * static_cast<float>(b);
    case BinaryFn::div: return static_cast<float>(a) / static_cast<float>(b);
    case BinaryFn::pow: return std::pow(a, b);
    case BinaryFn::min: return std::min(a, b);
    case BinaryFn::max: return std::max(a, b);
    case BinaryFn::mod: return std::fmod(a, b);
    case BinaryFn::equal: return a == b;
    case BinaryFn::less: return a < b;
    case BinaryFn::greater: return a > b;
    case BinaryFn::less_equal: return a <= b;
    case BinaryFn::greater_equal: return a >= b;
    case BinaryFn::and_: return a != 0 && b != 0;
    case BinaryFn::or_: return a != 0 || b != 0;
    case BinaryFn::xor_: return (a != 0) != (b != 0);
    default: return 0;
  }
}

double element(const HostTensor& t, int64_t i) {
  switch (t.desc.dtype) {
    case DType::f32: return t.as<float>()[i];
    case DType::i64: return static_cast<double>(t.as<int64_t>()[i]);
    case DType::i32: return t.as<int32_t>()[i];
    default: return t.as<uint8_t>()[i];
  }
}

TEST(OpsGeneral, BinaryEveryFunctionBroadcasts) {
  TempDir dir;
  for (int f = 0; f < static_cast<int>(BinaryFn::count); ++f) {
    const auto fn = static_cast<BinaryFn>(f);
    const bool compare = fn >= BinaryFn::equal && fn <= BinaryFn::greater_equal, logic = fn >= BinaryFn::and_;
    std::vector<DType> types = {logic ? DType::u8 : DType::f32};
    if (compare) types = {DType::f32, DType::i64, DType::i32};
    for (DType dt : types) {
      int seed = 0;
      for (const auto& [sa, sb] : kBroadcastCases) {
        SCOPED_TRACE(std::string(binary_fn_name(fn)) + " " + std::string(dtype_name(dt)) + " " + sa.to_string() + " " +
                     sb.to_string());
        HostTensor a = randf(sa, ++seed), b = randf(sb, ++seed);
        if (compare || logic) a = randi(dt, sa, ++seed, 0, logic ? 1 : 2), b = randi(dt, sb, ++seed, 0, logic ? 1 : 2);
        if (fn == BinaryFn::pow) a = randf(sa, ++seed, 0.5f, 2.f);
        if (fn == BinaryFn::div || fn == BinaryFn::mod) {
          b = randf(sb, ++seed, 0.5f, 2.f);
          for (int64_t i = 0; i < sb.numel(); i += 2) b.as<float>()[i] = -b.as<float>()[i];
        }
        LayerRun r;
        ASSERT_NO_FATAL_FAILURE(
            run_layer(r, dir, OpKind::binary, attrs_of(OpKind::binary, {{"fn", binary_fn_name(fn)}}), {a, b}));
        const Shape& ys = r.out.desc.shape;
        if (compare || logic) {
          std::vector<uint8_t> want;
          for (int64_t o = 0; o < ys.numel(); ++o) {
            want.push_back(static_cast<uint8_t>(binary_ref(fn, element(a, broadcast_index(ys, sa, o)),
                                                           element(b, broadcast_index(ys, sb, o)))));
          }
          expect_equal(r.out, want);
        } else {
          std::vector<float> want;
          for (int64_t o = 0; o < ys.numel(); ++o) {
            want.push_back(static_cast<float>(
                binary_ref(fn, element(a, broadcast_index(ys, sa, o)), element(b, broadcast_index(ys, sb, o)))));
          }
          expect_close(r.out, want);
        }
      }
    }
  }
}

// A model cannot declare an empty input, so the kernel runs alone; and an empty value inside a model
// (sliced to nothing, then joined) runs through the executor.
TEST(OpsGeneral, EmptyDims) {
  const HostTensor y = run_kernel(OpKind::binary, attrs_of(OpKind::binary, {{"fn", "add"}}),
                                  {floats(Shape{2, 0, 3}, {}), floats(Shape{1, 3}, {1, 2, 3})});
  EXPECT_EQ(y.desc.shape, (Shape{2, 0, 3}));
  TempDir dir;
  ModelBuilder b("empty", 5);
  b.input("x", DType::f32, Shape{2, 3});
  b.add("none", OpKind::slice, attrs_of(OpKind::slice, {{"axes", {1}}, {"starts", {2}}, {"ends", {1}}}), {"x"});
  b.add("y", OpKind::concat, attrs_of(OpKind::concat, {{"dim", 1}}), {"none", "x", "none"});
  b.output("y", DType::f32, Shape{2, 3});
  HostTensor x = randf(Shape{2, 3}, 1);
  x.name = "x";
  LayerRun r;
  ASSERT_NO_FATAL_FAILURE(run_model(r, b, next_model_dir(dir), {x}));
  expect_close(r.out, values<float>(x), 0);
}

TEST(OpsGeneral, WhereAnyDtypeBroadcasts) {
  TempDir dir;
  // cond [3, 1] (nonzero is true, 2 included), a [1, 4], b a scalar.
  for (DType dt : {DType::f32, DType::i64, DType::u8}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    HostTensor cond = randi(DType::u8, Shape{3, 1}, 1, 0, 2), a = randi(dt, Shape{1, 4}, 2, 0, 100),
               b = randi(dt, Shape{}, 3, 0, 100);
    LayerRun r;
    ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::where, {}, {cond, a, b}));
    const Shape ys{3, 4};
    ASSERT_EQ(r.out.desc.shape, ys);
    for (int64_t o = 0; o < 12; ++o) {
      const double want = cond.as<uint8_t>()[o / 4] ? element(a, o % 4) : element(b, 0);
      EXPECT_EQ(element(r.out, o), want) << o;
    }
  }
  // Same shapes everywhere, large (the parallel path), int64.
  HostTensor cond = randi(DType::u8, Shape{3, 20000}, 4, 0, 1), a = randi(DType::i64, Shape{3, 20000}, 5, -9, 9),
             b = randi(DType::i64, Shape{20000}, 6, -9, 9);
  LayerRun r;
  ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::where, {}, {cond, a, b}));
  std::vector<int64_t> want;
  for (int64_t o = 0; o < 60000; ++o) want.push_back(cond.as<uint8_t>()[o] ? a.as<int64_t>()[o] : b.as<int64_t>()[o % 20000]);
  expect_equal(r.out, want);
}

// A constant has no input; a model has at least one, so the constant is added to it.
TEST(OpsGeneral, ConstantIsItsWeight) {
  TempDir dir;
  ModelBuilder b("constant", 5);
  b.input("x", DType::f32, Shape{2, 3});
  b.add("c", OpKind::constant, attrs_of(OpKind::constant, {{"dtype", "float32"}, {"shape", {2, 3}}}), {});
  b.add("y", OpKind::binary, attrs_of(OpKind::binary, {{"fn", "add"}}), {"x", "c"});
  b.output("y", DType::f32, Shape{2, 3});
  HostTensor x = randf(Shape{2, 3}, 1);
  x.name = "x";
  LayerRun r;
  ASSERT_NO_FATAL_FAILURE(run_model(r, b, next_model_dir(dir), {x}));
  std::vector<float> want;
  for (int i = 0; i < 6; ++i) want.push_back(x.as<float>()[i] + r.weight(0)[i]);
  expect_close(r.out, want, 0);
}

TEST(OpsGeneral, MatmulBatchesBroadcastAndPromotes) {
  TempDir dir;
  const std::pair<Shape, Shape> cases[] = {
      {Shape{3, 4}, Shape{4, 5}},       {Shape{2, 3, 4}, Shape{4, 5}},          // one stacked GEMM
      {Shape{2, 3, 4}, Shape{2, 4, 5}}, {Shape{2, 1, 3, 4}, Shape{5, 4, 2}},    // batch broadcast
      {Shape{3, 4}, Shape{2, 4, 5}},    {Shape{4}, Shape{4, 5}},                // 1-d a
      {Shape{2, 3, 4}, Shape{4}},       {Shape{4}, Shape{4}},                   // 1-d b, dot
      {Shape{3, 0}, Shape{0, 2}},       {Shape{0, 3, 4}, Shape{4, 2}}};         // k = 0, empty batch (alone)
  int seed = 0;
  for (const auto& [sa, sb] : cases) {
    SCOPED_TRACE(sa.to_string() + " x " + sb.to_string());
    HostTensor a = randf(sa, ++seed), b = randf(sb, ++seed);
    LayerRun r;
    if (sa.numel() && sb.numel()) ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::matmul, {}, {a, b}));
    else r.out = run_kernel(OpKind::matmul, {}, {a, b});
    // Reference on the promoted shapes: [..., m, k] x [..., k, n].
    Shape pa = sa.rank == 1 ? Shape{1, sa[0]} : sa, pb = sb.rank == 1 ? Shape{sb[0], 1} : sb;
    const int64_t m = pa[pa.rank - 2], k = pa.last(), n = pb.last();
    Shape ba = pa, bb = pb;
    ba.rank -= 2, bb.rank -= 2;
    const Shape batch = must(broadcast_shapes(ba, bb), "batch");
    std::vector<float> want;
    for (int64_t t = 0; t < batch.numel(); ++t) {
      const int64_t ia = broadcast_index(batch, ba, t), ib = broadcast_index(batch, bb, t);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t q = 0; q < k; ++q) s += a.as<float>()[(ia * m + i) * k + q] * b.as<float>()[(ib * k + q) * n + j];
          want.push_back(static_cast<float>(s));
        }
    }
    expect_close(r.out, want);
  }
}

// A tensor of `dt` holding `v` (values every dtype holds exactly, or bit patterns via the raw types).
HostTensor of_values(DType dt, const std::vector<double>& v) {
  HostTensor t = must(HostTensor::allocate("x", {dt, Shape{static_cast<int64_t>(v.size())}}), "allocating");
  for (size_t i = 0; i < v.size(); ++i) {
    switch (dt) {
      case DType::f32: t.as<float>()[i] = static_cast<float>(v[i]); break;
      case DType::f16: t.as<_Float16>()[i] = static_cast<_Float16>(v[i]); break;
      case DType::bf16: t.as<uint16_t>()[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(v[i])) >> 16); break;
      case DType::i64: t.as<int64_t>()[i] = static_cast<int64_t>(v[i]); break;
      case DType::i32: t.as<int32_t>()[i] = static_cast<int32_t>(v[i]); break;
      default: t.as<uint8_t>()[i] = static_cast<uint8_t>(v[i]); break;
    }
  }
  return t;
}

double value_at(const HostTensor& t, int64_t i) {
  switch (t.desc.dtype) {
    case DType::f16: return static_cast<double>(t.as<_Float16>()[i]);
    case DType::bf16: return std::bit_cast<float>(static_cast<uint32_t>(t.as<uint16_t>()[i]) << 16);
    default: return element(t, i);
  }
}

LayerRun cast_to(const TempDir& dir, DType to, const HostTensor& x) {
  LayerAttrs a;
  a.to = to;
  LayerRun r;
  run_layer(r, dir, OpKind::cast, a, {x});
  return r;
}

TEST(OpsGeneral, CastEveryPairOfDtypes) {
  TempDir dir;
  const std::vector<double> v = {0, 1, 2, 3, 100, 127};  // exact in every dtype
  for (int from = 0; from < static_cast<int>(DType::count); ++from) {
    for (int to = 0; to < static_cast<int>(DType::count); ++to) {
      SCOPED_TRACE(std::string(dtype_name(static_cast<DType>(from))) + " -> " + std::string(dtype_name(static_cast<DType>(to))));
      LayerRun r;
      ASSERT_NO_FATAL_FAILURE(r = cast_to(dir, static_cast<DType>(to), of_values(static_cast<DType>(from), v)));
      for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(value_at(r.out, static_cast<int64_t>(i)), v[i]);
    }
  }
}

TEST(OpsGeneral, CastHalfPrecisionRoundsToNearestEven) {
  TempDir dir;
  // float16 against the compiler's _Float16: ties, overflow to inf, subnormals, random values.
  std::vector<float> xs = {1.f, 65504.f, 65520.f, 1.f / 3, std::ldexp(1.f, -24), -2.f, 1 + std::ldexp(1.f, -11),
                           1 + 3 * std::ldexp(1.f, -11), std::ldexp(1.f, -25), 3 * std::ldexp(1.f, -25),
                           std::numeric_limits<float>::infinity()};
  std::mt19937 rng(1);
  for (int i = 0; i < 5000; ++i) xs.push_back(std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), i % 40 - 28));
  LayerRun r;
  ASSERT_NO_FATAL_FAILURE(r = cast_to(dir, DType::f16, floats(Shape{static_cast<int64_t>(xs.size())}, xs)));
  std::vector<uint16_t> want;
  for (float x : xs) want.push_back(std::bit_cast<uint16_t>(static_cast<_Float16>(x)));
  expect_equal(r.out, want);
  // Every float16 widens exactly.
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  ASSERT_NO_FATAL_FAILURE(r = cast_to(dir, DType::f32, tensor(DType::f16, Shape{65536}, all)));
  for (uint32_t i = 0; i < 65536; ++i) {
    const float want_f = static_cast<float>(std::bit_cast<_Float16>(all[i]));
    if (std::isnan(want_f)) EXPECT_TRUE(std::isnan(r.out.as<float>()[i])) << i;
    else EXPECT_EQ(std::bit_cast<uint32_t>(r.out.as<float>()[i]), std::bit_cast<uint32_t>(want_f)) << i;
  }
  // bfloat16: known bit patterns (ties to even, sign, infinity) and NaN kept a NaN.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  ASSERT_NO_FATAL_FAILURE(r = cast_to(dir, DType::bf16,
                                      floats(Shape{6}, {1.f, 1 + std::ldexp(1.f, -8), 1 + 3 * std::ldexp(1.f, -8), -2.f,
                                                        std::numeric_limits<float>::infinity(), nan})));
  expect_equal<uint16_t>(r.out, {0x3f80, 0x3f80, 0x3f82, 0xc000, 0x7f80, r.out.as<uint16_t>()[5]});
  EXPECT_GT(r.out.as<uint16_t>()[5] & 0x7fff, 0x7f80);
}

TEST(OpsGeneral, CastToIntegersTruncatesSaturatesAndWraps) {
  TempDir dir;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const HostTensor x = floats(Shape{7}, {-1.7f, 2.9f, 1e20f, -1e20f, nan, 300.f, -5.f});
  LayerRun r;
  ASSERT_NO_FATAL_FAILURE(r = cast_to(dir, DType::i64, x));
  expect_equal<int64_t>(r.out, {-1, 2, INT64_MAX, INT64_MIN, 0, 300, -5});
  ASSERT_NO_FATAL_FAILURE(r = cast_to(dir, DType::i32, x));
  expect_equal<int32_t>(r.out, {-1, 2, INT32_MAX, INT32_MIN, 0, 300, -5});
  ASSERT_NO_FATAL_FAILURE(r = cast_to(dir, DType::u8, x));
  expect_equal<uint8_t>(r.out, {0, 2, 255, 0, 0, 255, 0});
  // Integer to integer wraps (numpy's astype).
  ASSERT_NO_FATAL_FAILURE(r = cast_to(dir, DType::i32, tensor<int64_t>(DType::i64, Shape{2}, {(int64_t{1} << 32) + 5, -1})));
  expect_equal<int32_t>(r.out, {5, -1});
  ASSERT_NO_FATAL_FAILURE(r = cast_to(dir, DType::u8, tensor<int32_t>(DType::i32, Shape{2}, {-1, 256})));
  expect_equal<uint8_t>(r.out, {255, 0});
}

}  // namespace ops_general_test
}  // namespace ember::gpu
