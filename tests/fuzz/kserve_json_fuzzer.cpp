// libFuzzer target for model/host_tensor.cpp: tensor_from_kserve_json, the KServe v2 JSON tensor
// decoder, on any JSON.
//
// Input: JSON text. A KServe request {"inputs": [tensor, ...]} has each of its tensors decoded, as
// `ember run` and the gateway do; any other JSON value is decoded as one tensor. Text that is not
// JSON is skipped (nlohmann's parser is the caller's, not ours). On success the tensor must own
// exactly desc.bytes() bytes, keep the name it was given, have a dtype JSON may carry, and
// re-encode (tensor_to_kserve_json) to a tensor that decodes to the same bytes. On failure the
// Error names the tensor's place in the request.
#include <cstring>
#include <nlohmann/json.hpp>

#include "model/host_tensor.hpp"
#include "tests/fuzz/fuzz_common.hpp"

using namespace ember;
using namespace ember::gpu;
using nlohmann::json;

namespace {

void decode(const json& j, const std::string& where) {
  auto t = tensor_from_kserve_json(j, where);
  if (!t.ok()) {
    EMBER_FUZZ_CHECK(t.error().message().starts_with(where));
    return;
  }
  EMBER_FUZZ_CHECK(t->buffer && t->buffer->size() == t->desc.bytes());
  EMBER_FUZZ_CHECK(t->name == j.at("name").get<std::string>());
  EMBER_FUZZ_CHECK(t->desc.dtype == DType::f32 || t->desc.dtype == DType::i64 || t->desc.dtype == DType::i32 ||
                   t->desc.dtype == DType::u8);
  for (int i = 0; i < t->desc.shape.rank; ++i) EMBER_FUZZ_CHECK(t->desc.shape[i] >= 0);

  json encoded;
  tensor_to_kserve_json(*t, encoded);
  auto again = tensor_from_kserve_json(encoded, "re-encoded");
  EMBER_FUZZ_CHECK(again.ok());
  EMBER_FUZZ_CHECK(again->name == t->name && again->desc.dtype == t->desc.dtype && again->desc.shape == t->desc.shape);
  EMBER_FUZZ_CHECK(std::memcmp(again->data(), t->data(), t->desc.bytes()) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const json j = json::parse(data, data + size, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  if (j.is_object() && j.contains("inputs") && j["inputs"].is_array()) {
    for (size_t i = 0; i < j["inputs"].size(); ++i) {
      decode(j["inputs"][i], "request.json: inputs[" + std::to_string(i) + "]");
    }
  } else {
    decode(j, "request.json");
  }
  return 0;
}
