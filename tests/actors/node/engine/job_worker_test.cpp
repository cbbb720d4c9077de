// JobWorker (actors/node/engine/job_worker.hpp): jobs in order, the bound and its overflow policy
// (reject newest), jobs still queued answered at destruction, and the sticky fault.
#include "actors/node/engine/job_worker.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tests/actors/node/engine/engine_test_util.hpp"

namespace ember::job_worker_test {

// The helpers by name, not by `using namespace`: the helper `engine` would clash with the room's
// namespace, ember::engine.
using engine_test::MiB;

// The worker holds a job until `go`: what is posted meanwhile waits, in order.
// The job holds the future it waits on, never reaching into this object once `go` is set.
struct Held {
  std::promise<void> started, go;
  void hold(ember::engine::JobWorker& w) {
    w.post([this, released = go.get_future().share()] {
      started.set_value();
      released.wait();
    });
    started.get_future().wait();
  }
};

TEST(JobWorker, RunsJobsInOrderAndRejectsTheNewestInferenceJobWhenFull) {
  auto device = gpu::testing::sim_device(16 * MiB);
  ember::engine::JobWorker w(*device, 2);
  Held held;
  held.hold(w);
  std::mutex mu;
  std::vector<int> ran;
  auto job = [&](int i) {
    return [&, i] {
      std::lock_guard lock(mu);
      ran.push_back(i);
    };
  };
  EXPECT_TRUE(w.try_post(job(1)));
  EXPECT_TRUE(w.try_post(job(2)));
  EXPECT_EQ(w.queued(), 2u);
  EXPECT_FALSE(w.try_post(job(3))) << "a third inference job beyond max_queue 2 is refused";
  w.post(job(4));  // bind and unbind jobs are never refused, and do not count
  EXPECT_EQ(w.queued(), 2u);
  std::promise<void> last;
  w.post([&] { last.set_value(); });
  held.go.set_value();
  last.get_future().wait();
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(w.queued(), 0u);
}

TEST(JobWorker, DestructionRunsEveryJobStillQueuedThenJoins) {
  auto device = gpu::testing::sim_device(16 * MiB);
  auto w = std::make_unique<ember::engine::JobWorker>(*device, 8);
  Held held;
  held.hold(*w);
  std::atomic<int> ran{0};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(w->try_post([&] { ++ran; }));
  w->post([&] { ++ran; });
  std::thread destroyer([&] { w.reset(); });
  held.go.set_value();
  destroyer.join();
  EXPECT_EQ(ran.load(), 4) << "each job queued before the destructor answered";
}

TEST(JobWorker, AThrowingRunBreaksTheEngineAndEveryLaterRunSaysWhy) {
  auto device = gpu::testing::sim_device(16 * MiB);
  ember::engine::JobWorker w(*device, 8);
  Status ok = w.guarded([] { return Status::OK(); });
  EXPECT_TRUE(ok.ok());
  EXPECT_FALSE(w.broken());
  Result<int> threw = w.guarded([]() -> Result<int> { throw std::runtime_error("boom"); });
  ASSERT_FALSE(threw.ok());
  EXPECT_EQ(threw.error().code(), ErrorCode::device_fault);
  EXPECT_NE(threw.error().message().find("executor threw: boom"), std::string::npos) << threw.error().message();
  EXPECT_TRUE(w.broken());
  bool called = false;
  Result<int> later = w.guarded([&]() -> Result<int> {
    called = true;
    return 1;
  });
  EXPECT_FALSE(called) << "a broken engine runs nothing";
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.error().code(), ErrorCode::device_fault);
  EXPECT_EQ(later.error().message(), threw.error().message());
}

TEST(JobWorker, AnInjectedKernelFaultTakesThePathOfARealOne) {
  auto device = gpu::testing::sim_device(16 * MiB);
  ember::engine::JobWorker w(*device, 8);
  w.fault_next_kernel();
  bool called = false;
  Status first = w.guarded([&] {
    called = true;
    return Status::OK();
  });
  EXPECT_FALSE(called);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.error().code(), ErrorCode::device_fault);
  EXPECT_NE(first.error().message().find("injected fault"), std::string::npos) << first.error().message();
  EXPECT_TRUE(w.broken());
  EXPECT_FALSE(w.guarded([] { return Status::OK(); }).ok()) << "sticky";
}

}  // namespace ember::job_worker_test
