// Reading one ONNX node's attributes with their types checked, and refusing the attributes a
// conversion did not read: an attribute the importer does not understand may change what the
// node computes, so it is an error, never ignored. An attribute an op gained in a later version
// than the model's opset (AveragePool's ceil_mode before opset 10) is refused by name (since()).
//
// Pure; anyone, any thread. The node outlives the reader.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "onnx/onnx.pb.h"

namespace ember::importer {

class NodeAttrs {
 public:
  explicit NodeAttrs(const onnx::NodeProto& node) : node_(node) {}

  /// INT attribute `name`, or `fallback` when absent.
  int64_t integer(const char* name, int64_t fallback);
  float number(const char* name, float fallback);
  std::string text(const char* name, const std::string& fallback);
  /// INTS attribute; `fallback` when absent.
  std::vector<int64_t> ints(const char* name, std::vector<int64_t> fallback = {});
  /// The TENSOR attribute, or nullptr.
  const onnx::TensorProto* tensor(const char* name);
  bool has(const char* name) const;
  /// Marks `name` as understood without reading it (an attribute whose value does not matter at
  /// inference, e.g. BatchNormalization's momentum).
  void ignore(const char* name) { read_.insert(name); }
  /// Whether attribute `name`, which the op gained at opset `version`, exists at the model's
  /// `opset`. Below `version` it does not: it is marked read, and a node that has it anyway is an
  /// error finish() reports (the model is not valid ONNX at its opset, and ONNX Runtime refuses it
  /// too), rather than read with the newer version's meaning.
  bool since(const char* name, int64_t version, int64_t opset);

  /// The first error: a wrong type, or (checked here) an attribute nobody read.
  Status finish() const;

 private:
  const onnx::AttributeProto* find(const char* name, onnx::AttributeProto::AttributeType type);

  const onnx::NodeProto& node_;
  std::set<std::string> read_;
  Status status_;
};

}  // namespace ember::importer
