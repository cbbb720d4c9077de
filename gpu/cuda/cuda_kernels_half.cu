// Half-precision weights (float16, bfloat16) on CUDA: linear's matrix product on the tensor cores
// (cublasGemmEx, half-precision operands, float32 accumulation and output), every other op's
// weights widened to float32 into the workspace room ops.hpp's workspace_bytes() adds for them,
// then the op's float32 kernel. Embedding reads its half-precision table itself (dense.cu).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>

#include "gpu/cuda/cuda_kernels.hpp"

namespace ember::gpu::cuda {

namespace {

template <class H>
__device__ float widen(H h);
template <>
__device__ float widen<__half>(__half h) {
  return __half2float(h);
}
template <>
__device__ float widen<__nv_bfloat16>(__nv_bfloat16 h) {
  return __bfloat162float(h);
}

template <class H>
__global__ void widen_kernel(const H* in, float* out, int64_t n) {
  EMBER_GRID_LOOP(i, n) out[i] = widen<H>(in[i]);
}

template <class H>
__global__ void narrow_kernel(const float* in, H* out, int64_t n);
template <>
__global__ void narrow_kernel<__half>(const float* in, __half* out, int64_t n) {
  EMBER_GRID_LOOP(i, n) out[i] = __float2half_rn(in[i]);
}
template <>
__global__ void narrow_kernel<__nv_bfloat16>(const float* in, __nv_bfloat16* out, int64_t n) {
  EMBER_GRID_LOOP(i, n) out[i] = __float2bfloat16_rn(in[i]);
}

CudaKernelStatus widen_into(DType t, const void* in, float* out, int64_t n, cudaStream_t s) {
  if (n == 0) return {};
  if (t == DType::f16) widen_kernel<<<grid_for(n), kBlock, 0, s>>>(static_cast<const __half*>(in), out, n);
  else widen_kernel<<<grid_for(n), kBlock, 0, s>>>(static_cast<const __nv_bfloat16*>(in), out, n);
  return launched("widen_kernel");
}

CudaKernelStatus narrow_into(DType t, const float* in, void* out, int64_t n, cudaStream_t s) {
  if (n == 0) return {};
  if (t == DType::f16) narrow_kernel<<<grid_for(n), kBlock, 0, s>>>(in, static_cast<__half*>(out), n);
  else narrow_kernel<<<grid_for(n), kBlock, 0, s>>>(in, static_cast<__nv_bfloat16*>(out), n);
  return launched("narrow_kernel");
}

// Where the half-precision room starts: after the op's own scratch.
uint64_t own_scratch(const KernelArgs& a) {
  std::array<TensorDesc, kMaxLayerInputs> in;
  for (int i = 0; i < a.num_inputs; ++i) in[static_cast<size_t>(i)] = a.inputs[i].desc;
  return op_scratch_bytes(a.op, a.attrs, {in.data(), static_cast<size_t>(a.num_inputs)});
}

// y = x W^T + b with W half: x narrowed to W's width after the weights' room, one GemmEx with
// float32 accumulation into y (row-major, as gemm_rm: the column-major C^T = W x^T).
CudaKernelStatus half_linear(const CudaKernelArgs& k) {
  const KernelArgs& a = *k.args;
  const DType t = a.weights[0].desc.dtype;
  const int64_t m = k.in_shape(0).numel() / a.attrs.in_features;
  const int64_t n = a.attrs.out_features, kk = a.attrs.in_features;
  auto* room = static_cast<uint8_t*>(k.workspace) + own_scratch(a);
  float* bias = reinterpret_cast<float*>(room);  // the weights' room: only the bias is widened
  void* x = room + (static_cast<uint64_t>(n) * static_cast<uint64_t>(kk) + static_cast<uint64_t>(n)) * 4;
  float* y = k.out_f32();
  if (m == 0 || n == 0) return {};
  EMBER_CUDA_TRY(narrow_into(t, k.in_f32(0), x, m * kk, k.stream));
  if (k.weights[1]) {
    EMBER_CUDA_TRY(widen_into(t, k.weights[1], bias, n, k.stream));
    EMBER_CUDA_TRY(fill_rows(y, m, n, bias, k.stream));
  }
  const float alpha = 1.f, beta = k.weights[1] ? 1.f : 0.f;
  const cudaDataType ht = t == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
  return blas_call(cublasGemmEx_64(k.blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, kk, &alpha, k.weights[0], ht, kk, x, ht, kk,
                                   &beta, y, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx (half-precision weights)");
}

}  // namespace

CudaKernelStatus run_half_weights(const CudaKernelArgs& args, CudaKernel kernel) {
  const KernelArgs& a = *args.args;
  if (a.op == OpKind::linear) return half_linear(args);
  auto* wide = reinterpret_cast<float*>(static_cast<uint8_t*>(args.workspace) + own_scratch(a));
  CudaKernelArgs k = args;
  for (int w = 0; w < a.num_weights; ++w) {
    if (!args.weights[w]) continue;
    const int64_t n = a.weights[w].desc.shape.numel();
    EMBER_CUDA_TRY(widen_into(a.weights[w].desc.dtype, args.weights[w], wide, n, args.stream));
    k.weights[w] = wide;
    wide += n;
  }
  return kernel(k);
}

}  // namespace ember::gpu::cuda
