// The Stream and Event of a CudaDevice (contract: device.hpp; behaviour: cuda_device.hpp).
// Internal to the CUDA plugin: CudaDevice::create_stream and create_event call these.
//
// A CudaStream owns one non-blocking cudaStream_t, a cuBLAS handle bound to it with its own
// workspace, and an event for synchronize(). Creation never fails as a C++ call: if CUDA refuses,
// the device records a fault and the stream is inert (enqueues nothing, synchronize reports the
// fault). Destroying a stream waits for its work, including host callbacks, to finish.
#pragma once

#include <memory>

#include "gpu/cuda/cuda_device.hpp"

namespace ember::gpu::cuda {

std::unique_ptr<Stream> make_cuda_stream(CudaDevice& device);
std::unique_ptr<Event> make_cuda_event(CudaDevice& device);

}  // namespace ember::gpu::cuda
