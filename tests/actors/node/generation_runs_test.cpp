// Generation runs (actors/node/generation_runs.hpp): the chunk each GenerationOutput becomes, the job
// a generate_request becomes, and the gpu_executor over a SimDevice joining a generation from a
// swap_request: every token streamed to the sink equal to the reference, usage on the final chunk;
// refusals (ids outside the vocabulary, a prompt over the context window) answer the swap_request
// with invalid_argument and no chunk.
#include "actors/node/generation_runs.hpp"

#include <gtest/gtest.h>

#include <caf/typed_event_based_actor.hpp>
#include <string>
#include <vector>

#include "actors/node/engine/executor_engine.hpp"
#include "actors/node/gpu_executor.hpp"
#include "tests/actors/actor_test_util.hpp"
#include "tests/actors/node/engine/engine_test_util.hpp"
#include "tests/actors/node/engine/generation_test_util.hpp"

namespace ember {
namespace generation_runs_test {

using namespace std::chrono_literals;
namespace gt = engine::generation_test;

TEST(GenerationChunk, CarriesTokensTextFinishAndUsage) {
  GenerationOutput out;
  out.tokens = {3, 4};
  out.text = "ab";
  generate_chunk c = to_chunk("gen-1", out, nullptr);
  EXPECT_EQ(c.id, "gen-1");
  EXPECT_EQ(c.tokens, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(c.text, "ab");
  EXPECT_FALSE(c.is_final());
  EXPECT_EQ(c.usage.completion_tokens, 0u);

  out.final = true;
  out.finish = text::FinishReason::length;
  out.prompt_tokens = 5;
  out.completion_tokens = 7;
  c = to_chunk("gen-1", out, nullptr);
  EXPECT_EQ(c.finish, FinishReason::length);
  EXPECT_EQ(c.usage.prompt_tokens, 5u);
  EXPECT_EQ(c.usage.completion_tokens, 7u);
  out.finish = text::FinishReason::stop;
  EXPECT_EQ(to_chunk("gen-1", out, nullptr).finish, FinishReason::stop);
}

TEST(GenerationChunk, AnErrorSaysWhetherTheGatewayMayResumeIt) {
  GenerationOutput out;
  out.final = true;
  out.error = unavailable("model evicted");
  out.resumable = true;
  generate_chunk c = to_chunk("gen-2", out, nullptr);
  EXPECT_EQ(c.finish, FinishReason::error);
  EXPECT_EQ(c.error.code, ErrorCode::unavailable);
  EXPECT_EQ(c.error.message, "model evicted");
  EXPECT_TRUE(c.error.resume);
  out.resumable = false;
  EXPECT_FALSE(to_chunk("gen-2", out, nullptr).error.resume);
}

TEST(GenerationChunk, LogprobsPerTokenWithTheirAlternatives) {
  GenerationOutput out;
  out.tokens = {9};
  text::SampledToken t;
  t.id = 9;
  t.logprob = -0.5f;
  t.top = {{9, -0.5f}, {2, -1.5f}};
  out.logprobs = {t};
  generate_chunk c = to_chunk("gen-3", out, nullptr);
  ASSERT_EQ(c.logprobs.size(), 1u);
  EXPECT_EQ(c.logprobs[0].chosen.token, 9);
  EXPECT_FLOAT_EQ(c.logprobs[0].chosen.logprob, -0.5f);
  ASSERT_EQ(c.logprobs[0].top.size(), 2u);
  EXPECT_EQ(c.logprobs[0].top[1].token, 2);
  EXPECT_FLOAT_EQ(c.logprobs[0].top[1].logprob, -1.5f);
}

generate_request token_request(std::vector<int32_t> prompt) {
  generate_request r;
  r.id = "gen-t";
  r.model = {"dec", 1};
  r.kind = PromptKind::tokens;
  r.prompt_tokens = std::move(prompt);
  return r;
}

TEST(GenerationJobFromRequest, MapsSamplingStopAndResume) {
  generate_request r = token_request({1, 2, 3});
  r.sampling.temperature = 0.5f;
  r.sampling.top_k = 7;
  r.sampling.has_seed = true;
  r.sampling.seed = 42;
  r.sampling.logit_bias = {{5, -100.0f}};
  r.max_tokens = 9;
  r.stop_token_ids = {4};
  r.ignore_eos = true;
  r.logprobs = true;
  r.top_logprobs = 2;
  r.resume_tokens = {8, 8};
  auto job = make_generation_job(r, nullptr, [](GenerationOutput) {}, 77);
  ASSERT_TRUE(job.ok()) << job.error().message();
  EXPECT_EQ(job->id, "gen-t");
  EXPECT_EQ(job->prompt, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(job->resumed, (std::vector<int32_t>{8, 8}));
  EXPECT_FLOAT_EQ(job->sampling.temperature, 0.5f);
  EXPECT_EQ(job->sampling.top_k, 7);
  EXPECT_EQ(job->sampling.seed, std::optional<uint64_t>(42));
  EXPECT_FLOAT_EQ(job->sampling.logit_bias.at(5), -100.0f);
  EXPECT_TRUE(job->sampling.logprobs);
  EXPECT_EQ(job->sampling.top_logprobs, 2u);
  EXPECT_EQ(job->fallback_seed, 77u);
  EXPECT_EQ(job->stop.max_tokens, std::optional<int64_t>(9));
  EXPECT_EQ(job->stop.stop_token_ids, (std::vector<int64_t>{4}));
  EXPECT_TRUE(job->stop.ignore_eos);
  EXPECT_TRUE(job->emit);
  r.sampling.has_seed = false;
  r.max_tokens = 0;
  job = make_generation_job(r, nullptr, [](GenerationOutput) {}, 77);
  ASSERT_TRUE(job.ok());
  EXPECT_FALSE(job->sampling.seed);
  EXPECT_FALSE(job->stop.max_tokens) << "0: until the context window is full";
}

TEST(GenerationJobFromRequest, TextWithoutATokenizerIsRefusedNamingTheField) {
  generate_request r = token_request({});
  r.kind = PromptKind::text;
  r.prompt = "hello";
  auto job = make_generation_job(r, nullptr, [](GenerationOutput) {}, 0);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(job.error().message().find("'prompt'"), std::string::npos) << job.error().message();
  r.kind = PromptKind::chat;
  r.messages = {{"user", "hi"}};
  job = make_generation_job(r, nullptr, [](GenerationOutput) {}, 0);
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.error().message().find("'messages'"), std::string::npos) << job.error().message();
  r = token_request({1});
  r.stop = {"\n"};
  job = make_generation_job(r, nullptr, [](GenerationOutput) {}, 0);
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.error().message().find("'stop'"), std::string::npos) << job.error().message();
}

// The executor over a SimDevice: a swap_request carrying a generation swaps the model in, joins the
// stream and answers; the sink gets every token, in order, the final chunk with usage.
struct ExecutorRig {
  WorkQueue maintenance{{.threads = 1}};
  std::unique_ptr<caf::actor_system> sys = testing::make_system();
  gpu::testing::TempDir dir;
  std::shared_ptr<const gpu::Model> model = gt::decoder(dir / "dec", /*generative=*/true);
  gpu_executor_actor exec =
      spawn_gpu_executor(*sys, engine_test::engine(gpu::testing::sim_device(64 * gt::MiB)), "n1", nullptr, maintenance,
                         nullptr);

  ~ExecutorRig() {
    caf::anon_send_exit(exec, caf::exit_reason::user_shutdown);
    sys->await_all_actors_done();
  }

  swap_request generation(generate_request r, caf::actor sink) {
    swap_request req;
    auto only = std::make_shared<infer_request>();
    only->model = r.model;
    req.request = only;
    req.run.model = model;
    req.generation = std::make_shared<const generation_order>(generation_order{std::move(r), std::move(sink)});
    return req;
  }

  std::vector<int32_t> reference(std::vector<int32_t> prompt, size_t n) {
    auto device = gpu::testing::sim_device(64 * gt::MiB);
    auto ex = gpu::LayerExecutor::create(*device, model, {0, model->num_layers()});
    EXPECT_TRUE(ex.ok());
    return gt::recomputed(*device, **ex, std::move(prompt), n);
  }
};

TEST(GenerationExecutor, StreamsEveryTokenToTheSinkEqualToTheReference) {
  ExecutorRig rig;
  caf::scoped_actor self{*rig.sys};
  generate_request r = token_request({5, 17, 33, 2});
  r.model = {"dec", 1};
  r.sampling.temperature = 0;
  r.max_tokens = 12;
  self->send(rig.exec, rig.generation(r, caf::actor_cast<caf::actor>(self)));
  std::vector<int32_t> tokens;
  std::optional<generate_chunk> final;
  bool joined = false;
  while (!final || !joined) {
    bool timed_out = false;
    self->receive([&](swap_reply& reply) { joined = true; EXPECT_FALSE(reply.error) << reply.error->message(); },
                  [&](generate_chunk& c) {
                    EXPECT_EQ(c.id, "gen-t");
                    tokens.insert(tokens.end(), c.tokens.begin(), c.tokens.end());
                    if (c.is_final()) final = c;
                  },
                  caf::after(30s) >> [&] { timed_out = true; });
    ASSERT_FALSE(timed_out) << "the generation stalled";
  }
  EXPECT_EQ(tokens, rig.reference({5, 17, 33, 2}, 12));
  EXPECT_EQ(final->finish, FinishReason::length);
  EXPECT_EQ(final->usage.prompt_tokens, 4u);
  EXPECT_EQ(final->usage.completion_tokens, 12u);
}

TEST(GenerationExecutor, RefusalsAnswerInvalidArgumentAndSendNoChunk) {
  ExecutorRig rig;
  caf::scoped_actor self{*rig.sys};
  std::vector<int32_t> too_long(gt::kContext + 1, 1);
  for (auto prompt : {std::vector<int32_t>{1, 500}, too_long}) {
    self->send(rig.exec, rig.generation(token_request(prompt), caf::actor_cast<caf::actor>(self)));
    bool answered = false;
    self->receive(
        [&](swap_reply& reply) {
          answered = true;
          ASSERT_TRUE(reply.error);
          EXPECT_EQ(reply.error->code(), ErrorCode::invalid_argument) << reply.error->message();
        },
        [&](generate_chunk&) { ADD_FAILURE() << "a refused generation sent a chunk"; },
        caf::after(30s) >> [] { ADD_FAILURE() << "no answer"; });
    EXPECT_TRUE(answered);
  }
  // The sink's mailbox holds nothing either: the executor answered first and a chunk would have
  // been sent before its answer.
  EXPECT_TRUE(self->mailbox().empty());
}

}  // namespace generation_runs_test
}  // namespace ember
