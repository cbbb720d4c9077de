#include "actors/node/run_reply.hpp"

#include <algorithm>

#include "actors/node/request_batch.hpp"
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

RunInputs decoded_inputs(std::vector<std::shared_ptr<const infer_request>> requests, BatchPadding padding) {
  return [requests = std::move(requests), padding = std::move(padding)]() -> Result<std::vector<gpu::HostTensor>> {
    if (requests.size() == 1) return decode_tensors(requests.front()->inputs);
    return decode_tensors(concat_requests(requests, padding).inputs);
  };
}

std::vector<Result<infer_reply>> execution_answers(infer_reply skeleton,
                                                   const std::vector<std::shared_ptr<const infer_request>>& requests,
                                                   const InferResult& r, const BatchPadding& padding) {
  auto reply = build_reply(std::move(skeleton), requests.front()->outputs, r);
  std::vector<Result<infer_reply>> answers;
  if (requests.size() == 1) {
    answers.push_back(std::move(reply));
  } else if (reply.ok()) {
    auto parts = split_reply(*reply, requests, padding);
    for (size_t k = 0; k < requests.size(); ++k) {
      if (parts.ok()) {
        answers.emplace_back(std::move((*parts)[k]));
      } else {
        answers.emplace_back(parts.error());
      }
    }
  }
  return answers;
}

swap_reply swap_answer(infer_reply skeleton, const std::vector<std::string>& wanted, SwapRunResult r) {
  swap_reply out;
  auto reply = build_reply(std::move(skeleton), wanted, r.run);
  if (reply.ok()) {
    out.reply = std::move(*reply);
  } else {
    out.error = reply.error();
  }
  if (r.run.outputs.ok()) r.run.outputs = std::vector<gpu::HostTensor>{};  // encoded into the reply
  out.result = std::move(r);
  return out;
}

}  // namespace ember
