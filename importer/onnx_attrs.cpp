#include "importer/onnx_attrs.hpp"

namespace ember::importer {

using onnx::AttributeProto;

const AttributeProto* NodeAttrs::find(const char* name, AttributeProto::AttributeType type) {
  read_.insert(name);
  for (const auto& a : node_.attribute()) {
    if (a.name() != name) continue;
    // Files from old exporters leave `type` unset; then the field that is set decides.
    const bool typed = a.has_type() && a.type() != AttributeProto::UNDEFINED;
    if (typed && a.type() != type) {
      if (status_.ok()) {
        status_ = invalid_argument("attribute '" + std::string(name) + "' has type " +
                                   AttributeProto::AttributeType_Name(a.type()) + ", expected " +
                                   AttributeProto::AttributeType_Name(type));
      }
      return nullptr;
    }
    return &a;
  }
  return nullptr;
}

bool NodeAttrs::has(const char* name) const {
  for (const auto& a : node_.attribute())
    if (a.name() == name) return true;
  return false;
}

int64_t NodeAttrs::integer(const char* name, int64_t fallback) {
  const auto* a = find(name, AttributeProto::INT);
  return a ? a->i() : fallback;
}

float NodeAttrs::number(const char* name, float fallback) {
  const auto* a = find(name, AttributeProto::FLOAT);
  return a ? a->f() : fallback;
}

std::string NodeAttrs::text(const char* name, const std::string& fallback) {
  const auto* a = find(name, AttributeProto::STRING);
  return a ? a->s() : fallback;
}

std::vector<int64_t> NodeAttrs::ints(const char* name, std::vector<int64_t> fallback) {
  const auto* a = find(name, AttributeProto::INTS);
  if (!a) return fallback;
  return {a->ints().begin(), a->ints().end()};
}

bool NodeAttrs::since(const char* name, int64_t version, int64_t opset) {
  if (opset >= version) return true;
  read_.insert(name);
  if (has(name) && status_.ok()) {
    status_ = invalid_argument("attribute '" + std::string(name) + "' is not part of " + node_.op_type() +
                               " before opset " + std::to_string(version) + " (the model declares opset " +
                               std::to_string(opset) + ")");
  }
  return false;
}

const onnx::TensorProto* NodeAttrs::tensor(const char* name) {
  const auto* a = find(name, AttributeProto::TENSOR);
  return a && a->has_t() ? &a->t() : nullptr;
}

Status NodeAttrs::finish() const {
  if (!status_.ok()) return status_;
  for (const auto& a : node_.attribute()) {
    if (!read_.count(a.name())) {
      return unsupported("attribute '" + a.name() + "' is not understood by the importer");
    }
  }
  return Status::OK();
}

}  // namespace ember::importer
