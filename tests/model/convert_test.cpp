// model/convert.hpp: float weights rewritten at another width, everything else kept.
#include "model/convert.hpp"

#include <gtest/gtest.h>

#include "model/half.hpp"
#include "tests/model/model_test_util.hpp"

namespace ember::gpu {
namespace convert_test {

using testing::TempDir;
using testing::tiny_model;

TEST(Convert, HalfWidthsHalveEveryLayersBytesAndKeepTheirOrder) {
  TempDir dir;
  auto f32 = tiny_model("resnet50", dir / "f32");
  for (DType width : {DType::f16, DType::bf16}) {
    const std::string out = dir / std::string(dtype_name(width));
    auto stats = convert_model_dir(dir / "f32", out, width);
    ASSERT_TRUE(stats.ok()) << stats.error().message();
    auto half = Model::load(out);
    ASSERT_TRUE(half.ok()) << half.error().message();
    ASSERT_EQ((*half)->num_layers(), f32->num_layers());
    EXPECT_EQ(stats->tensors_converted, f32->weights_index().tensors.size());
    EXPECT_EQ((*half)->data_bytes() * 2, f32->data_bytes());
    for (uint32_t i = 0; i < f32->num_layers(); ++i) {
      EXPECT_EQ((*half)->layer_bytes(i).length * 2, f32->layer_bytes(i).length) << "layer " << i;
      EXPECT_EQ((*half)->layer(i).attrs.weights, f32->layer_weights(i).empty() ? DType::f32 : width) << "layer " << i;
    }
    // Values: each is the float32 rounded to nearest even.
    const TensorInfo& a = f32->weights_index().tensors.front();
    const TensorInfo* b = (*half)->weights_index().find(a.name);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->desc.dtype, width);
    for (int64_t e = 0; e < a.desc.shape.numel(); ++e) {
      const float v = reinterpret_cast<const float*>(f32->data() + a.data.offset)[e];
      const uint16_t h = reinterpret_cast<const uint16_t*>((*half)->data() + b->data.offset)[e];
      ASSERT_EQ(h, width == DType::f16 ? f32_to_f16(v) : f32_to_bf16(v)) << a.name << "[" << e << "]";
    }
    // And back: widening is exact, so float32 -> half -> float32 -> half changes nothing.
    ASSERT_TRUE(convert_model_dir(out, out + "-back", DType::f32).ok());
    ASSERT_TRUE(convert_model_dir(out + "-back", out + "-again", width).ok());
    EXPECT_EQ(testing::read_file(out + "/weights.safetensors"), testing::read_file(out + "-again/weights.safetensors"));
    EXPECT_EQ(testing::read_file(dir / "f32/model.json"), testing::read_file(out + "/model.json"));
  }
}

TEST(Convert, InPlaceReplacesTheWeightsAndDropsAStaleProfile) {
  TempDir dir;
  tiny_model("mlp", dir.path());
  testing::write_file(dir / "profile.json", "{}");
  auto stats = convert_model_dir(dir.path(), dir.path(), DType::bf16);
  ASSERT_TRUE(stats.ok()) << stats.error().message();
  EXPECT_TRUE(stats->profile_removed);
  EXPECT_FALSE(std::filesystem::exists(dir / "profile.json"));
  EXPECT_LT(stats->bytes_after, stats->bytes_before);
  auto m = Model::load(dir.path());
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m.value()->weights_index().tensors.front().desc.dtype, DType::bf16);
}

TEST(Convert, RefusesWhatItCannotWriteAndNamesTheTensor) {
  TempDir dir;
  auto m = tiny_model("mlp", dir / "m");
  auto bad = convert_model_dir(dir / "m", dir / "x", DType::i64);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("float32, float16 or bfloat16"), std::string::npos) << bad.error().message();
  EXPECT_FALSE(convert_model_dir(dir / "missing", dir / "y", DType::f16).ok());
  // A weight of 1e5 does not fit float16 (largest 65504): refused with the tensor's name.
  const std::string weights = testing::read_file(dir / "m/weights.safetensors");
  const TensorInfo& t = m->weights_index().tensors.front();
  std::string patched = weights;
  const float big = 1e5f;
  std::memcpy(patched.data() + m->data_offset() + t.data.offset, &big, 4);
  testing::write_file(dir / "m/weights.safetensors", patched);
  auto overflow = convert_model_dir(dir / "m", dir / "z", DType::f16);
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(overflow.error().message().find(t.name), std::string::npos) << overflow.error().message();
  EXPECT_TRUE(convert_model_dir(dir / "m", dir / "w", DType::bf16).ok()) << "bfloat16 holds it";
}

}  // namespace convert_test
}  // namespace ember::gpu
