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
};
static_assert(std::size(kCpuKernels) == static_cast<size_t>(OpKind::count), "every op needs a CPU kernel");
}  // namespace

void run_cpu_kernel(const CpuKernelArgs& args) { kCpuKernels[static_cast<size_t>(args.args->op)](args); }

}  // namespace ember::gpu
