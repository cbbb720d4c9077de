// The CPU kernels: what SimDevice's streams run for each op (the CUDA plugin has its own table).
//
// Called only from a SimDevice stream thread, with every pointer already resolved to host memory
// and checked against the arena (addresses that arrive as data, kv_attention's KV blocks, through
// CpuKernelArgs::resolve). Arguments have passed infer_output, so kernels do not validate
// shapes; they never allocate (scratch comes in `workspace`) and never throw on data: an
// embedding id outside the table yields a zero row (the executor rejects such ids at the edge).
// Matrix products go to OpenBLAS (cblas_sgemm); loops are parallelised with OpenMP over the
// device's compute threads. float32 compute; the data-movement ops (constant, transpose, concat,
// slice, gather, expand, pad, where, cast) move any dtype by element size, and comparisons, cast,
// argmax and topk give the integer dtypes ops.hpp states. Half-precision weights (float16,
// bfloat16) are widened by run_cpu_kernel into the workspace room ops.hpp's workspace_bytes() adds
// for them, and the kernel runs on the widened copies (embedding widens the rows it copies itself).
#pragma once

#include <cstdint>

#include "gpu/kernel_args.hpp"

namespace ember::gpu {

/// Resolves a device address that reaches a kernel as data rather than as an argument
/// (kv_attention's block table) to a host pointer, with the bounds check the device gives every
/// argument pointer: nullptr, after faulting the device with `what` in the message, when [addr,
/// addr + bytes) is outside its memory. Thread-safe: kernels call it from their OpenMP threads.
/// Without a function every address is refused.
struct DeviceAddressResolver {
  uint8_t* (*fn)(void* device, uint64_t addr, uint64_t bytes, const char* what) = nullptr;
  void* device = nullptr;
  uint8_t* operator()(uint64_t addr, uint64_t bytes, const char* what) const {
    return fn ? fn(device, addr, bytes, what) : nullptr;
  }
};

struct CpuKernelArgs {
  const KernelArgs* args = nullptr;
  const uint8_t* inputs[kMaxLayerInputs] = {};
  const uint8_t* weights[kMaxLayerWeights] = {};  // nullptr = absent optional weight
  uint8_t* output = nullptr;
  uint8_t* workspace = nullptr;
  DeviceAddressResolver resolve;  // the launching SimDevice's

  const float* in_f32(int i) const { return reinterpret_cast<const float*>(inputs[i]); }
  const float* w_f32(int i) const { return reinterpret_cast<const float*>(weights[i]); }
  float* out_f32() const { return reinterpret_cast<float*>(output); }
  float* ws_f32() const { return reinterpret_cast<float*>(workspace); }
  const LayerAttrs& attrs() const { return args->attrs; }
  const Shape& in_shape(int i) const { return args->inputs[i].desc.shape; }
};

using CpuKernel = void (*)(const CpuKernelArgs&);

/// Dispatches to the kernel of args.args->op.
void run_cpu_kernel(const CpuKernelArgs& args);

// One kernel per op, grouped by file: kernels_cpu_dense.cpp (matrix products), kernels_cpu_depthwise.cpp
// (conv2d's direct depthwise plan, which cpu_conv2d hands over to), kernels_cpu_pointwise.cpp
// (activations and normalisation), kernels_cpu_layout.cpp (pooling, resize, reshaping copies),
// kernels_cpu_elementwise.cpp (unary, binary with broadcasting, where, cast), kernels_cpu_shape.cpp
// (general data movement), kernels_cpu_reduce.cpp (reductions, argmax, topk, group and RMS norm),
// kernels_cpu_kv_attention.cpp (attention over the paged KV cache).
void cpu_linear(const CpuKernelArgs&);
void cpu_conv2d(const CpuKernelArgs&);
void cpu_conv2d_depthwise(const CpuKernelArgs&);  // ConvPlan::depthwise only; cpu_conv2d calls it
void cpu_attention(const CpuKernelArgs&);
void cpu_embedding(const CpuKernelArgs&);
void cpu_batch_norm(const CpuKernelArgs&);
void cpu_relu(const CpuKernelArgs&);
void cpu_gelu(const CpuKernelArgs&);
void cpu_tanh(const CpuKernelArgs&);
void cpu_layer_norm(const CpuKernelArgs&);
void cpu_softmax(const CpuKernelArgs&);
void cpu_add(const CpuKernelArgs&);
void cpu_max_pool2d(const CpuKernelArgs&);
void cpu_avg_pool2d(const CpuKernelArgs&);
void cpu_global_avg_pool(const CpuKernelArgs&);
void cpu_copy(const CpuKernelArgs&);  // flatten and reshape: same bytes, new shape
void cpu_select(const CpuKernelArgs&);
void cpu_unary(const CpuKernelArgs&);
void cpu_binary(const CpuKernelArgs&);
void cpu_where(const CpuKernelArgs&);
void cpu_constant(const CpuKernelArgs&);
void cpu_matmul(const CpuKernelArgs&);
void cpu_transpose(const CpuKernelArgs&);
void cpu_concat(const CpuKernelArgs&);
void cpu_slice(const CpuKernelArgs&);
void cpu_gather(const CpuKernelArgs&);
void cpu_expand(const CpuKernelArgs&);
void cpu_pad(const CpuKernelArgs&);
void cpu_resize(const CpuKernelArgs&);
void cpu_conv_transpose2d(const CpuKernelArgs&);
void cpu_group_norm(const CpuKernelArgs&);
void cpu_rms_norm(const CpuKernelArgs&);
void cpu_reduce(const CpuKernelArgs&);
void cpu_cast(const CpuKernelArgs&);
void cpu_argmax(const CpuKernelArgs&);
void cpu_topk(const CpuKernelArgs&);
void cpu_kv_attention(const CpuKernelArgs&);  // kernels_cpu_kv_attention.cpp

/// Softmax of `n` floats in place, over the first `valid` of them; the rest become 0 (causal
/// masking without infinities). Shared by softmax and attention.
void softmax_row(float* row, int64_t n, int64_t valid);

}  // namespace ember::gpu
