#include "gpu/executor.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "gpu/io_scheduler.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::gpu {
namespace executor_test {

using testing::TempDir;

std::vector<HostTensor> run_all(Device& d, std::shared_ptr<const Model> m, const std::vector<HostTensor>& in) {
  auto ex = testing::must(LayerExecutor::create(d, m, {0, m->num_layers()}), "creating the executor");
  return testing::must(ex->run_host(in), "running the model");
}

const HostTensor& by_name(const std::vector<HostTensor>& ts, const std::string& name) {
  for (const auto& t : ts)
    if (t.name == name) return t;
  ADD_FAILURE() << "no tensor " << name;
  return ts.front();
}

class EveryArchitecture : public ::testing::TestWithParam<const char*> {};

// Two ranges back to back, handing device tensors from one to the other, compute bit for bit what
// the whole model computes, at every cut.
TEST_P(EveryArchitecture, SplitRangesEqualTheWholeModel) {
  TempDir dir;
  auto m = testing::tiny_model(GetParam(), dir.path());
  auto d = testing::sim_device();
  const auto inputs = testing::arch_inputs(*m, 2, 8, 11);
  const auto whole = run_all(*d, m, inputs);
  auto first_stream = d->create_stream();
  const uint32_t n = m->num_layers();
  for (uint32_t cut : {1u, n / 3, n / 2, n - 1}) {
    auto a = LayerExecutor::create(*d, m, {0, cut});
    auto b = LayerExecutor::create(*d, m, {cut, n});
    ASSERT_TRUE(a.ok() && b.ok());
    std::vector<uint32_t> ids;
    for (const auto& t : inputs) ids.push_back(*m->graph().find(t.name));
    auto in = upload(*d, *first_stream, inputs, ids);
    ASSERT_TRUE(first_stream->synchronize().ok());
    auto mid = (*a)->run(*in);
    ASSERT_TRUE(mid.ok()) << mid.error().message();
    // The second range also reads model inputs the first does not hand on (e.g. token types).
    Activations handoff = *mid;
    for (uint32_t id : (*b)->input_values())
      if (!handoff.count(id)) handoff[id] = in->at(id);
    auto out = (*b)->run(handoff);
    ASSERT_TRUE(out.ok()) << out.error().message();
    // Model outputs come from whichever range produced them (BERT's hidden state may be cut off
    // before the pooler).
    Activations results = *out;
    for (uint32_t id : m->graph().outputs)
      if (mid->count(id)) results[id] = mid->at(id);
    auto host = download(*first_stream, results, m->graph().value_names);
    ASSERT_TRUE(host.ok());
    for (const auto& t : whole) EXPECT_TRUE(testing::bitwise_equal(by_name(*host, t.name), t)) << GetParam() << " cut " << cut;
  }
}

// The same split across two devices, through host memory, as a pipeline across nodes would.
TEST_P(EveryArchitecture, SplitAcrossDevicesThroughTheHost) {
  TempDir dir;
  auto m = testing::tiny_model(GetParam(), dir.path());
  auto d0 = testing::sim_device(256 << 20, 0), d1 = testing::sim_device(256 << 20, 1);
  const auto inputs = testing::arch_inputs(*m, 3, 5, 12);
  const auto whole = run_all(*d0, m, inputs);
  const uint32_t cut = m->num_layers() / 2;
  auto a = LayerExecutor::create(*d0, m, {0, cut});
  auto b = LayerExecutor::create(*d1, m, {cut, m->num_layers()});
  std::vector<HostTensor> first_in, second_in;
  for (const auto& t : inputs) {
    auto id = *m->graph().find(t.name);
    const auto& need_a = (*a)->input_values();
    const auto& need_b = (*b)->input_values();
    if (std::count(need_a.begin(), need_a.end(), id)) first_in.push_back(t);
    if (std::count(need_b.begin(), need_b.end(), id)) second_in.push_back(t);
  }
  auto mid = (*a)->run_host(first_in);
  ASSERT_TRUE(mid.ok()) << mid.error().message();
  for (auto& t : *mid) second_in.push_back(t);
  auto out = (*b)->run_host(second_in);
  ASSERT_TRUE(out.ok()) << out.error().message();
  for (const auto& t : whole) EXPECT_TRUE(testing::bitwise_equal(by_name(*out, t.name), t)) << GetParam();
}

// Flashpoint's pipeline: three stages cut as models of their own (Model::stage), each from a
// buffer that holds only the header and its own layer range (the rest is garbage, as on a node that
// fetched one range), on three devices; the tensors travel through the host from stage to stage,
// each stage taking what it reads and handing on what later stages read. Bit-identical to the
// whole model on one device.
TEST_P(EveryArchitecture, ThreeStagesCutAsModelsEqualTheWholeModel) {
  TempDir dir;
  auto m = testing::tiny_model(GetParam(), dir.path());
  const std::string manifest = testing::read_file(dir / kManifestFile);
  const auto inputs = testing::arch_inputs(*m, 2, 4, 21);
  auto d0 = testing::sim_device(256 << 20, 0);
  const auto whole = run_all(*d0, m, inputs);
  const uint32_t n = m->num_layers();
  const std::vector<LayerRange> ranges = {{0, n / 3}, {n / 3, 2 * n / 3}, {2 * n / 3, n}};
  const Graph& g = m->graph();

  std::vector<HostTensor> carried = inputs;  // what travels to the next stage
  for (size_t k = 0; k < ranges.size(); ++k) {
    SCOPED_TRACE("stage " + std::to_string(k));
    // This stage's buffer: the header and its range only.
    auto buffer = testing::must(HostBuffer::allocate(m->file_bytes()), "buffer");
    std::memset(buffer->data(), 0xA5, m->file_bytes());
    std::memcpy(buffer->data(), m->file()->data(), m->data_offset());
    const ByteRange r = m->range_bytes(ranges[k]);
    std::memcpy(buffer->data() + m->data_offset() + r.offset, m->data() + r.offset, r.length);
    auto partial = Model::from_memory(manifest, buffer, "partial");
    ASSERT_TRUE(partial.ok()) << partial.error().to_string();
    auto stage = Model::stage(*partial, ranges[k]);
    ASSERT_TRUE(stage.ok()) << stage.error().to_string();
    EXPECT_EQ((*stage)->num_layers(), ranges[k].size());
    EXPECT_EQ((*stage)->data_bytes(), r.length);

    auto device = testing::sim_device(256 << 20, static_cast<uint32_t>(k));
    auto ex = LayerExecutor::create(*device, *stage, {0, (*stage)->num_layers()});
    ASSERT_TRUE(ex.ok()) << ex.error().to_string();
    std::vector<HostTensor> in;
    for (const TensorSpec& spec : (*stage)->manifest().inputs) in.push_back(by_name(carried, spec.name));
    auto out = (*ex)->run_host(in);
    ASSERT_TRUE(out.ok()) << out.error().to_string();
    // Hand on what later layers read, or the model answers.
    std::vector<HostTensor> next;
    for (const std::vector<HostTensor>* set : {&carried, &*out}) {
      for (const HostTensor& t : *set) {
        const uint32_t v = *g.find(t.name);
        if (g.last_use[v] >= static_cast<int64_t>(ranges[k].last)) next.push_back(t);
      }
    }
    carried = std::move(next);
  }
  for (const auto& t : whole)
    EXPECT_TRUE(testing::bitwise_equal(by_name(carried, t.name), t)) << GetParam() << " " << t.name;
}

TEST(ModelStage, BadRangesAreRefusedAndTheNameMarksTheStage) {
  TempDir dir;
  auto m = testing::tiny_model("mlp", dir.path());
  EXPECT_EQ(Model::stage(m, {2, 2}).error().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(Model::stage(m, {0, m->num_layers() + 1}).error().code(), ErrorCode::invalid_argument);
  auto s = Model::stage(m, {1, m->num_layers()});
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ((*s)->manifest().name, m->manifest().name + "#1-" + std::to_string(m->num_layers()));
  // The stage's input is the first layer's output, its batch dim free.
  ASSERT_EQ((*s)->manifest().inputs.size(), 1u);
  EXPECT_EQ((*s)->manifest().inputs[0].name, m->layer(0).name);
  EXPECT_EQ((*s)->manifest().inputs[0].shape[0], -1);
}

// Each row of a batch computes what it computes alone (up to GEMM blocking differences).
TEST_P(EveryArchitecture, BatchRowsMatchSingleRuns) {
  TempDir dir;
  auto m = testing::tiny_model(GetParam(), dir.path());
  auto d = testing::sim_device();
  const auto batch = testing::arch_inputs(*m, 4, 6, 21);
  const auto together = run_all(*d, m, batch);
  for (int64_t row = 0; row < 4; ++row) {
    std::vector<HostTensor> single;
    for (const auto& t : batch) {
      TensorDesc desc = t.desc;
      desc.shape[0] = 1;
      auto one = HostTensor::allocate(t.name, desc);
      std::memcpy(one->data(), t.data() + row * desc.bytes(), desc.bytes());
      single.push_back(std::move(*one));
    }
    const auto alone = run_all(*d, m, single);
    for (const auto& t : alone) {
      const HostTensor& all = by_name(together, t.name);
      auto slice = HostTensor::allocate(t.name, t.desc);
      std::memcpy(slice->data(), all.data() + row * t.desc.bytes(), t.desc.bytes());
      EXPECT_LT(testing::relative_error(*slice, t), 1e-5) << GetParam() << " row " << row << " " << t.name;
    }
  }
}

// A swap-in (weights copied in groups on a copy stream, each layer launched once its group arrived)
// computes bit for bit what a warm executor computes, for every grouping: one group, one per layer,
// and small byte groups; with the copy engine paced (1 GB/s) so the copies really run behind.
TEST_P(EveryArchitecture, SwapInEqualsAWarmRunForEveryGrouping) {
  TempDir dir;
  auto m = testing::tiny_model(GetParam(), dir.path());
  SimDeviceConfig c;
  c.memory_bytes = 256ull << 20;
  c.compute_threads = 2;
  c.pcie_bytes_per_s = 1e9;
  auto d = SimDevice::create(c, 0);
  ASSERT_TRUE(d.ok());
  const auto inputs = testing::arch_inputs(*m, 2, 8, 31);
  const auto warm = run_all(**d, m, inputs);
  IoScheduler io(**d, {16 << 10, 3});
  for (auto [group, through] : std::vector<std::pair<uint64_t, IoScheduler*>>{
           {0, nullptr}, {1, nullptr}, {4096, nullptr}, {64 << 10, nullptr}, {0, &io}, {4096, &io}, {64 << 10, &io}}) {
    auto ex = LayerExecutor::swap_in(**d, m, {0, m->num_layers()}, SwapInOptions{group, {}, nullptr, through});
    ASSERT_TRUE(ex.ok()) << ex.error().message();
    if (group == 0) {
      EXPECT_EQ((*ex)->weight_groups(), 1u);
    }
    if (group == 1) {
      EXPECT_GT((*ex)->weight_groups(), 1u);
    }
    auto out = (*ex)->run_host(inputs);
    ASSERT_TRUE(out.ok()) << out.error().message();
    EXPECT_TRUE((*ex)->weights_resident());
    for (const auto& t : warm) {
      const HostTensor& got = by_name(*out, t.name);
      ASSERT_EQ(got.desc.bytes(), t.desc.bytes());
      EXPECT_EQ(std::memcmp(got.data(), t.data(), t.desc.bytes()), 0)
          << GetParam() << " group " << group << (through ? " interleaved " : " ") << t.name;
    }
    auto again = (*ex)->run_host(inputs);  // warm now: no waits, same answer
    ASSERT_TRUE(again.ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, EveryArchitecture, ::testing::Values("mlp", "resnet50", "bert-base", "gpt2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// PCIe sharing: four models swapped in at once on one paced device, their copies interleaved by
// the device's I/O scheduler block by block (or, without it, each issued at once), each run answers
// bit for bit as the model's warm run.
TEST(Executor, ConcurrentSwapInsInterleavedOrNotEqualWarmRuns) {
  TempDir dir;
  SimDeviceConfig c;
  c.memory_bytes = 512ull << 20;
  c.compute_threads = 1;
  c.pcie_bytes_per_s = 4e9;
  auto d = SimDevice::create(c, 0);
  ASSERT_TRUE(d.ok());
  std::vector<std::shared_ptr<const Model>> models;
  std::vector<std::vector<HostTensor>> inputs, warm;
  for (const char* arch : {"mlp", "resnet50", "bert-base", "gpt2"}) {
    models.push_back(testing::tiny_model(arch, dir.path() + "/" + arch));
    inputs.push_back(testing::arch_inputs(*models.back(), 2, 8, 41));
    warm.push_back(run_all(**d, models.back(), inputs.back()));
  }
  for (bool interleaved : {false, true}) {
    IoScheduler io(**d, {64 << 10, 4, true});
    std::vector<std::thread> threads;
    std::vector<Result<std::vector<HostTensor>>> outs(models.size(), internal_error("not run"));
    for (size_t i = 0; i < models.size(); ++i) {
      threads.emplace_back([&, i] {
        auto ex = LayerExecutor::swap_in(**d, models[i], {0, models[i]->num_layers()},
                                         SwapInOptions{256 << 10, {}, nullptr, interleaved ? &io : nullptr});
        if (!ex.ok()) return void(outs[i] = ex.error());
        outs[i] = (*ex)->run_host(inputs[i]);
      });
    }
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < models.size(); ++i) {
      ASSERT_TRUE(outs[i].ok()) << outs[i].error().message();
      for (const auto& t : warm[i]) {
        const HostTensor& got = by_name(*outs[i], t.name);
        EXPECT_EQ(std::memcmp(got.data(), t.data(), t.desc.bytes()), 0)
            << models[i]->manifest().name << (interleaved ? " interleaved " : " ") << t.name;
      }
    }
    EXPECT_EQ(io.stats().jobs, interleaved ? models.size() : 0u);
  }
}

TEST(Executor, WeightsThatDoNotFitAreOutOfMemoryAndLeakNothing) {
  TempDir dir;
  auto m = testing::tiny_model("resnet50", dir.path());  // 13.5 MiB of weights
  auto d = testing::sim_device(8 << 20);
  auto ex = LayerExecutor::create(*d, m, {0, m->num_layers()});
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.error().code(), ErrorCode::out_of_memory);
  EXPECT_NE(ex.error().message().find("weights of model 'resnet50-tiny'"), std::string::npos) << ex.error().message();
  EXPECT_EQ(d->memory().used_bytes, 0u);
  // A range that fits still works on the same device.
  auto part = LayerExecutor::create(*d, m, {0, 20});
  EXPECT_TRUE(part.ok());
}

TEST(Executor, ActivationsThatDoNotFitAreOutOfMemoryAndTheDeviceStaysUsable) {
  TempDir dir;
  auto m = testing::tiny_model("mlp", dir.path());
  auto d = testing::sim_device(1 << 20);
  auto ex = LayerExecutor::create(*d, m, {0, m->num_layers()});
  ASSERT_TRUE(ex.ok());
  const uint64_t weights = d->memory().used_bytes;
  auto huge = testing::random_tensor("input", {DType::f32, Shape{20000, 16}}, 1);  // 2.5 MiB of activations
  auto r = (*ex)->run_host({huge});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::out_of_memory);
  EXPECT_EQ(d->memory().used_bytes, weights);
  EXPECT_TRUE(d->status().ok());
  auto small = testing::random_tensor("input", {DType::f32, Shape{2, 16}}, 1);
  EXPECT_TRUE((*ex)->run_host({small}).ok());
}

TEST(Executor, BadInputsAreRejectedAndDisturbNothing) {
  TempDir dir;
  auto m = testing::tiny_model("gpt2", dir.path());
  auto d = testing::sim_device();
  auto ex = LayerExecutor::create(*d, m, {0, m->num_layers()});
  ASSERT_TRUE(ex.ok());
  const auto good = testing::arch_inputs(*m, 2, 4, 3);
  auto expect_error = [&](const std::vector<HostTensor>& in, const std::string& what) {
    auto r = (*ex)->run_host(in);
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.error().code(), ErrorCode::invalid_argument) << r.error().to_string();
    EXPECT_NE(r.error().message().find(what), std::string::npos) << r.error().message();
  };
  expect_error({testing::random_tensor("input_ids", {DType::f32, Shape{2, 4}}, 1)}, "input 'input_ids' is float32[2, 4]");
  expect_error({testing::random_tensor("input_ids", {DType::i64, Shape{8}}, 1, 0, 0, 100)}, "expected int64[-1, -1]");
  expect_error({testing::random_tensor("input_ids", {DType::i64, Shape{2, 40}}, 1, 0, 0, 100)}, "exceeds the 32 positions");
  expect_error({testing::random_tensor("input_ids", {DType::i64, Shape{2, 4}}, 1, 0, 0, 1000)}, "outside the 100 rows of layer 'wte'");
  expect_error({}, "missing input 'input_ids'");
  expect_error({good[0], good[0]}, "given twice");
  expect_error({good[0], testing::random_tensor("bogus", {DType::f32, Shape{1}}, 1)}, "unexpected input 'bogus'");
  EXPECT_TRUE(d->status().ok());
  auto ok = (*ex)->run_host(good);
  ASSERT_TRUE(ok.ok()) << ok.error().message();
}

TEST(Executor, DeviceFaultFailsTheRunAndEveryLaterOne) {
  TempDir dir;
  auto m = testing::tiny_model("bert-base", dir.path());
  auto d = testing::sim_device();
  auto ex = LayerExecutor::create(*d, m, {0, m->num_layers()});
  ASSERT_TRUE(ex.ok());
  const auto in = testing::arch_inputs(*m, 1, 4, 5);
  ASSERT_TRUE((*ex)->run_host(in).ok());
  d->TEST_fail_after_kernels(7);
  auto r = (*ex)->run_host(in);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::device_fault);
  EXPECT_NE(r.error().message().find("layers [0, 25)"), std::string::npos) << r.error().message();
  auto again = (*ex)->run_host(in);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), ErrorCode::device_fault);
}

TEST(Executor, SwapInOfWeightsThatDoNotFitIsOutOfMemoryAndLeakNothing) {
  TempDir dir;
  auto m = testing::tiny_model("bert-base", dir.path());
  auto d = testing::sim_device(64 << 10);
  auto ex = LayerExecutor::swap_in(*d, m, {0, m->num_layers()});
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.error().code(), ErrorCode::out_of_memory);
  EXPECT_EQ(d->memory().used_bytes, 0u);
  EXPECT_EQ(LayerExecutor::swap_in(*d, m, {0, m->num_layers() + 1}).error().code(), ErrorCode::invalid_argument);
}

TEST(Executor, RangesOutsideTheModelAreRejected) {
  TempDir dir;
  auto m = testing::tiny_model("mlp", dir.path());
  auto d = testing::sim_device();
  EXPECT_FALSE(LayerExecutor::create(*d, m, {3, 3}).ok());
  EXPECT_FALSE(LayerExecutor::create(*d, m, {2, 9}).ok());
  auto relu_only = LayerExecutor::create(*d, m, {1, 2});  // no weights at all
  ASSERT_TRUE(relu_only.ok());
  EXPECT_EQ((*relu_only)->weight_bytes(), 0u);
  auto x = testing::random_tensor("fc1", {DType::f32, Shape{3, 32}}, 9);
  auto y = (*relu_only)->run_host({x});
  ASSERT_TRUE(y.ok()) << y.error().message();
  for (int i = 0; i < 96; ++i) EXPECT_EQ((*y)[0].as<float>()[i], std::max(0.f, x.as<float>()[i]));
}

TEST(Executor, PlansAreReusedAndActivationMemoryIsShared) {
  TempDir dir;
  auto m = testing::tiny_model("resnet50", dir.path());
  auto d = testing::sim_device();
  auto ex = LayerExecutor::create(*d, m, {0, m->num_layers()});
  const auto in = testing::arch_inputs(*m, 2, 0, 1);
  ASSERT_TRUE((*ex)->run_host(in).ok());
  // Liveness packing: far less than the sum of every intermediate value and scratch area.
  uint64_t sum = 0;
  auto values = m->check_inputs({in[0].desc});
  for (uint32_t l = 0; l < m->num_layers(); ++l) {
    std::vector<TensorDesc> layer_in;
    for (uint32_t v : m->graph().layer_inputs[l]) layer_in.push_back(*(*values)[v]);
    sum += (*values)[m->graph().layer_value(l)]->bytes() + workspace_bytes(m->layer(l).op, m->layer(l).attrs, layer_in);
  }
  EXPECT_LT((*ex)->last_plan_bytes(), sum / 4);
  const uint64_t used_after_first = d->memory().used_bytes;
  ASSERT_TRUE((*ex)->run_host(in).ok());
  EXPECT_EQ(d->memory().used_bytes, used_after_first);
}

}  // namespace executor_test
}  // namespace ember::gpu
