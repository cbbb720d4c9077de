// What the general ops' conformance tests share (ops_general_test.cpp, ops_general_reduce_test.cpp):
// one layer over given input values run as a model on SimDevice (or its kernel alone, for empty
// tensors a model cannot declare), tensors from lists, numpy's
// broadcasting index, and comparisons. Test-only; one thread.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "gpu/executor.hpp"
#include "gpu/kernels_cpu.hpp"
#include "model/model_builder.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::gpu::testing {

struct LayerRun {
  std::shared_ptr<const Model> model;
  HostTensor out;
  /// Weight `i` of the layer (kernel order) as floats.
  const float* weight(int i) const {
    const TensorInfo* t = model->layer_weights(0)[static_cast<size_t>(i)];
    return t ? reinterpret_cast<const float*>(model->data() + t->data.offset) : nullptr;
  }
};

/// Writes the model `b` has built into `path`, loads it and runs all its layers on a SimDevice over
/// `in`, keeping its one output. Call as ASSERT_NO_FATAL_FAILURE(run_model(...)).
inline void run_model(LayerRun& r, const ModelBuilder& b, const std::string& path, const std::vector<HostTensor>& in) {
  auto written = b.write(path);
  ASSERT_TRUE(written.ok()) << written.error().message();
  auto m = Model::load(path);
  ASSERT_TRUE(m.ok()) << m.error().message();
  r.model = *m;
  auto d = sim_device();
  auto ex = LayerExecutor::create(*d, r.model, {0, static_cast<uint32_t>(r.model->manifest().layers.size())});
  ASSERT_TRUE(ex.ok()) << ex.error().message();
  auto y = (*ex)->run_host(in);
  ASSERT_TRUE(y.ok()) << y.error().message();
  ASSERT_EQ(y->size(), 1u);
  r.out = (*y)[0];
}

inline std::string next_model_dir(const TempDir& dir) {
  static int models = 0;
  return dir / ("m" + std::to_string(models++));
}

/// Builds a model of one `op` layer over `in` (their dtypes and shapes), runs it on a SimDevice with
/// those values and keeps the output. Call as ASSERT_NO_FATAL_FAILURE(run_layer(...)).
inline void run_layer(LayerRun& r, const TempDir& dir, OpKind op, const LayerAttrs& attrs, std::vector<HostTensor> in) {
  ModelBuilder b("op", 5);
  std::vector<std::string> names;
  std::vector<TensorDesc> descs;
  for (size_t i = 0; i < in.size(); ++i) {
    in[i].name = "x" + std::to_string(i);
    names.push_back(b.input(in[i].name, in[i].desc.dtype, in[i].desc.shape));
    descs.push_back(in[i].desc);
  }
  b.add("y", op, attrs, names);
  auto out = infer_output(op, attrs, descs);
  ASSERT_TRUE(out.ok()) << out.error().message();
  b.output("y", out->dtype, out->shape);
  ASSERT_NO_FATAL_FAILURE(run_model(r, b, next_model_dir(dir), in));
  ASSERT_EQ(r.out.desc.dtype, out->dtype);
  ASSERT_EQ(r.out.desc.shape, out->shape);
}

/// Runs `op`'s CPU kernel directly on host memory (for what a model cannot declare as an input or
/// output: tensors with an empty dim). Weights, if any, are given.
inline HostTensor run_kernel(OpKind op, const LayerAttrs& attrs, const std::vector<HostTensor>& in,
                             const std::vector<HostTensor>& weights = {}) {
  KernelArgs args;
  args.op = op;
  args.attrs = attrs;
  std::vector<TensorDesc> descs;
  for (const HostTensor& t : in) descs.push_back(t.desc), args.inputs[args.num_inputs++].desc = t.desc;
  for (const HostTensor& t : weights) args.weights[args.num_weights++].desc = t.desc;
  const TensorDesc out = must(infer_output(op, attrs, descs), "infer_output");
  args.output.desc = out;
  HostTensor y = must(HostTensor::allocate("y", out), "allocating the output");
  std::vector<uint8_t> ws(workspace_bytes(op, attrs, descs) + 1);
  CpuKernelArgs k;
  k.args = &args;
  for (size_t i = 0; i < in.size(); ++i) k.inputs[i] = in[i].data();
  for (size_t i = 0; i < weights.size(); ++i) k.weights[i] = weights[i].data();
  k.output = y.data();
  k.workspace = ws.data();
  run_cpu_kernel(k);
  return y;
}

/// Attributes as model.json spells them, parsed (so ONNX's defaults apply).
inline LayerAttrs attrs_of(OpKind op, const nlohmann::json& j) {
  LayerAttrs a;
  auto s = parse_attrs(op, j, a, "test");
  EXPECT_TRUE(s.ok()) << s.error().message();
  return a;
}

template <class T>
HostTensor tensor(DType dt, Shape s, const std::vector<T>& v) {
  HostTensor t = must(HostTensor::allocate("x", {dt, s}), "allocating a tensor");
  EXPECT_EQ(static_cast<size_t>(s.numel()), v.size());
  if (!v.empty()) std::memcpy(t.data(), v.data(), std::min<size_t>(t.desc.bytes(), v.size() * sizeof(T)));
  return t;
}

inline HostTensor floats(Shape s, const std::vector<float>& v) { return tensor(DType::f32, s, v); }

/// Uniform floats in [lo, hi).
inline HostTensor randf(Shape s, uint64_t seed, float lo = -2.f, float hi = 2.f) {
  return random_tensor("x", {DType::f32, s}, seed, lo, hi);
}

/// Uniform integers in [lo, hi] of an integer dtype (or float32 holding integers).
inline HostTensor randi(DType dt, Shape s, uint64_t seed, int64_t lo, int64_t hi) {
  HostTensor t = must(HostTensor::allocate("x", {dt, s}), "allocating a tensor");
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < s.numel(); ++i) {
    const int64_t v = std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    switch (dt) {
      case DType::f32: t.as<float>()[i] = static_cast<float>(v); break;
      case DType::i64: t.as<int64_t>()[i] = v; break;
      case DType::i32: t.as<int32_t>()[i] = static_cast<int32_t>(v); break;
      default: t.as<uint8_t>()[i] = static_cast<uint8_t>(v); break;
    }
  }
  return t;
}

template <class T>
std::vector<T> values(const HostTensor& t) {
  const T* p = t.as<T>();
  return std::vector<T>(p, p + t.desc.shape.numel());
}

/// The flat index into `in` that numpy broadcasting reads for flat output index `o` of `out`.
inline int64_t broadcast_index(const Shape& out, const Shape& in, int64_t o) {
  int64_t idx = 0, stride = 1;
  for (int i = out.rank - 1; i >= 0; --i) {
    const int64_t c = o % out[i];
    o /= out[i];
    const int j = in.rank - out.rank + i;
    if (j < 0) continue;
    if (in[j] != 1) idx += c * stride;
    stride *= in[j];
  }
  return idx;
}

/// Max |got - want| at most tol times the largest |want| (NaN must match NaN).
inline void expect_close(const HostTensor& got, const std::vector<float>& want, double tol = 1e-5) {
  ASSERT_EQ(got.desc.dtype, DType::f32);
  ASSERT_EQ(static_cast<size_t>(got.desc.shape.numel()), want.size());
  double diff = 0, scale = 1e-12;
  for (size_t i = 0; i < want.size(); ++i) {
    const float g = got.as<float>()[i];
    if (std::isnan(want[i]) || std::isnan(g)) {
      EXPECT_EQ(std::isnan(want[i]), std::isnan(g)) << "element " << i << ": got " << g << ", want " << want[i];
      continue;
    }
    if (std::isinf(want[i]) || std::isinf(g)) {
      EXPECT_EQ(g, want[i]) << "element " << i;
      continue;
    }
    diff = std::max(diff, static_cast<double>(std::abs(g - want[i])));
    scale = std::max(scale, static_cast<double>(std::abs(want[i])));
  }
  EXPECT_LE(diff / scale, tol) << "max abs diff " << diff << " scale " << scale;
}

template <class T>
void expect_equal(const HostTensor& got, const std::vector<T>& want) {
  ASSERT_EQ(static_cast<size_t>(got.desc.shape.numel()), want.size());
  ASSERT_EQ(dtype_size(got.desc.dtype), sizeof(T));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got.as<T>()[i], want[i]) << "element " << i;
}

}  // namespace ember::gpu::testing
