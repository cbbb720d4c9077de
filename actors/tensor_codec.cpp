#include "actors/tensor_codec.hpp"

#include <cstring>

namespace ember {

Result<gpu::HostTensor> decode_tensor(const tensor_msg& msg) {
  const std::string at = "tensor '" + msg.name + "'";
  if (msg.dtype >= static_cast<uint8_t>(gpu::DType::count)) {
    return invalid_argument(at + ": unknown dtype " + std::to_string(msg.dtype));
  }
  if (msg.shape.size() > static_cast<size_t>(gpu::Shape::kMaxRank)) {
    return invalid_argument(at + ": more than " + std::to_string(gpu::Shape::kMaxRank) + " dims");
  }
  gpu::TensorDesc desc{static_cast<gpu::DType>(msg.dtype), gpu::Shape()};
  uint64_t numel = 1;
  for (int64_t d : msg.shape) {
    if (d < 0 || __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel) || numel > (1ull << 40)) {
      return invalid_argument(at + ": shape dims must be non-negative and of sane size");
    }
    desc.shape[desc.shape.rank++] = d;
  }
  if (desc.bytes() != msg.data.size()) {
    return invalid_argument(at + ": " + std::to_string(msg.data.size()) + " bytes of data but " +
                            std::string(gpu::dtype_name(desc.dtype)) + desc.shape.to_string() + " needs " +
                            std::to_string(desc.bytes()));
  }
  EMBER_ASSIGN_OR_RETURN(gpu::HostTensor t, gpu::HostTensor::allocate(msg.name, desc));
  if (!msg.data.empty()) std::memcpy(t.data(), msg.data.data(), msg.data.size());
  return t;
}

Result<std::vector<gpu::HostTensor>> decode_tensors(const std::vector<tensor_msg>& msgs) {
  std::vector<gpu::HostTensor> out;
  out.reserve(msgs.size());
  for (const auto& m : msgs) {
    EMBER_ASSIGN_OR_RETURN(gpu::HostTensor t, decode_tensor(m));
    out.push_back(std::move(t));
  }
  return out;
}

tensor_msg encode_tensor(const gpu::HostTensor& t) {
  tensor_msg m;
  m.name = t.name;
  m.dtype = static_cast<uint8_t>(t.desc.dtype);
  m.shape.assign(t.desc.shape.dims.begin(), t.desc.shape.dims.begin() + t.desc.shape.rank);
  m.data.assign(t.data(), t.data() + t.desc.bytes());
  return m;
}

std::vector<tensor_msg> encode_tensors(const std::vector<gpu::HostTensor>& ts) {
  std::vector<tensor_msg> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(encode_tensor(t));
  return out;
}

}  // namespace ember
