#include "base/work_queue.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <vector>

namespace ember {
namespace work_queue_test {

TEST(WorkQueue, ASerialQueueRunsJobsInSubmissionOrderOnOneThread) {
  std::vector<int> order;
  std::thread::id first;
  bool one_thread = true;
  {
    WorkQueue q;
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(q.try_post([&, i] {
        if (i == 0) first = std::this_thread::get_id();
        one_thread = one_thread && std::this_thread::get_id() == first && q.on_worker_thread();
        order.push_back(i);
      }));
    }
  }  // the destructor runs what is queued, then joins
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_TRUE(one_thread);
}

TEST(WorkQueue, TryPostRefusesTheNewestBeyondTheBoundAndPostDoesNot) {
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> ran{0};
  {
    WorkQueue q({.threads = 1, .capacity = 2});
    std::promise<void> started;
    ASSERT_TRUE(q.try_post([&] {
      started.set_value();
      gate.wait();
      ++ran;
    }));
    started.get_future().wait();  // the running job does not count against the bound
    EXPECT_TRUE(q.try_post([&] { ++ran; }));
    EXPECT_TRUE(q.try_post([&] { ++ran; }));
    EXPECT_FALSE(q.try_post([&] { ++ran; }));
    EXPECT_EQ(q.queued(), 2u);
    EXPECT_EQ(q.rejected(), 1u);
    q.post([&] { ++ran; });  // exempt from the bound
    release.set_value();
  }
  EXPECT_EQ(ran.load(), 4);
}

TEST(WorkQueue, SeveralThreadsRunJobsConcurrently) {
  WorkQueue q({.threads = 2, .capacity = 8});
  std::promise<void> both;
  std::atomic<int> arrived{0};
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(q.try_post([&] {
      if (++arrived == 2) both.set_value();
      gate.wait();
    }));
  }
  // Both jobs run at once; a serial queue would never get here.
  EXPECT_EQ(both.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  release.set_value();
}

TEST(WorkQueue, WithoutThreadsEveryJobRunsInlineAtOnce) {
  WorkQueue q({.threads = 0});
  const auto caller = std::this_thread::get_id();
  bool ran = false;
  EXPECT_TRUE(q.try_post([&] { ran = std::this_thread::get_id() == caller; }));
  EXPECT_TRUE(ran);
  EXPECT_FALSE(q.on_worker_thread());
}

TEST(WorkQueue, OnThreadStartRunsOnEachThreadBeforeAnyJob) {
  std::mutex mu;
  std::vector<std::thread::id> started;
  std::atomic<bool> ordered{true};
  {
    WorkQueue q({.threads = 2, .capacity = 8, .on_thread_start = [&] {
                   std::lock_guard lock(mu);
                   started.push_back(std::this_thread::get_id());
                 }});
    for (int i = 0; i < 4; ++i) {
      q.post([&] {
        std::lock_guard lock(mu);
        if (std::find(started.begin(), started.end(), std::this_thread::get_id()) == started.end()) ordered = false;
      });
    }
  }
  EXPECT_EQ(started.size(), 2u);
  EXPECT_TRUE(ordered.load());
}

TEST(WorkQueue, RunHereRunsOnTheCallingThreadWhenTheQueueIsIdle) {
  WorkQueue q;
  const auto caller = std::this_thread::get_id();
  bool here = false;
  EXPECT_TRUE(q.run_here([&] { here = std::this_thread::get_id() == caller && !q.on_worker_thread(); }));
  EXPECT_TRUE(here);
  WorkQueue several({.threads = 2});
  EXPECT_FALSE(several.run_here([] {}));  // serial queues only
}

TEST(WorkQueue, RunHereIsRefusedWhileTheWorkerRunsAJobOrJobsWait) {
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  WorkQueue q;
  std::promise<void> started;
  q.post([&] {
    started.set_value();
    gate.wait();
  });
  started.get_future().wait();
  bool ran = false;
  EXPECT_FALSE(q.run_here([&] { ran = true; }));  // the worker runs a job
  q.post([] {});
  EXPECT_FALSE(q.run_here([&] { ran = true; }));  // and one waits
  EXPECT_FALSE(ran);
  release.set_value();
}

TEST(WorkQueue, AJobPostedWhileRunHereRunsStartsAfterIt) {
  std::vector<int> order;
  std::mutex mu;
  {
    WorkQueue q;
    ASSERT_TRUE(q.run_here([&] {
      q.post([&] {
        std::lock_guard lock(mu);
        order.push_back(2);
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the worker would have started it by now
      std::lock_guard lock(mu);
      order.push_back(1);
    }));
  }
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(WorkQueue, RunHereCallersTakeTurnsAndNeverOverlapTheWorker) {
  WorkQueue q;
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  std::atomic<int> here{0}, posted{0};
  auto body = [&] {
    if (inside.fetch_add(1) != 0) overlapped = true;
    std::this_thread::yield();
    inside.fetch_sub(1);
  };
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        if (q.run_here(body)) {
          ++here;
        } else if (t % 2 == 0) {
          q.post([&] {
            body();
            ++posted;
          });
        }
      }
    });
  }
  for (auto& c : callers) c.join();
  q.post([] {});
  EXPECT_FALSE(overlapped.load());
  EXPECT_GT(here.load(), 0);
}

TEST(WorkQueue, ACallerThatWillNotWaitForTheTurnIsRefusedAtOnceWhileAnotherHoldsIt) {
  WorkQueue q;
  std::promise<void> entered, release;
  auto gate = release.get_future().share();
  std::thread holder([&] {
    EXPECT_TRUE(q.run_here([&] {
      entered.set_value();
      gate.wait();
    }));
  });
  entered.get_future().wait();
  bool ran = false;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(q.run_here([&] { ran = true; }, /*wait_for_turn=*/false));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  release.set_value();
  holder.join();
  EXPECT_FALSE(ran);
  EXPECT_TRUE(q.run_here([&] { ran = true; }, false));  // the turn is free again
  EXPECT_TRUE(ran);
}

TEST(WorkQueue, CallersWaitingForTheTurnAllReturnWhenAJobIsQueuedMeanwhile) {
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  WorkQueue q;
  std::promise<void> holding;
  std::thread holder([&] {
    EXPECT_TRUE(q.run_here([&] {
      holding.set_value();
      gate.wait();
    }));
  });
  holding.get_future().wait();
  std::vector<std::future<bool>> waiters;
  for (int i = 0; i < 3; ++i) waiters.push_back(std::async(std::launch::async, [&] { return q.run_here([] {}); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // they wait for the turn
  std::atomic<bool> job_ran{false};
  q.post([&] { job_ran = true; });
  release.set_value();
  holder.join();
  for (auto& w : waiters) {
    ASSERT_EQ(w.wait_for(std::chrono::seconds(30)), std::future_status::ready);  // none is left asleep
    w.get();  // true only if it got the turn before the job was queued: either is fine
  }
}

}  // namespace work_queue_test
}  // namespace ember
