// The warm path's conversation: an inference request and its answer, with the tensors both carry.
// A front end (actors/gateway/http/, grpc/) decodes a client's request into an infer_request; the
// gateway sends it to a node's router (through its supervisor), which runs it on a gpu_executor (or
// inline) and answers with an infer_reply. Pipelines (actors/pipeline_messages.hpp) and workflows
// (actors/workflow_messages.hpp) wrap the same request. Request tensors ride these messages; model
// bytes never do (they move over the data plane, transport/).
//
// Pure data with CAF `inspect`, registered in actors/type_ids.hpp; anyone may build and read them on
// any thread.
#pragma once

#include <caf/meta/type_name.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/wire_inspect.hpp"

namespace ember {

/// A tensor in a request or an answer: dtype is gpu::DType's value, data is dense row-major bytes.
struct tensor_msg {
  std::string name;
  uint8_t dtype = 0;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor_msg& x) {
  return f(caf::meta::type_name("tensor_msg"), x.name, x.dtype, x.shape, x.data);
}

/// An inference request on the warm path: gateway -> node_router -> gpu_executor.
struct infer_request {
  model_key model;
  /// The client's request id (echoed in the answer), may be empty.
  std::string id;
  std::vector<tensor_msg> inputs;
  /// Outputs the client asked for by name; empty means all.
  std::vector<std::string> outputs;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, infer_request& x) {
  return f(caf::meta::type_name("infer_request"), x.model, x.id, x.inputs, x.outputs);
}

struct infer_reply {
  model_key model;
  std::string id;
  std::vector<tensor_msg> outputs;
  /// Which node and device answered.
  std::string node;
  std::string device;
  /// Time the request waited in the executor's queue and the time it ran, microseconds.
  uint64_t queue_us = 0;
  uint64_t compute_us = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, infer_reply& x) {
  return f(caf::meta::type_name("infer_reply"), x.model, x.id, x.outputs, x.node, x.device, x.queue_us, x.compute_us);
}

}  // namespace ember
