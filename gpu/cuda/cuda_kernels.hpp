// The CUDA kernels: what a CudaDevice stream enqueues for each op. Internal to the plugin.
//
// Called only from CudaStream::launch, on the thread feeding that stream, with the stream's
// device current, every pointer checked to lie inside the device's arena, and arguments that
// passed infer_output. A kernel function only enqueues work on `stream` (CUDA kernels, cuBLAS
// calls, device-to-device copies) and returns; it never synchronises, never allocates (scratch
// comes in `workspace`, exactly workspace_bytes(...) bytes, of which a kernel may use less) and
// never reads device memory from the host.
//
// Semantics are the CPU kernels' (kernels_cpu*.cpp), which are PyTorch's and, for the general ops,
// ONNX's as model/ops.hpp states them: same formulas, same workspace layout where one is used, an
// embedding id outside the table gives a zero row, causal and padding-masked attention zeroes
// masked probabilities. Results agree with the CPU kernels to float32 rounding (summation order
// differs); computation is float32 throughout, and data movement, comparisons, casts and index
// outputs are exact. Half-precision weights (run_half_weights): linear multiplies half-precision
// operands with float32 accumulation, so its inputs are rounded to the weights' width first; the
// other ops widen the weights. Matrix products go to cuBLAS in its default math mode, which
// computes float32 GEMMs in float32 (no TF32), as PyTorch does by default.
//
// cuBLAS is column-major and Ember row-major; gemm_rm() below hides the swap: a row-major
// C = A B is the column-major C^T = B^T A^T, so it calls cuBLAS with the operands exchanged.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <utility>

#include "gpu/kernel_args.hpp"

namespace ember::gpu::cuda {

/// One launch: the layer's arguments and their device addresses (nullptr = absent optional weight).
struct CudaKernelArgs {
  const KernelArgs* args = nullptr;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;  // bound to `stream`
  const void* inputs[kMaxLayerInputs] = {};
  const void* weights[kMaxLayerWeights] = {};
  void* output = nullptr;
  void* workspace = nullptr;
  /// The device's reservation, [memory_base, memory_base + memory_bytes): the bounds of addresses
  /// that reach a kernel as data (kv_attention's block table), which CudaStream::launch cannot check.
  uint64_t memory_base = 0, memory_bytes = 0;

  const float* in_f32(int i) const { return static_cast<const float*>(inputs[i]); }
  const float* w_f32(int i) const { return static_cast<const float*>(weights[i]); }
  float* out_f32() const { return static_cast<float*>(output); }
  float* ws_f32() const { return static_cast<float*>(workspace); }
  const LayerAttrs& attrs() const { return args->attrs; }
  const Shape& in_shape(int i) const { return args->inputs[i].desc.shape; }
  const Shape& out_shape() const { return args->output.desc.shape; }
};

/// The first failed call of a kernel function; later steps are not enqueued.
struct CudaKernelStatus {
  const char* call = nullptr;  // nullptr: everything was enqueued
  cudaError_t cuda = cudaSuccess;
  cublasStatus_t blas = CUBLAS_STATUS_SUCCESS;
  bool ok() const { return call == nullptr; }
};

using CudaKernel = CudaKernelStatus (*)(const CudaKernelArgs&);

/// Enqueues the kernel of args.args->op.
CudaKernelStatus run_cuda_kernel(const CudaKernelArgs& args);

/// A layer whose weights are float16 or bfloat16 (widens_weights): linear on the tensor cores,
/// any other op's `kernel` on its weights widened into the workspace (cuda_kernels_half.cu).
CudaKernelStatus run_half_weights(const CudaKernelArgs& args, CudaKernel kernel);

/// True for the ops whose kernels call cuBLAS (and so use the device's cuBLAS workspace).
bool uses_cublas(OpKind op);

/// cudaSuccess when this plugin has a kernel image the current device can run (checked at
/// device creation so that a GPU older than the compiled architectures is refused up front).
cudaError_t probe_kernel_image();

// -- shared by the kernel files -----------------------------------------------------------------

/// Returns a failed CudaKernelStatus from the enclosing kernel function.
#define EMBER_CUDA_TRY(expr)                                      \
  do {                                                            \
    const ::ember::gpu::cuda::CudaKernelStatus ember_st_ = (expr); \
    if (!ember_st_.ok()) return ember_st_;                        \
  } while (0)

/// The status of the kernel launch just made (cudaGetLastError), named `what`.
CudaKernelStatus launched(const char* what);
CudaKernelStatus cuda_call(cudaError_t e, const char* what);
CudaKernelStatus blas_call(cublasStatus_t s, const char* what);

/// Row-major C[m, n] = alpha * op(A)[m, k] op(B)[k, n] + beta * C, `batch` times with the given
/// element strides between consecutive A, B and C (strides ignored when batch is 1).
/// lda, ldb, ldc are row-major leading dimensions (the row length of each stored matrix).
CudaKernelStatus gemm_rm(cublasHandle_t h, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                         int64_t batch = 1, int64_t stride_a = 0, int64_t stride_b = 0, int64_t stride_c = 0);

/// y[r, :] = bias for r in [0, rows), row length n (leading dimension n).
CudaKernelStatus fill_rows(float* y, int64_t rows, int64_t n, const float* bias, cudaStream_t stream);

/// Attention's key-padding mask as softmax_rows reads it: row r of the score rows belongs to batch
/// entry first_batch + (r / rows_per_slice) * batch_step, and key j of that entry is kept when
/// mask[batch, j] is nonzero (a float's sign bit ignored, so -0.0 is zero too).
struct KeyMask {
  const void* data = nullptr;  // [batch, n] of elem_size-byte elements; nullptr: every key kept
  uint32_t elem_size = 1;
  bool floating = false;
  int64_t first_batch = 0, batch_step = 0, rows_per_slice = 1;
};

/// Softmax of each row of x [rows, n] into y (may alias x), like softmax_row in kernels_cpu:
/// when causal_period > 0, row r keeps only its first (r % causal_period) + 1 entries, and `mask`
/// drops padded keys; the rest become 0, and a row with no key left is all 0. With `log`, the
/// log-softmax of the row (no causal period or mask then).
CudaKernelStatus softmax_rows(const float* x, float* y, int64_t rows, int64_t n, int64_t causal_period,
                              cudaStream_t stream, const KeyMask& mask = {}, bool log = false);

/// How a flat index over an output of `dims` (row-major) maps to element offsets in N operands:
/// offset of operand j = sum over d of index_d * strides[j][d] (0 along a broadcast dim, negative
/// for a reversed slice). make_index_map() merges dims that are contiguous in every operand, so
/// operands of the output's shape become one dim of stride 1, which it marks `flat` (offset = index).
template <int N>
struct IndexMap {
  int32_t rank = 0;
  bool flat = false;
  int64_t dims[Shape::kMaxRank] = {};
  int64_t strides[N][Shape::kMaxRank] = {};
};

/// Row-major element strides of `in` seen from an output of rank `out_rank` it broadcasts to:
/// numpy alignment from the right, 0 along its dims of 1 and along dims it lacks.
inline void broadcast_strides(const Shape& in, int out_rank, int64_t* strides) {
  int64_t s = 1;
  for (int d = out_rank - 1; d >= 0; --d) {
    const int i = in.rank - out_rank + d;
    const int64_t n = i >= 0 ? in[i] : 1;
    strides[d] = n == 1 ? 0 : s;
    s *= n;
  }
}

/// The map of an output `out` with the given per-operand strides (strides[j][d] for dim d of out),
/// dims of 1 dropped and contiguous runs merged.
template <int N>
IndexMap<N> make_index_map(const Shape& out, const int64_t (&strides)[N][Shape::kMaxRank]) {
  IndexMap<N> m;
  for (int d = out.rank - 1; d >= 0; --d) {  // innermost first, then reversed below
    if (out[d] == 1) continue;
    bool merge = m.rank > 0;
    for (int j = 0; merge && j < N; ++j) merge = strides[j][d] == m.strides[j][m.rank - 1] * m.dims[m.rank - 1];
    if (merge) {
      m.dims[m.rank - 1] *= out[d];
      continue;
    }
    m.dims[m.rank] = out[d];
    for (int j = 0; j < N; ++j) m.strides[j][m.rank] = strides[j][d];
    ++m.rank;
  }
  for (int a = 0, b = m.rank - 1; a < b; ++a, --b) {
    std::swap(m.dims[a], m.dims[b]);
    for (int j = 0; j < N; ++j) std::swap(m.strides[j][a], m.strides[j][b]);
  }
  m.flat = m.rank <= 1;
  for (int j = 0; j < N && m.rank == 1; ++j) m.flat = m.flat && m.strides[j][0] == 1;
  return m;
}

/// Calls f(T*) with a null pointer of the C++ type that moves `size`-byte elements unchanged.
template <class F>
CudaKernelStatus by_element_size(uint32_t size, F&& f) {
  switch (size) {
    case 1: return f(static_cast<uint8_t*>(nullptr));
    case 2: return f(static_cast<uint16_t*>(nullptr));
    case 4: return f(static_cast<uint32_t*>(nullptr));
    default: return f(static_cast<uint64_t*>(nullptr));
  }
}

// One function per op, grouped by file like the CPU kernels: cuda_kernels_dense.cu (matrix
// products and embedding), cuda_kernels_pointwise.cu (activations, normalisation),
// cuda_kernels_layout.cu (pooling, resize, flatten/select), cuda_kernels_elementwise.cu (the
// broadcasting unary, binary and where ops, cast), cuda_kernels_shape.cu (data movement: constant,
// transpose, concat, slice, gather, expand, pad), cuda_kernels_reduce.cu (reduce, argmax, topk),
// cuda_kernels_kv_attention.cu (attention over the paged KV cache).
CudaKernelStatus cuda_linear(const CudaKernelArgs&);
CudaKernelStatus cuda_conv2d(const CudaKernelArgs&);
CudaKernelStatus cuda_attention(const CudaKernelArgs&);
CudaKernelStatus cuda_embedding(const CudaKernelArgs&);
CudaKernelStatus cuda_batch_norm(const CudaKernelArgs&);
CudaKernelStatus cuda_relu(const CudaKernelArgs&);
CudaKernelStatus cuda_gelu(const CudaKernelArgs&);
CudaKernelStatus cuda_tanh(const CudaKernelArgs&);
CudaKernelStatus cuda_layer_norm(const CudaKernelArgs&);
CudaKernelStatus cuda_softmax(const CudaKernelArgs&);
CudaKernelStatus cuda_add(const CudaKernelArgs&);
CudaKernelStatus cuda_max_pool2d(const CudaKernelArgs&);
CudaKernelStatus cuda_avg_pool2d(const CudaKernelArgs&);
CudaKernelStatus cuda_global_avg_pool(const CudaKernelArgs&);
CudaKernelStatus cuda_copy(const CudaKernelArgs&);  // flatten and reshape: same bytes, new shape
CudaKernelStatus cuda_select(const CudaKernelArgs&);
CudaKernelStatus cuda_unary(const CudaKernelArgs&);
CudaKernelStatus cuda_binary(const CudaKernelArgs&);
CudaKernelStatus cuda_where(const CudaKernelArgs&);
CudaKernelStatus cuda_constant(const CudaKernelArgs&);
CudaKernelStatus cuda_matmul(const CudaKernelArgs&);
CudaKernelStatus cuda_transpose(const CudaKernelArgs&);
CudaKernelStatus cuda_concat(const CudaKernelArgs&);
CudaKernelStatus cuda_slice(const CudaKernelArgs&);
CudaKernelStatus cuda_gather(const CudaKernelArgs&);
CudaKernelStatus cuda_expand(const CudaKernelArgs&);
CudaKernelStatus cuda_pad(const CudaKernelArgs&);
CudaKernelStatus cuda_resize(const CudaKernelArgs&);
CudaKernelStatus cuda_conv_transpose2d(const CudaKernelArgs&);
CudaKernelStatus cuda_group_norm(const CudaKernelArgs&);
CudaKernelStatus cuda_rms_norm(const CudaKernelArgs&);
CudaKernelStatus cuda_reduce(const CudaKernelArgs&);
CudaKernelStatus cuda_cast(const CudaKernelArgs&);
CudaKernelStatus cuda_argmax(const CudaKernelArgs&);
CudaKernelStatus cuda_topk(const CudaKernelArgs&);
CudaKernelStatus cuda_kv_attention(const CudaKernelArgs&);  // cuda_kernels_kv_attention.cu

#ifdef __CUDACC__
// -- device helpers (CUDA translation units only) ----------------------------------------------

inline constexpr int kBlock = 256;  // threads per block of the elementwise kernels

/// Grid-stride loop: `i` visits every index in [0, n) exactly once across the grid.
#define EMBER_GRID_LOOP(i, n)                                                                   \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

/// Blocks for a grid-stride loop over n items (capped; the loop covers the rest). n > 0.
inline unsigned grid_for(int64_t n, int block = kBlock) {
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned>(blocks < (1 << 20) ? blocks : (1 << 20));
}

/// Threads per block for a block-per-row kernel over rows of n: a multiple of 32 in [32, 256].
inline int row_block(int64_t n) {
  const int64_t b = (n + 31) / 32 * 32;
  return static_cast<int>(b < 32 ? 32 : (b > 256 ? 256 : b));
}

/// The element offsets of flat output index i in each operand of m.
template <int N>
__device__ inline void map_offsets(const IndexMap<N>& m, int64_t i, int64_t (&off)[N]) {
  for (int j = 0; j < N; ++j) off[j] = 0;
  for (int d = m.rank - 1; d >= 0; --d) {
    const int64_t c = i % m.dims[d];
    i /= m.dims[d];
    for (int j = 0; j < N; ++j) off[j] += c * m.strides[j][d];
  }
}

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide reductions; every thread of the block must call them and gets the result. blockDim.x
// must be a multiple of 32. `scratch` is __shared__ float[32]; back-to-back calls may reuse it.
__device__ inline float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // a previous reduction may still be reading scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_sum(lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : 0.f);
}

__device__ inline float block_max(float v, float* scratch) {
  v = warp_max(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_max(lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : -INFINITY);
}
#endif  // __CUDACC__

}  // namespace ember::gpu::cuda
