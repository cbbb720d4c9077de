#include "config/workflow_config.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "base/json_text.hpp"

namespace ember {

namespace {

using nlohmann::json;

/// Step and tensor names: what a path segment and a KServe tensor name may safely be.
bool good_name(const std::string& s) {
  return !s.empty() && s.size() <= 128 && s[0] != '.' && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
  });
}

struct Context {
  std::string source;
  Error error(const std::string& field, const std::string& what) const {
    return invalid_argument(source + ": " + field + ": " + what);
  }
};

Status check_keys(const Context& c, const json& object, const std::string& field,
                  std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string list;
    for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    return c.error(field.empty() ? key : field + "." + key, "unknown key (known: " + list + ")");
  }
  return Status::OK();
}

/// "image" (a workflow input) or "detect.features" (output `features` of step `detect`): the step is
/// the part before the first '.', so tensor names may hold dots but step names may not.
Result<WorkflowSource> parse_source(const Context& c, const json& v, const std::string& field) {
  if (!v.is_string()) return c.error(field, "must be a string: a workflow input or \"step.output\"");
  const std::string s = v.get<std::string>();
  const auto dot = s.find('.');
  WorkflowSource out;
  if (dot == std::string::npos) {
    out.tensor = s;
  } else {
    out.step = s.substr(0, dot);
    out.tensor = s.substr(dot + 1);
    if (!good_name(out.step)) return c.error(field, "'" + s + "': '" + out.step + "' is not a step name");
  }
  if (!good_name(out.tensor)) return c.error(field, "'" + s + "' does not name a tensor");
  return out;
}

Result<std::vector<std::pair<std::string, WorkflowSource>>> parse_bindings(const Context& c, const json& v,
                                                                           const std::string& field) {
  if (!v.is_object() || v.empty()) {
    return c.error(field, "must be a non-empty object of tensor name to source (\"input\": \"step.output\")");
  }
  if (v.size() > kMaxWorkflowTensors)
    return c.error(field, "more than " + std::to_string(kMaxWorkflowTensors) + " tensors");
  std::vector<std::pair<std::string, WorkflowSource>> out;
  for (const auto& [name, source] : v.items()) {
    if (!good_name(name)) return c.error(field, "'" + name + "' is not a tensor name");
    EMBER_ASSIGN_OR_RETURN(auto from, parse_source(c, source, field + "." + name));
    out.emplace_back(name, std::move(from));
  }
  return out;
}

}  // namespace

Result<WorkflowConfig> parse_workflow(std::string_view text, std::string_view name, std::string_view source) {
  const Context c{std::string(source)};
  auto parsed = parse_json_text(text);
  if (!parsed.ok()) return invalid_argument(c.source + ": " + parsed.error().message());
  const json& doc = *parsed;
  if (!doc.is_object()) return invalid_argument(c.source + ": must be a JSON object with inputs, steps and outputs");
  EMBER_RETURN_IF_ERROR(check_keys(c, doc, "", {"inputs", "steps", "outputs", "description"}));
  WorkflowConfig w;
  w.name = std::string(name);
  if (!good_name(w.name) || w.name.find('.') != std::string::npos) {
    return invalid_argument(c.source + ": '" + w.name + "' is not a workflow name");
  }

  // inputs
  if (!doc.contains("inputs") || !doc["inputs"].is_array() || doc["inputs"].empty()) {
    return c.error("inputs", "must be a non-empty array of tensor names");
  }
  if (doc["inputs"].size() > kMaxWorkflowTensors) {
    return c.error("inputs", "more than " + std::to_string(kMaxWorkflowTensors) + " tensors");
  }
  std::set<std::string> inputs;
  for (size_t i = 0; i < doc["inputs"].size(); ++i) {
    const json& v = doc["inputs"][i];
    const std::string field = "inputs[" + std::to_string(i) + "]";
    if (!v.is_string() || !good_name(v.get<std::string>()) || v.get<std::string>().find('.') != std::string::npos) {
      return c.error(field, "must be a tensor name (letters, digits, _ and -)");
    }
    if (!inputs.insert(v.get<std::string>()).second) return c.error(field, "'" + v.get<std::string>() + "' twice");
    w.inputs.push_back(v.get<std::string>());
  }

  // steps, in the file's order first
  if (!doc.contains("steps") || !doc["steps"].is_array() || doc["steps"].empty()) {
    return c.error("steps", "must be a non-empty array of steps");
  }
  if (doc["steps"].size() > kMaxWorkflowSteps) {
    return c.error("steps", "more than " + std::to_string(kMaxWorkflowSteps) + " steps");
  }
  std::vector<WorkflowStep> steps;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < doc["steps"].size(); ++i) {
    const json& s = doc["steps"][i];
    const std::string field = "steps[" + std::to_string(i) + "]";
    if (!s.is_object()) return c.error(field, "must be an object with name, model and inputs");
    EMBER_RETURN_IF_ERROR(check_keys(c, s, field, {"name", "model", "version", "inputs"}));
    WorkflowStep step;
    if (!s.contains("name") || !s["name"].is_string() || !good_name(s["name"].get<std::string>()) ||
        s["name"].get<std::string>().find('.') != std::string::npos) {
      return c.error(field + ".name", "must be a step name (letters, digits, _ and -)");
    }
    step.name = s["name"].get<std::string>();
    if (inputs.count(step.name)) return c.error(field + ".name", "'" + step.name + "' is also a workflow input");
    if (!index.emplace(step.name, i).second) return c.error(field + ".name", "'" + step.name + "' twice");
    if (!s.contains("model") || !s["model"].is_string() || !good_name(s["model"].get<std::string>()) ||
        s["model"].get<std::string>().find('#') != std::string::npos) {
      return c.error(field + ".model", "must be a model's name");
    }
    step.model = s["model"].get<std::string>();
    if (s.contains("version")) {
      const json& v = s["version"];
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > UINT32_MAX) {
        return c.error(field + ".version", "must be a version number (0: the newest)");
      }
      step.version = static_cast<uint32_t>(v.get<int64_t>());
    }
    if (!s.contains("inputs")) return c.error(field + ".inputs", "missing: which tensors feed the model");
    EMBER_ASSIGN_OR_RETURN(step.inputs, parse_bindings(c, s["inputs"], field + ".inputs"));
    steps.push_back(std::move(step));
  }

  // every source names a workflow input or an existing step, never the step itself
  auto check_source = [&](const WorkflowSource& from, const std::string& field, const std::string& self) -> Status {
    if (from.step.empty()) {
      if (!inputs.count(from.tensor))
        return c.error(field, "'" + from.tensor + "' is no workflow input nor \"step.output\"");
      return Status::OK();
    }
    if (!index.count(from.step)) return c.error(field, "'" + from.to_string() + "' names no step '" + from.step + "'");
    if (from.step == self) return c.error(field, "step '" + self + "' reads its own output");
    return Status::OK();
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    std::set<size_t> after;
    for (const auto& [input, from] : steps[i].inputs) {
      EMBER_RETURN_IF_ERROR(check_source(from, "steps[" + std::to_string(i) + "].inputs." + input, steps[i].name));
      if (!from.step.empty()) after.insert(index[from.step]);
    }
    steps[i].after.assign(after.begin(), after.end());
  }
  if (!doc.contains("outputs")) return c.error("outputs", "missing: which tensors the answer holds");
  EMBER_ASSIGN_OR_RETURN(w.outputs, parse_bindings(c, doc["outputs"], "outputs"));
  for (const auto& [output, from] : w.outputs) EMBER_RETURN_IF_ERROR(check_source(from, "outputs." + output, ""));

  // every step feeds an output, through later steps or directly
  std::vector<bool> used(steps.size(), false);
  std::vector<size_t> todo;
  for (const auto& [output, from] : w.outputs)
    if (!from.step.empty()) todo.push_back(index[from.step]);
  while (!todo.empty()) {
    const size_t s = todo.back();
    todo.pop_back();
    if (used[s]) continue;
    used[s] = true;
    for (size_t a : steps[s].after) todo.push_back(a);
  }

  // a topological order (Kahn), the file's order among steps that are ready together
  std::vector<size_t> waiting(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) waiting[i] = steps[i].after.size();
  std::vector<size_t> order;
  std::vector<bool> placed(steps.size(), false);
  while (order.size() < steps.size()) {
    size_t next = steps.size();
    for (size_t i = 0; i < steps.size() && next == steps.size(); ++i)
      if (!placed[i] && waiting[i] == 0) next = i;
    if (next == steps.size()) {
      std::string cycle;
      for (size_t i = 0; i < steps.size(); ++i)
        if (!placed[i]) cycle += (cycle.empty() ? "" : ", ") + steps[i].name;
      return c.error("steps", "the steps " + cycle + " read each other in a cycle (a workflow is a DAG)");
    }
    placed[next] = true;
    order.push_back(next);
    for (size_t i = 0; i < steps.size(); ++i)
      if (std::find(steps[i].after.begin(), steps[i].after.end(), next) != steps[i].after.end()) --waiting[i];
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!used[i]) {
      return c.error("steps[" + std::to_string(i) + "]",
                     "step '" + steps[i].name + "' feeds no output, directly or through other steps");
    }
  }

  // renumber `after` into the new order
  std::vector<size_t> position(steps.size());
  for (size_t p = 0; p < order.size(); ++p) position[order[p]] = p;
  for (size_t p = 0; p < order.size(); ++p) {
    WorkflowStep step = std::move(steps[order[p]]);
    for (size_t& a : step.after) a = position[a];
    std::sort(step.after.begin(), step.after.end());
    w.steps.push_back(std::move(step));
  }
  return w;
}

}  // namespace ember
