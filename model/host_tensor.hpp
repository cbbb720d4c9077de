// HostTensor: a named tensor in host memory, and the two ways tensors enter and leave Ember from
// outside: safetensors files (any number of named tensors) and the KServe v2 / Open Inference
// Protocol JSON tensor encoding ({"name", "datatype", "shape", "data"}).
//
// Pure data and parsing; anyone, any thread; never throws. Parsers validate what they read
// (datatype names, shape against data length, numbers that fit the dtype) and name the tensor
// and field in their errors.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.hpp"
#include "model/host_buffer.hpp"
#include "model/tensor.hpp"

namespace ember::gpu {

struct HostTensor {
  std::string name;
  TensorDesc desc;
  std::shared_ptr<HostBuffer> buffer;  // exactly desc.bytes() bytes

  static Result<HostTensor> allocate(std::string name, TensorDesc desc);
  uint8_t* data() { return buffer->data(); }
  const uint8_t* data() const { return buffer->data(); }
  template <class T>
  T* as() { return reinterpret_cast<T*>(buffer->data()); }
  template <class T>
  const T* as() const { return reinterpret_cast<const T*>(buffer->data()); }
};

/// Reads every tensor of a safetensors file, in data order.
Result<std::vector<HostTensor>> read_tensor_file(const std::string& path);
/// Writes tensors to a safetensors file, in the given order.
Status write_tensor_file(const std::string& path, const std::vector<HostTensor>& tensors);

/// Decodes one KServe v2 JSON tensor: {"name", "datatype" ("FP32", "INT64", ...), "shape", "data"};
/// `data` may be flat or nested (row-major). `where` prefixes errors.
Result<HostTensor> tensor_from_kserve_json(const nlohmann::json& j, const std::string& where);
/// tensor_from_kserve_json with the 'data' numbers given as their JSON text, row-major (each one a
/// valid JSON number: the gateway scans large lists itself, kserve_data_scan.hpp); `j`'s own 'data'
/// is not read. The same checks, the same values (FP32: the correctly rounded double, then float, as
/// a JSON parser gives), the same errors.
Result<HostTensor> tensor_from_kserve_numbers(const nlohmann::json& j, const std::vector<std::string_view>& numbers,
                                              const std::string& where);
/// The binary tensor data extension (Triton's): the tensor's name, datatype and shape from `j`
/// (which must have no 'data'), its bytes `bytes`, exactly the shape's size. Any datatype,
/// FP16 and BF16 too.
Result<HostTensor> tensor_from_kserve_binary(const nlohmann::json& j, std::string_view bytes, const std::string& where);
/// tensor_from_kserve_binary's checks alone, for a caller that puts the `bytes` bytes where it
/// wants them (the gateway, straight into its message): the tensor's name and description.
Result<std::pair<std::string, TensorDesc>> kserve_binary_header(const nlohmann::json& j, uint64_t bytes,
                                                                const std::string& where);
/// Encodes a tensor in the KServe v2 form with flat data.
void tensor_to_kserve_json(const HostTensor& t, nlohmann::json& out);

}  // namespace ember::gpu
