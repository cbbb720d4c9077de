#include "gpu/kernels_cpu.hpp"

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
};
static_assert(std::size(kCpuKernels) == static_cast<size_t>(OpKind::count), "every op needs a CPU kernel");
}  // namespace

void run_cpu_kernel(const CpuKernelArgs& args) { kCpuKernels[static_cast<size_t>(args.args->op)](args); }

}  // namespace ember::gpu
