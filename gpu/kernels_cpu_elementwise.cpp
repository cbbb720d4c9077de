// CPU kernels of the general elementwise ops: unary (every UnaryFn), binary (every BinaryFn, numpy
// broadcasting), where (broadcast over three, any dtype by element size) and cast (all pairs of
// float32, float16, bfloat16, int64, int32, uint8). Broadcasting walks a StridedLoop built once per
// launch; equal shapes and scalar operands take its fast paths (inner stride 1 or 0).
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "gpu/cpu_strided.hpp"
#include "gpu/cpu_vector_math.hpp"
#include "gpu/kernels_cpu.hpp"
#include "model/half.hpp"

namespace ember::gpu {

namespace {

constexpr int64_t kParallelElements = 1 << 15;  // below this, threads cost more than they save

// Runs fn(begin, end) over [0, n) in chunks on the device's threads.
template <class Fn>
void parallel_chunks(int64_t n, Fn&& fn) {
  constexpr int64_t kChunk = 1 << 14;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(chunks, n > kParallelElements, [&](int64_t c) { fn(c * kChunk, std::min(n, (c + 1) * kChunk)); });
}

// y[i] = f(x[i]); a function object per UnaryFn keeps each loop simple enough to vectorise.
template <class F>
void map_span(const float* x, float* y, int64_t n, F f) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

template <class F>
void map_all(const CpuKernelArgs& k, F f) {
  parallel_chunks(k.in_shape(0).numel(), [&](int64_t b, int64_t e) { map_span(k.in_f32(0) + b, k.out_f32() + b, e - b, f); });
}

float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

// The BinaryFn f on two operands read through a run's strides (each 1 or 0: broadcasting).
template <class T, class U, class F>
void binary_run(const T* a, int64_t sa, const T* b, int64_t sb, U* y, int64_t n, F f) {
  if (sa == 1 && sb == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], b[i]);
  } else if (sb == 1) {
    const T av = a[0];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = f(av, b[i]);
  } else if (sa == 1) {
    const T bv = b[0];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], bv);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i * sa], b[i * sb]);
  }
}

template <class T, class U, class F>
void binary_typed(const CpuKernelArgs& k, F f) {
  const Shape* shapes[] = {&k.in_shape(0), &k.in_shape(1)};
  const StridedLoop l = broadcast_loop(k.args->output.desc.shape, shapes, 2);
  const T* a = reinterpret_cast<const T*>(k.inputs[0]);
  const T* b = reinterpret_cast<const T*>(k.inputs[1]);
  U* y = reinterpret_cast<U*>(k.output);
  for_each_run(l, kParallelElements, [&](const int64_t* off, int64_t o, int64_t n) {
    binary_run(a + off[0], l.inner_stride(0), b + off[1], l.inner_stride(1), y + o, n, f);
  });
}

// A comparison on float32, int64 or int32 operands, giving uint8 0/1.
template <class F>
void compare(const CpuKernelArgs& k, F f) {
  switch (k.args->inputs[0].desc.dtype) {
    case DType::i64: return binary_typed<int64_t, uint8_t>(k, f);
    case DType::i32: return binary_typed<int32_t, uint8_t>(k, f);
    default: return binary_typed<float, uint8_t>(k, f);
  }
}

// NaN-propagating min and max (numpy's minimum and maximum; ONNX Min and Max).
float fmin_nan(float a, float b) { return a != a || b != b ? a + b : (a < b ? a : b); }
float fmax_nan(float a, float b) { return a != a || b != b ? a + b : (a > b ? a : b); }

// cast: element types by tag, read as float (float types) or int64 (integer types).
struct F16 { uint16_t bits; };
struct BF16 { uint16_t bits; };
static_assert(sizeof(F16) == 2 && sizeof(BF16) == 2);

inline float load(float x) { return x; }
inline float load(F16 x) { return f16_to_f32(x.bits); }
inline float load(BF16 x) { return bf16_to_f32(x.bits); }
inline int64_t load(int64_t x) { return x; }
inline int64_t load(int32_t x) { return x; }
inline int64_t load(uint8_t x) { return x; }

// Float to integer: toward zero, saturating at D's range, NaN to 0 (ops.hpp's cast).
template <class D>
D saturate(float x) {
  if (x != x) return 0;
  constexpr double lo = static_cast<double>(std::numeric_limits<D>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<D>::max());
  const double t = std::trunc(static_cast<double>(x));
  if (t <= lo) return std::numeric_limits<D>::min();
  if (t >= hi) return std::numeric_limits<D>::max();
  return static_cast<D>(t);
}

template <class D, class V>
D store(V v) {
  if constexpr (std::is_same_v<D, F16>) return F16{f32_to_f16(static_cast<float>(v))};
  else if constexpr (std::is_same_v<D, BF16>) return BF16{f32_to_bf16(static_cast<float>(v))};
  else if constexpr (std::is_same_v<D, float>) return static_cast<float>(v);
  else if constexpr (std::is_same_v<V, float>) return saturate<D>(v);
  else return static_cast<D>(v);  // integer to integer wraps (two's complement), as numpy's astype
}

template <class F>
void with_type(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::f16: return f(F16{});
    case DType::bf16: return f(BF16{});
    case DType::i64: return f(int64_t{});
    case DType::i32: return f(int32_t{});
    default: return f(uint8_t{});
  }
}

}  // namespace

void cpu_unary(const CpuKernelArgs& k) {
  const float alpha = k.attrs().alpha, beta = k.attrs().beta;
  switch (static_cast<UnaryFn>(k.attrs().fn)) {
    case UnaryFn::sigmoid: return map_all(k, [](float x) { return sigmoid(x); });
    case UnaryFn::silu: return map_all(k, [](float x) { return x * sigmoid(x); });
    case UnaryFn::hard_sigmoid:
      return map_all(k, [=](float x) { return std::max(0.f, std::min(1.f, alpha * x + beta)); });
    case UnaryFn::hard_swish:
      return map_all(k, [=](float x) { return x * std::max(0.f, std::min(1.f, alpha * x + beta)); });
    case UnaryFn::clip: return map_all(k, [=](float x) { return x < alpha ? alpha : (x > beta ? beta : x); });
    case UnaryFn::exp: return map_all(k, [](float x) { return expf(x); });
    case UnaryFn::log: return map_all(k, [](float x) { return std::log(x); });
    case UnaryFn::sqrt: return map_all(k, [](float x) { return std::sqrt(x); });
    case UnaryFn::reciprocal: return map_all(k, [](float x) { return 1.f / x; });
    case UnaryFn::erf: return map_all(k, [](float x) { return erff(x); });
    case UnaryFn::neg: return map_all(k, [](float x) { return -x; });
    case UnaryFn::abs: return map_all(k, [](float x) { return std::fabs(x); });
    case UnaryFn::leaky_relu: return map_all(k, [=](float x) { return x >= 0.f ? x : alpha * x; });
    case UnaryFn::elu: return map_all(k, [=](float x) { return x > 0.f ? x : alpha * (expf(x) - 1.f); });
    case UnaryFn::celu:
      return map_all(k, [=](float x) { return std::max(0.f, x) + std::min(0.f, alpha * (expf(x / alpha) - 1.f)); });
    case UnaryFn::selu: return map_all(k, [=](float x) { return beta * (x > 0.f ? x : alpha * (expf(x) - 1.f)); });
    case UnaryFn::softplus:  // log(1 + e^x) without overflow
      return map_all(k, [](float x) { return std::max(x, 0.f) + std::log1p(expf(-std::fabs(x))); });
    case UnaryFn::softsign: return map_all(k, [](float x) { return x / (1.f + std::fabs(x)); });
    case UnaryFn::sin: return map_all(k, [](float x) { return std::sin(x); });
    case UnaryFn::cos: return map_all(k, [](float x) { return std::cos(x); });
    case UnaryFn::floor: return map_all(k, [](float x) { return std::floor(x); });
    case UnaryFn::ceil: return map_all(k, [](float x) { return std::ceil(x); });
    case UnaryFn::round: return map_all(k, [](float x) { return std::nearbyint(x); });  // halves to even
    case UnaryFn::sign: return map_all(k, [](float x) { return x > 0.f ? 1.f : (x < 0.f ? -1.f : x); });
    case UnaryFn::not_: {
      const uint8_t* x = k.inputs[0];
      parallel_chunks(k.in_shape(0).numel(), [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) k.output[i] = x[i] ? 0 : 1;
      });
      return;
    }
    case UnaryFn::count: return;
  }
}

void cpu_binary(const CpuKernelArgs& k) {
  switch (static_cast<BinaryFn>(k.attrs().fn)) {
    case BinaryFn::add: return binary_typed<float, float>(k, [](float a, float b) { return a + b; });
    case BinaryFn::sub: return binary_typed<float, float>(k, [](float a, float b) { return a - b; });
    case BinaryFn::mul: return binary_typed<float, float>(k, [](float a, float b) { return a * b; });
    case BinaryFn::div: return binary_typed<float, float>(k, [](float a, float b) { return a / b; });
    case BinaryFn::pow: return binary_typed<float, float>(k, [](float a, float b) { return std::pow(a, b); });
    case BinaryFn::min: return binary_typed<float, float>(k, fmin_nan);
    case BinaryFn::max: return binary_typed<float, float>(k, fmax_nan);
    case BinaryFn::mod: return binary_typed<float, float>(k, [](float a, float b) { return std::fmod(a, b); });
    case BinaryFn::equal: return compare(k, [](auto a, auto b) -> uint8_t { return a == b; });
    case BinaryFn::less: return compare(k, [](auto a, auto b) -> uint8_t { return a < b; });
    case BinaryFn::greater: return compare(k, [](auto a, auto b) -> uint8_t { return a > b; });
    case BinaryFn::less_equal: return compare(k, [](auto a, auto b) -> uint8_t { return a <= b; });
    case BinaryFn::greater_equal: return compare(k, [](auto a, auto b) -> uint8_t { return a >= b; });
    case BinaryFn::and_: return binary_typed<uint8_t, uint8_t>(k, [](uint8_t a, uint8_t b) -> uint8_t { return a && b; });
    case BinaryFn::or_: return binary_typed<uint8_t, uint8_t>(k, [](uint8_t a, uint8_t b) -> uint8_t { return a || b; });
    case BinaryFn::xor_: return binary_typed<uint8_t, uint8_t>(k, [](uint8_t a, uint8_t b) -> uint8_t { return !a != !b; });
    case BinaryFn::count: return;
  }
}

void cpu_where(const CpuKernelArgs& k) {
  const Shape* shapes[] = {&k.in_shape(0), &k.in_shape(1), &k.in_shape(2)};
  const StridedLoop l = broadcast_loop(k.args->output.desc.shape, shapes, 3);
  const uint8_t* cond = k.inputs[0];
  with_type(k.args->inputs[1].desc.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* a = reinterpret_cast<const T*>(k.inputs[1]);
    const T* b = reinterpret_cast<const T*>(k.inputs[2]);
    T* y = reinterpret_cast<T*>(k.output);
    const int64_t sc = l.inner_stride(0), sa = l.inner_stride(1), sb = l.inner_stride(2);
    for_each_run(l, kParallelElements, [&](const int64_t* off, int64_t o, int64_t n) {
      const uint8_t* c = cond + off[0];
      const T* ap = a + off[1];
      const T* bp = b + off[2];
      for (int64_t i = 0; i < n; ++i) y[o + i] = c[i * sc] ? ap[i * sa] : bp[i * sb];
    });
  });
}

void cpu_cast(const CpuKernelArgs& k) {
  const int64_t n = k.in_shape(0).numel();
  const DType from = k.args->inputs[0].desc.dtype, to = k.args->output.desc.dtype;
  if (from == to) {
    std::memcpy(k.output, k.inputs[0], k.args->output.desc.bytes());
    return;
  }
  with_type(from, [&](auto src_tag) {
    using S = decltype(src_tag);
    with_type(to, [&](auto dst_tag) {
      using D = decltype(dst_tag);
      const S* x = reinterpret_cast<const S*>(k.inputs[0]);
      D* y = reinterpret_cast<D*>(k.output);
      parallel_chunks(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) y[i] = store<D>(load(x[i]));
      });
    });
  });
}

}  // namespace ember::gpu
