// Dynamic batching's tensor work (actors/node/request_batch.hpp): compatibility, concatenation
// along the batch dimension, and splitting the answer back.
#include "actors/node/request_batch.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace {

tensor_msg tensor(const std::string& name, std::vector<int64_t> shape, uint8_t fill) {
  tensor_msg t;
  t.name = name;
  t.dtype = 0;
  t.shape = std::move(shape);
  size_t n = 4;
  for (int64_t d : t.shape) n *= static_cast<size_t>(d);
  t.data.assign(n, fill);
  return t;
}

std::shared_ptr<const infer_request> request(const std::string& id, int64_t rows, uint8_t fill, int64_t width = 3) {
  auto r = std::make_shared<infer_request>();
  r->model = {"m", 1};
  r->id = id;
  r->inputs.push_back(tensor("x", {rows, width}, fill));
  r->inputs.push_back(tensor("y", {rows}, static_cast<uint8_t>(fill + 1)));
  return r;
}

TEST(RequestBatch, CompatibleRequestsShareNamesTypesTrailingDimsAndOutputs) {
  auto a = request("a", 1, 1);
  EXPECT_EQ(batch_rows(*a), 1);
  EXPECT_TRUE(batch_compatible(*a, *request("b", 3, 2)));
  EXPECT_FALSE(batch_compatible(*a, *request("c", 1, 2, 4))) << "another width";
  auto other_outputs = std::make_shared<infer_request>(*request("d", 1, 2));
  other_outputs->outputs = {"fc"};
  EXPECT_FALSE(batch_compatible(*a, *other_outputs));
  auto ragged = std::make_shared<infer_request>(*request("e", 2, 2));
  ragged->inputs[1] = tensor("y", {3}, 0);
  EXPECT_EQ(batch_rows(*ragged), 0) << "inputs disagree on rows";
  EXPECT_FALSE(batch_compatible(*a, *ragged));
  auto scalar = std::make_shared<infer_request>(*request("f", 1, 2));
  scalar->inputs[1].shape.clear();
  EXPECT_EQ(batch_rows(*scalar), 0);
  auto renamed = std::make_shared<infer_request>(*request("g", 1, 2));
  renamed->inputs[0].name = "z";
  EXPECT_FALSE(batch_compatible(*a, *renamed));
}

TEST(RequestBatch, ConcatenatesInMemberOrderAndSplitsTheAnswerBack) {
  std::vector<std::shared_ptr<const infer_request>> members{request("a", 1, 10), request("b", 2, 20),
                                                            request("c", 1, 30)};
  infer_request batch = concat_requests(members);
  EXPECT_EQ(batch.id, "a");
  ASSERT_EQ(batch.inputs.size(), 2u);
  EXPECT_EQ(batch.inputs[0].shape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(batch.inputs[1].shape, (std::vector<int64_t>{4}));
  ASSERT_EQ(batch.inputs[0].data.size(), 4u * 3 * 4);
  EXPECT_EQ(batch.inputs[0].data[0], 10);
  EXPECT_EQ(batch.inputs[0].data[12], 20);
  EXPECT_EQ(batch.inputs[0].data[36], 30);

  // The answer: one output of 4 rows of 2 bytes, each row's bytes its row number.
  infer_reply reply;
  reply.model = {"m", 1};
  reply.node = "n1";
  reply.device = "sim:0";
  reply.compute_us = 7;
  tensor_msg out;
  out.name = "o";
  out.shape = {4, 2};
  out.data = {0, 0, 1, 1, 2, 2, 3, 3};
  reply.outputs.push_back(out);
  auto parts = split_reply(reply, members);
  ASSERT_TRUE(parts.ok()) << parts.error().message();
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_EQ((*parts)[1].id, "b");
  EXPECT_EQ((*parts)[1].outputs[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ((*parts)[1].outputs[0].data, (std::vector<uint8_t>{1, 1, 2, 2}));
  EXPECT_EQ((*parts)[2].outputs[0].data, (std::vector<uint8_t>{3, 3}));
  EXPECT_EQ((*parts)[2].device, "sim:0");
  EXPECT_EQ((*parts)[0].compute_us, 7u);

  reply.outputs[0].shape = {1, 8};  // rows not kept apart
  auto bad = split_reply(reply, members);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::internal);
}

TEST(RequestBatch, OnlyModelsWithAFreeFirstDimensionEverywhereMayBatch) {
  gpu::Manifest m;
  gpu::TensorSpec in{"x", gpu::DType::f32, gpu::Shape{-1, 4}};
  gpu::TensorSpec out{"y", gpu::DType::f32, gpu::Shape{-1, 2}};
  m.inputs = {in};
  m.outputs = {out};
  EXPECT_TRUE(batching_eligible(m).ok());
  m.outputs[0].shape = gpu::Shape{1, 2};
  EXPECT_NE(batching_eligible(m).error().message().find("output 'y' has shape [1, 2]"), std::string::npos)
      << batching_eligible(m).error().message();
}

}  // namespace
}  // namespace ember
