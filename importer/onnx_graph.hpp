// An ONNX model parsed and checked for structure, before any node is converted: the protobuf,
// the opset, who produces and who reads every value, a topological order of the nodes, and which
// nodes the graph's outputs need.
//
// What read_onnx refuses, each with an Error that names the file and the node or value:
//   - bytes that do not parse as a ModelProto (truncated, not protobuf), or more than 2 GiB (the
//     limit of one protobuf message: larger models keep their weights as external data);
//   - a model without a graph, a graph without outputs, sparse initializers;
//   - no opset for the default domain (""/"ai.onnx"), or one outside kMinOpset..kMaxOpset (9 to 17:
//     the op conversions read each op as the version the model's opset names, lower_*.cpp);
//   - a value produced twice (by two nodes, or by a node and an input or initializer);
//   - a node that reads a value nothing produces (a dangling input), an output nothing produces;
//   - a cycle: nodes that cannot be put in an order where every value is produced before it is read.
// Nodes need not be listed in order: the order is computed (Kahn's algorithm, keeping the file's
// order among nodes that are ready together, so an ordered file keeps its order).
//
// Pure; anyone, any thread. The node's attributes and the operators themselves are not checked
// here (converter.hpp does that per op).
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "onnx/onnx.pb.h"

namespace ember::importer {

inline constexpr int64_t kMinOpset = 9;
inline constexpr int64_t kMaxOpset = 17;

struct OnnxGraph {
  onnx::ModelProto model;
  /// The default domain's opset version, in kMinOpset..kMaxOpset.
  int64_t opset = 0;
  /// Node indices (into graph().node()) in an order where every value is produced before it is read.
  std::vector<int> order;
  /// Value name -> the node that produces it (inputs and initializers are absent).
  std::map<std::string, int, std::less<>> producer;
  /// Value name -> the nodes that read it, in node order (a node reading it twice appears once).
  std::map<std::string, std::vector<int>, std::less<>> consumers;
  std::set<std::string, std::less<>> initializers;
  /// The graph's inputs that are not initializers: the model's inputs, in graph order.
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  /// Per node: whether some graph output depends on it.
  std::vector<bool> live;

  const onnx::GraphProto& graph() const { return model.graph(); }
  const onnx::NodeProto& node(int i) const { return model.graph().node(i); }
  bool is_output(std::string_view value) const;
  /// The one node that reads `value`, when exactly one does and it is not a graph output; else -1.
  int sole_consumer(std::string_view value) const;
};

/// "node '/layer1/Conv' (Conv)"; a node without a name is named by its index and first output.
std::string node_label(const onnx::NodeProto& node, int index);

/// Parses `bytes` and checks the structure above. `source` names the file in messages.
Result<OnnxGraph> read_onnx(std::string_view bytes, std::string_view source);

}  // namespace ember::importer
