#include "model/manifest.hpp"

#include "base/json_text.hpp"
#include "base/units.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace ember::gpu {

using nlohmann::json;

namespace {

bool valid_name(std::string_view s, size_t max_len, std::string_view extra) {
  if (s.empty() || s.size() > max_len) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.' || extra.find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

std::string layer_where(const std::string& at, size_t i, const LayerSpec& l) {
  return at + ": layers[" + std::to_string(i) + "] '" + l.name + "' (" +
         std::string(l.op == OpKind::count ? "?" : op_name(l.op)) + ")";
}

Status check_keys(const json& obj, std::initializer_list<std::string_view> keys, const std::string& where) {
  for (const auto& [key, value] : obj.items()) {
    (void)value;
    bool known = false;
    for (auto k : keys) known |= (k == key);
    if (!known) return invalid_argument(where + ": unknown field '" + key + "'");
  }
  return Status::OK();
}

Result<std::string> get_string(const json& obj, const char* key, const std::string& where, bool required = true) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (!required) return std::string();
    return invalid_argument(where + ": field '" + key + "' is missing");
  }
  if (!it->is_string()) return invalid_argument(where + ": field '" + key + "' must be a string");
  return it->get<std::string>();
}

Result<TensorSpec> parse_tensor_spec(const json& j, const std::string& where) {
  if (!j.is_object()) return invalid_argument(where + ": expected an object {name, dtype, shape}");
  EMBER_RETURN_IF_ERROR(check_keys(j, {"name", "dtype", "shape"}, where));
  TensorSpec t;
  EMBER_ASSIGN_OR_RETURN(t.name, get_string(j, "name", where));
  if (!valid_name(t.name, 256, ":/")) return invalid_argument(where + ": field 'name': '" + t.name + "' is not a valid name");
  EMBER_ASSIGN_OR_RETURN(std::string dtype, get_string(j, "dtype", where));
  auto dt = parse_dtype(dtype);
  if (!dt.ok()) return dt.error().with_context(where + ": field 'dtype'");
  t.dtype = *dt;
  auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array()) return invalid_argument(where + ": field 'shape' must be a list");
  if (shape->size() > static_cast<size_t>(Shape::kMaxRank)) {
    return unsupported(where + ": field 'shape' has more than " + std::to_string(Shape::kMaxRank) + " dims");
  }
  for (const auto& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < -1 || d.get<int64_t>() == 0 || d.get<int64_t>() > (1ll << 32)) {
      return invalid_argument(where + ": field 'shape': " + shape->dump() + " must hold positive dims or -1");
    }
    t.shape[t.shape.rank++] = d.get<int64_t>();
  }
  return t;
}

Result<std::vector<TensorSpec>> parse_tensor_list(const json& root, const char* key, const std::string& at) {
  auto it = root.find(key);
  if (it == root.end() || !it->is_array() || it->empty()) {
    return invalid_argument(at + ": field '" + key + "' must be a non-empty list");
  }
  std::vector<TensorSpec> out;
  for (size_t i = 0; i < it->size(); ++i) {
    EMBER_ASSIGN_OR_RETURN(TensorSpec t, parse_tensor_spec((*it)[i], at + ": " + key + "[" + std::to_string(i) + "]"));
    out.push_back(std::move(t));
  }
  return out;
}

Result<LayerSpec> parse_layer(const json& j, size_t i, const std::string& at) {
  std::string where = at + ": layers[" + std::to_string(i) + "]";
  if (!j.is_object()) return invalid_argument(where + ": expected an object");
  EMBER_RETURN_IF_ERROR(check_keys(j, {"name", "op", "inputs", "attrs", "weights"}, where));
  LayerSpec l;
  EMBER_ASSIGN_OR_RETURN(l.name, get_string(j, "name", where));
  if (!valid_name(l.name, 256, ":/")) return invalid_argument(where + ": field 'name': '" + l.name + "' is not a valid name");
  where += " '" + l.name + "'";
  EMBER_ASSIGN_OR_RETURN(std::string op, get_string(j, "op", where));
  auto kind = parse_op(op);
  if (!kind.ok()) return kind.error().with_context(where + ": field 'op'");
  l.op = *kind;
  where = layer_where(at, i, l);

  auto inputs = j.find("inputs");
  if (inputs == j.end() || !inputs->is_array()) return invalid_argument(where + ": field 'inputs' must be a list of names");
  for (const auto& in : *inputs) {
    if (!in.is_string()) return invalid_argument(where + ": field 'inputs' must be a list of names");
    l.inputs.push_back(in.get<std::string>());
  }
  auto [min_in, max_in] = input_count(l.op);
  if (static_cast<int>(l.inputs.size()) < min_in || static_cast<int>(l.inputs.size()) > max_in) {
    return invalid_argument(where + ": field 'inputs': takes " + std::to_string(min_in) + " input(s), got " +
                            std::to_string(l.inputs.size()));
  }

  static const json kEmpty = json::object();
  auto attrs = j.find("attrs");
  EMBER_RETURN_IF_ERROR(parse_attrs(l.op, attrs == j.end() ? kEmpty : *attrs, l.attrs, where));

  auto weights = j.find("weights");
  const json& wj = weights == j.end() ? kEmpty : *weights;
  if (!wj.is_object()) return invalid_argument(where + ": field 'weights' must map roles to tensor names");
  const auto specs = weight_specs(l.op, l.attrs);
  for (const auto& [role, tensor] : wj.items()) {
    bool known = false;
    for (const auto& s : specs) known |= (s.role == role);
    if (!known) return invalid_argument(where + ": weights." + role + ": op takes no weight of that role");
    if (!tensor.is_string()) return invalid_argument(where + ": weights." + role + ": must be a tensor name");
  }
  for (const auto& s : specs) {
    auto it = wj.find(std::string(s.role));
    if (it == wj.end()) {
      if (s.required) return invalid_argument(where + ": weights." + std::string(s.role) + ": required weight is missing");
      continue;
    }
    if (!s.required) {
      return invalid_argument(where + ": weights." + std::string(s.role) + ": given, but the attributes say there is none");
    }
    l.weights.push_back({std::string(s.role), it->get<std::string>()});
  }
  return l;
}

Result<AutoscaleOverrides> parse_autoscale(const json& j, const std::string& at) {
  const std::string where = at + ": serving.autoscale";
  if (!j.is_object()) return invalid_argument(where + ": must be an object");
  EMBER_RETURN_IF_ERROR(check_keys(j,
                                   {"policy", "min_replicas", "max_replicas", "target_ongoing_requests", "headroom",
                                    "target_queue_latency", "target_requests_per_minute", "upscale_delay",
                                    "downscale_delay", "idle_timeout", "host_keep_alive", "downscale_tolerance"},
                                   where));
  AutoscaleOverrides o;
  const auto count = [&](const char* key, std::optional<uint32_t>& out) -> Status {
    auto it = j.find(key);
    if (it == j.end()) return Status::OK();
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > AutoscaleConfig::kMaxReplicas)
      return invalid_argument(where + "." + key + ": must be an integer in 0.." +
                              std::to_string(AutoscaleConfig::kMaxReplicas));
    out = static_cast<uint32_t>(it->get<int64_t>());
    return Status::OK();
  };
  const auto number = [&](const char* key, std::optional<double>& out) -> Status {
    auto it = j.find(key);
    if (it == j.end()) return Status::OK();
    if (!it->is_number()) return invalid_argument(where + "." + key + ": must be a number");
    out = it->get<double>();
    return Status::OK();
  };
  const auto duration = [&](const char* key, std::optional<uint64_t>& out) -> Status {
    auto it = j.find(key);
    if (it == j.end()) return Status::OK();
    if (!it->is_string()) return invalid_argument(where + "." + key + ": must be a duration such as \"30s\"");
    auto us = parse_duration_us(it->get<std::string>());
    if (!us.ok()) return us.error().with_context(where + "." + key);
    out = *us;
    return Status::OK();
  };
  if (auto it = j.find("policy"); it != j.end()) {
    auto policy = it->is_string() ? parse_scaling_policy(it->get<std::string>())
                                  : Result<ScalingPolicy>(invalid_argument("must be a word"));
    if (!policy.ok()) return policy.error().with_context(where + ".policy");
    o.policy = *policy;
  }
  EMBER_RETURN_IF_ERROR(count("min_replicas", o.min_replicas));
  EMBER_RETURN_IF_ERROR(count("max_replicas", o.max_replicas));
  EMBER_RETURN_IF_ERROR(number("target_ongoing_requests", o.target_ongoing_requests));
  EMBER_RETURN_IF_ERROR(number("headroom", o.headroom));
  EMBER_RETURN_IF_ERROR(number("target_requests_per_minute", o.target_requests_per_minute));
  EMBER_RETURN_IF_ERROR(number("downscale_tolerance", o.downscale_tolerance));
  EMBER_RETURN_IF_ERROR(duration("target_queue_latency", o.target_queue_latency_us));
  EMBER_RETURN_IF_ERROR(duration("upscale_delay", o.upscale_delay_us));
  EMBER_RETURN_IF_ERROR(duration("downscale_delay", o.downscale_delay_us));
  EMBER_RETURN_IF_ERROR(duration("idle_timeout", o.idle_timeout_us));
  EMBER_RETURN_IF_ERROR(duration("host_keep_alive", o.host_keep_alive_us));
  // Each value in its range, and min/max against each other when both are given; against the
  // cluster's defaults only where the manager applies them (with_overrides).
  AutoscaleConfig widest;
  widest.max_replicas = AutoscaleConfig::kMaxReplicas;
  if (auto checked = with_overrides(widest, o, at, "serving.autoscale"); !checked.ok()) return checked.error();
  return o;
}

void autoscale_to_json(const AutoscaleOverrides& o, nlohmann::ordered_json& out) {
  if (o.policy) out["policy"] = std::string(to_string(*o.policy));
  if (o.min_replicas) out["min_replicas"] = *o.min_replicas;
  if (o.max_replicas) out["max_replicas"] = *o.max_replicas;
  if (o.target_ongoing_requests) out["target_ongoing_requests"] = *o.target_ongoing_requests;
  if (o.headroom) out["headroom"] = *o.headroom;
  if (o.target_queue_latency_us) out["target_queue_latency"] = format_duration(*o.target_queue_latency_us);
  if (o.target_requests_per_minute) out["target_requests_per_minute"] = *o.target_requests_per_minute;
  if (o.upscale_delay_us) out["upscale_delay"] = format_duration(*o.upscale_delay_us);
  if (o.downscale_delay_us) out["downscale_delay"] = format_duration(*o.downscale_delay_us);
  if (o.idle_timeout_us) out["idle_timeout"] = format_duration(*o.idle_timeout_us);
  if (o.host_keep_alive_us) out["host_keep_alive"] = format_duration(*o.host_keep_alive_us);
  if (o.downscale_tolerance) out["downscale_tolerance"] = *o.downscale_tolerance;
}

Result<ServingConfig> parse_serving(const json& root, const std::string& at) {
  ServingConfig s;
  auto it = root.find("serving");
  if (it == root.end()) return s;
  const std::string where = at + ": serving";
  if (!it->is_object()) return invalid_argument(where + ": must be an object");
  EMBER_RETURN_IF_ERROR(
      check_keys(*it, {"slo_deadline_ms", "slo_percentile", "max_batch", "dynamic_batching", "autoscale"}, where));
  if (auto d = it->find("slo_deadline_ms"); d != it->end()) {
    if (!d->is_number() || d->get<double>() < 0 || d->get<double>() > 3.6e6) {
      return invalid_argument(where + ".slo_deadline_ms: must be a number of milliseconds in [0, 3600000]");
    }
    // Rounded, not truncated: 1.009 * 1000.0 is 1008.999..., and manifest_to_json() writes
    // deadline_us / 1000.0, which must read back as the same microseconds.
    s.slo_deadline_us = static_cast<uint64_t>(std::llround(d->get<double>() * 1000.0));
  }
  if (auto p = it->find("slo_percentile"); p != it->end()) {
    if (!p->is_number() || !(p->get<double>() > 0 && p->get<double>() < 1)) {
      return invalid_argument(where + ".slo_percentile: must be a fraction in (0, 1), e.g. 0.98");
    }
    s.slo_percentile = p->get<double>();
  }
  if (auto b = it->find("max_batch"); b != it->end()) {
    if (!b->is_number_integer() || b->get<int64_t>() < 1 || b->get<int64_t>() > 4096) {
      return invalid_argument(where + ".max_batch: must be an integer in 1..4096");
    }
    s.max_batch = static_cast<uint32_t>(b->get<int64_t>());
  }
  if (auto db = it->find("dynamic_batching"); db != it->end()) {
    const std::string at_db = where + ".dynamic_batching";
    if (!db->is_object()) return invalid_argument(at_db + ": must be an object (empty for the defaults)");
    EMBER_RETURN_IF_ERROR(check_keys(*db, {"preferred_batch", "max_queue_delay_us", "pad"}, at_db));
    s.dynamic_batching = true;
    if (auto p = db->find("preferred_batch"); p != db->end()) {
      if (!p->is_number_integer() || p->get<int64_t>() < 1 || p->get<int64_t>() > s.max_batch) {
        return invalid_argument(at_db + ".preferred_batch: must be an integer in 1..max_batch (" +
                                std::to_string(s.max_batch) + ")");
      }
      s.preferred_batch = static_cast<uint32_t>(p->get<int64_t>());
    }
    if (auto d = db->find("max_queue_delay_us"); d != db->end()) {
      if (!d->is_number_integer() || d->get<int64_t>() < 0 || d->get<int64_t>() > 10'000'000) {
        return invalid_argument(at_db +
                                ".max_queue_delay_us: must be an integer number of microseconds in "
                                "0..10000000");
      }
      s.max_queue_delay_us = static_cast<uint64_t>(d->get<int64_t>());
    }
    if (auto pad = db->find("pad"); pad != db->end()) {
      if (!pad->is_object() || pad->empty()) {
        return invalid_argument(at_db + ".pad: must be an object {input name: pad value}");
      }
      for (const auto& [name, value] : pad->items()) {
        if (!value.is_number()) return invalid_argument(at_db + ".pad." + name + ": the pad value must be a number");
        s.pad_inputs.emplace_back(name, value.get<double>());
      }
    }
  }
  if (auto a = it->find("autoscale"); a != it->end()) {
    EMBER_ASSIGN_OR_RETURN(s.autoscale, parse_autoscale(*a, at));
  }
  return s;
}

TensorSpec concrete(const TensorSpec& t, int64_t wildcard) {
  TensorSpec c = t;
  for (int i = 0; i < c.shape.rank; ++i)
    if (c.shape[i] < 0) c.shape[i] = wildcard;
  return c;
}

}  // namespace

const std::string* LayerSpec::weight(std::string_view role) const {
  for (const auto& w : weights)
    if (w.role == role) return &w.tensor;
  return nullptr;
}

std::optional<uint32_t> Graph::find(std::string_view name) const {
  for (uint32_t i = 0; i < value_names.size(); ++i)
    if (value_names[i] == name) return i;
  return std::nullopt;
}

std::vector<uint32_t> Graph::range_inputs(LayerRange range) const {
  std::set<uint32_t> ids;
  for (uint32_t l = range.first; l < range.last; ++l)
    for (uint32_t v : layer_inputs[l])
      if (producer(v) < static_cast<int64_t>(range.first)) ids.insert(v);
  return {ids.begin(), ids.end()};
}

std::vector<uint32_t> Graph::range_outputs(LayerRange range) const {
  std::vector<uint32_t> out;
  for (uint32_t l = range.first; l < range.last; ++l) {
    const uint32_t v = layer_value(l);
    if (last_use[v] >= static_cast<int64_t>(range.last)) out.push_back(v);
  }
  return out;
}

Result<Graph> build_graph(const Manifest& m, std::string_view source) {
  const std::string at(source);
  Graph g;
  g.num_inputs = static_cast<uint32_t>(m.inputs.size());
  std::map<std::string, uint32_t, std::less<>> ids;
  auto define = [&](const std::string& name, const std::string& where) -> Status {
    if (!ids.emplace(name, static_cast<uint32_t>(g.value_names.size())).second) {
      return invalid_argument(where + ": name '" + name + "' is already used by an input or an earlier layer");
    }
    g.value_names.push_back(name);
    return Status::OK();
  };
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    EMBER_RETURN_IF_ERROR(define(m.inputs[i].name, at + ": inputs[" + std::to_string(i) + "]"));
  }
  g.layer_inputs.resize(m.layers.size());
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerSpec& l = m.layers[i];
    for (const auto& in : l.inputs) {
      auto it = ids.find(in);
      if (it == ids.end()) {
        return invalid_argument(layer_where(at, i, l) + ": field 'inputs': '" + in +
                                "' is neither a model input nor an earlier layer");
      }
      g.layer_inputs[i].push_back(it->second);
    }
    EMBER_RETURN_IF_ERROR(define(l.name, layer_where(at, i, l)));
  }
  g.last_use.assign(g.value_names.size(), -1);
  for (uint32_t l = 0; l < g.layer_inputs.size(); ++l)
    for (uint32_t v : g.layer_inputs[l]) g.last_use[v] = l;
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    auto it = ids.find(m.outputs[i].name);
    if (it == ids.end()) {
      return invalid_argument(at + ": outputs[" + std::to_string(i) + "]: '" + m.outputs[i].name +
                              "' is neither a model input nor a layer");
    }
    g.outputs.push_back(it->second);
    g.last_use[it->second] = static_cast<int64_t>(m.layers.size());
  }
  return g;
}

Status infer_range(const Manifest& m, const Graph& g, LayerRange range, std::vector<std::optional<TensorDesc>>& values) {
  values.resize(g.value_names.size());
  std::vector<TensorDesc> in;
  for (uint32_t l = range.first; l < range.last; ++l) {
    const LayerSpec& spec = m.layers[l];
    in.clear();
    for (uint32_t v : g.layer_inputs[l]) {
      if (!values[v]) return internal_error("infer_range: value '" + g.value_names[v] + "' has no shape");
      in.push_back(*values[v]);
    }
    auto out = infer_output(spec.op, spec.attrs, in);
    if (!out.ok()) return out.error().with_context(layer_where("model '" + m.name + "'", l, spec));
    values[g.layer_value(l)] = *out;
  }
  return Status::OK();
}

Result<Manifest> parse_manifest(std::string_view text, std::string_view source) {
  const std::string at(source);
  auto parsed = parse_json_text(text);
  if (!parsed.ok()) return parsed.error().with_context(at);
  json root = std::move(*parsed);
  if (!root.is_object()) return invalid_argument(at + ": must be a JSON object");
  EMBER_RETURN_IF_ERROR(check_keys(
      root, {"format", "format_version", "name", "description", "inputs", "outputs", "layers", "serving", "generation"},
      at));
  EMBER_ASSIGN_OR_RETURN(std::string format, get_string(root, "format", at));
  if (format != "ember-model") return invalid_argument(at + ": field 'format': expected \"ember-model\", got \"" + format + "\"");
  auto version = root.find("format_version");
  if (version == root.end() || !version->is_number_integer() || version->get<int64_t>() != kManifestFormatVersion) {
    return unsupported(at + ": field 'format_version': this build reads version " + std::to_string(kManifestFormatVersion));
  }

  Manifest m;
  EMBER_ASSIGN_OR_RETURN(m.name, get_string(root, "name", at));
  if (!valid_name(m.name, 128, "")) {
    return invalid_argument(at + ": field 'name': '" + m.name + "' must be 1-128 characters of A-Z a-z 0-9 _ . -");
  }
  EMBER_ASSIGN_OR_RETURN(m.description, get_string(root, "description", at, /*required=*/false));
  EMBER_ASSIGN_OR_RETURN(m.inputs, parse_tensor_list(root, "inputs", at));
  EMBER_ASSIGN_OR_RETURN(m.outputs, parse_tensor_list(root, "outputs", at));
  auto layers = root.find("layers");
  if (layers == root.end() || !layers->is_array() || layers->empty()) {
    return invalid_argument(at + ": field 'layers' must be a non-empty list");
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    EMBER_ASSIGN_OR_RETURN(LayerSpec l, parse_layer((*layers)[i], i, at));
    m.layers.push_back(std::move(l));
  }
  EMBER_ASSIGN_OR_RETURN(m.serving, parse_serving(root, at));
  if (auto gen = root.find("generation"); gen != root.end()) {
    EMBER_ASSIGN_OR_RETURN(m.generation, parse_generation(*gen, at + ": generation"));
  }
  for (const auto& pad : m.serving.pad_inputs) {
    const std::string& name = pad.first;
    const double value = pad.second;
    const std::string where = at + ": serving.dynamic_batching.pad." + name;
    auto in = std::find_if(m.inputs.begin(), m.inputs.end(), [&](const TensorSpec& t) { return t.name == name; });
    if (in == m.inputs.end()) return invalid_argument(where + ": the model has no such input");
    if (in->shape.rank < 2 || in->shape[0] != -1 || in->shape[1] != -1) {
      return invalid_argument(where + ": input " + in->shape.to_string() +
                              " must have free batch and sequence dims ([-1, -1, ...]) to be padded");
    }
    const bool integral = in->dtype == DType::i64 || in->dtype == DType::i32 || in->dtype == DType::u8;
    if (integral && (value != std::floor(value) || (in->dtype == DType::u8 && (value < 0 || value > 255)) ||
                     std::fabs(value) > 9.0e15)) {
      return invalid_argument(where + ": " + std::to_string(value) + " is not a " +
                              std::string(dtype_name(in->dtype)) + " value");
    }
  }

  // References, then shapes: run inference with every wildcard dim set to 2.
  EMBER_ASSIGN_OR_RETURN(Graph g, build_graph(m, source));
  std::vector<std::optional<TensorDesc>> values(g.value_names.size());
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    const TensorSpec c = concrete(m.inputs[i], 2);
    values[i] = TensorDesc{c.dtype, c.shape};
  }
  Status shapes = infer_range(m, g, {0, g.num_layers()}, values);
  if (!shapes.ok()) {
    // infer_range names the model; name the file instead.
    std::string msg = shapes.error().message();
    const std::string prefix = "model '" + m.name + "': ";
    if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
    return invalid_argument(at + ": " + msg + " (shapes checked with every -1 input dim set to 2)");
  }
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    const TensorDesc& got = *values[g.outputs[i]];
    const TensorSpec& want = m.outputs[i];
    TensorSpec pattern = want;
    // An output's -1 dims follow from the inputs' -1 dims, which are all 2 here.
    const bool match = got.dtype == want.dtype && got.shape.rank == want.shape.rank &&
                       got.shape.matches(pattern.shape);
    if (!match) {
      return invalid_argument(at + ": outputs[" + std::to_string(i) + "] '" + want.name + "': declared " +
                              std::string(dtype_name(want.dtype)) + want.shape.to_string() + " but the layers produce " +
                              std::string(dtype_name(got.dtype)) + got.shape.to_string() +
                              " (with every -1 input dim set to 2)");
    }
  }
  if (m.generation) EMBER_RETURN_IF_ERROR(check_generation(m, g, at + ": generation"));
  return m;
}

std::string manifest_to_json(const Manifest& m) {
  auto tensor = [](const TensorSpec& t) {
    return nlohmann::ordered_json{{"name", t.name},
                                  {"dtype", dtype_name(t.dtype)},
                                  {"shape", std::vector<int64_t>(t.shape.dims.begin(), t.shape.dims.begin() + t.shape.rank)}};
  };
  nlohmann::ordered_json root;
  root["format"] = "ember-model";
  root["format_version"] = kManifestFormatVersion;
  root["name"] = m.name;
  if (!m.description.empty()) root["description"] = m.description;
  root["inputs"] = nlohmann::ordered_json::array();
  for (const auto& t : m.inputs) root["inputs"].push_back(tensor(t));
  root["outputs"] = nlohmann::ordered_json::array();
  for (const auto& t : m.outputs) root["outputs"].push_back(tensor(t));
  nlohmann::ordered_json serving;
  if (m.serving.slo_deadline_us) serving["slo_deadline_ms"] = static_cast<double>(m.serving.slo_deadline_us) / 1000.0;
  serving["slo_percentile"] = m.serving.slo_percentile;
  serving["max_batch"] = m.serving.max_batch;
  if (m.serving.dynamic_batching) {
    nlohmann::ordered_json db = nlohmann::ordered_json::object();
    if (m.serving.preferred_batch) db["preferred_batch"] = m.serving.preferred_batch;
    if (m.serving.max_queue_delay_us) db["max_queue_delay_us"] = m.serving.max_queue_delay_us;
    if (!m.serving.pad_inputs.empty()) {
      nlohmann::ordered_json pad = nlohmann::ordered_json::object();
      for (const auto& [name, value] : m.serving.pad_inputs) pad[name] = value;
      db["pad"] = pad;
    }
    serving["dynamic_batching"] = db;
  }
  if (m.serving.autoscale != AutoscaleOverrides{}) {
    nlohmann::ordered_json autoscale;
    autoscale_to_json(m.serving.autoscale, autoscale);
    serving["autoscale"] = autoscale;
  }
  root["serving"] = serving;
  if (m.generation) {
    nlohmann::ordered_json generation;
    generation_to_json(*m.generation, generation);
    root["generation"] = generation;
  }
  root["layers"] = nlohmann::ordered_json::array();
  for (const auto& l : m.layers) {
    json attrs;
    attrs_to_json(l.op, l.attrs, attrs);
    nlohmann::ordered_json weights = nlohmann::ordered_json::object();
    for (const auto& w : l.weights) weights[w.role] = w.tensor;
    nlohmann::ordered_json layer{{"name", l.name}, {"op", op_name(l.op)}, {"inputs", l.inputs}};
    if (!attrs.empty()) layer["attrs"] = attrs;
    if (!weights.empty()) layer["weights"] = weights;
    root["layers"].push_back(layer);
  }
  return root.dump(1) + "\n";
}

}  // namespace ember::gpu
