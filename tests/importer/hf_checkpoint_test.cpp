// importer/hf_checkpoint.cpp: a checkpoint's tensors found by name and read widened to float32.
// (Malformed folders, sharded or not, are hf_import_test.cpp's HfMalformed table: each is refused
// by the import that opens them.)
#include <gtest/gtest.h>

#include "importer/hf_checkpoint.hpp"
#include "tests/importer/hf_fixture.hpp"

namespace ember::importer {
namespace hf_checkpoint_test {

using ember::testing::must;
using gpu::DType;
using gpu::testing::TempDir;

TEST(HfCheckpoint, WidensHalfPrecisionExactly) {
  TempDir dir;
  hf_fixture::write_shard(dir / "model.safetensors", {{"a", {3, 5}}}, DType::f16);
  auto c = must(HfCheckpoint::open(dir.path()));
  EXPECT_EQ(c.width(), DType::f16);
  auto v = must(c.read("a"));
  ASSERT_EQ(v.size(), 15u);
  for (int64_t i = 0; i < 15; ++i) EXPECT_EQ(v[static_cast<size_t>(i)], hf_fixture::stored("a", i, DType::f16));
  EXPECT_EQ(c.read("b").error().code(), ErrorCode::not_found);
}

TEST(HfCheckpoint, FindsEveryShardsTensors) {
  TempDir dir;
  hf_fixture::Llama f;
  hf_fixture::write_weights(dir.path(), f.tensors(), 3, DType::bf16);
  auto c = must(HfCheckpoint::open(dir.path()));
  EXPECT_EQ(c.files().size(), 3u);
  EXPECT_EQ(c.names().size(), f.tensors().size());
  EXPECT_EQ(c.width(), DType::bf16);
  const HfTensor* t = c.find("model.norm.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_NE(t->file.find("model-00003-of-00003.safetensors"), std::string::npos);
  EXPECT_EQ(must(c.read("model.norm.weight"))[5], hf_fixture::stored("model.norm.weight", 5, DType::bf16));
}

TEST(HfCheckpoint, RefusesAFolderWithoutWeights) {
  TempDir dir;
  auto c = HfCheckpoint::open(dir.path());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), ErrorCode::not_found);
  EXPECT_NE(c.error().message().find("no model.safetensors and no model.safetensors.index.json"), std::string::npos)
      << c.error().message();
}

}  // namespace hf_checkpoint_test
}  // namespace ember::importer
