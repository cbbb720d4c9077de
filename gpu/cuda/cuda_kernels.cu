// The CUDA kernel table and the helpers the kernel files share (status, row-major GEMM, bias rows).
#include <iterator>

#include "gpu/cuda/cuda_kernels.hpp"

namespace ember::gpu::cuda {

namespace {

constexpr CudaKernel kCudaKernels[] = {
    cuda_linear,           // linear
    cuda_conv2d,           // conv2d
    cuda_batch_norm,       // batch_norm
    cuda_relu,             // relu
    cuda_gelu,             // gelu
    cuda_tanh,             // tanh
    cuda_layer_norm,       // layer_norm
    cuda_softmax,          // softmax
    cuda_attention,        // attention
    cuda_embedding,        // embedding
    cuda_add,              // add
    cuda_max_pool2d,       // max_pool2d
    cuda_avg_pool2d,       // avg_pool2d
    cuda_global_avg_pool,  // global_avg_pool
    cuda_copy,             // flatten
    cuda_copy,             // reshape
    cuda_select,           // select
    cuda_unary,            // unary
    cuda_binary,           // binary
    cuda_where,            // where
    cuda_constant,         // constant
    cuda_matmul,           // matmul
    cuda_transpose,        // transpose
    cuda_concat,           // concat
    cuda_slice,            // slice
    cuda_gather,           // gather
    cuda_expand,           // expand
    cuda_pad,              // pad
    cuda_resize,           // resize
    cuda_conv_transpose2d, // conv_transpose2d
    cuda_group_norm,       // group_norm
    cuda_rms_norm,         // rms_norm
    cuda_reduce,           // reduce
    cuda_cast,             // cast
    cuda_argmax,           // argmax
    cuda_topk,             // topk
    cuda_kv_attention,     // kv_attention
};
static_assert(std::size(kCudaKernels) == static_cast<size_t>(OpKind::count), "every op needs a CUDA kernel");

__global__ void fill_rows_kernel(float* y, int64_t total, int64_t n, const float* bias) {
  EMBER_GRID_LOOP(i, total) y[i] = bias[i % n];
}

}  // namespace

CudaKernelStatus run_cuda_kernel(const CudaKernelArgs& args) {
  const auto op = static_cast<size_t>(args.args->op);
  if (op >= std::size(kCudaKernels)) return {"run_cuda_kernel (unknown op)", cudaErrorInvalidValue};
  if (widens_weights(args.args->op, args.args->attrs)) return run_half_weights(args, kCudaKernels[op]);
  return kCudaKernels[op](args);
}

bool uses_cublas(OpKind op) {
  return op == OpKind::linear || op == OpKind::conv2d || op == OpKind::attention || op == OpKind::matmul ||
         op == OpKind::conv_transpose2d;
}

cudaError_t probe_kernel_image() {
  cudaFuncAttributes attrs;
  return cudaFuncGetAttributes(&attrs, fill_rows_kernel);
}

CudaKernelStatus launched(const char* what) { return cuda_call(cudaGetLastError(), what); }

CudaKernelStatus cuda_call(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return {};
  return {what, e, CUBLAS_STATUS_SUCCESS};
}

CudaKernelStatus blas_call(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return {};
  return {what, cudaSuccess, s};
}

CudaKernelStatus gemm_rm(cublasHandle_t h, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                         int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c) {
  if (m == 0 || n == 0 || batch == 0) return {};
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  // Column-major C^T[n, m] = op(B)^T[n, k] op(A)^T[k, m]: a row-major matrix with row length ld
  // is the column-major transpose with leading dimension ld, so the operands swap and keep their ops.
  if (batch == 1) {
    return blas_call(cublasSgemm_64(h, op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc), "cublasSgemm");
  }
  return blas_call(cublasSgemmStridedBatched_64(h, op_b, op_a, n, m, k, &alpha, b, ldb, stride_b, a, lda, stride_a,
                                                &beta, c, ldc, stride_c, batch),
                   "cublasSgemmStridedBatched");
}

CudaKernelStatus fill_rows(float* y, int64_t rows, int64_t n, const float* bias, cudaStream_t stream) {
  const int64_t total = rows * n;
  if (total == 0) return {};
  fill_rows_kernel<<<grid_for(total), kBlock, 0, stream>>>(y, total, n, bias);
  return launched("fill_rows_kernel");
}

}  // namespace ember::gpu::cuda
