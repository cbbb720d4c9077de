// OnnxBuilder: small ONNX models built in memory with the protobuf API, for the importer's tests.
// Each call appends to a ModelProto; bytes() serialises it. Nothing here checks the model: tests
// build malformed ones on purpose.
#pragma once

#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "importer/onnx_import.hpp"
#include "onnx/onnx.pb.h"

namespace ember::importer::testing {

/// One dim of a declared input or output: a size, or a name (dim_param) for a free dim.
struct Dim {
  Dim(int64_t v) : value(v) {}                // NOLINT: implicit by design
  Dim(const char* p) : param(p) {}            // NOLINT: implicit by design
  int64_t value = 0;
  std::string param;
};

class OnnxBuilder {
 public:
  explicit OnnxBuilder(int64_t opset = 13) {
    model.set_ir_version(8);
    model.set_producer_name("onnx_builder");
    auto* o = model.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    model.mutable_graph()->set_name("test");
  }

  OnnxBuilder& input(const std::string& name, std::vector<Dim> dims, int32_t elem = onnx::TensorProto::FLOAT) {
    value_info(model.mutable_graph()->add_input(), name, dims, elem);
    return *this;
  }
  OnnxBuilder& output(const std::string& name) {
    model.mutable_graph()->add_output()->set_name(name);
    return *this;
  }

  /// A float initializer stored as raw_data.
  onnx::TensorProto& weight(const std::string& name, std::vector<int64_t> dims, const std::vector<float>& values) {
    auto* t = tensor(model.mutable_graph()->add_initializer(), name, dims, onnx::TensorProto::FLOAT);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
    return *t;
  }
  /// A float initializer of `count(dims)` values 0.1, 0.2, ... (scaled by `scale`).
  onnx::TensorProto& ramp(const std::string& name, std::vector<int64_t> dims, float scale = 0.1f) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * static_cast<float>(i + 1);
    return weight(name, std::move(dims), v);
  }
  /// An int64 initializer in int64_data.
  onnx::TensorProto& ints(const std::string& name, std::vector<int64_t> dims, const std::vector<int64_t>& values) {
    auto* t = tensor(model.mutable_graph()->add_initializer(), name, dims, onnx::TensorProto::INT64);
    for (int64_t v : values) t->add_int64_data(v);
    return *t;
  }

  onnx::NodeProto& node(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
                        const std::string& name = "") {
    auto* n = model.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? "/" + op + "_" + std::to_string(model.graph().node_size()) : name);
    for (auto& i : inputs) n->add_input(i);
    for (auto& o : outputs) n->add_output(o);
    return *n;
  }
  /// A Constant node holding a scalar float or an int64 vector.
  onnx::NodeProto& scalar(const std::string& out, float v) {
    auto& n = node("Constant", {}, {out});
    auto* t = n.add_attribute();
    t->set_name("value");
    t->set_type(onnx::AttributeProto::TENSOR);
    tensor(t->mutable_t(), "", {}, onnx::TensorProto::FLOAT)->add_float_data(v);
    return n;
  }
  onnx::NodeProto& int_scalar(const std::string& out, int64_t v) {
    auto& n = int_vector(out, {v});
    n.mutable_attribute(0)->mutable_t()->clear_dims();
    return n;
  }
  onnx::NodeProto& int_vector(const std::string& out, const std::vector<int64_t>& v) {
    auto& n = node("Constant", {}, {out});
    auto* t = n.add_attribute();
    t->set_name("value");
    t->set_type(onnx::AttributeProto::TENSOR);
    auto* tt = tensor(t->mutable_t(), "", {static_cast<int64_t>(v.size())}, onnx::TensorProto::INT64);
    for (int64_t x : v) tt->add_int64_data(x);
    return n;
  }

  std::string bytes() const { return model.SerializeAsString(); }

  onnx::ModelProto model;

 private:
  static void value_info(onnx::ValueInfoProto* v, const std::string& name, const std::vector<Dim>& dims, int32_t elem) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (const Dim& d : dims) {
      auto* dim = shape->add_dim();
      if (d.param.empty()) dim->set_dim_value(d.value);
      else dim->set_dim_param(d.param);
    }
  }
  static onnx::TensorProto* tensor(onnx::TensorProto* t, const std::string& name, const std::vector<int64_t>& dims,
                                   int32_t type) {
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    return t;
  }
};

inline void set_int(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void set_float(onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void set_ints(onnx::NodeProto& n, const std::string& name, std::initializer_list<int64_t> v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void set_tensor(onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  a->mutable_t()->add_dims(1);
  a->mutable_t()->add_float_data(v);
}
inline void set_string(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

/// The conversion of `b`'s model, bytes only (no folder: external data is refused).
inline Result<Imported> convert(const OnnxBuilder& b, ImportOptions options = {}) {
  if (options.name.empty()) options.name = "test";
  return convert_onnx(b.bytes(), "", options, "test.onnx");
}

}  // namespace ember::importer::testing
