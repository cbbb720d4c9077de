// StepInputs (actors/node/engine/step_inputs.hpp): the four tensors of a step exactly as
// docs/design/generation.md lays them out, for a prefill packed with decodes; the table width and
// its zero padding; the cache type's code; and every input it refuses.
#include "actors/node/engine/step_inputs.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace ember::engine {
namespace step_inputs_test {

std::vector<int64_t> values(const gpu::HostTensor& t) {
  const int64_t* p = t.as<int64_t>();
  return std::vector<int64_t>(p, p + t.desc.shape.numel());
}

std::vector<gpu::DevicePtr> table(std::initializer_list<uint64_t> addrs) {
  std::vector<gpu::DevicePtr> t;
  for (uint64_t a : addrs) t.push_back({a});
  return t;
}

// A prefill of 3 tokens (a new sequence), a decode at position 5 over two blocks, and a decode at
// position 0 of a one-token prompt: T = 5, B = 3, W = 2 (the longest table).
TEST(StepInputs, APrefillAndTwoDecodesPackAsTheContractSays) {
  std::vector<StepSequence> step = {
      {10, 0, {101, 102, 103}, table({0x1000})},
      {11, 5, {201}, table({0x2000, 0x3000})},
      {12, 0, {301}, table({0x4000})},
  };
  auto t = build_step_inputs(step, 4, gpu::DType::f16);
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(values(t->input_ids), (std::vector<int64_t>{101, 102, 103, 201, 301}));
  EXPECT_EQ(values(t->positions), (std::vector<int64_t>{0, 1, 2, 5, 0}));
  EXPECT_EQ(values(t->kv_meta), (std::vector<int64_t>{3, 4, 2, 1,                  // B, block_size, W, f16
                                                      0, 0, 0, 1, 2,               // each token's sequence
                                                      0x1000, 0,                   // sequence 0's table, padded
                                                      0x2000, 0x3000,              // sequence 1's
                                                      0x4000, 0}));                // sequence 2's
  EXPECT_EQ(values(t->last_index), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(t->kv_meta.desc.shape, gpu::Shape({4 + 5 + 3 * 2}));
  const auto inputs = t->take();
  ASSERT_EQ(inputs.size(), 4u);
  const char* names[] = {"input_ids", "positions", "kv_meta", "last_index"};
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(inputs[i].name, names[i]);
    EXPECT_EQ(inputs[i].desc.dtype, gpu::DType::i64);
    EXPECT_EQ(inputs[i].desc.shape.rank, 1);
  }
}

TEST(StepInputs, TheCacheTypeCodesAreTheContracts) {
  EXPECT_EQ(*kv_dtype_code(gpu::DType::f32), 0);
  EXPECT_EQ(*kv_dtype_code(gpu::DType::f16), 1);
  EXPECT_EQ(*kv_dtype_code(gpu::DType::bf16), 2);
  EXPECT_EQ(kv_dtype_code(gpu::DType::i64).error().code(), ErrorCode::invalid_argument);
}

// A table longer than its positions need (blocks the sequence grew into ahead) is listed whole, and
// sets the width; a single sequence gives W from its table.
TEST(StepInputs, ATableListsEveryBlockAndTheWidestSetsTheWidth) {
  auto t = build_step_inputs({{1, 16, {7, 8}, table({0x100, 0x200, 0x300})}, {2, 3, {9}, table({0x400})}}, 16,
                             gpu::DType::f32);
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(values(t->kv_meta), (std::vector<int64_t>{2, 16, 3, 0, 0, 0, 1, 0x100, 0x200, 0x300, 0x400, 0, 0}));
  EXPECT_EQ(values(t->positions), (std::vector<int64_t>{16, 17, 3}));
  EXPECT_EQ(values(t->last_index), (std::vector<int64_t>{1, 2}));
}

TEST(StepInputs, BadStepsAreRefusedWithTheReason) {
  auto refused = [](const std::vector<StepSequence>& s, uint32_t block_size, gpu::DType dt, const std::string& what) {
    auto t = build_step_inputs(s, block_size, dt);
    ASSERT_FALSE(t.ok()) << what;
    EXPECT_EQ(t.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(t.error().message().find(what), std::string::npos) << t.error().message();
  };
  refused({}, 4, gpu::DType::f32, "no sequence");
  refused({{1, 0, {5}, table({0x10})}}, 0, gpu::DType::f32, "block_size 0");
  refused({{1, 0, {5}, table({0x10})}}, 4, gpu::DType::i32, "float32, float16 or bfloat16");
  refused({{1, 0, {}, table({0x10})}}, 4, gpu::DType::f32, "sequence 1 has no token");
  // Positions 3..4 need two blocks of 4.
  refused({{2, 3, {5, 6}, table({0x10})}}, 4, gpu::DType::f32, "sequence 2's block table lists 1 blocks");
  refused({{3, 0, {5}, table({0x0})}}, 4, gpu::DType::f32, "sequence 3's block 0 has address 0");
  refused({{4, 0, {5}, table({0x10, uint64_t{1} << 63})}}, 4, gpu::DType::f32, "beyond int64");
  refused({{5, (uint64_t{1} << 63) - 1, {5}, table({0x10})}}, 4, gpu::DType::f32, "pass int64");
}

}  // namespace step_inputs_test
}  // namespace ember::engine
