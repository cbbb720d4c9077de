#include "importer/converter.hpp"

#include <algorithm>
#include <cstring>

#include "importer/fold.hpp"
#include "importer/onnx_tensor.hpp"

namespace ember::importer {

namespace {

// Refusals listed in full before the rest is summarised.
constexpr size_t kListedRefusals = 16;

Result<gpu::DType> input_dtype(int32_t type, const std::string& where) {
  switch (type) {
    case onnx::TensorProto::FLOAT: return gpu::DType::f32;
    case onnx::TensorProto::INT64: return gpu::DType::i64;
    case onnx::TensorProto::INT32: return gpu::DType::i32;
    default:
      return unsupported(where + ": element type " + onnx_type_name(type) +
                         "; Ember's inputs are float32, int64 or int32");
  }
}

// A constant's elements in `dtype` (an integer type, or float16/bfloat16 is not needed: float
// constants are written as float32), little-endian.
Result<std::shared_ptr<const std::vector<uint8_t>>> constant_bytes(const Constant& c, gpu::DType dtype) {
  if (c.kind != Constant::Kind::i64 || !c.fixed()) {
    return invalid_argument("a " + std::string(gpu::dtype_name(dtype)) + " value from " + c.describe());
  }
  auto out = std::make_shared<std::vector<uint8_t>>();
  const size_t width = gpu::dtype_size(dtype);
  out->resize(c.a.size() * width);
  for (size_t i = 0; i < c.a.size(); ++i) {
    const int64_t v = c.a[i];
    uint8_t* p = out->data() + i * width;
    switch (dtype) {
      case gpu::DType::i64: std::memcpy(p, &v, 8); break;
      case gpu::DType::i32: {
        if (v < INT32_MIN || v > INT32_MAX) return invalid_argument(std::to_string(v) + " does not fit int32");
        const auto x = static_cast<int32_t>(v);
        std::memcpy(p, &x, 4);
        break;
      }
      case gpu::DType::u8:
        if (v < 0 || v > 255) return invalid_argument(std::to_string(v) + " does not fit uint8");
        *p = static_cast<uint8_t>(v);
        break;
      default: return invalid_argument("integers cannot be written as " + std::string(gpu::dtype_name(dtype)));
    }
  }
  return std::shared_ptr<const std::vector<uint8_t>>(std::move(out));
}

// Ember's reshape target turning `in` into `out`: fixed dims as they are, a free dim that stays in
// place 0 (copy), and at most one other free dim -1.
Result<gpu::Shape> reshape_target(const Dims& in, const Dims& out) {
  gpu::Shape t;
  t.rank = out.rank();
  bool wildcard = false;
  for (int i = 0; i < out.rank(); ++i) {
    if (out.fixed(i)) {
      t[i] = out.a[i];
    } else if (i < in.rank() && in.a[i] == out.a[i] && in.b[i] == out.b[i]) {
      t[i] = 0;
    } else if (!wildcard) {
      wildcard = true;
      t[i] = -1;
    } else {
      return unsupported("not supported yet: a reshape to " + out.to_string() +
                         ", where more than one dim depends on the model's free dims");
    }
  }
  return t;
}

}  // namespace

std::string ember_name(std::string_view onnx_name) {
  std::string s(onnx_name.substr(0, 200));
  for (char& c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.' || c == ':' || c == '/';
    if (!ok) c = '_';
  }
  return s.empty() ? "value" : s;
}

std::string layer_hint(const onnx::NodeProto& node) {
  return node.name().empty() && node.output_size() > 0 ? node.output(0) : node.name();
}

Converter::Converter(const OnnxGraph& graph, const ImportOptions& options, std::string model_dir, std::string source)
    : graph_(graph), options_(options), model_dir_(std::move(model_dir)), source_(std::move(source)) {}

std::string Converter::unique_name(std::string_view hint) {
  const std::string base = ember_name(hint);
  std::string name = base;
  for (int k = 2; names_.count(name); ++k) name = base + "_" + std::to_string(k);
  names_.insert(name);
  return name;
}

Status Converter::define_inputs() {
  for (const auto& info : graph_.graph().input()) {
    if (graph_.initializers.count(info.name())) continue;
    const std::string where = source_ + ": input '" + info.name() + "'";
    if (!info.type().has_tensor_type()) return unsupported(where + ": not a tensor");
    const auto& tt = info.type().tensor_type();
    EMBER_ASSIGN_OR_RETURN(gpu::DType dtype, input_dtype(tt.elem_type(), where));
    if (!tt.has_shape()) return unsupported(where + ": no shape; Ember's inputs declare their rank and fixed dims");
    if (tt.shape().dim_size() > gpu::Shape::kMaxRank) {
      return unsupported(where + ": rank " + std::to_string(tt.shape().dim_size()) + " (at most 6)");
    }
    Dims d;
    d.a.rank = d.b.rank = tt.shape().dim_size();
    const auto given = options_.input_shapes.find(info.name());
    if (given != options_.input_shapes.end() && given->second.size() != static_cast<size_t>(d.a.rank)) {
      return invalid_argument("--input-shape " + info.name() + ": " + std::to_string(given->second.size()) +
                              " dims given, the graph declares " + std::to_string(d.a.rank));
    }
    for (int k = 0; k < d.a.rank; ++k) {
      const auto& dim = tt.shape().dim(k);
      std::string symbol;  // "" for a fixed dim
      const int64_t want = given != options_.input_shapes.end() ? given->second[static_cast<size_t>(k)] : 0;
      if (want > 0) {
        if (want > kMaxDim || (dim.has_dim_value() && dim.dim_value() != want)) {
          return invalid_argument("--input-shape " + info.name() + ": dim " + std::to_string(k) + " is " +
                                  std::to_string(dim.dim_value()) + " in the graph, not " + std::to_string(want));
        }
        d.a[k] = d.b[k] = want;
        continue;
      }
      if (want < 0) {  // freed by --input-shape: a free dim of its own unless the graph named it
        symbol = dim.has_dim_param() && !dim.dim_param().empty() ? dim.dim_param()
                                                                 : "--input-shape " + info.name() + "." + std::to_string(k);
      } else if (given == options_.input_shapes.end() && k == options_.batch_dim) {
        symbol = "--batch-dim";
      } else if (dim.has_dim_value()) {
        if (dim.dim_value() <= 0 || dim.dim_value() > kMaxDim) {
          return unsupported(where + ": dim " + std::to_string(k) + " is " + std::to_string(dim.dim_value()));
        }
        d.a[k] = d.b[k] = dim.dim_value();
        continue;
      } else {  // a dim_param names a free dim; one without a name is a free dim of its own
        symbol = dim.has_dim_param() ? dim.dim_param() : std::string();
        if (symbol.empty()) symbol = "#" + std::to_string(k) + "." + std::to_string(next_symbol_);
      }
      auto [it, fresh] = symbols_.emplace(symbol, next_symbol_);
      if (fresh) ++next_symbol_;
      d.a[k] = kProbeA;
      d.b[k] = probe_b(it->second);
    }
    const std::string name = unique_name(info.name());
    manifest_.inputs.push_back({name, dtype, d.declared()});
    values_[info.name()] = Value::of_activation(name, dtype, d);
  }
  for (const auto& [name, dims] : options_.input_shapes) {
    if (!values_.count(name) || values_.at(name).is_constant()) {
      return invalid_argument("--input-shape " + name + ": the graph has no input of that name");
    }
  }
  return Status::OK();
}

Status Converter::read_initializers() {
  for (const auto& t : graph_.graph().initializer()) {
    EMBER_ASSIGN_OR_RETURN(Constant c, read_tensor(t, model_dir_, source_ + ": initializer '" + t.name() + "'"));
    values_[t.name()] = Value::of_constant(std::move(c));
  }
  return Status::OK();
}

const Value* Converter::input(const onnx::NodeProto& node, int i) const {
  if (i >= node.input_size() || node.input(i).empty()) return nullptr;
  auto it = values_.find(node.input(i));
  return it == values_.end() ? nullptr : &it->second;
}

Result<const Value*> Converter::value_input(const onnx::NodeProto& node, int i) const {
  const Value* v = input(node, i);
  if (!v) return invalid_argument("input " + std::to_string(i) + " is missing");
  return v;
}

Result<std::shared_ptr<const Constant>> Converter::constant_input(const onnx::NodeProto& node, int i,
                                                                  const char* role) const {
  const Value* v = input(node, i);
  if (!v) return invalid_argument("input " + std::to_string(i) + " (" + role + ") is missing");
  if (!v->is_constant()) {
    return unsupported("not supported yet: input " + std::to_string(i) + " (" + role + ", '" + node.input(i) +
                       "') is computed at serve time; the importer needs it constant");
  }
  return v->constant;
}

Result<const Value*> Converter::activation_input(const onnx::NodeProto& node, int i, const char* role) const {
  const Value* v = input(node, i);
  if (!v) return invalid_argument("input " + std::to_string(i) + " (" + role + ") is missing");
  if (!v->is_activation()) {
    return unsupported("not supported yet: input " + std::to_string(i) + " (" + role + ", '" + node.input(i) +
                       "') is a constant; Ember's layers compute on values a request carries");
  }
  if (v->dtype != gpu::DType::f32) {
    return unsupported("input " + std::to_string(i) + " (" + role + ") is " + std::string(gpu::dtype_name(v->dtype)) +
                       "; the op computes on float32");
  }
  return v;
}

void Converter::define(const onnx::NodeProto& node, int i, Value value) {
  if (i >= node.output_size() || node.output(i).empty()) return;
  values_[node.output(i)] = std::move(value);
}

Status Converter::require_unused(const onnx::NodeProto& node, int i, const char* what) const {
  if (i >= node.output_size() || node.output(i).empty()) return Status::OK();
  const std::string& out = node.output(i);
  if (graph_.consumers.count(out) || graph_.is_output(out)) {
    return unsupported(std::string(what) + " (output " + std::to_string(i) +
                       ") is read by the graph; the importer converts inference, which does not compute it");
  }
  return Status::OK();
}

Result<Dims> Converter::infer(gpu::OpKind op, const gpu::LayerAttrs& attrs,
                              const std::vector<const Value*>& inputs) const {
  std::vector<gpu::TensorDesc> a, b;
  for (const Value* v : inputs) {
    a.push_back({v->dtype, v->dims.a});
    b.push_back({v->dtype, v->dims.b});
  }
  auto out_a = gpu::infer_output(op, attrs, a);
  if (!out_a.ok()) return out_a.error();
  auto out_b = gpu::infer_output(op, attrs, b);
  if (!out_b.ok()) return out_b.error().with_context("with the model's free dims at their second probe size");
  return Dims{out_a->shape, out_b->shape};
}

Result<Value> Converter::reshape(std::string_view name_hint, const Value& x, const Dims& out) {
  gpu::LayerAttrs attrs;
  std::vector<const Value*> inputs{&x};
  if (auto target = reshape_target(x.dims, out); target.ok()) {
    attrs.shape = *target;
  } else {
    // Free dims that move: each taken from a value that has it (like_dims), fixed dims as they are.
    attrs.shape.rank = out.rank();
    std::vector<std::pair<int64_t, int64_t>> moved;
    std::vector<int> at, where;
    for (int i = 0; i < out.rank(); ++i) {
      if (out.fixed(i)) {
        attrs.shape[i] = out.a[i];
      } else if (i < x.dims.rank() && x.dims.a[i] == out.a[i] && x.dims.b[i] == out.b[i]) {
        attrs.shape[i] = 0;
      } else {
        attrs.shape[i] = 1;  // ignored: like_dims names where it comes from
        moved.emplace_back(out.a[i], out.b[i]);
        at.push_back(i);
      }
    }
    const Value* like = dim_carrier(moved, where);
    if (!like) return target.error();
    for (size_t k = 0; k < at.size(); ++k) attrs.like_dims[at[k]] = static_cast<int8_t>(where[k]);
    inputs.push_back(like);
  }
  EMBER_ASSIGN_OR_RETURN(const Dims got, infer(gpu::OpKind::reshape, attrs, inputs));
  if (!(got == out)) return internal_error("reshape to " + out.to_string() + " came out as " + got.to_string());
  return add_layer(name_hint, gpu::OpKind::reshape, attrs, inputs, {});
}

const Value* Converter::dim_carrier(const std::vector<std::pair<int64_t, int64_t>>& dims,
                                    std::vector<int>& where) const {
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& [name, v] : values_) {
      if (!v.is_activation()) continue;
      bool is_input = false;
      for (const auto& in : manifest_.inputs) is_input |= in.name == v.ember;
      if (is_input != (pass == 0)) continue;
      where.clear();
      for (const auto& [a, b] : dims) {
        int found = -1;
        for (int i = 0; i < v.dims.rank() && found < 0; ++i)
          if (v.dims.a[i] == a && v.dims.b[i] == b) found = i;
        if (found < 0) break;
        where.push_back(found);
      }
      if (where.size() == dims.size()) return &v;
    }
  }
  return nullptr;
}

Result<Value> Converter::add_layer(std::string_view name_hint, gpu::OpKind op, const gpu::LayerAttrs& attrs,
                                   const std::vector<const Value*>& inputs, const std::vector<RoleWeight>& weights) {
  gpu::LayerSpec layer;
  layer.op = op;
  layer.attrs = attrs;
  for (const Value* v : inputs) {
    if (!v->is_activation()) return internal_error("add_layer: input is not an activation");
    layer.inputs.push_back(v->ember);
  }
  std::vector<gpu::TensorDesc> probe;
  for (const Value* v : inputs) probe.push_back({v->dtype, v->dims.a});
  EMBER_ASSIGN_OR_RETURN(const gpu::TensorDesc out, gpu::infer_output(op, attrs, probe));
  EMBER_ASSIGN_OR_RETURN(const Dims dims, infer(op, attrs, inputs));

  size_t bound = 0;
  std::vector<PendingWeight> pending;
  for (const gpu::WeightSpec& spec : gpu::weight_specs(op, attrs)) {
    auto w = std::find_if(weights.begin(), weights.end(), [&](const RoleWeight& r) { return r.role == spec.role; });
    if (w == weights.end()) {
      if (spec.required) return internal_error("add_layer: no weight for role '" + std::string(spec.role) + "'");
      continue;
    }
    ++bound;
    const std::string role(spec.role);
    const Constant& c = *w->value;
    gpu::Shape shape;
    for (int64_t d : c.dims) shape[shape.rank++] = d;
    const bool as_float = spec.dtype == gpu::DType::f32;
    if ((as_float && c.kind != Constant::Kind::f32) || shape != spec.shape) {
      return invalid_argument(std::string(gpu::op_name(op)) + " needs " + role + " " +
                              std::string(gpu::dtype_name(spec.dtype)) + spec.shape.to_string() + ", the model has " +
                              c.describe());
    }
    layer.weights.push_back({role, role});  // the tensor's name is set once layer names are final
    PendingWeight p{manifest_.layers.size(), role, shape, nullptr, spec.dtype, nullptr};
    if (as_float) {
      // The buffer is the constant's own: a weight two layers read is written twice from one buffer.
      p.values = std::shared_ptr<const std::vector<float>>(w->value, &w->value->f);
      if (!written_.insert(p.values.get()).second) stats_.duplicated_bytes += static_cast<uint64_t>(c.numel()) * 4;
    } else {
      EMBER_ASSIGN_OR_RETURN(p.raw, constant_bytes(c, spec.dtype));
    }
    pending.push_back(std::move(p));
    stats_.parameters += static_cast<uint64_t>(c.numel());
  }
  if (bound != weights.size()) return internal_error("add_layer: a weight of a role the op does not take");
  layer.name = unique_name(name_hint);
  weights_.insert(weights_.end(), pending.begin(), pending.end());
  manifest_.layers.push_back(std::move(layer));
  return Value::of_activation(manifest_.layers.back().name, out.dtype, dims);
}

Result<const Value*> Converter::constant_layer(const std::shared_ptr<const Constant>& k, gpu::DType int_dtype,
                                               std::string_view hint) {
  const gpu::DType dtype = k->kind == Constant::Kind::f32 ? gpu::DType::f32 : int_dtype;
  const auto key = std::make_pair(k.get(), dtype);
  if (auto it = constant_layers_.find(key); it != constant_layers_.end()) return &it->second.second;
  if (!k->fixed()) {
    return unsupported("not supported: a constant " + k->describe() +
                       " whose values depend on a free dim of the model, read as a layer's operand");
  }
  if (k->dims.size() > static_cast<size_t>(gpu::Shape::kMaxRank)) return unsupported("not supported: a constant of rank above 6");
  gpu::LayerAttrs attrs;
  attrs.to = dtype;
  for (int64_t d : k->dims) attrs.shape[attrs.shape.rank++] = d;
  EMBER_ASSIGN_OR_RETURN(Value v, add_layer(std::string(hint) + ".constant", gpu::OpKind::constant, attrs, {}, {{"value", k}}));
  auto [it, fresh] = constant_layers_.emplace(key, std::make_pair(k, std::move(v)));
  (void)fresh;
  return &it->second.second;
}

Result<const Value*> Converter::operand(const onnx::NodeProto& node, int i, const char* role, gpu::DType int_dtype) {
  const Value* v = input(node, i);
  if (!v) return invalid_argument("input " + std::to_string(i) + " (" + role + ") is missing");
  if (v->is_activation()) return v;
  if (!v->is_constant()) return internal_error("input " + std::to_string(i) + " was refused");
  auto r = constant_layer(v->constant, int_dtype, node.input(i));
  if (!r.ok()) return r.error().with_context("input " + std::to_string(i) + " (" + role + ")");
  return r;
}

Result<std::shared_ptr<const Constant>> Converter::transposed(const std::shared_ptr<const Constant>& w) {
  auto& [source, t] = transposed_[w.get()];
  if (!t) {
    EMBER_ASSIGN_OR_RETURN(Constant c, fold_transpose(*w, {1, 0}));
    source = w;
    t = std::make_shared<const Constant>(std::move(c));
  }
  return t;
}

void Converter::refuse(const onnx::NodeProto& node, int index, const Error& error) {
  refusals_.push_back({node.op_type(), node_label(node, index), error});
  for (const auto& out : node.output())
    if (!out.empty() && !values_.count(out)) values_[out] = Value{};
}

void Converter::convert_node(int index) {
  const onnx::NodeProto& node = graph_.node(index);
  if (!graph_.live[static_cast<size_t>(index)]) {
    ++stats_.removed;
    return;
  }
  // The nodes whose inputs this step reads from outside it: the node, or a fused pattern.
  std::vector<int> nodes = {index};
  const Fusion* fusion = nullptr;
  if (auto f = fusion_of_.find(index); f != fusion_of_.end()) {
    ++stats_.fused;
    fusion = &fusions_[f->second];
    if (index != fusion->anchor) return;
    nodes = fusion->nodes;
  }
  const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
  OpConversion conversion = nullptr;
  for (auto table : {layer_conversion, shape_conversion, elementwise_conversion, tensor_conversion, reduce_conversion}) {
    if (default_domain && !conversion) conversion = table(node.op_type());
  }

  bool reads_refused = false;
  for (int n : nodes) {
    for (const auto& in : graph_.node(n).input()) {
      auto it = values_.find(in);
      reads_refused |= it != values_.end() && it->second.kind == Value::Kind::refused;
    }
  }
  Status st;
  if (!default_domain) {
    st = unsupported("not supported: domain '" + node.domain() + "' (the importer reads the default ai.onnx domain)");
  } else if (!fusion && !conversion) {
    st = unsupported("not supported yet: Ember's op set has no " + node.op_type());
  } else if (reads_refused) {  // refused upstream: nothing can be said about this node
    ++unchecked_;
    for (const auto& out : node.output())
      if (!out.empty()) values_[out] = Value{};
    return;
  } else {
    st = fusion ? convert_fusion(*this, *fusion) : conversion(*this, node);
  }
  if (st.ok()) {
    for (int i = 0; i < node.output_size(); ++i) {
      const std::string& out = node.output(i);
      if (!out.empty() && !values_.count(out) && (graph_.consumers.count(out) || graph_.is_output(out))) {
        st = internal_error("output " + std::to_string(i) + " was not converted");
      }
    }
  }
  if (!st.ok()) refuse(node, index, st.error());
}

Error Converter::refusal_error() const {
  std::map<std::string, int> by_op;
  bool all_unsupported = true, bug = false;
  for (const auto& r : refusals_) {
    ++by_op[r.op_type];
    all_unsupported &= r.error.code() == ErrorCode::unsupported;
    bug |= r.error.code() == ErrorCode::internal;
  }
  std::string ops;
  for (const auto& [op, n] : by_op) ops += (ops.empty() ? "" : ", ") + op + (n > 1 ? " x" + std::to_string(n) : "");
  std::string msg = source_ + ": cannot import " + std::to_string(refusals_.size()) + " of " +
                    std::to_string(graph_.graph().node_size()) + " nodes (" + ops + ")";
  if (unchecked_) msg += "; " + std::to_string(unchecked_) + " nodes that read their results were not checked";
  msg += ":";
  for (size_t i = 0; i < refusals_.size() && i < kListedRefusals; ++i) {
    msg += "\n  " + refusals_[i].label + ": " + refusals_[i].error.message();
  }
  if (refusals_.size() > kListedRefusals) msg += "\n  ... and " + std::to_string(refusals_.size() - kListedRefusals) + " more";
  if (bug) return internal_error(msg);
  return Error(all_unsupported ? ErrorCode::unsupported : ErrorCode::invalid_argument, msg);
}

Status Converter::declare_outputs() {
  std::map<std::string, std::string> rename;  // layer -> graph output's name
  for (const auto& o : graph_.outputs) {
    const Value& v = values_.at(o);
    const std::string where = source_ + ": graph output '" + o + "'";
    if (v.is_constant()) return unsupported(where + " is a constant; an Ember model computes each output from its inputs");
    if (v.kind != Value::Kind::activation) return internal_error(where + " was not converted");
    for (const auto& in : manifest_.inputs)
      if (in.name == v.ember) return unsupported(where + " is the input '" + in.name + "' unchanged");
    if (rename.count(v.ember)) return unsupported(where + " is the same value as an earlier output");
    for (int i = 0; i < v.dims.rank(); ++i) {
      if (v.dims.a[i] > kMaxDim || v.dims.b[i] > kMaxDim) return unsupported(where + ": dims " + v.dims.to_string() + " too large");
      // model.json declares positive dims (or -1): an output that is always empty is refused.
      if (v.dims.a[i] < 1 || v.dims.b[i] < 1) {
        return unsupported(where + " is empty (" + v.dims.to_string() + "); Ember's outputs have positive dims");
      }
    }
    // The layer takes the output's name; it was reserved for it before the walk.
    rename[v.ember] = output_names_.at(o);
    manifest_.outputs.push_back({output_names_.at(o), v.dtype, v.dims.declared()});
  }
  for (auto& layer : manifest_.layers) {
    if (auto r = rename.find(layer.name); r != rename.end()) layer.name = r->second;
    for (auto& in : layer.inputs)
      if (auto r = rename.find(in); r != rename.end()) in = r->second;
  }
  // Tensor names, now that layer names are final: "<layer>.<role>".
  for (auto& layer : manifest_.layers)
    for (auto& b : layer.weights) b.tensor = layer.name + "." + b.role;
  return Status::OK();
}

Result<Imported> Converter::run() {
  stats_.opset = graph_.opset;
  stats_.nodes = static_cast<uint32_t>(graph_.graph().node_size());
  manifest_.name = options_.name;
  EMBER_RETURN_IF_ERROR(define_inputs());
  // Output names are reserved first, so no layer named after a node takes one.
  for (const auto& o : graph_.outputs)
    if (!output_names_.count(o)) output_names_[o] = unique_name(o);
  EMBER_RETURN_IF_ERROR(read_initializers());
  fusions_ = find_fusions(graph_);
  for (size_t f = 0; f < fusions_.size(); ++f)
    for (int n : fusions_[f].nodes) fusion_of_[n] = f;
  for (int index : graph_.order) convert_node(index);
  if (!refusals_.empty()) return refusal_error();
  if (manifest_.layers.empty()) return unsupported(source_ + ": nothing to compute: every output is an input or a constant");
  EMBER_RETURN_IF_ERROR(declare_outputs());

  const std::string json = gpu::manifest_to_json(manifest_);
  if (auto checked = gpu::parse_manifest(json, source_); !checked.ok()) {
    return internal_error("the importer made a model.json that does not validate: " + checked.error().message());
  }
  Imported out;
  for (const auto& w : weights_) {
    out.weights.push_back({*manifest_.layers[w.layer].weight(w.role), w.shape, w.values, w.dtype, w.raw});
  }
  out.manifest = std::move(manifest_);
  out.stats = stats_;
  return out;
}

}  // namespace ember::importer
