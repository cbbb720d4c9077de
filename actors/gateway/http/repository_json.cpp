// Model-repository JSON bodies (see repository_json.hpp).
#include "actors/gateway/http/repository_json.hpp"

#include <charconv>
#include <nlohmann/json.hpp>

#include "base/json_text.hpp"

namespace ember {

namespace {

using nlohmann::json;

bool blank(std::string_view body) { return body.find_first_not_of(" \t\r\n") == std::string_view::npos; }

}  // namespace

Result<uint32_t> parse_load_parameters(std::string_view body) {
  if (blank(body)) return 0u;
  EMBER_ASSIGN_OR_RETURN(json j, parse_json_text(body));
  if (!j.is_object()) return invalid_argument("the request body must be a JSON object");
  auto params = j.find("parameters");
  if (params == j.end()) return 0u;
  if (!params->is_object()) return invalid_argument("field 'parameters' must be an object");
  auto replicas = params->find("replicas");
  if (replicas == params->end()) return 0u;
  if (!replicas->is_number_integer() || replicas->get<int64_t>() < 1 || replicas->get<int64_t>() > 1024) {
    return invalid_argument("parameter 'replicas' must be an integer in 1..1024");
  }
  return static_cast<uint32_t>(replicas->get<int64_t>());
}

Result<distribute_request> parse_distribute_request(std::string_view body, const std::string& model) {
  distribute_request req;
  req.model = {model, 0};
  if (blank(body)) return req;
  EMBER_ASSIGN_OR_RETURN(json j, parse_json_text(body));
  if (!j.is_object()) return invalid_argument("the request body must be a JSON object");
  if (auto nodes = j.find("nodes"); nodes != j.end()) {
    if (!nodes->is_array()) return invalid_argument("field 'nodes' must be a list of node names");
    for (const auto& n : *nodes) {
      if (!n.is_string() || n.get<std::string>().empty()) return invalid_argument("field 'nodes' must hold node names");
      req.nodes.push_back(n.get<std::string>());
    }
  }
  if (auto mode = j.find("mode"); mode != j.end()) {
    if (!mode->is_string()) return invalid_argument("field 'mode' must be \"chain\", \"unicast\" or \"auto\"");
    EMBER_ASSIGN_OR_RETURN(req.mode, parse_distribute_mode(mode->get<std::string>()));
  }
  if (auto version = j.find("version"); version != j.end()) {
    const Error bad = invalid_argument("field 'version' must be a string of digits");
    if (!version->is_string()) return bad;
    const std::string& text = version->get_ref<const std::string&>();
    uint32_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return bad;
    req.model.version = v;
  }
  return req;
}

std::string render_distribute_result(const distribute_result& r) {
  json nodes = json::array();
  for (const auto& n : r.nodes) {
    nodes.push_back({{"node", n.node},
                     {"source", r.evicted ? std::string("evicted") : describe_source(n.source, n.source_peer)},
                     {"bytes", n.bytes_fetched},
                     {"seconds", static_cast<double>(n.load_us) / 1e6}});
  }
  return json{{"model", r.model.name},
              {"version", std::to_string(r.model.version)},
              {"mode", r.evicted ? std::string("evict") : std::string(to_string(r.mode))},
              {"bytes", r.blob_bytes},
              {"seconds", r.seconds},
              {"chains", r.chains},
              {"nodes", std::move(nodes)},
              {"errors", r.errors}}
      .dump();
}

std::string_view repository_state(const model_state& s) {
  switch (s.state) {
    case ModelReadiness::ready:
      return "READY";
    case ModelReadiness::loading:
      return "LOADING";
    case ModelReadiness::unloaded:
    case ModelReadiness::failed:
      break;
  }
  return "UNAVAILABLE";
}

std::string render_repository_index(const std::vector<model_state>& index) {
  json out = json::array();
  for (const auto& s : index) {
    json e{{"name", s.model.name},
           {"version", std::to_string(s.model.version)},
           {"state", std::string(repository_state(s))}};
    if (!s.reason.empty()) e["reason"] = s.reason;
    out.push_back(std::move(e));
  }
  return out.dump();
}

}  // namespace ember
