// Conformance of the general data-movement ops on SimDevice (transpose, concat, slice, gather,
// expand, pad) and resize: each runs as a one-layer model and is compared with numpy's definition
// written here as a naive loop (negative axes, starts and steps; out-of-range indices; every pad
// mode; several dtypes, moved by element size), and resize with values worked out by hand from ONNX
// Resize's formulas and the outputs of ONNX's own node tests. Exact, except resize (1e-5 relative).
#include <gtest/gtest.h>

#include <limits>

#include "tests/gpu/ops_general_test_util.hpp"

namespace ember::gpu {
namespace ops_general_shape_test {

using namespace testing;

double element(const HostTensor& t, int64_t i) {
  switch (t.desc.dtype) {
    case DType::f32: return t.as<float>()[i];
    case DType::i64: return static_cast<double>(t.as<int64_t>()[i]);
    case DType::i32: return t.as<int32_t>()[i];
    default: return t.as<uint8_t>()[i];
  }
}

TEST(OpsGeneral, TransposeAnyDtype) {
  TempDir dir;
  for (DType dt : {DType::f32, DType::i64, DType::u8, DType::f16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const Shape xs{2, 3, 1, 4};
    HostTensor x = randi(dt == DType::f16 ? DType::i32 : dt, xs, 1, 0, 100);  // any bytes do for f16
    x.desc.dtype = dt;
    if (dt == DType::f16) x.desc.shape = Shape{2, 3, 1, 8};
    const Shape s = x.desc.shape;
    LayerRun r;
    ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::transpose, attrs_of(OpKind::transpose, {{"perm", {3, 0, 2, 1}}}), {x}));
    ASSERT_EQ(r.out.desc.shape, (Shape{s[3], s[0], s[2], s[1]}));
    const uint32_t e = dtype_size(dt);
    for (int64_t i = 0; i < s[3]; ++i)
      for (int64_t b = 0; b < s[0]; ++b)
        for (int64_t c = 0; c < s[1]; ++c) {
          const int64_t o = (i * s[0] + b) * s[1] + c, in = (b * s[1] + c) * s[3] + i;
          EXPECT_EQ(std::memcmp(r.out.data() + o * e, x.data() + in * e, e), 0) << o;
        }
  }
}

TEST(OpsGeneral, ConcatAlongAnyDim) {
  TempDir dir;
  // float32 along dim 1 (and with an input empty along it, the kernel alone); int64 along dim -1.
  std::vector<HostTensor> in = {randf(Shape{2, 3, 4}, 1), randf(Shape{2, 2, 4}, 2), randf(Shape{2, 5, 4}, 3)};
  LayerRun r;
  ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::concat, attrs_of(OpKind::concat, {{"dim", 1}}), in));
  std::vector<float> want;
  for (int b = 0; b < 2; ++b)
    for (const HostTensor& t : in)
      for (int64_t i = 0; i < t.desc.shape[1] * 4; ++i) want.push_back(t.as<float>()[b * t.desc.shape[1] * 4 + i]);
  expect_close(r.out, want, 0);
  in.insert(in.begin() + 1, randf(Shape{2, 0, 4}, 4));
  expect_close(run_kernel(OpKind::concat, attrs_of(OpKind::concat, {{"dim", 1}}), in), want, 0);

  std::vector<HostTensor> ids = {randi(DType::i64, Shape{3, 2}, 4, -50, 50), randi(DType::i64, Shape{3, 1}, 5, -50, 50)};
  ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::concat, attrs_of(OpKind::concat, {{"dim", -1}}), ids));
  std::vector<int64_t> want_ids;
  for (int b = 0; b < 3; ++b) {
    want_ids.push_back(ids[0].as<int64_t>()[b * 2]);
    want_ids.push_back(ids[0].as<int64_t>()[b * 2 + 1]);
    want_ids.push_back(ids[1].as<int64_t>()[b]);
  }
  expect_equal(r.out, want_ids);
}

TEST(OpsGeneral, SliceNegativeBoundsAndSteps) {
  TempDir dir;
  struct Case {
    nlohmann::json attrs;
    std::vector<std::vector<int64_t>> picks;  // per dim of x [5, 6], the indices numpy picks
  };
  const int64_t big = std::numeric_limits<int64_t>::max();
  const Case cases[] = {
      {{{"axes", {0, 1}}, {"starts", {1, -1}}, {"ends", {big, -7}}, {"steps", {2, -2}}}, {{1, 3}, {5, 3, 1}}},
      {{{"axes", {-1}}, {"starts", {-100}}, {"ends", {3}}}, {{0, 1, 2, 3, 4}, {0, 1, 2}}},
      {{{"axes", {0}}, {"starts", {-1}}, {"ends", {-big}}, {"steps", {-1}}}, {{4, 3, 2, 1, 0}, {0, 1, 2, 3, 4, 5}}},
      {{{"axes", {1}}, {"starts", {4}}, {"ends", {2}}}, {{0, 1, 2, 3, 4}, {}}},  // empty
  };
  for (DType dt : {DType::f32, DType::i64}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.attrs.dump() + " " + std::string(dtype_name(dt)));
      HostTensor x = randi(dt, Shape{5, 6}, 1, -99, 99);
      LayerRun r;
      if (c.picks[1].empty()) r.out = run_kernel(OpKind::slice, attrs_of(OpKind::slice, c.attrs), {x});
      else ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::slice, attrs_of(OpKind::slice, c.attrs), {x}));
      ASSERT_EQ(r.out.desc.shape, (Shape{static_cast<int64_t>(c.picks[0].size()), static_cast<int64_t>(c.picks[1].size())}));
      int64_t o = 0;
      for (int64_t i : c.picks[0])
        for (int64_t j : c.picks[1]) EXPECT_EQ(element(r.out, o++), element(x, i * 6 + j));
    }
  }
}

TEST(OpsGeneral, GatherWrapsNegativeAndZeroesOutOfRange) {
  TempDir dir;
  const Shape xs{4, 3};
  HostTensor x = randf(xs, 1);
  // dim 0, int64 indices [2, 2] with -1 (wraps to 3) and 5 (outside: zeros).
  LayerRun r;
  ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::gather, attrs_of(OpKind::gather, {{"dim", 0}}),
                                    {x, tensor<int64_t>(DType::i64, Shape{2, 2}, {-1, 0, 5, 2})}));
  ASSERT_EQ(r.out.desc.shape, (Shape{2, 2, 3}));
  std::vector<float> want;
  for (int64_t idx : {3, 0, -1, 2})
    for (int j = 0; j < 3; ++j) want.push_back(idx < 0 ? 0.f : x.as<float>()[idx * 3 + j]);
  expect_close(r.out, want, 0);
  // dim -1 with a scalar int32 index drops the dim; int64 data.
  HostTensor ids = randi(DType::i64, xs, 2, -1000, 1000);
  ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::gather, attrs_of(OpKind::gather, {{"dim", -1}}),
                                    {ids, tensor<int32_t>(DType::i32, Shape{}, {-2})}));
  ASSERT_EQ(r.out.desc.shape, (Shape{4}));
  std::vector<int64_t> want_ids;
  for (int i = 0; i < 4; ++i) want_ids.push_back(ids.as<int64_t>()[i * 3 + 1]);
  expect_equal(r.out, want_ids);
}

TEST(OpsGeneral, ExpandBroadcastsAndTakesDimsFromALikeInput) {
  TempDir dir;
  HostTensor x = randf(Shape{3, 1}, 1);
  LayerRun r;
  ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::expand, attrs_of(OpKind::expand, {{"shape", {2, 1, 4}}}), {x}));
  ASSERT_EQ(r.out.desc.shape, (Shape{2, 3, 4}));
  std::vector<float> want;
  for (int64_t o = 0; o < 24; ++o) want.push_back(x.as<float>()[broadcast_index(Shape{2, 3, 4}, x.desc.shape, o)]);
  expect_close(r.out, want, 0);
  // The first dim from dim 1 of a second input.
  HostTensor ids = randi(DType::i64, Shape{1}, 2, 0, 9);
  ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::expand,
                                    attrs_of(OpKind::expand, {{"shape", {1, 2}}, {"like_dims", {1, -1}}}),
                                    {ids, randf(Shape{7, 5}, 3)}));
  ASSERT_EQ(r.out.desc.shape, (Shape{5, 2}));
  expect_equal(r.out, std::vector<int64_t>(10, ids.as<int64_t>()[0]));
}

TEST(OpsGeneral, PadModes) {
  TempDir dir;
  const Shape xs{2, 3, 4};
  // numpy's pad: begin/end per dim; negative crops.
  auto source = [](int64_t i, int64_t n, const std::string& mode) -> int64_t {
    if (i >= 0 && i < n) return i;
    if (mode == "constant") return -1;
    if (mode == "edge") return i < 0 ? 0 : n - 1;
    return i < 0 ? -i : 2 * (n - 1) - i;  // reflect, pads below n
  };
  const std::vector<int64_t> pads[] = {{0, 1, 2, 1, 2, 3}, {1, 0, -1, 0, 2, 2}};
  for (const char* m : {"constant", "reflect", "edge"}) {
    const std::string mode = m;
    for (const auto& p : pads) {
      SCOPED_TRACE(mode + " " + nlohmann::json(p).dump());
      HostTensor x = randf(xs, 1);
      LayerRun r;
      ASSERT_NO_FATAL_FAILURE(run_layer(
          r, dir, OpKind::pad, attrs_of(OpKind::pad, {{"pads", p}, {"mode", mode}, {"value", 1.5}}), {x}));
      const Shape& ys = r.out.desc.shape;
      std::vector<float> want;
      for (int64_t i = 0; i < ys[0]; ++i)
        for (int64_t j = 0; j < ys[1]; ++j)
          for (int64_t k = 0; k < ys[2]; ++k) {
            const int64_t a = source(i - p[0], 2, mode), b = source(j - p[1], 3, mode), c = source(k - p[2], 4, mode);
            want.push_back(a < 0 || b < 0 || c < 0 ? 1.5f : x.as<float>()[(a * 3 + b) * 4 + c]);
          }
      expect_close(r.out, want, 0);
    }
  }
  // Constant padding of int64 fills zeros.
  LayerRun r;
  ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::pad, attrs_of(OpKind::pad, {{"pads", {1, 1}}, {"value", 1.5}}),
                                    {tensor<int64_t>(DType::i64, Shape{2}, {7, -8})}));
  expect_equal<int64_t>(r.out, {0, 7, -8, 0});
}

struct ResizeCase {
  const char* what;
  nlohmann::json attrs;
  Shape in;
  std::vector<float> want;  // ONNX's node test output (values of 1..n in, row-major)
};

// ONNX's backend node tests of Resize (onnx/backend/test/case/node/resize.py), inputs 1..n.
TEST(OpsGeneral, ResizeMatchesOnnxNodeTests) {
  TempDir dir;
  const ResizeCase cases[] = {
      {"upsample_scales_nearest", {{"mode", "nearest"}, {"scales", {1, 1, 2, 3}}}, Shape{1, 1, 2, 2},
       {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}},
      {"downsample_scales_nearest", {{"mode", "nearest"}, {"scales", {1, 1, 0.6, 0.6}}}, Shape{1, 1, 2, 4}, {1, 3}},
      {"upsample_scales_linear", {{"mode", "linear"}, {"scales", {1, 1, 2, 2}}}, Shape{1, 1, 2, 2},
       {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4}},
      {"upsample_scales_linear_align_corners",
       {{"mode", "linear"}, {"scales", {1, 1, 2, 2}}, {"coordinate_transformation_mode", "align_corners"}},
       Shape{1, 1, 2, 2},
       {1, 4.f / 3, 5.f / 3, 2, 5.f / 3, 2, 7.f / 3, 8.f / 3, 7.f / 3, 8.f / 3, 3, 10.f / 3, 3, 10.f / 3, 11.f / 3, 4}},
      {"downsample_scales_linear", {{"mode", "linear"}, {"scales", {1, 1, 0.6, 0.6}}}, Shape{1, 1, 2, 4},
       {8.f / 3, 13.f / 3}},
      {"downsample_scales_linear_align_corners",
       {{"mode", "linear"}, {"scales", {1, 1, 0.6, 0.6}}, {"coordinate_transformation_mode", "align_corners"}},
       Shape{1, 1, 2, 4}, {1, 3.142857143f}},
      {"downsample_sizes_linear_pytorch_half_pixel",
       {{"mode", "linear"}, {"sizes", {1, 1, 3, 1}}, {"coordinate_transformation_mode", "pytorch_half_pixel"}},
       Shape{1, 1, 4, 4}, {5.f / 3, 7, 37.f / 3}},
  };
  for (const ResizeCase& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<float> x(static_cast<size_t>(c.in.numel()));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
    LayerRun r;
    ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::resize, attrs_of(OpKind::resize, c.attrs), {floats(c.in, x)}));
    expect_close(r.out, c.want);
  }
}

// The 8x8 nearest upsamplings of 1..16 in 4x4: the input row (and column) each output index reads.
TEST(OpsGeneral, ResizeNearestRoundingModes) {
  TempDir dir;
  struct Case {
    const char* coords;
    const char* round;
    std::vector<int> src;
  };
  const Case cases[] = {
      {"half_pixel", "ceil", {0, 1, 1, 2, 2, 3, 3, 3}},             // ONNX: upsample_sizes_nearest_ceil_half_pixel
      {"align_corners", "floor", {0, 0, 0, 1, 1, 2, 2, 3}},         // ..._floor_align_corners
      {"asymmetric", "round_prefer_ceil", {0, 1, 1, 2, 2, 3, 3, 3}},  // ..._round_prefer_ceil_asymmetric
      {"asymmetric", "round_prefer_floor", {0, 0, 1, 1, 2, 2, 3, 3}},
  };
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i + 1);
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.coords) + " " + c.round);
    LayerRun r;
    ASSERT_NO_FATAL_FAILURE(run_layer(
        r, dir, OpKind::resize,
        attrs_of(OpKind::resize, {{"mode", "nearest"}, {"sizes", {1, 1, 8, 8}}, {"coordinate_transformation_mode", c.coords},
                                  {"nearest_mode", c.round}}),
        {floats(Shape{1, 1, 4, 4}, x)}));
    std::vector<float> want;
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 8; ++j) want.push_back(x[static_cast<size_t>(c.src[i] * 4 + c.src[j])]);
    expect_close(r.out, want, 0);
  }
}

// Planes of a rank-3 input and a rank-1 one resample independently, linear, half_pixel.
TEST(OpsGeneral, ResizeLinearOverPlanesAndOneDim) {
  TempDir dir;
  HostTensor x = randf(Shape{3, 2, 3}, 1);
  LayerRun r;
  ASSERT_NO_FATAL_FAILURE(
      run_layer(r, dir, OpKind::resize, attrs_of(OpKind::resize, {{"mode", "linear"}, {"sizes", {3, 4, 3}}}), {x}));
  // Rows 2 -> 4 at scale 2: sources -0.25, 0.25, 0.75, 1.25 -> rows (0), (0, 1 at 0.25), (0, 1 at 0.75), (1).
  const float t[] = {0, 0.25f, 0.75f, 1};
  std::vector<float> want;
  for (int p = 0; p < 3; ++p)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 3; ++j) {
        const float* c = x.as<float>() + p * 6 + j;
        want.push_back((1 - t[i]) * c[0] + t[i] * c[3]);
      }
  expect_close(r.out, want);
  ASSERT_NO_FATAL_FAILURE(run_layer(r, dir, OpKind::resize, attrs_of(OpKind::resize, {{"mode", "linear"}, {"scales", {2}}}),
                                    {floats(Shape{2}, {1, 3})}));
  expect_close(r.out, {1, 1.5, 2.5, 3});
}

}  // namespace ops_general_shape_test
}  // namespace ember::gpu
