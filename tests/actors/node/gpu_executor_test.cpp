// The gpu_executor actor over its engine (actors/node/gpu_executor.cpp): pinned binding's dynamic
// batching of what waits behind a running execution, requests decoded on the engine's thread (never
// the actor's), and restarts (the old device closed first, a failed restart answered to every asker
// and tried again).
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
using engine_test::write_mlp;
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

// A request whose inputs do not decode, waiting among others for the running execution: the batch
// it joins fails and runs again member by member, so it fails alone, with its own error, and every
// other request is answered right. (The engine's worker is held while they arrive: the first runs
// alone, the other seven wait and go as one batch.)
TEST(PinnedBatching, AMemberThatDoesNotDecodeFailsAloneAndTheOthersAreAnswered) {
  WorkQueue maintenance{{.threads = 1}};
  auto sys = testing::make_system();
  gpu::testing::TempDir dir;
  auto model = batching({"bert-base"}, 8, 0)(dir / "m0/1", 0);
  NodeInstruments instruments;
  auto owned = engine(gpu::testing::sim_device(64 * MiB));
  ExecutorEngine* held_engine = owned.get();  // the actor's from here on; any thread may post it a job
  auto exec = spawn_gpu_executor(*sys, std::move(owned), "n1", &instruments, maintenance, nullptr);
  ASSERT_TRUE(testing::ask<std::string>(*sys, exec, 30s, bind_model{{"m0", 1}, model}).ok());
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  held_engine->lend({}, [released](Result<std::vector<gpu::PeerValue>>) { released.wait(); });  // holds the worker
  caf::scoped_actor self{*sys};
  constexpr int kRequests = 8;
  constexpr int kBad = 3;
  std::vector<std::vector<gpu::HostTensor>> inputs;
  for (int k = 0; k < kRequests; ++k) {
    inputs.push_back(gpu::testing::arch_inputs(*model, 1, 4, 70 + k));
    infer_request req;
    req.model = {"m0", 1};
    req.id = std::to_string(k);
    req.inputs = encode_tensors(inputs.back());
    if (k == kBad) req.inputs[0].data.pop_back();  // one byte short: it does not decode
    self->send(exec, std::move(req));
  }
  // Messages are taken in order: once the status is answered, the seven wait behind the first.
  EXPECT_TRUE(testing::ask<executor_status>(*sys, exec, 30s, status_atom_v).ok());
  release.set_value();
  int right = 0;
  int refused = 0;
  for (int k = 0; k < kRequests; ++k) {
    self->receive(
        [&](infer_reply& r) {
          EXPECT_NE(r.id, std::to_string(kBad)) << "answered a request that does not decode";
          auto out = decode_tensors(std::move(r.outputs));
          right += out.ok() && same_answer(*out, warm_outputs(model, inputs[std::stoul(r.id)]));
        },
        [&](caf::error& e) {
          const Error err = from_caf(e);
          EXPECT_EQ(err.code(), ErrorCode::invalid_argument) << err.message();
          EXPECT_NE(err.message().find("bytes of data"), std::string::npos) << err.message();
          ++refused;
        },
        caf::after(30s) >> [&] { ADD_FAILURE() << "no answer"; });
  }
  EXPECT_EQ(right, kRequests - 1);
  EXPECT_EQ(refused, 1);
  // The first alone, the batch of seven, then each of the seven again alone.
  EXPECT_EQ(metric(instruments, "ember_execution_count_total", 0), 2 + kRequests - 1);
  self->send_exit(exec, caf::exit_reason::user_shutdown);
  self->wait_for(exec);
}

// The executor's actor never decodes: a request waits undecoded for the engine's worker, which
// decodes it when its job starts. With the worker held, the actor has taken requests that do not
// decode, pinned and late-binding (it answered a later message), and has answered neither; once the
// worker goes on, the errors come (the swap changed nothing on the device), and the executor still
// serves.
TEST(ExecutorDecoding, ARequestIsDecodedOnTheEnginesThreadNotOnTheActor) {
  WorkQueue maintenance{{.threads = 1}};
  auto sys = testing::make_system();
  gpu::testing::TempDir dir;
  auto model = write_mlp(dir / "m", 1, 2);
  const model_key key{"m", 1};
  auto owned = engine(gpu::testing::sim_device(16 * MiB));
  ExecutorEngine* held_engine = owned.get();  // the actor's from here on; any thread may post it a job
  auto exec = spawn_gpu_executor(*sys, std::move(owned), "n1", nullptr, maintenance, nullptr);
  ASSERT_TRUE(testing::ask<std::string>(*sys, exec, 30s, bind_model{key, model}).ok());
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  held_engine->lend({}, [released](Result<std::vector<gpu::PeerValue>>) { released.wait(); });  // holds the worker

  caf::scoped_actor self{*sys};
  const auto in = gpu::testing::arch_inputs(*model, 2, 1, 3);
  infer_request bad;
  bad.model = key;
  bad.inputs = encode_tensors(in);
  bad.inputs[0].data.resize(12);
  self->send(exec, bad);
  self->send(exec, swap_request{std::make_shared<const infer_request>(bad), SwapRun{{}, model}});
  // Messages are taken in order: once the status is answered, the actor has handled both. (No
  // ASSERT before the worker is released: the engine could not be destroyed.)
  EXPECT_TRUE(testing::ask<executor_status>(*sys, exec, 30s, status_atom_v).ok());
  EXPECT_TRUE(self->mailbox().empty()) << "answered while the engine's worker was held: decoded on the actor";
  release.set_value();
  auto says_bytes = [](const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::invalid_argument);
    EXPECT_NE(err.message().find("12 bytes of data"), std::string::npos) << err.message();
  };
  for (int answer = 0; answer < 2; ++answer) {
    self->receive([](infer_reply&) { ADD_FAILURE() << "answered a request that does not decode"; },
                  [&](caf::error& e) { says_bytes(from_caf(e)); },
                  [&](swap_reply& r) {
                    EXPECT_FALSE(r.reply.has_value());
                    ASSERT_TRUE(r.error.has_value());
                    says_bytes(*r.error);
                    EXPECT_TRUE(r.result.inputs_failed);
                    EXPECT_FALSE(r.result.fault);
                    EXPECT_FALSE(r.result.swapped);
                    EXPECT_TRUE(r.result.evicted.empty());
                  },
                  caf::after(30s) >> [] { ADD_FAILURE() << "no answer"; });
  }
  infer_request good;
  good.model = key;
  good.inputs = encode_tensors(in);
  auto served = testing::ask<infer_reply>(*sys, exec, 30s, good);
  ASSERT_TRUE(served.ok()) << served.error().message();
  auto out = decode_tensors(served->outputs);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(gpu::testing::bitwise_equal((*out)[0], warm_outputs(model, in)[0]));
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
