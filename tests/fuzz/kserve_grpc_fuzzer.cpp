// libFuzzer target for actors/gateway/grpc/kserve_grpc.cpp: decode_infer_request, the gRPC
// inference request decoder, on any ModelInferRequest protobuf can parse, and encode_infer_reply.
//
// Input: the serialized ModelInferRequest (bytes protobuf does not parse are skipped: protobuf's
// parser is the caller's). On success every input holds exactly its shape's bytes in a dtype Ember
// runs, with at most 6 dimensions, and an answer echoing the inputs as outputs encodes: raw, with
// the same bytes; typed when asked and every dtype has a typed field, decoding back (as a typed
// request) to the same bytes. On failure the message is not empty.
#include <cstring>

#include "actors/gateway/grpc/kserve_grpc.hpp"
#include "model/tensor.hpp"
#include "tests/fuzz/fuzz_request.hpp"

using namespace ember;

// protobuf logs every string field with invalid UTF-8 it refuses: quiet, so findings stand out.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest in;
  if (!in.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto decoded = decode_infer_request(in);
  if (!decoded.ok()) {
    EMBER_FUZZ_CHECK(!decoded.error().message().empty());
    return 0;
  }
  const infer_request& req = decoded->request;
  EMBER_FUZZ_CHECK(req.model.name == in.model_name());
  const infer_reply reply = fuzz::check_and_echo(req);
  inference::ModelInferResponse out;
  EMBER_FUZZ_CHECK(encode_infer_reply(reply, *decoded, out).ok());
  EMBER_FUZZ_CHECK(out.outputs_size() == static_cast<int>(req.inputs.size()));
  if (out.raw_output_contents_size() > 0) {
    EMBER_FUZZ_CHECK(out.raw_output_contents_size() == out.outputs_size());
    for (int i = 0; i < out.outputs_size(); ++i) {
      const auto& bytes = out.raw_output_contents(i);
      const auto& want = req.inputs[static_cast<size_t>(i)].data;
      EMBER_FUZZ_CHECK(bytes.size() == want.size() &&
                       (want.empty() || std::memcmp(bytes.data(), want.data(), want.size()) == 0));
    }
    return 0;
  }
  // Typed: the answer's contents, sent back as a typed request, decode to the same bytes.
  EMBER_FUZZ_CHECK(decoded->typed_reply);
  inference::ModelInferRequest back;
  back.set_model_name(in.model_name());
  for (const auto& o : out.outputs()) {
    auto* t = back.add_inputs();
    t->set_name(o.name().empty() ? "x" : o.name());
    t->set_datatype(o.datatype());
    *t->mutable_shape() = o.shape();
    *t->mutable_contents() = o.contents();
  }
  auto again = decode_infer_request(back);
  EMBER_FUZZ_CHECK(again.ok());
  for (size_t i = 0; i < req.inputs.size(); ++i) {
    const auto& a = req.inputs[i].data;
    const auto& b = again->request.inputs[i].data;
    EMBER_FUZZ_CHECK(a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0));
  }
  return 0;
}
