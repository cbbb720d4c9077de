// Dynamic batching's tensor work (actors/node/request_batch.hpp): compatibility, concatenation
// along the batch dimension, and splitting the answer back.
#include "actors/node/request_batch.hpp"

#include <gtest/gtest.h>

#include <cstring>

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

// Token ids (int64) and a mask of one row each, `len` positions: ids 1..len, mask 1.
std::shared_ptr<const infer_request> sequence(const std::string& id, int64_t rows, int64_t len) {
  auto r = std::make_shared<infer_request>();
  r->model = {"bert", 1};
  r->id = id;
  for (const char* name : {"input_ids", "attention_mask"}) {
    tensor_msg t;
    t.name = name;
    t.dtype = static_cast<uint8_t>(gpu::DType::i64);
    t.shape = {rows, len};
    std::vector<int64_t> v(static_cast<size_t>(rows * len));
    for (int64_t i = 0; i < rows * len; ++i) v[static_cast<size_t>(i)] = std::string(name) == "attention_mask" ? 1 : 1 + i % len + 100 * (i / len);
    t.data.resize(v.size() * 8);
    std::memcpy(t.data.data(), v.data(), t.data.size());
    r->inputs.push_back(std::move(t));
  }
  return r;
}

std::vector<int64_t> ints(const tensor_msg& t) {
  std::vector<int64_t> v(t.data.size() / 8);
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

BatchPadding bert_padding() {
  BatchPadding p;
  p.inputs = {{"input_ids", 0}, {"attention_mask", 0}};
  p.outputs = {"hidden"};
  return p;
}

TEST(RequestBatch, SequencesOfDifferentLengthsArePaddedAndTheirAnswersCutBack) {
  const BatchPadding pad = bert_padding();
  auto a = sequence("a", 1, 3), b = sequence("b", 2, 5), c = sequence("c", 1, 2);
  EXPECT_FALSE(batch_compatible(*a, *b)) << "without padding, lengths must agree";
  EXPECT_TRUE(batch_compatible(*a, *b, pad));
  EXPECT_EQ(sequence_length(*b, pad), 5);
  std::vector<std::shared_ptr<const infer_request>> members{a, b, c};
  infer_request batch = concat_requests(members, pad);
  ASSERT_EQ(batch.inputs.size(), 2u);
  EXPECT_EQ(batch.inputs[0].shape, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(ints(batch.inputs[0]), (std::vector<int64_t>{1, 2, 3, 0, 0,  //
                                                         1, 2, 3, 4, 5, 101, 102, 103, 104, 105,  //
                                                         1, 2, 0, 0, 0}));
  EXPECT_EQ(ints(batch.inputs[1]), (std::vector<int64_t>{1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0}));

  // The answer: a [4, 5, 2] float output per position (cut back) and a [4, 2] pooled one (not).
  infer_reply reply;
  reply.model = {"bert", 1};
  tensor_msg hidden;
  hidden.name = "hidden";
  hidden.shape = {4, 5, 2};
  std::vector<float> h(40);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>(i);
  hidden.data.resize(h.size() * 4);
  std::memcpy(hidden.data.data(), h.data(), hidden.data.size());
  tensor_msg pooled;
  pooled.name = "pooled";
  pooled.shape = {4, 2};
  pooled.data.assign(4 * 2 * 4, 7);
  reply.outputs = {hidden, pooled};
  auto parts = split_reply(reply, members, pad);
  ASSERT_TRUE(parts.ok()) << parts.error().message();
  ASSERT_EQ(parts->size(), 3u);
  auto floats = [](const tensor_msg& t) {
    std::vector<float> v(t.data.size() / 4);
    std::memcpy(v.data(), t.data.data(), t.data.size());
    return v;
  };
  EXPECT_EQ((*parts)[0].outputs[0].shape, (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(floats((*parts)[0].outputs[0]), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ((*parts)[1].outputs[0].shape, (std::vector<int64_t>{2, 5, 2}));
  EXPECT_EQ(floats((*parts)[1].outputs[0]).front(), 10.f);
  EXPECT_EQ(floats((*parts)[1].outputs[0]).back(), 29.f);
  EXPECT_EQ((*parts)[2].outputs[0].shape, (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(floats((*parts)[2].outputs[0]), (std::vector<float>{30, 31, 32, 33}));
  EXPECT_EQ((*parts)[1].outputs[1].shape, (std::vector<int64_t>{2, 2})) << "pooled outputs keep their rows only";
}

TEST(RequestBatch, PaddingNeedsEachMembersPaddedInputsToAgreeOnItsLength) {
  const BatchPadding pad = bert_padding();
  auto a = sequence("a", 1, 3);
  auto odd = std::make_shared<infer_request>(*sequence("b", 1, 4));
  odd->inputs[1] = sequence("x", 1, 5)->inputs[1];  // a mask longer than its ids
  EXPECT_EQ(sequence_length(*odd, pad), 0);
  EXPECT_FALSE(batch_compatible(*a, *odd, pad));
  auto lying = std::make_shared<infer_request>(*sequence("c", 1, 4));
  lying->inputs[0].data.resize(8);  // fewer bytes than its shape: runs alone, where decoding says why
  EXPECT_FALSE(batch_compatible(*a, *lying, pad));
  EXPECT_TRUE(batch_compatible(*a, *sequence("d", 3, 3), pad)) << "equal lengths batch as before";
  // An answer that lost the padded length cannot be cut back: the members run alone.
  std::vector<std::shared_ptr<const infer_request>> members{a, sequence("e", 1, 5)};
  infer_reply reply;
  tensor_msg hidden;
  hidden.name = "hidden";
  hidden.shape = {2, 4, 2};
  hidden.data.assign(2 * 4 * 2 * 4, 0);
  reply.outputs = {hidden};
  EXPECT_FALSE(split_reply(reply, members, pad).ok());
}

TEST(RequestBatch, ThePaddingComesFromTheManifest) {
  gpu::Manifest m;
  m.inputs = {{"input_ids", gpu::DType::i64, gpu::Shape{-1, -1}}, {"attention_mask", gpu::DType::i64, gpu::Shape{-1, -1}}};
  m.outputs = {{"hidden", gpu::DType::f32, gpu::Shape{-1, -1, 8}}, {"pooled", gpu::DType::f32, gpu::Shape{-1, 8}}};
  EXPECT_TRUE(BatchPadding::of(m).empty());
  m.serving.pad_inputs = {{"input_ids", 0}, {"attention_mask", 0}};
  const BatchPadding p = BatchPadding::of(m);
  EXPECT_EQ(p.outputs, (std::vector<std::string>{"hidden"}));
  ASSERT_TRUE(p.value("attention_mask"));
  EXPECT_EQ(*p.value("attention_mask"), 0.0);
  EXPECT_FALSE(p.value("hidden"));
}

}  // namespace
}  // namespace ember
