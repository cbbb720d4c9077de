// Reading one ONNX node's attributes with their types checked, and refusing the attributes a
// conversion did not read: an attribute the importer does not understand may change what the
// node computes, so it is an error, never ignored.
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

  /// The first error: a wrong type, or (checked here) an attribute nobody read.
  Status finish() const;

 private:
  const onnx::AttributeProto* find(const char* name, onnx::AttributeProto::AttributeType type);

  const onnx::NodeProto& node_;
  std::set<std::string> read_;
  Status status_;
};

}  // namespace ember::importer
