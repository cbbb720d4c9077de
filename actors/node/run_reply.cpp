#include "actors/node/run_reply.hpp"

#include <algorithm>

#include "actors/tensor_codec.hpp"

namespace ember {

Result<infer_reply> build_reply(infer_reply skeleton, const std::vector<std::string>& wanted, const InferResult& r) {
  if (!r.outputs.ok()) return r.outputs.error();
  for (const auto& name : wanted) {
    const bool known =
        std::any_of(r.outputs->begin(), r.outputs->end(), [&](const gpu::HostTensor& t) { return t.name == name; });
    if (!known) return invalid_argument("the model has no output '" + name + "'");
  }
  infer_reply reply = std::move(skeleton);
  reply.queue_us = r.queue_us;
  reply.compute_us = r.compute_us;
  for (const auto& t : *r.outputs) {
    if (wanted.empty() || std::find(wanted.begin(), wanted.end(), t.name) != wanted.end()) {
      reply.outputs.push_back(encode_tensor(t));
    }
  }
  return reply;
}

}  // namespace ember
