// A request travelling a pipeline (Flashpoint's partitioned cold start): the gateway sends a
// stage_request to the first stage's stage host (a stage_host_actor, never through the node's
// supervisor), each stage hands it with its carried tensors to the next (tensor_handoff: over the
// data plane when large) and the last answers with the infer_reply (actors/inference_messages.hpp)
// that travels back up the hops. stage_key names a stage on a node and, as wire(), across processes
// (the manager places and reports stages by it; actors/loading_messages.hpp's load_stage loads one).
//
// Pure data with CAF `inspect`, registered in actors/type_ids.hpp; anyone may build and read them on
// any thread.
#pragma once

#include <caf/actor.hpp>
#include <caf/meta/type_name.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/inference_messages.hpp"
#include "actors/wire_inspect.hpp"

namespace ember {

/// A pipeline stage (Flashpoint's partitioned cold start): layers [first_layer, last_layer) of
/// `model`. The node carries this typed key (its router's stage replicas, its stage host's flow);
/// wire() is the model_key the stage is served under across processes, "<name>#<first>-<last>" at
/// the model's version (gpu::stage_name, as gpu::Model::stage names the stage; model names never
/// hold '#'): the manager places, reports and unloads stages by it, gateways and upstream stages
/// address them by it (pipeline_hop::stage, credit_atom), so it stays a model_key on the wire.
struct stage_key {
  model_key model;
  uint32_t first_layer = 0;
  uint32_t last_layer = 0;

  model_key wire() const;
  friend bool operator==(const stage_key& a, const stage_key& b) {
    return a.model == b.model && a.first_layer == b.first_layer && a.last_layer == b.last_layer;
  }
  friend bool operator<(const stage_key& a, const stage_key& b) {
    if (!(a.model == b.model)) return a.model < b.model;
    return a.first_layer != b.first_layer ? a.first_layer < b.first_layer : a.last_layer < b.last_layer;
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_key& x) {
  return f(caf::meta::type_name("stage_key"), x.model, x.first_layer, x.last_layer);
}

/// stage_key{model, first, last}.wire(): the model_key a node serves that stage under.
model_key stage_key_of(const model_key& model, uint32_t first, uint32_t last);

/// One stage of a pipeline: the actor serving it (the stage host of its node, a stage_host_actor:
/// node_report::stages) and the stage's key (stage_key::wire()).
struct pipeline_hop {
  caf::actor router;
  model_key stage;
  std::string node;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pipeline_hop& x) {
  return f(caf::meta::type_name("pipeline_hop"), x.router, x.stage, x.node);
}

/// Carried tensors handed to the next stage over the data plane: the upstream node's blob server
/// holds their bytes, concatenated in order, as blob `key` (`sizes` bytes each, SHA-256 `sha256` in
/// hex) until the downstream took them; the request's inputs then carry names, dtypes and shapes
/// only. An empty key: the tensors ride in the message itself.
struct tensor_handoff {
  HostPort from;
  std::string key;
  std::vector<uint64_t> sizes;
  std::string sha256;
  transport::Ticket ticket;  // issued by the upstream for the downstream, when the data plane needs tickets
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor_handoff& x) {
  return f(caf::meta::type_name("tensor_handoff"), x.from, x.key, x.sizes, x.sha256, x.ticket);
}

/// A request travelling a pipeline: gateway -> first stage's router -> ... -> last stage's router,
/// each answering its upstream with the last stage's infer_reply. `request.model` is the whole
/// model; `request.inputs` are the tensors carried: the client's inputs, then every value a later
/// stage reads, under their value names. `seq` numbers the requests one upstream sends, so the
/// downstream's credit_atom names which request it took.
struct stage_request {
  infer_request request;
  std::vector<pipeline_hop> hops;
  uint32_t at = 0;
  caf::actor upstream;  // the router that sent it (null from the gateway): it gets the credit
  uint64_t seq = 0;
  tensor_handoff handoff;  // between stages: where the carried tensors' bytes wait
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_request& x) {
  return f(caf::meta::type_name("stage_request"), x.request, x.hops, x.at, x.upstream, x.seq, x.handoff);
}

}  // namespace ember
