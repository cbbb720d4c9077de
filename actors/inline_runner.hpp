// InlineRunner: what a node in this process offers the front ends of a gateway in the same process
// (`ember serve`): a warm request run on the front end's own thread, with no actor and no other
// thread in its way, when the model is resident on an idle device of the node. The gateway's warm
// path (actors/gateway/gateway_client.hpp) asks it first and takes the router's way when it
// declines. The node's implementation: actors/node/inline_runs.hpp.
#pragma once

#include <optional>

#include "actors/inference_messages.hpp"
#include "actors/workflow_messages.hpp"
#include "base/status.hpp"

namespace ember {

class InlineRunner {
 public:
  virtual ~InlineRunner() = default;
  /// The answer of `req` (its model version named exactly), run on the calling thread: the outputs,
  /// or an error the router's way would have given too (a bad input, an unknown output). nullopt,
  /// having run nothing, when the node would rather take the request through its router: the model
  /// is not resident, its device is busy, it batches, the device faulted, or inline runs are off.
  virtual std::optional<Result<infer_reply>> run(const infer_request& req) = 0;
  /// A whole workflow request (the node router's workflow_request) run on the calling thread, as
  /// run() runs one request, when one device holds every step's model and is idle; nullopt, having
  /// run nothing, when the node would rather take it through its router.
  virtual std::optional<Result<infer_reply>> run_workflow(const workflow_request& req) = 0;
};

}  // namespace ember
