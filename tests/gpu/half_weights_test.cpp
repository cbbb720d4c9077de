// Half-precision weights on SimDevice: a model converted to float16 or bfloat16 (model/convert.hpp)
// answers like its float32 original within the width's rounding, its device copy and every swap-in
// moving half the bytes.
#include <gtest/gtest.h>

#include <cmath>

#include "gpu/executor.hpp"
#include "model/convert.hpp"
#include "tests/gpu/test_util.hpp"
#include "tests/model/model_test_util.hpp"

namespace ember::gpu {
namespace half_weights_test {

using testing::TempDir;

// max |a - b| / max |b| over every output.
double relative_error(const std::vector<HostTensor>& a, const std::vector<HostTensor>& b) {
  double err = 0, scale = 0;
  for (size_t o = 0; o < b.size(); ++o) {
    for (int64_t i = 0; i < b[o].desc.shape.numel(); ++i) {
      scale = std::max(scale, static_cast<double>(std::fabs(b[o].as<float>()[i])));
      err = std::max(err, static_cast<double>(std::fabs(a[o].as<float>()[i] - b[o].as<float>()[i])));
    }
  }
  return err / std::max(scale, 1e-12);
}

class HalfWeights : public ::testing::TestWithParam<std::string> {};

TEST_P(HalfWeights, AnswerLikeFloat32WithinTheirRoundingAndSwapInHalfTheBytes) {
  TempDir dir;
  const std::string arch = GetParam();
  auto f32 = testing::tiny_model(arch, dir / "f32");
  auto device = testing::sim_device();
  auto inputs = testing::arch_inputs(*f32, 2, 8, 3);
  auto ex = LayerExecutor::create(*device, f32, {0, f32->num_layers()});
  ASSERT_TRUE(ex.ok()) << ex.error().message();
  auto want = (*ex)->run_host(inputs);
  ASSERT_TRUE(want.ok()) << want.error().message();
  // float16 keeps 11 bits of mantissa, bfloat16 8: a weight's rounding is 2^-11 or 2^-8 of it, and
  // the tiny models' few layers add a few of those up.
  for (auto [width, tolerance] : {std::pair{DType::f16, 5e-3}, std::pair{DType::bf16, 4e-2}}) {
    const std::string out = dir / std::string(dtype_name(width));
    ASSERT_TRUE(convert_model_dir(dir / "f32", out, width).ok());
    auto half = testing::must(Model::load(out), "loading");
    EXPECT_EQ(half->range_bytes({0, half->num_layers()}).length * 2, f32->range_bytes({0, f32->num_layers()}).length);
    const auto before = device->copy_counts();
    auto swapped = LayerExecutor::swap_in(*device, half, {0, half->num_layers()}, SwapInOptions{});
    ASSERT_TRUE(swapped.ok()) << swapped.error().message();
    auto got = (*swapped)->run_host(inputs);
    ASSERT_TRUE(got.ok()) << got.error().message();
    const auto after = device->copy_counts();
    EXPECT_LE(after.to_device_bytes - before.to_device_bytes,
              half->data_bytes() + 1024 * 1024)  // the weights at half width, plus the inputs
        << dtype_name(width);
    EXPECT_LT(relative_error(*got, *want), tolerance) << arch << " " << dtype_name(width);
    EXPECT_GT(relative_error(*got, *want), 0) << "the weights were rounded";
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, HalfWeights, ::testing::Values("mlp", "resnet50", "bert-base", "gpt2"));

}  // namespace half_weights_test
}  // namespace ember::gpu
