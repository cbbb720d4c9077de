// The CUDA kernels of kv_attention (model/ops.hpp). Placeholder until they land: the launch fails
// and faults the device rather than answer anything.
#include "gpu/cuda/cuda_kernels.hpp"

namespace ember::gpu::cuda {

CudaKernelStatus cuda_kv_attention(const CudaKernelArgs&) {
  return {"cuda_kv_attention (no CUDA kernel yet)", cudaErrorNotSupported};
}

}  // namespace ember::gpu::cuda
