// The CUDA plugin (gpu/cuda/) seen from outside, as device_registry.cpp sees it.
//
// On every machine: kind=auto falls back to SimDevices with a reason, kind=cuda is an error (not a
// crash) when no GPU answers, and, when this build has the plugin, the plugin sits beside the
// binary, loads, and reports the driver problem through its entry point. On a machine with a GPU,
// CudaDeviceTest also runs the device contract and every op against SimDevice (the CPU kernels,
// themselves checked against PyTorch); without one those tests skip and say so. The op cases are
// run on SimDevice everywhere, so that a bad case is found before it reaches a GPU machine.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "config/device_config.hpp"
#include "gpu/cuda_plugin_abi.hpp"
#include "gpu/device_registry.hpp"
#include "gpu/sim_device.hpp"
#include "model/half.hpp"
#include "tests/cuda/cuda_op_cases.hpp"

namespace ember::gpu {
namespace cuda_plugin_test {

// CTest runs test cases as parallel processes: keep each process's CUDA reservation small instead
// of the default 90% of free memory (an explicit setting in the environment wins).
const bool kSmallCudaReservation = [] { return ::setenv("EMBER_CUDA_MEMORY", "512MiB", 0) == 0; }();

std::filesystem::path exe_dir() { return std::filesystem::read_symlink("/proc/self/exe").parent_path(); }

// The plugin beside this binary, loaded once like the registry does (never closed).
struct Plugin {
  void* handle = nullptr;
  CudaPluginApi api{};
  std::string error;  // why handle is null
};

const Plugin& plugin() {
  static const Plugin loaded = [] {
    Plugin p;
    const std::string path = (exe_dir() / "libember_cuda.so").string();
    if (!std::filesystem::exists(path)) {
      p.error = path + " does not exist";
      return p;
    }
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      p.error = ::dlerror();
      return p;
    }
    auto get = reinterpret_cast<GetCudaPluginApi>(::dlsym(h, kCudaPluginEntry));
    if (!get) {
      p.error = path + " does not export " + kCudaPluginEntry;
      return p;
    }
    p.handle = h;
    p.api = get();
    return p;
  }();
  return loaded;
}

// CUDA devices present: -1 with `why` when the plugin is missing or the driver refuses.
int gpu_count(std::string* why) {
  const Plugin& p = plugin();
  if (!p.handle) {
    *why = "CUDA plugin not loaded: " + p.error;
    return -1;
  }
  char err[512] = {0};
  const int n = p.api.device_count(err, sizeof(err));
  *why = n < 0 ? err : (n == 0 ? "no CUDA device present" : "");
  return n;
}

DevicesConfig devices_config(DeviceKind kind) {
  DevicesConfig config;
  config.kind = kind;
  config.count = 1;
  config.sim.memory_bytes = 64ull << 20;
  config.sim.compute_threads = 1;
  return config;
}

TEST(CudaPluginTest, AutoFallsBackToSimDevicesWithAReason) {
  std::string why;
  const int gpus = gpu_count(&why);
  auto opened = open_devices(devices_config(DeviceKind::automatic));
  ASSERT_TRUE(opened.ok()) << opened.error().to_string();
  ASSERT_EQ(opened->devices.size(), 1u);
  if (gpus > 0) {
    EXPECT_EQ(opened->devices[0]->info().kind, DeviceKind::cuda);
    EXPECT_EQ(opened->cuda_unavailable_reason, "");
    return;
  }
  EXPECT_EQ(opened->devices[0]->info().kind, DeviceKind::sim);
  EXPECT_EQ(opened->devices[0]->info().name, "sim:0");
  const std::string& reason = opened->cuda_unavailable_reason;
  EXPECT_FALSE(reason.empty());
#ifdef EMBER_HAVE_CUDA
  // The plugin loaded, so the reason is the driver's answer, e.g. error 35 on a machine without one.
  if (plugin().handle) {
    EXPECT_NE(reason.find("cudaGetDeviceCount"), std::string::npos) << reason;
  }
#else
  EXPECT_NE(reason.find("no CUDA support"), std::string::npos) << reason;
#endif
}

TEST(CudaPluginTest, CudaKindIsAnErrorWhenNoGpuAnswers) {
  std::string why;
  const int gpus = gpu_count(&why);
  auto opened = open_devices(devices_config(DeviceKind::cuda));
  if (gpus > 0) {
    ASSERT_TRUE(opened.ok()) << opened.error().to_string();
    EXPECT_EQ(opened->devices.at(0)->info().kind, DeviceKind::cuda);
    return;
  }
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().code(), ErrorCode::unsupported) << opened.error().to_string();
  EXPECT_NE(opened.error().message().find("devices.kind is cuda"), std::string::npos) << opened.error().message();
}

TEST(CudaPluginTest, PluginSitsBesideTheBinary) {
  const auto candidates = cuda_plugin_candidates();
#ifdef EMBER_HAVE_CUDA
  const std::string beside = (exe_dir() / "libember_cuda.so").string();
  EXPECT_NE(std::find(candidates.begin(), candidates.end(), beside), candidates.end());
  EXPECT_TRUE(std::filesystem::exists(beside)) << beside;
#else
  EXPECT_TRUE(candidates.empty());
  GTEST_SKIP() << "this build has no CUDA plugin (configured without nvcc or cuBLAS)";
#endif
}

TEST(CudaPluginTest, EntryPointReportsTheDriverInsteadOfCrashing) {
#ifndef EMBER_HAVE_CUDA
  GTEST_SKIP() << "this build has no CUDA plugin (configured without nvcc or cuBLAS)";
#endif
  const Plugin& p = plugin();
  if (!p.handle && p.error.find("libcublas") != std::string::npos) {
    GTEST_SKIP() << "the CUDA toolkit's libraries are not installed here: " << p.error;
  }
  ASSERT_NE(p.handle, nullptr) << p.error;
  EXPECT_EQ(p.api.abi_version, kCudaPluginAbiVersion);

  char err[512] = {0};
  const int n = p.api.device_count(err, sizeof(err));
  if (n < 0) {
    EXPECT_NE(std::string(err).find("cudaGetDeviceCount"), std::string::npos) << err;
    // The error is sticky in CUDA: the same answer again, still no crash.
    char again[512] = {0};
    EXPECT_EQ(p.api.device_count(again, sizeof(again)), -1);
    EXPECT_STREQ(err, again);
    // A short buffer is truncated and terminated, not overrun.
    char tiny[8];
    std::memset(tiny, 'x', sizeof(tiny));
    EXPECT_EQ(p.api.device_count(tiny, sizeof(tiny)), -1);
    EXPECT_LT(::strnlen(tiny, sizeof(tiny)), sizeof(tiny));
  }
  // An ordinal that does not exist (every ordinal, without a driver) is a message, not a device.
  char create_err[512] = {0};
  Device* d = p.api.create_device(static_cast<uint32_t>(std::max(n, 0)), create_err, sizeof(create_err));
  EXPECT_EQ(d, nullptr);
  EXPECT_GT(std::strlen(create_err), 0u);
  delete d;
}

TEST(CudaPluginTest, BadMemorySettingIsRefusedByCreateDevice) {
#ifndef EMBER_HAVE_CUDA
  GTEST_SKIP() << "this build has no CUDA plugin (configured without nvcc or cuBLAS)";
#endif
  const Plugin& p = plugin();
  if (!p.handle) GTEST_SKIP() << "CUDA plugin not loaded: " << p.error;
  const char* old = std::getenv("EMBER_CUDA_MEMORY");
  const std::string saved = old ? old : "";
  for (const char* bad : {"lots", "0", "150%", "%"}) {
    ::setenv("EMBER_CUDA_MEMORY", bad, 1);
    char err[512] = {0};
    Device* d = p.api.create_device(0, err, sizeof(err));
    EXPECT_EQ(d, nullptr) << bad;
    EXPECT_NE(std::string(err).find("EMBER_CUDA_MEMORY"), std::string::npos) << bad << ": " << err;
    delete d;
  }
  if (old) ::setenv("EMBER_CUDA_MEMORY", saved.c_str(), 1);
  else ::unsetenv("EMBER_CUDA_MEMORY");
}

// -- one case per op (and per kernel path), run on SimDevice everywhere and on CUDA when present --

TensorDesc f32(Shape s) { return {DType::f32, s}; }

LayerAttrs window(int64_t k, int64_t s, int64_t p) {
  LayerAttrs a;
  a.kernel[0] = a.kernel[1] = k;
  a.stride[0] = a.stride[1] = s;
  a.padding[0] = a.padding[1] = p;
  return a;
}

std::vector<OpCase> op_cases() {
  std::vector<OpCase> cases;
  auto add = [&](std::string name, OpKind op, LayerAttrs a, std::vector<TensorDesc> in) {
    cases.push_back({std::move(name), op, a, std::move(in)});
  };
  LayerAttrs a;

  a = {};
  a.in_features = 16, a.out_features = 24;
  add("linear", OpKind::linear, a, {f32({2, 3, 16})});
  a.bias = false;
  add("linear_no_bias", OpKind::linear, a, {f32({5, 16})});

  a = window(3, 2, 1);
  a.in_channels = 3, a.out_channels = 8;
  add("conv2d_im2col", OpKind::conv2d, a, {f32({2, 3, 9, 9})});
  a = window(1, 1, 0);
  a.in_channels = 8, a.out_channels = 16;
  add("conv2d_pointwise", OpKind::conv2d, a, {f32({2, 8, 5, 5})});
  a.bias = false;
  add("conv2d_pointwise_no_bias", OpKind::conv2d, a, {f32({1, 8, 5, 5})});
  a = window(3, 1, 2);
  a.in_channels = 8, a.out_channels = 12, a.groups = 4, a.dilation[0] = a.dilation[1] = 2;
  add("conv2d_grouped_dilated", OpKind::conv2d, a, {f32({2, 8, 7, 7})});
  a = window(3, 2, 1);
  a.in_channels = a.out_channels = a.groups = 6;
  a.kernel[1] = 5, a.padding[1] = 2;
  add("conv2d_depthwise", OpKind::conv2d, a, {f32({2, 6, 8, 10})});

  a = {};
  a.num_features = 4;
  add("batch_norm", OpKind::batch_norm, a, {f32({2, 4, 5, 5})});
  add("relu", OpKind::relu, {}, {f32({1000})});
  add("gelu_erf", OpKind::gelu, {}, {f32({3, 333})});
  a = {};
  a.tanh_approximation = true;
  add("gelu_tanh", OpKind::gelu, a, {f32({3, 333})});
  add("tanh", OpKind::tanh, {}, {f32({7, 11})});
  a = {};
  a.num_features = 300;
  add("layer_norm", OpKind::layer_norm, a, {f32({3, 7, 300})});
  a = {};
  a.dim = -1;
  add("softmax_last", OpKind::softmax, a, {f32({4, 517})});
  a.dim = 1;
  add("softmax_middle", OpKind::softmax, a, {f32({2, 5, 3})});

  a = {};
  a.embed_dim = 16, a.num_heads = 4;
  add("attention", OpKind::attention, a, {f32({2, 5, 16})});
  a.causal = true, a.bias = false;
  add("attention_causal_no_bias", OpKind::attention, a, {f32({3, 7, 16})});
  a = {};
  a.embed_dim = 64, a.num_heads = 32;  // 32 slices: two batches of 16 along heads
  add("attention_many_heads", OpKind::attention, a, {f32({1, 9, 64})});
  a = {};
  a.embed_dim = 8, a.num_heads = 2, a.causal = true;  // 40 slices along batch entries
  add("attention_many_batches", OpKind::attention, a, {f32({20, 6, 8})});

  a = {};
  a.num_embeddings = 10, a.embedding_dim = 12;
  add("embedding_i64", OpKind::embedding, a, {{DType::i64, Shape{2, 6}}});
  add("embedding_i32", OpKind::embedding, a, {{DType::i32, Shape{3, 4}}});
  a.positional = true;
  add("embedding_positional", OpKind::embedding, a, {{DType::i64, Shape{2, 7}}});

  add("add", OpKind::add, {}, {f32({4, 9}), f32({4, 9})});
  add("max_pool2d", OpKind::max_pool2d, window(3, 2, 1), {f32({2, 3, 9, 9})});
  add("avg_pool2d", OpKind::avg_pool2d, window(3, 2, 1), {f32({2, 3, 9, 9})});
  add("avg_pool2d_k2", OpKind::avg_pool2d, window(2, 2, 0), {f32({1, 2, 8, 6})});
  add("global_avg_pool", OpKind::global_avg_pool, {}, {f32({2, 3, 7, 7})});
  add("flatten", OpKind::flatten, {}, {f32({2, 3, 4, 5})});
  a = {};
  a.shape = Shape{2, -1};
  add("reshape", OpKind::reshape, a, {f32({2, 3, 4})});
  a = {};
  a.dim = 1, a.index = -1;
  add("select_middle", OpKind::select, a, {f32({3, 4, 5})});
  a.dim = 0, a.index = 1;
  add("select_first_i64", OpKind::select, a, {{DType::i64, Shape{3, 4}}});

  // Half-precision weights (attrs.weights): linear on the tensor cores (its input rounded to the
  // weights' width on CUDA, so the comparison's tolerance is the width's), the others widened.
  for (DType width : {DType::f16, DType::bf16}) {
    const std::string w = width == DType::f16 ? "_f16" : "_bf16";
    a = {};
    a.in_features = 64, a.out_features = 48, a.weights = width;
    add("linear" + w, OpKind::linear, a, {f32({3, 5, 64})});
    a = window(3, 1, 1);
    a.in_channels = 4, a.out_channels = 8, a.weights = width;
    add("conv2d" + w, OpKind::conv2d, a, {f32({2, 4, 6, 6})});
    a = {};
    a.num_features = 32, a.weights = width;
    add("layer_norm" + w, OpKind::layer_norm, a, {f32({3, 32})});
    a = {};
    a.embed_dim = 16, a.num_heads = 4, a.weights = width;
    add("attention" + w, OpKind::attention, a, {f32({2, 5, 16})});
    a = {};
    a.num_embeddings = 10, a.embedding_dim = 12, a.weights = width;
    add("embedding" + w, OpKind::embedding, a, {{DType::i64, Shape{2, 6}}});
  }
  add_general_op_cases(cases);
  add_kv_attention_op_cases(cases);
  return cases;
}

// Inputs and weights of one case, deterministic per case.
struct CaseData {
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<WeightSpec> specs;
  std::vector<std::vector<uint8_t>> weights;  // empty: absent optional weight
  TensorDesc output;
  uint64_t workspace = 0;
};

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Floats uniform in [lo, hi] (rounded to halves when `halves`), integers uniform in [id_lo, id_hi],
// uint8 0 or 1, float16/bfloat16 any finite bit pattern.
struct Draw {
  float lo = -2.f, hi = 2.f;
  bool halves = false;
  int64_t id_lo = -1, id_hi = 0;
};

std::vector<uint8_t> random_tensor(const TensorDesc& d, std::mt19937& rng, const Draw& draw) {
  const auto n = static_cast<size_t>(d.shape.numel());
  if (d.dtype == DType::i64 || d.dtype == DType::i32) {
    std::uniform_int_distribution<int64_t> id(draw.id_lo, draw.id_hi);
    std::vector<int64_t> v(n);
    for (auto& x : v) x = id(rng);
    if (d.dtype == DType::i64) return bytes_of(v);
    return bytes_of(std::vector<int32_t>(v.begin(), v.end()));
  }
  if (d.dtype == DType::u8) {
    std::uniform_int_distribution<int> bit(0, 1);
    std::vector<uint8_t> v(n);
    for (auto& x : v) x = static_cast<uint8_t>(bit(rng));
    return v;
  }
  if (d.dtype == DType::f16 || d.dtype == DType::bf16) {
    const uint16_t exponent = d.dtype == DType::f16 ? 0x7c00 : 0x7f80;  // all ones: inf or NaN
    std::uniform_int_distribution<int> bits(0, 0xffff);
    std::vector<uint16_t> v(n);
    for (auto& x : v) {
      x = static_cast<uint16_t>(bits(rng));
      if ((x & exponent) == exponent) x ^= 0x4000;
    }
    return bytes_of(v);
  }
  std::uniform_real_distribution<float> u(draw.lo, draw.hi);
  std::vector<float> v(n);
  for (auto& x : v) x = draw.halves ? std::round(u(rng) * 2.f) / 2.f : u(rng);
  return bytes_of(v);
}

// The dtype a weight is held at: a constant's value as its spec says, a float weight at the layer's
// width (attrs.weights: float32, float16 or bfloat16).
DType weight_dtype(const OpCase& c, const WeightSpec& s) { return c.op == OpKind::constant ? s.dtype : c.attrs.weights; }

// float32 bytes rounded to float16 or bfloat16.
std::vector<uint8_t> narrowed(const std::vector<uint8_t>& f32, DType to) {
  std::vector<uint16_t> out(f32.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    float v;
    std::memcpy(&v, f32.data() + 4 * i, 4);
    out[i] = to == DType::f16 ? f32_to_f16(v) : f32_to_bf16(v);
  }
  return bytes_of(out);
}

Result<CaseData> make_case_data(const OpCase& c, uint32_t seed) {
  CaseData data;
  EMBER_ASSIGN_OR_RETURN(data.output, infer_output(c.op, c.attrs, c.inputs));
  data.workspace = workspace_bytes(c.op, c.attrs, c.inputs);
  std::mt19937 rng(seed);
  // Ids include one out-of-range id at each end of the embedding table.
  Draw draw{c.lo, c.hi, c.halves, -1, c.attrs.num_embeddings};
  if (c.ids) draw.id_lo = c.ids->first, draw.id_hi = c.ids->second;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const bool given = i < c.given.size() && !c.given[i].empty();
    if (given && c.given[i].size() != c.inputs[i].bytes()) {
      return invalid_argument("case " + c.name + ": given input " + std::to_string(i) + " has the wrong size");
    }
    data.inputs.push_back(given ? c.given[i] : random_tensor(c.inputs[i], rng, draw));
  }
  data.specs = weight_specs(c.op, c.attrs);
  for (const WeightSpec& s : data.specs) {
    if (!s.required) {
      data.weights.emplace_back();
      continue;
    }
    // Matrices scaled by fan-in as PyTorch initialises them, so that attention scores stay in the
    // range trained models have (huge scores make softmax amplify rounding differences).
    Draw w{-1.f, 1.f, false, -1, 0};
    if (s.shape.rank >= 2) w.hi = 1.f / std::sqrt(static_cast<float>(s.shape.prod(1, s.shape.rank))), w.lo = -w.hi;
    if (s.role == "running_var") w.lo = 0.5f, w.hi = 1.5f;
    const DType held = weight_dtype(c, s);
    std::vector<uint8_t> bytes = random_tensor({held == s.dtype ? s.dtype : DType::f32, s.shape}, rng, w);
    if (held != s.dtype) bytes = narrowed(bytes, held);  // half-precision weights: drawn, then rounded
    data.weights.push_back(std::move(bytes));
  }
  return data;
}

// Uploads a case to `device`, runs it on one stream and returns the output bytes.
Result<std::vector<uint8_t>> run_case(Device& device, const OpCase& c, const CaseData& data) {
  std::vector<std::shared_ptr<DeviceBuffer>> buffers;  // outlive the stream, whose destructor waits
  std::unique_ptr<Stream> stream = device.create_stream();
  auto buffer = [&](uint64_t bytes) -> Result<DevicePtr> {
    EMBER_ASSIGN_OR_RETURN(auto b, DeviceBuffer::allocate(device, std::max<uint64_t>(bytes, 1)));
    buffers.push_back(b);
    return b->ptr();
  };
  KernelArgs args;
  args.op = c.op;
  args.attrs = c.attrs;
  std::vector<std::vector<uint8_t>> inputs = data.inputs;
  if (!c.kv_pool.empty()) {  // kv_attention: the pool on this device, kv_meta's block numbers made addresses
    EMBER_ASSIGN_OR_RETURN(DevicePtr pool, buffer(c.kv_pool.size()));
    stream->copy_to_device(pool, c.kv_pool.data(), c.kv_pool.size());
    auto* meta = reinterpret_cast<int64_t*>(inputs[2].data());
    const int64_t tokens = c.inputs[0].shape[0], entries = c.inputs[2].shape[0];
    for (int64_t e = kKvMetaHeader + tokens; e < entries; ++e) {
      if (meta[e] > 0) meta[e] = static_cast<int64_t>(pool.addr + static_cast<uint64_t>((meta[e] - 1) * c.kv_block_bytes));
    }
  }
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    EMBER_ASSIGN_OR_RETURN(DevicePtr p, buffer(inputs[i].size()));
    stream->copy_to_device(p, inputs[i].data(), inputs[i].size());
    args.inputs[args.num_inputs++] = DeviceTensor{c.inputs[i], p};
  }
  for (size_t i = 0; i < data.specs.size(); ++i) {
    DeviceTensor t{{weight_dtype(c, data.specs[i]), data.specs[i].shape}, DevicePtr{}};
    if (!data.weights[i].empty()) {
      EMBER_ASSIGN_OR_RETURN(t.ptr, buffer(data.weights[i].size()));
      stream->copy_to_device(t.ptr, data.weights[i].data(), data.weights[i].size());
    }
    args.weights[args.num_weights++] = t;
  }
  EMBER_ASSIGN_OR_RETURN(DevicePtr out, buffer(data.output.bytes()));
  args.output = DeviceTensor{data.output, out};
  if (data.workspace) {
    EMBER_ASSIGN_OR_RETURN(args.workspace, buffer(data.workspace));
    args.workspace_bytes = data.workspace;
  }
  stream->launch(args);
  std::vector<uint8_t> result(data.output.bytes());
  stream->copy_to_host(result.data(), out, result.size());
  EMBER_RETURN_IF_ERROR(stream->synchronize());
  return result;
}

std::vector<float> floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

std::unique_ptr<Device> make_sim_device() {
  SimDeviceConfig config;
  config.memory_bytes = 256ull << 20;
  config.compute_threads = 1;
  auto sim = SimDevice::create(config, 0);
  EXPECT_TRUE(sim.ok());
  return sim.ok() ? std::move(*sim) : nullptr;
}

// Every case is valid and runs on SimDevice here, so the CUDA comparison below tests kernels only.
TEST(CudaConformanceCases, RunOnSimDevice) {
  auto sim = make_sim_device();
  ASSERT_TRUE(sim);
  std::vector<bool> covered(static_cast<size_t>(OpKind::count), false);
  for (const OpCase& c : op_cases()) {
    SCOPED_TRACE(c.name);
    auto data = make_case_data(c, 1);
    ASSERT_TRUE(data.ok()) << data.error().to_string();
    auto out = run_case(*sim, c, *data);
    ASSERT_TRUE(out.ok()) << out.error().to_string();
    if (data->output.dtype == DType::f32) {
      for (float v : floats(*out)) ASSERT_TRUE(std::isfinite(v));
    }
    covered[static_cast<size_t>(c.op)] = true;
  }
  for (size_t op = 0; op < covered.size(); ++op) {
    EXPECT_TRUE(covered[op]) << "no case for op " << op_name(static_cast<OpKind>(op));
  }
}

// -- on a GPU machine only -----------------------------------------------------------------------

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (gpu_count(&why) <= 0) {
      GTEST_SKIP() << "no CUDA device answers here (" << why
                   << "), so the CUDA kernels cannot run; this test is meaningful on a GPU machine";
    }
    char err[512] = {0};
    cuda_.reset(plugin().api.create_device(0, err, sizeof(err)));  // EMBER_CUDA_MEMORY: 512MiB
    ASSERT_TRUE(cuda_) << err;
    sim_ = make_sim_device();
    ASSERT_TRUE(sim_);
  }

  std::unique_ptr<Device> cuda_;
  std::unique_ptr<Device> sim_;
};

TEST_F(CudaDeviceTest, InfoAndOutOfMemoryNameTheDevice) {
  const DeviceInfo& info = cuda_->info();
  EXPECT_EQ(info.kind, DeviceKind::cuda);
  EXPECT_EQ(info.name.rfind("cuda:0", 0), 0u) << info.name;
  EXPECT_GT(info.memory_bytes, 0u);
  auto a = cuda_->allocate(1000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->addr % 256, 0u);
  EXPECT_EQ(cuda_->memory().used_bytes, 1024u);
  auto huge = cuda_->allocate(info.memory_bytes + 1);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().code(), ErrorCode::out_of_memory);
  EXPECT_NE(huge.error().message().find("cuda:0"), std::string::npos) << huge.error().message();
  cuda_->free(*a);
  EXPECT_EQ(cuda_->memory().used_bytes, 0u);
  EXPECT_TRUE(cuda_->status().ok());
}

TEST_F(CudaDeviceTest, CopiesEventsAndCallbacksKeepOrder) {
  auto stream = cuda_->create_stream();
  auto other = cuda_->create_stream();
  auto done = cuda_->create_event();
  EXPECT_TRUE(done->query());  // never recorded
  std::vector<float> host(1 << 20), back(host.size());
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
  auto a = DeviceBuffer::allocate(*cuda_, host.size() * 4);
  auto b = DeviceBuffer::allocate(*cuda_, host.size() * 4);
  ASSERT_TRUE(a.ok() && b.ok());
  stream->copy_to_device((*a)->ptr(), host.data(), host.size() * 4);
  stream->record(*done);
  other->wait(*done);
  other->copy_on_device((*b)->ptr(), (*a)->ptr(), host.size() * 4);
  other->copy_to_host(back.data(), (*b)->ptr(), back.size() * 4);
  std::promise<bool> called;
  other->then([&](const Status& s) { called.set_value(s.ok()); });
  ASSERT_TRUE(other->synchronize().ok());
  EXPECT_TRUE(called.get_future().get());
  EXPECT_TRUE(done->synchronize().ok());
  EXPECT_EQ(host, back);
}

TEST_F(CudaDeviceTest, IllegalAddressIsAStickyFault) {
  auto stream = cuda_->create_stream();
  float x = 1.f;
  stream->copy_to_device(DevicePtr{8}, &x, sizeof(x));
  Status s = stream->synchronize();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::device_fault);
  EXPECT_NE(s.error().message().find("illegal address"), std::string::npos) << s.error().message();
  EXPECT_FALSE(cuda_->status().ok());
  std::promise<bool> called;
  stream->then([&](const Status& st) { called.set_value(st.ok()); });
  EXPECT_FALSE(called.get_future().get());  // told about the fault, not left hanging
  EXPECT_FALSE(cuda_->create_stream()->synchronize().ok());
}

TEST_F(CudaDeviceTest, EveryOpMatchesSimDevice) {
  constexpr float kAbs = 1e-4f, kRel = 1e-3f;  // float32 with a different summation order
  for (const OpCase& c : op_cases()) {
    SCOPED_TRACE(c.name);
    auto data = make_case_data(c, 7);
    ASSERT_TRUE(data.ok()) << data.error().to_string();
    auto want = run_case(*sim_, c, *data);
    ASSERT_TRUE(want.ok()) << want.error().to_string();
    auto got = run_case(*cuda_, c, *data);
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    ASSERT_EQ(got->size(), want->size());
    if (data->output.dtype != DType::f32) {
      EXPECT_EQ(*got, *want);
      continue;
    }
    const auto g = floats(*got), w = floats(*want);
    // linear with half-precision weights multiplies half-precision operands on a GPU: its input is
    // rounded to the weights' width (2^-11 or 2^-8 of each value), the CPU's is not.
    float abs = kAbs, rel = kRel;
    float scale = 0;
    for (float x : w) scale = std::max(scale, std::fabs(x));
    if (c.op == OpKind::linear && c.attrs.weights != DType::f32) {
      rel = c.attrs.weights == DType::f16 ? 4e-3f : 3e-2f;
      abs = rel * scale;
    }
    // kv_attention with a half-precision cache: the two devices' float32 rotations of a k element
    // (their cosf, their fused multiply-adds) may round it to neighbouring cache values, one ulp
    // (2^-11, 2^-8) of one term of a score.
    if (c.op == OpKind::kv_attention && !c.given.empty()) {
      int64_t cache = 0;
      std::memcpy(&cache, c.given[2].data() + 3 * sizeof(int64_t), sizeof(cache));
      if (cache != 0) abs = (cache == 1 ? 1e-3f : 8e-3f) * scale;
    }
    size_t bad = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      if (!(std::fabs(g[i] - w[i]) <= abs + rel * std::fabs(w[i])) && bad++ < 5) {
        ADD_FAILURE() << "element " << i << ": cuda " << g[i] << ", sim " << w[i];
      }
    }
    EXPECT_EQ(bad, 0u) << "of " << g.size() << " elements";
  }
  EXPECT_TRUE(cuda_->status().ok());
}

// Every stream used to take a 32 MiB cuBLAS workspace (Hopper) from the reservation, so a node
// with a few dozen executors lost its activation memory to them (seen on an H200: the density
// benchmark's node ran out of device memory for a 48 KiB input). Streams now share the device's
// one workspace, outside allocate()'s memory, handed from stream to stream by an event; GEMMs
// enqueued on several streams from several threads at once must still match the CPU.
TEST_F(CudaDeviceTest, StreamsShareOneBlasWorkspace) {
  const uint64_t used = cuda_->memory().used_bytes;
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < 40; ++i) streams.push_back(cuda_->create_stream());
  EXPECT_EQ(cuda_->memory().used_bytes, used);
  streams.clear();

  std::vector<std::pair<OpCase, std::vector<uint8_t>>> blas_cases;  // the case and the CPU's answer
  std::vector<CaseData> inputs;
  for (const OpCase& c : op_cases()) {
    if (c.op != OpKind::linear && c.op != OpKind::conv2d && c.op != OpKind::attention && c.op != OpKind::matmul &&
        c.op != OpKind::conv_transpose2d) {
      continue;
    }
    auto data = make_case_data(c, 11);
    ASSERT_TRUE(data.ok()) << data.error().to_string();
    auto want = run_case(*sim_, c, *data);
    ASSERT_TRUE(want.ok()) << want.error().to_string();
    blas_cases.emplace_back(c, std::move(*want));
    inputs.push_back(std::move(*data));
  }
  ASSERT_FALSE(blas_cases.empty());
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 8; ++round) {
        for (size_t i = 0; i < blas_cases.size(); ++i) {
          const size_t k = (i + static_cast<size_t>(t)) % blas_cases.size();
          auto got = run_case(*cuda_, blas_cases[k].first, inputs[k]);
          if (!got.ok() || got->size() != blas_cases[k].second.size()) {
            bad++;
            continue;
          }
          const auto g = floats(*got), w = floats(blas_cases[k].second);
          for (size_t e = 0; e < g.size(); ++e) {
            if (!(std::fabs(g[e] - w[e]) <= 1e-4f + 1e-3f * std::fabs(w[e]))) {
              bad++;
              break;
            }
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_TRUE(cuda_->status().ok()) << cuda_->status().error().to_string();
}

}  // namespace cuda_plugin_test
}  // namespace ember::gpu
