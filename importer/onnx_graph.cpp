#include "importer/onnx_graph.hpp"

#include <climits>
#include <queue>

namespace ember::importer {

bool OnnxGraph::is_output(std::string_view value) const {
  for (const auto& o : outputs)
    if (o == value) return true;
  return false;
}

int OnnxGraph::sole_consumer(std::string_view value) const {
  auto it = consumers.find(value);
  if (it == consumers.end() || it->second.size() != 1 || is_output(value)) return -1;
  return it->second.front();
}

std::string node_label(const onnx::NodeProto& node, int index) {
  std::string name = node.name();
  if (name.empty()) {
    name = "#" + std::to_string(index);
    if (node.output_size() > 0) name += " -> '" + node.output(0) + "'";
  }
  return "node '" + name + "' (" + node.op_type() + ")";
}

namespace {

Status check_opset(const onnx::ModelProto& m, const std::string& at, int64_t& opset) {
  bool found = false;
  for (const auto& o : m.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") {
      opset = o.version();
      found = true;
    }
  }
  if (!found) {
    // A model of other domains' ops only (ONNX's training ops, ai.onnx.preview.training) is valid
    // ONNX, just not one Ember runs; a model that declares no domain at all is malformed.
    std::string others;
    for (const auto& o : m.opset_import()) others += (others.empty() ? "'" : ", '") + o.domain() + "'";
    if (!others.empty()) {
      return unsupported(at + ": the model declares no opset for the default domain (ai.onnx), only for " + others +
                         "; Ember imports the default domain's ops");
    }
    return invalid_argument(at + ": the model declares no opset for the default domain (ai.onnx)");
  }
  if (opset < kMinOpset || opset > kMaxOpset) {
    return unsupported(at + ": opset " + std::to_string(opset) + " of the default domain; this build imports opsets " +
                       std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) +
                       " (re-export with torch.onnx.export(..., opset_version=17))");
  }
  return Status::OK();
}

}  // namespace

Result<OnnxGraph> read_onnx(std::string_view bytes, std::string_view source) {
  const std::string at(source);
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    return unsupported(at + ": " + std::to_string(bytes.size()) +
                       " bytes; one protobuf message holds at most 2 GiB (export the weights as external data)");
  }
  OnnxGraph g;
  if (!g.model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return corrupt(at + ": not an ONNX model: the protobuf does not parse (" + std::to_string(bytes.size()) +
                   " bytes; truncated, or not a ModelProto)");
  }
  if (!g.model.has_graph()) return corrupt(at + ": not an ONNX model: it has no graph");
  EMBER_RETURN_IF_ERROR(check_opset(g.model, at, g.opset));
  const onnx::GraphProto& graph = g.graph();
  if (graph.sparse_initializer_size() > 0) return unsupported(at + ": sparse initializers are not imported");
  if (graph.output_size() == 0) return invalid_argument(at + ": the graph has no outputs");

  // Who produces what: initializers, inputs, then each node's outputs, each name once.
  std::map<std::string, std::string, std::less<>> defined;  // value -> what defines it, for messages
  auto define = [&](const std::string& value, const std::string& what) -> Status {
    if (value.empty()) return Status::OK();  // an omitted optional output
    auto [it, fresh] = defined.emplace(value, what);
    if (!fresh) {
      return invalid_argument(at + ": value '" + value + "' is produced twice, by " + it->second + " and by " + what);
    }
    return Status::OK();
  };
  for (const auto& init : graph.initializer()) {
    EMBER_RETURN_IF_ERROR(define(init.name(), "initializer '" + init.name() + "'"));
    g.initializers.insert(init.name());
  }
  for (const auto& in : graph.input()) {
    if (g.initializers.count(in.name())) continue;  // an initializer listed as an input: a constant
    EMBER_RETURN_IF_ERROR(define(in.name(), "input '" + in.name() + "'"));
    g.inputs.push_back(in.name());
  }
  const int n = graph.node_size();
  for (int i = 0; i < n; ++i) {
    for (const auto& out : graph.node(i).output()) {
      EMBER_RETURN_IF_ERROR(define(out, node_label(graph.node(i), i)));
      if (!out.empty()) g.producer.emplace(out, i);
    }
  }

  // Readers, dangling inputs, and the order (Kahn: a node is ready when every producer is placed;
  // the smallest ready index goes first).
  std::vector<int> waiting(static_cast<size_t>(n), 0);
  std::vector<std::vector<int>> dependents(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto& node = graph.node(i);
    std::set<std::string_view> seen;
    for (const auto& in : node.input()) {
      if (in.empty() || !seen.insert(in).second) continue;
      if (!defined.count(in)) {
        return invalid_argument(at + ": " + node_label(node, i) + " reads '" + in +
                                "', which no node, graph input or initializer produces");
      }
      g.consumers[in].push_back(i);
      if (auto p = g.producer.find(in); p != g.producer.end()) {
        ++waiting[static_cast<size_t>(i)];
        dependents[static_cast<size_t>(p->second)].push_back(i);
      }
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int i = 0; i < n; ++i)
    if (waiting[static_cast<size_t>(i)] == 0) ready.push(i);
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    g.order.push_back(i);
    for (int d : dependents[static_cast<size_t>(i)])
      if (--waiting[static_cast<size_t>(d)] == 0) ready.push(d);
  }
  if (static_cast<int>(g.order.size()) != n) {
    std::string stuck;
    int shown = 0;
    for (int i = 0; i < n && shown < 5; ++i) {
      if (waiting[static_cast<size_t>(i)] == 0) continue;
      stuck += (shown++ ? ", " : "") + node_label(graph.node(i), i);
    }
    return invalid_argument(at + ": the graph has a cycle: " + std::to_string(n - static_cast<int>(g.order.size())) +
                            " nodes cannot be ordered so that each value is produced before it is read (" + stuck +
                            (n - static_cast<int>(g.order.size()) > shown ? ", ..." : "") + ")");
  }

  // Outputs, and what they need (walking back from them).
  g.live.assign(static_cast<size_t>(n), false);
  std::vector<std::string_view> work;
  for (const auto& out : graph.output()) {
    if (!defined.count(out.name())) {
      return invalid_argument(at + ": graph output '" + out.name() + "' is produced by nothing");
    }
    g.outputs.push_back(out.name());
    work.push_back(out.name());
  }
  while (!work.empty()) {
    const std::string_view v = work.back();
    work.pop_back();
    auto p = g.producer.find(v);
    if (p == g.producer.end() || g.live[static_cast<size_t>(p->second)]) continue;
    g.live[static_cast<size_t>(p->second)] = true;
    for (const auto& in : graph.node(p->second).input())
      if (!in.empty()) work.push_back(in);
  }
  return g;
}

}  // namespace ember::importer
