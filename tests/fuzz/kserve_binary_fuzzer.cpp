// libFuzzer target for actors/gateway/http/kserve_json.cpp: parse_infer_http, the HTTP inference
// body with the binary tensor data extension (Inference-Header-Content-Length), and
// render_infer_http on the answer; and that reading the data lists from the text (the default from
// 4 KiB on; here for every body) gives exactly what the JSON parser gives.
//
// Input: a 4-byte little-endian header length (0xFFFFFFFF: no header, the body is all JSON), then
// the body. On success every input holds exactly its shape's bytes in a dtype Ember runs, and an
// answer echoing the inputs as outputs renders, in binary where asked, with the header length
// inside the body; rendered as JSON alone it parses back to the same bytes (FP16/BF16 excepted,
// which JSON does not carry, and non-finite FP32 values, which JSON renders as null: binary
// outputs carry them). On failure the message is not empty.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "actors/gateway/http/kserve_json.hpp"
#include "model/tensor.hpp"
#include "tests/fuzz/fuzz_request.hpp"

using namespace ember;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint32_t header = fuzz::take_u32(data, size);
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  std::optional<uint64_t> json_bytes;
  if (header != 0xFFFFFFFFu) json_bytes = header;
  auto parsed = parse_infer_http(body, json_bytes, {"m", 1}, 0);
  // Data lists read from the text give what the JSON parser gives: the same tensors, the same error.
  auto whole = parse_infer_http(body, json_bytes, {"m", 1}, SIZE_MAX);
  EMBER_FUZZ_CHECK(parsed.ok() == whole.ok());
  if (!parsed.ok()) {
    EMBER_FUZZ_CHECK(!parsed.error().message().empty());
    EMBER_FUZZ_CHECK(parsed.error().message() == whole.error().message());
    return 0;
  }
  EMBER_FUZZ_CHECK(parsed->request.inputs.size() == whole->request.inputs.size());
  for (size_t i = 0; i < parsed->request.inputs.size(); ++i) {
    const tensor_msg& a = parsed->request.inputs[i];
    const tensor_msg& b = whole->request.inputs[i];
    EMBER_FUZZ_CHECK(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.data == b.data);
  }
  const infer_request& req = parsed->request;
  EMBER_FUZZ_CHECK(req.model.name == "m");
  const infer_reply reply = fuzz::check_and_echo(req);
  bool json_carries_all = true;
  for (const auto& t : req.inputs) {
    const auto dt = static_cast<gpu::DType>(t.dtype);
    if (dt == gpu::DType::f16 || dt == gpu::DType::bf16) json_carries_all = false;
    if (dt == gpu::DType::f32) {
      for (size_t k = 0; k + 4 <= t.data.size(); k += 4) {
        float v;
        std::memcpy(&v, t.data.data() + k, 4);
        if (!std::isfinite(v)) json_carries_all = false;
      }
    }
  }
  auto rendered = render_infer_http(reply, *parsed);
  if (rendered.ok() && rendered->json_bytes) EMBER_FUZZ_CHECK(*rendered->json_bytes <= rendered->body.size());
  if (!json_carries_all) return 0;
  // As JSON alone, the answer's tensors read back as the same bytes.
  HttpInferRequest as_json;
  auto plain = render_infer_http(reply, as_json);
  EMBER_FUZZ_CHECK(plain.ok() && !plain->json_bytes);
  std::string again = plain->body;
  const std::string from = "\"outputs\":";
  const size_t at = again.find(from);
  EMBER_FUZZ_CHECK(at != std::string::npos);
  again.replace(at, from.size(), "\"inputs\":");
  auto back = parse_infer_http(again, std::nullopt, {"m", 1});
  EMBER_FUZZ_CHECK(back.ok() && back->request.inputs.size() == req.inputs.size());
  for (size_t i = 0; i < req.inputs.size(); ++i) {
    const auto& a = req.inputs[i];
    const auto& b = back->request.inputs[i];
    EMBER_FUZZ_CHECK(a.dtype == b.dtype && a.shape == b.shape && a.data.size() == b.data.size());
    // Float bytes may differ for NaN payloads and -0 (JSON carries numbers, not bits); ints must not.
    if (a.dtype != static_cast<uint8_t>(gpu::DType::f32)) EMBER_FUZZ_CHECK(a.data == b.data);
  }
  return 0;
}
