#include "gpu/kernels_cpu.hpp"

#include <algorithm>
#include <array>

#include "gpu/cpu_parallel.hpp"
#include "model/half.hpp"

namespace ember::gpu {

namespace {
constexpr CpuKernel kCpuKernels[] = {
    cpu_linear,       // linear
    cpu_conv2d,       // conv2d
    cpu_batch_norm,   // batch_norm
    cpu_relu,         // relu
    cpu_gelu,         // gelu
    cpu_tanh,         // tanh
    cpu_layer_norm,   // layer_norm
    cpu_softmax,      // softmax
    cpu_attention,    // attention
    cpu_embedding,    // embedding
    cpu_add,          // add
    cpu_max_pool2d,   // max_pool2d
    cpu_avg_pool2d,   // avg_pool2d
    cpu_global_avg_pool,  // global_avg_pool
    cpu_copy,         // flatten
    cpu_copy,         // reshape
    cpu_select,       // select
    cpu_unary,        // unary
    cpu_binary,       // binary
    cpu_where,        // where
    cpu_constant,     // constant
    cpu_matmul,       // matmul
    cpu_transpose,    // transpose
    cpu_concat,       // concat
    cpu_slice,        // slice
    cpu_gather,       // gather
    cpu_expand,       // expand
    cpu_pad,          // pad
    cpu_resize,       // resize
    cpu_conv_transpose2d,  // conv_transpose2d
    cpu_group_norm,   // group_norm
    cpu_rms_norm,     // rms_norm
    cpu_reduce,       // reduce
    cpu_cast,         // cast
    cpu_argmax,       // argmax
    cpu_topk,         // topk
    cpu_kv_attention, // kv_attention
};
static_assert(std::size(kCpuKernels) == static_cast<size_t>(OpKind::count), "every op needs a CPU kernel");
}  // namespace

namespace {

// Half-precision weights: each widened to float32 into the workspace room after the op's own
// scratch (ops.hpp's workspace_bytes), then the float32 kernel runs on the widened copies.
void run_widened(const CpuKernelArgs& args) {
  const KernelArgs& a = *args.args;
  std::array<TensorDesc, kMaxLayerInputs> in;
  for (int i = 0; i < a.num_inputs; ++i) in[static_cast<size_t>(i)] = a.inputs[i].desc;
  const uint64_t own = op_scratch_bytes(a.op, a.attrs, {in.data(), static_cast<size_t>(a.num_inputs)});
  float* wide = reinterpret_cast<float*>(args.workspace + own);
  CpuKernelArgs k = args;
  for (int w = 0; w < a.num_weights; ++w) {
    if (!args.weights[w]) continue;
    const int64_t n = a.weights[w].desc.shape.numel();
    const auto* h = reinterpret_cast<const uint16_t*>(args.weights[w]);
    float* out = wide;
    if (a.weights[w].desc.dtype == DType::f16) {
      parallel_for((n + 4095) / 4096, n > 65536, [&](int64_t c) {
        for (int64_t e = c * 4096, end = std::min(n, e + 4096); e < end; ++e) out[e] = f16_to_f32(h[e]);
      });
    } else {
      parallel_for((n + 4095) / 4096, n > 65536, [&](int64_t c) {
        for (int64_t e = c * 4096, end = std::min(n, e + 4096); e < end; ++e) out[e] = bf16_to_f32(h[e]);
      });
    }
    k.weights[w] = reinterpret_cast<const uint8_t*>(out);
    wide += n;
  }
  kCpuKernels[static_cast<size_t>(a.op)](k);
}

}  // namespace

void run_cpu_kernel(const CpuKernelArgs& args) {
  if (widens_weights(args.args->op, args.args->attrs)) return run_widened(args);
  kCpuKernels[static_cast<size_t>(args.args->op)](args);
}

}  // namespace ember::gpu
