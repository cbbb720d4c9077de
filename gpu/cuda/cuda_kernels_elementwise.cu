// CUDA kernels of the general elementwise ops: unary, binary (numpy broadcasting), where, cast.
// Each function is a template on its UnaryFn / BinaryFn (a table of kernels indexed by the enum),
// so the loop body has no switch. Broadcast operands are read through an IndexMap; operands of the
// output's shape take the flat path. Formulas are model/ops.hpp's (ONNX's): libm calls are CUDA's
// accurate ones (no --use_fast_math), so results match the CPU to float32 rounding; comparisons,
// logic, where and casts are exact.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <limits>
#include <type_traits>
#include <utility>

#include "gpu/cuda/cuda_kernels.hpp"

namespace ember::gpu::cuda {

namespace {

// -- unary -----------------------------------------------------------------------------------------

// alpha, beta: LayerAttrs' (see UnaryFn). hard_swish uses ONNX's fixed 1/6 and 1/2.
template <UnaryFn F>
__device__ float unary_value(float x, float alpha, float beta) {
  if constexpr (F == UnaryFn::sigmoid) return 1.f / (1.f + expf(-x));
  else if constexpr (F == UnaryFn::silu) return x / (1.f + expf(-x));
  else if constexpr (F == UnaryFn::hard_sigmoid) return fmaxf(0.f, fminf(1.f, alpha * x + beta));
  else if constexpr (F == UnaryFn::hard_swish) return x * fmaxf(0.f, fminf(1.f, x * (1.f / 6.f) + 0.5f));
  else if constexpr (F == UnaryFn::clip) return x < alpha ? alpha : (x > beta ? beta : x);  // NaN stays NaN
  else if constexpr (F == UnaryFn::exp) return expf(x);
  else if constexpr (F == UnaryFn::log) return logf(x);
  else if constexpr (F == UnaryFn::sqrt) return sqrtf(x);
  else if constexpr (F == UnaryFn::reciprocal) return 1.f / x;
  else if constexpr (F == UnaryFn::erf) return erff(x);
  else if constexpr (F == UnaryFn::neg) return -x;
  else if constexpr (F == UnaryFn::abs) return fabsf(x);
  else if constexpr (F == UnaryFn::leaky_relu) return x >= 0.f ? x : alpha * x;
  else if constexpr (F == UnaryFn::elu) return x > 0.f ? x : alpha * expm1f(x);
  else if constexpr (F == UnaryFn::celu) return fmaxf(0.f, x) + fminf(0.f, alpha * expm1f(x / alpha));
  else if constexpr (F == UnaryFn::selu) return beta * (x > 0.f ? x : alpha * expm1f(x));
  else if constexpr (F == UnaryFn::softplus) return fmaxf(x, 0.f) + log1pf(expf(-fabsf(x)));  // log(1 + e^x)
  else if constexpr (F == UnaryFn::softsign) return x / (1.f + fabsf(x));
  else if constexpr (F == UnaryFn::sin) return sinf(x);
  else if constexpr (F == UnaryFn::cos) return cosf(x);
  else if constexpr (F == UnaryFn::floor) return floorf(x);
  else if constexpr (F == UnaryFn::ceil) return ceilf(x);
  else if constexpr (F == UnaryFn::round) return rintf(x);  // half to even, as ONNX Round
  else if constexpr (F == UnaryFn::sign) return x > 0.f ? 1.f : (x < 0.f ? -1.f : x);
  else return x;  // not_ is not a float function (see not_kernel)
}

template <UnaryFn F>
__global__ void unary_kernel(const float* x, float* y, int64_t n, float alpha, float beta) {
  EMBER_GRID_LOOP(i, n) y[i] = unary_value<F>(x[i], alpha, beta);
}

__global__ void not_kernel(const uint8_t* x, uint8_t* y, int64_t n) {
  EMBER_GRID_LOOP(i, n) y[i] = x[i] == 0;
}

using UnaryKernel = void (*)(const float*, float*, int64_t, float, float);

template <size_t... I>
const UnaryKernel* unary_table(std::index_sequence<I...>) {
  static const UnaryKernel table[] = {unary_kernel<static_cast<UnaryFn>(I)>...};
  return table;
}

// -- binary ----------------------------------------------------------------------------------------

// Arithmetic gives T (float32); comparisons and logic give uint8 0/1. min and max are std::min and
// std::max (the first operand wins a tie or a NaN in the second); mod is C's fmod.
template <BinaryFn F, class T>
__device__ auto binary_value(T a, T b) {
  if constexpr (F == BinaryFn::add) return a + b;
  else if constexpr (F == BinaryFn::sub) return a - b;
  else if constexpr (F == BinaryFn::mul) return a * b;
  else if constexpr (F == BinaryFn::div) return a / b;
  else if constexpr (F == BinaryFn::pow) return powf(a, b);
  else if constexpr (F == BinaryFn::min) return b < a ? b : a;
  else if constexpr (F == BinaryFn::max) return a < b ? b : a;
  else if constexpr (F == BinaryFn::mod) return fmodf(a, b);
  else if constexpr (F == BinaryFn::equal) return static_cast<uint8_t>(a == b);
  else if constexpr (F == BinaryFn::less) return static_cast<uint8_t>(a < b);
  else if constexpr (F == BinaryFn::greater) return static_cast<uint8_t>(a > b);
  else if constexpr (F == BinaryFn::less_equal) return static_cast<uint8_t>(a <= b);
  else if constexpr (F == BinaryFn::greater_equal) return static_cast<uint8_t>(a >= b);
  else if constexpr (F == BinaryFn::and_) return static_cast<uint8_t>(a != 0 && b != 0);
  else if constexpr (F == BinaryFn::or_) return static_cast<uint8_t>(a != 0 || b != 0);
  else return static_cast<uint8_t>((a != 0) != (b != 0));  // xor_
}

template <BinaryFn F, class T, class U>
__global__ void binary_kernel(const T* a, const T* b, U* y, int64_t n, IndexMap<2> m) {
  if (m.flat) {
    EMBER_GRID_LOOP(i, n) y[i] = binary_value<F>(a[i], b[i]);
    return;
  }
  EMBER_GRID_LOOP(i, n) {
    int64_t off[2];
    map_offsets(m, i, off);
    y[i] = binary_value<F>(a[off[0]], b[off[1]]);
  }
}

template <class T, class U>
using BinaryKernel = void (*)(const T*, const T*, U*, int64_t, IndexMap<2>);

// The kernels of BinaryFn values First, First + 1, ... on operands T giving U.
template <class T, class U, size_t First, size_t... I>
const BinaryKernel<T, U>* binary_table(std::index_sequence<I...>) {
  static const BinaryKernel<T, U> table[] = {binary_kernel<static_cast<BinaryFn>(First + I), T, U>...};
  return table;
}

constexpr size_t kArithmetic = static_cast<size_t>(BinaryFn::equal);  // add .. mod
constexpr size_t kComparisons = static_cast<size_t>(BinaryFn::and_) - kArithmetic;
constexpr size_t kLogic = static_cast<size_t>(BinaryFn::count) - static_cast<size_t>(BinaryFn::and_);

template <class T, class U>
CudaKernelStatus launch_binary(const CudaKernelArgs& k, BinaryKernel<T, U> kernel, const IndexMap<2>& m, int64_t n) {
  kernel<<<grid_for(n), kBlock, 0, k.stream>>>(static_cast<const T*>(k.inputs[0]), static_cast<const T*>(k.inputs[1]),
                                               static_cast<U*>(k.output), n, m);
  return launched("binary_kernel");
}

// -- where -----------------------------------------------------------------------------------------

template <class T>
__global__ void where_kernel(const uint8_t* cond, const T* a, const T* b, T* y, int64_t n, IndexMap<3> m) {
  if (m.flat) {
    EMBER_GRID_LOOP(i, n) y[i] = cond[i] ? a[i] : b[i];
    return;
  }
  EMBER_GRID_LOOP(i, n) {
    int64_t off[3];
    map_offsets(m, i, off);
    y[i] = cond[off[0]] ? a[off[1]] : b[off[2]];
  }
}

// -- cast ------------------------------------------------------------------------------------------

template <class T>
inline constexpr bool kFloating = std::is_same_v<T, float> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// numeric_limits is host-only constexpr; its values are usable on the device as constants.
template <class D>
inline constexpr D kMaxOf = std::numeric_limits<D>::max();
template <class D>
inline constexpr D kMinOf = std::numeric_limits<D>::min();

template <class S>
__device__ float to_f32(S v) {
  if constexpr (std::is_same_v<S, __half>) return __half2float(v);
  else if constexpr (std::is_same_v<S, __nv_bfloat16>) return __bfloat162float(v);
  else return static_cast<float>(v);  // integers round to nearest
}

template <class D>
__device__ D from_f32(float f) {
  if constexpr (std::is_same_v<D, __half>) return __float2half_rn(f);  // nearest even; overflow to inf
  else if constexpr (std::is_same_v<D, __nv_bfloat16>) return __float2bfloat16_rn(f);
  else return f;
}

// The contract's cast: float to integer truncates toward zero, saturates at D's range and maps NaN
// to 0; integer to float rounds to nearest (to float32 first for float16/bfloat16); integer to
// integer keeps the low bits (two's complement, as C++ and numpy).
template <class D, class S>
__device__ D convert(S v) {
  if constexpr (kFloating<S> && kFloating<D>) {
    return from_f32<D>(to_f32(v));
  } else if constexpr (kFloating<S>) {
    const float f = to_f32(v);
    if (f != f) return D{0};
    if (f >= static_cast<float>(kMaxOf<D>)) return kMaxOf<D>;  // float(INT_MAX) is 2^31 or 2^63: out of range
    if (f <= static_cast<float>(kMinOf<D>)) return kMinOf<D>;
    return static_cast<D>(f);
  } else if constexpr (kFloating<D>) {
    return from_f32<D>(static_cast<float>(v));
  } else {
    return static_cast<D>(v);
  }
}

template <class S, class D>
__global__ void cast_kernel(const S* x, D* y, int64_t n) {
  EMBER_GRID_LOOP(i, n) y[i] = convert<D>(x[i]);
}

/// Calls f(T*) with a null pointer of dtype t's C++ type.
template <class F>
CudaKernelStatus by_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(static_cast<float*>(nullptr));
    case DType::f16: return f(static_cast<__half*>(nullptr));
    case DType::bf16: return f(static_cast<__nv_bfloat16*>(nullptr));
    case DType::i64: return f(static_cast<int64_t*>(nullptr));
    case DType::i32: return f(static_cast<int32_t*>(nullptr));
    default: return f(static_cast<uint8_t*>(nullptr));
  }
}

}  // namespace

CudaKernelStatus cuda_unary(const CudaKernelArgs& k) {
  const int64_t n = k.in_shape(0).numel();
  if (n == 0) return {};
  const auto fn = static_cast<UnaryFn>(k.attrs().fn);
  if (fn == UnaryFn::not_) {
    not_kernel<<<grid_for(n), kBlock, 0, k.stream>>>(static_cast<const uint8_t*>(k.inputs[0]),
                                                     static_cast<uint8_t*>(k.output), n);
    return launched("not_kernel");
  }
  static const UnaryKernel* const table = unary_table(std::make_index_sequence<static_cast<size_t>(UnaryFn::count)>());
  table[static_cast<size_t>(fn)]<<<grid_for(n), kBlock, 0, k.stream>>>(k.in_f32(0), k.out_f32(), n, k.attrs().alpha,
                                                                       k.attrs().beta);
  return launched("unary_kernel");
}

CudaKernelStatus cuda_binary(const CudaKernelArgs& k) {
  const Shape& out = k.out_shape();
  const int64_t n = out.numel();
  if (n == 0) return {};
  int64_t strides[2][Shape::kMaxRank];
  broadcast_strides(k.in_shape(0), out.rank, strides[0]);
  broadcast_strides(k.in_shape(1), out.rank, strides[1]);
  const IndexMap<2> m = make_index_map(out, strides);
  const auto fn = static_cast<size_t>(k.attrs().fn);
  if (fn < kArithmetic) {
    static const auto* const table = binary_table<float, float, 0>(std::make_index_sequence<kArithmetic>());
    return launch_binary(k, table[fn], m, n);
  }
  if (fn >= kArithmetic + kComparisons) {
    static const auto* const table =
        binary_table<uint8_t, uint8_t, kArithmetic + kComparisons>(std::make_index_sequence<kLogic>());
    return launch_binary(k, table[fn - kArithmetic - kComparisons], m, n);
  }
  return by_dtype(k.args->inputs[0].desc.dtype, [&](auto* tag) -> CudaKernelStatus {
    using T = std::remove_pointer_t<decltype(tag)>;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, int64_t> || std::is_same_v<T, int32_t>) {
      static const auto* const table = binary_table<T, uint8_t, kArithmetic>(std::make_index_sequence<kComparisons>());
      return launch_binary(k, table[fn - kArithmetic], m, n);
    } else {
      return {"binary (comparison of an unsupported dtype)", cudaErrorInvalidValue};
    }
  });
}

CudaKernelStatus cuda_where(const CudaKernelArgs& k) {
  const Shape& out = k.out_shape();
  const int64_t n = out.numel();
  if (n == 0) return {};
  int64_t strides[3][Shape::kMaxRank];
  for (int j = 0; j < 3; ++j) broadcast_strides(k.in_shape(j), out.rank, strides[j]);
  const IndexMap<3> m = make_index_map(out, strides);
  return by_element_size(dtype_size(k.args->output.desc.dtype), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    where_kernel<<<grid_for(n), kBlock, 0, k.stream>>>(static_cast<const uint8_t*>(k.inputs[0]),
                                                       static_cast<const T*>(k.inputs[1]),
                                                       static_cast<const T*>(k.inputs[2]), static_cast<T*>(k.output), n,
                                                       m);
    return launched("where_kernel");
  });
}

CudaKernelStatus cuda_cast(const CudaKernelArgs& k) {
  const TensorDesc& x = k.args->inputs[0].desc;
  const int64_t n = x.shape.numel();
  if (n == 0) return {};
  if (x.dtype == k.attrs().to) {
    return cuda_call(cudaMemcpyAsync(k.output, k.inputs[0], x.bytes(), cudaMemcpyDeviceToDevice, k.stream),
                     "cudaMemcpyAsync (device to device)");
  }
  return by_dtype(x.dtype, [&](auto* src) {
    using S = std::remove_pointer_t<decltype(src)>;
    return by_dtype(k.attrs().to, [&](auto* dst) {
      using D = std::remove_pointer_t<decltype(dst)>;
      cast_kernel<<<grid_for(n), kBlock, 0, k.stream>>>(static_cast<const S*>(k.inputs[0]), static_cast<D*>(k.output),
                                                        n);
      return launched("cast_kernel");
    });
  });
}

}  // namespace ember::gpu::cuda
