// Held requests (the late-binding router's records, no actor): what an executor's answer comes down
// to for every kind of request and retry (classify_answer), the retry enum's once-each rule, and the
// dispatches in flight that the run watchdog finds overdue.
#include "actors/node/held_request.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace held_request_test {

swap_reply reply() {
  swap_reply r;
  r.reply = infer_reply{};
  return r;
}
swap_reply error(Error e) {
  swap_reply r;
  r.error = std::move(e);
  return r;
}
swap_reply fault() {
  swap_reply r = error(device_fault("sim:0"));
  r.result.fault = true;
  return r;
}
Held held(HeldKind kind, HeldRetry retry = HeldRetry::none) {
  Held h;
  h.kind = kind;
  h.retry = retry;
  return h;
}
SwapDispatch plain() { return SwapDispatch{}; }
SwapDispatch beside() {
  SwapDispatch d;
  d.beside = true;
  return d;
}
SwapDispatch batch() {
  SwapDispatch d;
  d.batch.push_back({2, "m/1", 0});
  return d;
}

TEST(HeldRequest, EachKindOfRequestHasItsOutcome) {
  EXPECT_EQ(classify_answer(reply(), plain(), held(HeldKind::client)), AnswerOutcome::answered);
  EXPECT_EQ(classify_answer(error(invalid_argument("x")), plain(), held(HeldKind::client)), AnswerOutcome::failed);
  EXPECT_EQ(classify_answer(reply(), plain(), held(HeldKind::profile)), AnswerOutcome::profiled);
  EXPECT_EQ(classify_answer(error(out_of_memory("x")), plain(), held(HeldKind::profile)), AnswerOutcome::profiled);
  EXPECT_EQ(classify_answer(reply(), plain(), held(HeldKind::stage_warmup)), AnswerOutcome::warmed);
  EXPECT_EQ(classify_answer(error(internal_error("x")), plain(), held(HeldKind::member_warmup)), AnswerOutcome::warmed);
  EXPECT_EQ(classify_answer(reply(), plain(), held(HeldKind::workflow_step)), AnswerOutcome::workflow_step);
  EXPECT_EQ(classify_answer(error(internal_error("x")), plain(), held(HeldKind::workflow_step)),
            AnswerOutcome::workflow_step);
}

TEST(HeldRequest, AFaultComesFirstForEveryKind) {
  for (HeldKind k : {HeldKind::client, HeldKind::profile, HeldKind::stage_warmup, HeldKind::member_warmup,
                     HeldKind::workflow_step}) {
    EXPECT_EQ(classify_answer(fault(), plain(), held(k)), AnswerOutcome::fault);
    EXPECT_EQ(classify_answer(fault(), batch(), held(k)), AnswerOutcome::fault);
    EXPECT_EQ(classify_answer(fault(), beside(), held(k)), AnswerOutcome::fault);
  }
}

TEST(HeldRequest, ARunBesideOthersOutOfMemoryRunsAgainAloneOnce) {
  const swap_reply oom = error(out_of_memory("no room for the activations"));
  EXPECT_EQ(classify_answer(oom, beside(), held(HeldKind::client)), AnswerOutcome::retry_alone);
  EXPECT_EQ(classify_answer(oom, beside(), held(HeldKind::workflow_step)), AnswerOutcome::retry_alone);
  EXPECT_EQ(classify_answer(oom, beside(), held(HeldKind::client, HeldRetry::solo)), AnswerOutcome::retry_alone);
  // Once retried alone, its next failure is its answer.
  EXPECT_EQ(classify_answer(oom, beside(), held(HeldKind::client, HeldRetry::alone)), AnswerOutcome::failed);
  EXPECT_EQ(classify_answer(oom, beside(), held(HeldKind::client, HeldRetry::solo_and_alone)), AnswerOutcome::failed);
  // Out of memory as a device's own request, or another error beside: an answer.
  EXPECT_EQ(classify_answer(oom, plain(), held(HeldKind::client)), AnswerOutcome::failed);
  EXPECT_EQ(classify_answer(error(invalid_argument("x")), beside(), held(HeldKind::client)), AnswerOutcome::failed);
}

TEST(HeldRequest, ABatchAnswersItsMembersOrRetriesEachAlone) {
  EXPECT_EQ(classify_answer(reply(), batch(), held(HeldKind::client)), AnswerOutcome::batch);
  EXPECT_EQ(classify_answer(error(out_of_memory("x")), batch(), held(HeldKind::client)), AnswerOutcome::retry_members);
  EXPECT_EQ(classify_answer(swap_reply{}, batch(), held(HeldKind::client)), AnswerOutcome::retry_members);
  EXPECT_TRUE(answers(AnswerOutcome::batch));
  EXPECT_FALSE(answers(AnswerOutcome::retry_members));
  EXPECT_FALSE(answers(AnswerOutcome::retry_alone));
  EXPECT_FALSE(answers(AnswerOutcome::fault));
  EXPECT_TRUE(answers(AnswerOutcome::failed));
}

TEST(HeldRequest, RetriesAccumulateAndOnlyAClientNotRunningSoloBatches) {
  EXPECT_EQ(with_solo(HeldRetry::none), HeldRetry::solo);
  EXPECT_EQ(with_alone(HeldRetry::none), HeldRetry::alone);
  EXPECT_EQ(with_alone(HeldRetry::solo), HeldRetry::solo_and_alone);
  EXPECT_EQ(with_solo(HeldRetry::alone), HeldRetry::solo_and_alone);
  EXPECT_EQ(with_solo(HeldRetry::solo), HeldRetry::solo);
  EXPECT_TRUE(batchable(held(HeldKind::client)));
  EXPECT_TRUE(batchable(held(HeldKind::client, HeldRetry::alone)));
  EXPECT_FALSE(batchable(held(HeldKind::client, HeldRetry::solo)));
  EXPECT_FALSE(batchable(held(HeldKind::client, HeldRetry::solo_and_alone)));
  for (HeldKind k : {HeldKind::profile, HeldKind::stage_warmup, HeldKind::member_warmup, HeldKind::workflow_step}) {
    EXPECT_FALSE(batchable(held(k)));
  }
  EXPECT_TRUE(is_traffic(HeldKind::client));
  EXPECT_TRUE(is_traffic(HeldKind::workflow_step));
  EXPECT_FALSE(is_traffic(HeldKind::profile));
  EXPECT_FALSE(is_traffic(HeldKind::stage_warmup));
}

TEST(HeldRequest, DispatchesInFlightAreOverdueAfterTheLimitAndAnsweredOnce) {
  HeldRequests h;
  const uint64_t a = h.next_id(), b = h.next_id();
  EXPECT_NE(a, b);
  h.hold(a, held(HeldKind::client));
  h.hold(b, held(HeldKind::profile));
  SwapDispatch da, db;
  da.request = a;
  db.request = b;
  h.started(da, 1000);
  h.started(db, 5000);
  EXPECT_TRUE(h.overdue(1999, 1000).empty());
  auto late = h.overdue(2000, 1000);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].request, a);
  EXPECT_TRUE(h.finished(a));
  EXPECT_FALSE(h.finished(a)) << "a second answer to one dispatch";
  EXPECT_FALSE(h.running(a));
  EXPECT_TRUE(h.running(b));
  auto taken = h.take(a);
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->kind, HeldKind::client);
  EXPECT_FALSE(h.take(a));
  EXPECT_NE(h.find(b), nullptr);
  EXPECT_EQ(h.all().size(), 1u);
}

}  // namespace held_request_test
}  // namespace ember
