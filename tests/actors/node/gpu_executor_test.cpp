// The gpu_executor actor over its engine (actors/node/gpu_executor.cpp): pinned binding's dynamic
// batching of what waits behind a running execution, and restarts (the old device closed first, a
// failed restart answered to every asker and tried again).
#include "actors/node/gpu_executor.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <caf/typed_event_based_actor.hpp>
#include <future>
#include <string>
#include <vector>

#include "actors/node/engine/executor_engine.hpp"
#include "actors/node/node_instruments.hpp"
#include "actors/tensor_codec.hpp"
#include "tests/actors/actor_test_util.hpp"
#include "tests/actors/node/engine/engine_test_util.hpp"
#include "tests/actors/node/node_test_util.hpp"

namespace ember {
namespace gpu_executor_test {

using namespace std::chrono_literals;
using engine_test::engine;
using engine_test::MiB;
using engine_test::warm_outputs;
using testing::batching;
using testing::metric;
using testing::same_answer;

// Pinned binding batches too: while one execution of a bound model that asks for batching runs, its
// requests wait at the executor and the next execution takes them together.
TEST(PinnedBatching, AnExecutorBatchesWhatWaitsBehindTheRunningExecution) {
  WorkQueue maintenance{{.threads = 1}};
  auto sys = testing::make_system();
  gpu::testing::TempDir dir;
  auto model = batching({"bert-base"}, 8, 0)(dir / "m0/1", 0);
  NodeInstruments instruments;
  auto exec =
      spawn_gpu_executor(*sys, engine(gpu::testing::sim_device(64 * MiB)), "n1", &instruments, maintenance, nullptr);
  auto bound = testing::ask<std::string>(*sys, exec, 30s, bind_model{{"m0", 1}, model});
  ASSERT_TRUE(bound.ok()) << bound.error().message();
  caf::scoped_actor self{*sys};
  constexpr int kRequests = 8;
  std::vector<std::vector<gpu::HostTensor>> inputs;
  for (int k = 0; k < kRequests; ++k) {
    inputs.push_back(gpu::testing::arch_inputs(*model, 1, 4, 50 + k));
    infer_request req;
    req.model = {"m0", 1};
    req.id = std::to_string(k);
    req.inputs = encode_tensors(inputs.back());
    self->send(exec, std::move(req));
  }
  int right = 0;
  for (int k = 0; k < kRequests; ++k) {
    self->receive(
        [&](infer_reply& r) {
          auto out = decode_tensors(std::move(r.outputs));
          right += out.ok() && same_answer(*out, warm_outputs(model, inputs[std::stoul(r.id)]));
        },
        [&](caf::error& e) { ADD_FAILURE() << from_caf(e).message(); },
        caf::after(30s) >> [&] { ADD_FAILURE() << "no answer"; });
  }
  EXPECT_EQ(right, kRequests);
  const double executions = metric(instruments, "ember_execution_count_total", 0);
  EXPECT_GE(executions, 1);
  EXPECT_LT(executions, kRequests) << "nothing was batched";
  EXPECT_EQ(metric(instruments, "ember_inference_count_total", 0), kRequests);
  self->send_exit(exec, caf::exit_reason::user_shutdown);
  self->wait_for(exec);
}

// A restart closes the broken device before it opens the new one (on a GPU both would share its
// memory). While it runs, and after it failed, the executor answers jobs as unavailable; a failed
// restart can be tried again.
TEST(LateBindingExecutor, ARestartClosesTheOldDeviceFirstAndAFailedOneCanBeRetried) {
  WorkQueue maintenance;
  auto sys = testing::make_system();
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  std::atomic<int> calls{0};
  std::atomic<uint32_t> open_at_reopen{99};
  engine_factory reopen = [&, opened]() -> Result<std::unique_ptr<ExecutorEngine>> {
    opened.wait();
    open_at_reopen = gpu::SimDevice::TEST_open_on_ordinal(5);
    if (calls++ == 0) return unavailable("the device did not come back");
    return engine(gpu::testing::sim_device(16 * MiB, 5));
  };
  auto exec =
      spawn_gpu_executor(*sys, engine(gpu::testing::sim_device(16 * MiB, 5)), "n1", nullptr, maintenance, reopen);
  auto is_unavailable = [](const auto& r, const std::string& says) {
    return !r.ok() && r.error().code() == ErrorCode::unavailable &&
           r.error().message().find(says) != std::string::npos;
  };
  infer_request req;
  req.model = {"m", 1};

  caf::scoped_actor self{*sys};
  self->send(exec, restart_atom_v);  // held at the gate, in the factory
  // Asked again meanwhile (a router that took over from a dead one): it joins the restart running.
  self->send(exec, restart_atom_v);
  auto during = testing::ask<infer_reply>(*sys, exec, 30s, req);
  EXPECT_TRUE(is_unavailable(during, "is restarting")) << (during.ok() ? "ok" : during.error().message());
  auto status = testing::ask<executor_status>(*sys, exec, 30s, status_atom_v);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->device.name, "sim:5");
  EXPECT_EQ(status->pool_capacity, 0u);

  gate.set_value();
  for (int asked = 0; asked < 2; ++asked) {  // both get the one restart's failure
    self->receive([](device_report&) { ADD_FAILURE() << "the first restart should fail"; },
                  [](caf::error& e) { EXPECT_NE(from_caf(e).message().find("did not come back"), std::string::npos); },
                  caf::after(30s) >> [] { ADD_FAILURE() << "no answer to the first restart"; });
  }
  EXPECT_EQ(open_at_reopen.load(), 0u) << "the broken device was still open when the new one was";
  auto after_failure = testing::ask<infer_reply>(*sys, exec, 30s, req);
  EXPECT_TRUE(is_unavailable(after_failure, "out of service"))
      << (after_failure.ok() ? "ok" : after_failure.error().message());

  auto retried = testing::ask<device_report>(*sys, exec, 30s, restart_atom_v);
  ASSERT_TRUE(retried.ok()) << retried.error().message();
  EXPECT_EQ(retried->name, "sim:5");
  status = testing::ask<executor_status>(*sys, exec, 30s, status_atom_v);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->pool_capacity, 8 * MiB);
  EXPECT_EQ(calls.load(), 2);
  self->send_exit(exec, caf::exit_reason::user_shutdown);
  self->wait_for(exec);
}

}  // namespace gpu_executor_test
}  // namespace ember
