#include "actors/cluster/desired_state.hpp"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <utility>

namespace ember {

namespace {

using nlohmann::ordered_json;

ordered_json key_json(const model_key& key) { return ordered_json{{"name", key.name}, {"version", key.version}}; }

/// `j[field]` as an unsigned number no larger than `most`, or corrupt naming `what`.
Result<uint64_t> number(const nlohmann::json& j, const char* field, uint64_t most, const std::string& what) {
  if (!j.contains(field) || !j[field].is_number_unsigned() || j[field].get<uint64_t>() > most) {
    return corrupt(what + ": \"" + field + "\" is missing or not a number up to " + std::to_string(most));
  }
  return j[field].get<uint64_t>();
}

Result<model_key> key_of(const nlohmann::json& j, const std::string& what) {
  if (!j.contains("model") || !j["model"].is_object() || !j["model"].contains("name") ||
      !j["model"]["name"].is_string() || j["model"]["name"].get<std::string>().empty()) {
    return corrupt(what + ": \"model\" is missing or has no name");
  }
  EMBER_ASSIGN_OR_RETURN(uint64_t version, number(j["model"], "version", UINT32_MAX, what + ": model"));
  return model_key{j["model"]["name"].get<std::string>(), static_cast<uint32_t>(version)};
}

Result<slo_setting> slo_of(const nlohmann::json& j, const std::string& what) {
  slo_setting slo;
  EMBER_ASSIGN_OR_RETURN(slo.deadline_us, number(j, "deadline_us", UINT64_MAX >> 1, what));
  if (!j.contains("percentile") || !j["percentile"].is_number() || !(j["percentile"].get<double>() >= 0) ||
      !(j["percentile"].get<double>() <= 1)) {
    return corrupt(what + ": \"percentile\" is missing or not in [0, 1]");
  }
  slo.percentile = j["percentile"].get<double>();
  return slo;
}

}  // namespace

std::string DesiredState::load_record(const model_key& key, uint32_t replicas) {
  return ordered_json{{"op", "load"}, {"model", key_json(key)}, {"replicas", replicas}}.dump();
}

std::string DesiredState::unload_record(const model_key& key) {
  return ordered_json{{"op", "unload"}, {"model", key_json(key)}}.dump();
}

std::string DesiredState::scale_record(const model_key& key, uint32_t min, uint32_t max) {
  return ordered_json{{"op", "scale"}, {"model", key_json(key)}, {"min", min}, {"max", max}}.dump();
}

std::string DesiredState::slo_record(const model_key& key, const slo_setting& slo) {
  return ordered_json{{"op", "slo"}, {"model", key_json(key)}, {"deadline_us", slo.deadline_us},
                      {"percentile", slo.percentile}}
      .dump();
}

std::string DesiredState::drain_record(const std::string& node) {
  return ordered_json{{"op", "drain"}, {"node", node}}.dump();
}

std::string DesiredState::left_record(const std::string& node) {
  return ordered_json{{"op", "left"}, {"node", node}}.dump();
}

Status DesiredState::apply(std::string_view record) {
  const nlohmann::json j = nlohmann::json::parse(record, nullptr, false);
  const std::string what = "a decision record";
  if (j.is_discarded() || !j.is_object() || !j.contains("op") || !j["op"].is_string()) {
    return corrupt(what + " is not a JSON object with an \"op\"");
  }
  const std::string op = j["op"].get<std::string>();
  if (op == "drain" || op == "left") {
    if (!j.contains("node") || !j["node"].is_string() || j["node"].get<std::string>().empty()) {
      return corrupt(what + " (" + op + "): \"node\" is missing or not a name");
    }
    if (op == "drain") drained_.insert(j["node"].get<std::string>());
    else drained_.erase(j["node"].get<std::string>());
    return Status::OK();
  }
  EMBER_ASSIGN_OR_RETURN(model_key key, key_of(j, what + " (" + op + ")"));
  if (op == "load") {
    EMBER_ASSIGN_OR_RETURN(uint64_t n, number(j, "replicas", UINT32_MAX, what + " (load)"));
    models_[key].load = static_cast<uint32_t>(n);
  } else if (op == "unload") {
    auto it = models_.find(key);
    if (it != models_.end()) {
      it->second.load.reset();
      if (it->second.empty()) models_.erase(it);
    }
  } else if (op == "scale") {
    EMBER_ASSIGN_OR_RETURN(uint64_t min, number(j, "min", UINT32_MAX, what + " (scale)"));
    EMBER_ASSIGN_OR_RETURN(uint64_t max, number(j, "max", UINT32_MAX, what + " (scale)"));
    models_[key].min = static_cast<uint32_t>(min);
    models_[key].max = static_cast<uint32_t>(max);
  } else if (op == "slo") {
    EMBER_ASSIGN_OR_RETURN(slo_setting slo, slo_of(j, what + " (slo)"));
    if (slo.deadline_us > 0) {
      models_[key].slo = slo;
    } else if (auto it = models_.find(key); it != models_.end()) {  // `slo MODEL off`
      it->second.slo.reset();
      if (it->second.empty()) models_.erase(it);
    }
  } else {
    return corrupt(what + ": unknown op \"" + op + "\"");
  }
  return Status::OK();
}

std::string DesiredState::snapshot() const {
  ordered_json models = ordered_json::array();
  for (const auto& [key, m] : models_) {
    ordered_json e{{"model", key_json(key)}};
    if (m.load) e["load"] = *m.load;
    if (m.min) e["min"] = *m.min;
    if (m.max) e["max"] = *m.max;
    if (m.slo) e["slo"] = ordered_json{{"deadline_us", m.slo->deadline_us}, {"percentile", m.slo->percentile}};
    models.push_back(std::move(e));
  }
  ordered_json out{{"version", kVersion}, {"models", std::move(models)}};
  if (!drained_.empty()) out["drained"] = drained_;
  return out.dump();
}

Result<DesiredState> DesiredState::from_snapshot(std::string_view json) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  const std::string what = "the manager's state snapshot";
  if (j.is_discarded() || !j.is_object() || !j.contains("models") || !j["models"].is_array()) {
    return corrupt(what + " is not a JSON object with \"models\"");
  }
  EMBER_ASSIGN_OR_RETURN(uint64_t version, number(j, "version", UINT32_MAX, what));
  if (version > static_cast<uint64_t>(kVersion)) {
    return unsupported(what + " was written by a newer Ember (version " + std::to_string(version) +
                       "; this one reads version " + std::to_string(kVersion) + ")");
  }
  DesiredState s;
  for (size_t i = 0; i < j["models"].size(); ++i) {
    const nlohmann::json& e = j["models"][i];
    const std::string at = what + ": models[" + std::to_string(i) + "]";
    if (!e.is_object()) return corrupt(at + " is not an object");
    EMBER_ASSIGN_OR_RETURN(model_key key, key_of(e, at));
    ModelIntent m;
    for (auto [field, slot] : {std::pair{"load", &m.load}, {"min", &m.min}, {"max", &m.max}}) {
      if (!e.contains(field)) continue;
      EMBER_ASSIGN_OR_RETURN(uint64_t n, number(e, field, UINT32_MAX, at));
      *slot = static_cast<uint32_t>(n);
    }
    if (e.contains("slo")) {
      EMBER_ASSIGN_OR_RETURN(slo_setting slo, slo_of(e["slo"], at + ".slo"));
      m.slo = slo;
    }
    if (!s.models_.emplace(key, m).second) return corrupt(at + ": " + key.to_string() + " is given twice");
  }
  if (j.contains("drained")) {
    const nlohmann::json& d = j["drained"];
    if (!d.is_array()) return corrupt(what + ": \"drained\" is not a list of node names");
    for (const auto& n : d) {
      if (!n.is_string() || n.get<std::string>().empty()) return corrupt(what + ": \"drained\" holds a non-name");
      s.drained_.insert(n.get<std::string>());
    }
  }
  return s;
}

namespace {

/// The journal in a folder (manager.state_dir).
class JournalStore final : public DecisionStore {
 public:
  explicit JournalStore(StateJournal journal) : journal_(std::move(journal)) {}
  Status keep(const std::string& record, const DesiredState& next) override {
    if (auto appended = journal_.append(record); !appended.ok()) return appended.error();
    if (journal_.since_snapshot() >= DecisionLog::kCompactEvery) return journal_.compact(next.snapshot());
    return Status::OK();
  }
  Status compact(const DesiredState& state) override { return journal_.compact(state.snapshot()); }
  std::string where() const override { return journal_.dir(); }

 private:
  StateJournal journal_;
};

}  // namespace

Result<std::unique_ptr<DecisionLog>> DecisionLog::open(const std::string& dir) {
  StateJournal::Loaded loaded;
  EMBER_ASSIGN_OR_RETURN(StateJournal journal, StateJournal::open(dir, loaded));
  DesiredState state;
  if (loaded.snapshot) {
    auto s = DesiredState::from_snapshot(*loaded.snapshot);
    if (!s.ok()) return Error(s.error().code(), dir + "/state.json: " + s.error().message());
    state = std::move(*s);
  }
  for (const auto& r : loaded.records) {
    if (Status s = state.apply(r.json); !s.ok()) {
      return corrupt(dir + "/journal: record " + std::to_string(r.seq) + ": " + s.error().message());
    }
  }
  return over(std::make_unique<JournalStore>(std::move(journal)), std::move(state));
}

Status DecisionLog::record(const std::string& record) {
  DesiredState next = state_;
  EMBER_RETURN_IF_ERROR(next.apply(record));  // one that would not read back is never kept
  if (Status kept = store_->keep(record, next); !kept.ok()) {
    spdlog::error("manager: a decision could not be kept in {}: {}", where(), kept.error().message());
    return kept;
  }
  state_ = std::move(next);
  return Status::OK();
}

}  // namespace ember
