// The JSON of the model-repository endpoints: KServe v2's repository extension (index, load,
// unload) and Ember's own distribute/evict administration. The HTTP front end parses and renders
// through these.
//
// Who may call: pure, anyone, any thread; never throws. Every body here is optional: an empty
// body (nothing, or only whitespace, as `curl -X POST URL` sends) means "all defaults". A bad
// body is invalid_argument with a message that names the field.
//
// Wire shapes:
//   load body        {"parameters"?: {"replicas"?: 1..1024}}              (KServe's load parameters)
//   distribute body  {"nodes"?: ["a", ...], "mode"?: "chain"|"unicast"|"auto", "version"?: "<digits>"}
//   distribute reply {"model", "version", "mode" ("evict" for an eviction), "bytes", "seconds",
//                     "chains": [..], "nodes": [{"node", "source", "bytes", "seconds"}], "errors": [..]}
//   index reply      [{"name", "version", "state": "READY"|"LOADING"|"UNAVAILABLE", "reason"?}]
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/model_messages.hpp"
#include "base/status.hpp"

namespace ember {

/// Replicas to keep from a load body; 0 (the manager's "at least one") when the body, its
/// "parameters" or its "replicas" is absent. Errors: parse_json_text's, "the request body must be a
/// JSON object", "field 'parameters' must be an object", "parameter 'replicas' must be an integer in
/// 1..1024".
Result<uint32_t> parse_load_parameters(std::string_view body);

/// A distribute or evict request for `model` (version 0, every node, chain mode by default).
/// Errors: parse_json_text's, "the request body must be a JSON object", "field 'nodes' must be a
/// list of node names", "field 'nodes' must hold node names", "field 'mode' must be \"chain\",
/// \"unicast\" or \"auto\"", parse_distribute_mode's "mode must be chain, unicast or auto, not
/// '<word>'", "field 'version' must be a string of digits".
Result<distribute_request> parse_distribute_request(std::string_view body, const std::string& model);

std::string render_distribute_result(const distribute_result& result);

/// KServe's word for a model state in the index: READY, LOADING, or UNAVAILABLE (unloaded, failed).
std::string_view repository_state(const model_state& state);

std::string render_repository_index(const std::vector<model_state>& index);

}  // namespace ember
