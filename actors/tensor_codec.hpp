// Conversions between the tensors of messages (tensor_msg) and of the executor (gpu::HostTensor).
//
// Pure; anyone, any thread. Decoding validates what a remote caller may have got wrong: an
// unknown dtype, a shape whose element count does not match the bytes, too many dims; each is an
// invalid_argument Error naming the tensor. Encoding never fails.
#pragma once

#include <vector>

#include "actors/inference_messages.hpp"
#include "base/status.hpp"
#include "model/host_tensor.hpp"

namespace ember {

/// Moves a message tensor's bytes into a new host tensor (one copy into page-aligned memory).
Result<gpu::HostTensor> decode_tensor(const tensor_msg& msg);
Result<std::vector<gpu::HostTensor>> decode_tensors(const std::vector<tensor_msg>& msgs);

tensor_msg encode_tensor(const gpu::HostTensor& t);
std::vector<tensor_msg> encode_tensors(const std::vector<gpu::HostTensor>& ts);

}  // namespace ember
