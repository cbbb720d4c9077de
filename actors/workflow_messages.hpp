// A workflow request (issue 18): the gateway sends a whole workflow to one node's router, which runs
// its steps itself (actors/node/workflow_runs.hpp) and answers with the infer_reply of its outputs
// (actors/inference_messages.hpp). The workflows the manager knows travel as routing.hpp's
// workflow_entry.
//
// Pure data with CAF `inspect`, registered in actors/type_ids.hpp; anyone may build and read it on
// any thread.
#pragma once

#include <caf/meta/type_name.hpp>
#include <string>
#include <vector>

#include "actors/inference_messages.hpp"
#include "actors/wire_inspect.hpp"

namespace ember {

/// A whole workflow request for one node (issue 18): it runs the steps itself, each on the device
/// its scheduler picks, the intermediates left on that device for the steps that read them. The
/// gateway sends the workflow as the manager read it and the model version of each step.
struct workflow_request {
  std::string name;
  std::string json;
  std::vector<model_key> models;  // per step of the parsed workflow, in its order
  infer_request request;          // model {name, 1}; inputs named as the workflow's; outputs asked
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, workflow_request& x) {
  return f(caf::meta::type_name("workflow_request"), x.name, x.json, x.models, x.request);
}

}  // namespace ember
