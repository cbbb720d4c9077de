// GenerationCall, the bridge between a GenerationService's sink and the HTTP thread: chunks come
// out in order; a refusal before any chunk is reported as one; what breaks the service's contract
// (an Error after a chunk, anything after the final call) is absorbed; past its bound the call
// overflows, once the queue is drained; a chunk from another thread wakes a waiting next().
#include "actors/gateway/http/generation_call.hpp"

#include <gtest/gtest.h>

#include <thread>

namespace ember {
namespace generation_call_test {

using namespace std::chrono_literals;
using Next = GenerationCall::Next;

generate_chunk piece(const std::string& text, FinishReason finish = FinishReason::none) {
  generate_chunk c;
  c.id = "cmpl-1";
  c.text = text;
  c.finish = finish;
  return c;
}

TEST(GenerationCall, ChunksComeOutInOrderAndTheCallClosesAtTheFinalOne) {
  auto call = GenerationCall::make();
  auto sink = call->sink();
  sink(piece("a"));
  sink(piece("b"));
  EXPECT_FALSE(call->closed());
  sink(piece("c", FinishReason::stop));
  EXPECT_TRUE(call->closed());
  sink(piece("after the end"));  // dropped
  generate_chunk c;
  std::optional<Error> refusal;
  for (const char* want : {"a", "b", "c"}) {
    ASSERT_EQ(call->next(0ms, c, refusal), Next::chunk);
    EXPECT_EQ(c.text, want);
  }
  EXPECT_TRUE(c.is_final());
  EXPECT_EQ(call->next(0ms, c, refusal), Next::idle);
  EXPECT_FALSE(refusal);
}

TEST(GenerationCall, ARefusalBeforeAnyChunkIsReportedAsOne) {
  auto call = GenerationCall::make();
  call->sink()(not_found("unknown model 'x'"));
  EXPECT_TRUE(call->closed());
  call->sink()(piece("late"));  // dropped
  generate_chunk c;
  std::optional<Error> refusal;
  ASSERT_EQ(call->next(0ms, c, refusal), Next::refused);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->code(), ErrorCode::not_found);
  EXPECT_EQ(refusal->message(), "unknown model 'x'");
}

TEST(GenerationCall, AnErrorAfterAChunkBecomesAFinalErrorChunk) {
  auto call = GenerationCall::make();
  auto sink = call->sink();
  sink(piece("a"));
  sink(unavailable("node lost"));
  EXPECT_TRUE(call->closed());
  generate_chunk c;
  std::optional<Error> refusal;
  ASSERT_EQ(call->next(0ms, c, refusal), Next::chunk);
  ASSERT_EQ(call->next(0ms, c, refusal), Next::chunk);
  EXPECT_EQ(c.finish, FinishReason::error);
  EXPECT_EQ(c.error.code, ErrorCode::unavailable);
  EXPECT_EQ(c.error.message, "node lost");
  EXPECT_FALSE(refusal);
}

TEST(GenerationCall, PastItsBoundTheCallOverflowsOnceTheQueueIsDrained) {
  auto call = GenerationCall::make(/*max_queued=*/2);
  auto sink = call->sink();
  sink(piece("a"));
  sink(piece("b"));
  EXPECT_FALSE(call->closed());
  EXPECT_FALSE(call->overflowed());
  sink(piece("c"));  // no room: the slow client is cut off
  EXPECT_TRUE(call->closed());
  EXPECT_TRUE(call->overflowed());
  sink(piece("d", FinishReason::stop));  // dropped too
  generate_chunk c;
  std::optional<Error> refusal;
  ASSERT_EQ(call->next(0ms, c, refusal), Next::chunk);
  EXPECT_EQ(c.text, "a");
  ASSERT_EQ(call->next(0ms, c, refusal), Next::chunk);
  EXPECT_EQ(c.text, "b");
  EXPECT_EQ(call->next(0ms, c, refusal), Next::overflowed);
  EXPECT_EQ(GenerationCall::kMaxQueuedChunks, 4096u);
}

TEST(GenerationCall, AChunkFromAnotherThreadWakesAWaitingNext) {
  auto call = GenerationCall::make();
  std::thread service([sink = call->sink()] { sink(piece("a", FinishReason::length)); });
  generate_chunk c;
  std::optional<Error> refusal;
  const Next got = call->next(10s, c, refusal);  // returns as soon as the chunk arrives
  service.join();
  ASSERT_EQ(got, Next::chunk);
  EXPECT_EQ(c.finish, FinishReason::length);
}

TEST(GenerationCall, TheSinkHoldsTheCallSoAServiceMayOutliveTheRequest) {
  GenerationService::Sink sink;
  {
    auto call = GenerationCall::make();
    sink = call->sink();
  }
  sink(piece("nobody reads this"));  // the call is still alive: no crash
  sink = nullptr;
}

}  // namespace generation_call_test
}  // namespace ember
