// The CPU kernel of kv_attention (model/ops.hpp). Placeholder until the kernel lands: it faults
// the device (SimStream turns the exception into a sticky fault) rather than answer anything.
#include <stdexcept>

#include "gpu/kernels_cpu.hpp"

namespace ember::gpu {

void cpu_kv_attention(const CpuKernelArgs&) { throw std::runtime_error("kv_attention has no CPU kernel yet"); }

}  // namespace ember::gpu
