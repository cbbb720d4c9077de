// The Stream and Event of a SimDevice (contract: device.hpp; behaviour: sim_device.hpp). Internal
// to SimDevice: SimDevice::create_stream and create_event call these.
//
// A SimStream is one serial WorkQueue (base/work_queue.hpp) running its operations in order;
// enqueue calls never block on the work, unless the caller said it waits for it anyway
// (Stream::set_caller_waits): then an idle stream runs each operation on the caller's thread. Tasks check the device's
// fault flag themselves, so after a fault copies and kernels are skipped while events and callbacks still complete (no
// waiter hangs). Destroying a stream runs what is queued and joins the thread.
#pragma once

#include <memory>

#include "gpu/sim_device.hpp"

namespace ember::gpu {

std::unique_ptr<Stream> make_sim_stream(SimDevice& device);
std::unique_ptr<Event> make_sim_event(SimDevice& device);

}  // namespace ember::gpu
