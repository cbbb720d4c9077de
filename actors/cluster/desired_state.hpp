// DesiredState: what a person decided about the cluster, as values (issue 37: a restarted manager
// comes back as it was): an explicit load (`load --replicas N`, a floor the autoscaler keeps until
// the next load or unload), the console's bounds (`scale MODEL MIN MAX`), an SLO set at run time, a
// node drain (`drain NODE`: nothing is placed there while it is a member). Each decision is one
// record, a line of JSON the manager journals (StateJournal) before it acts on it:
//
//   {"op":"load","model":{"name":"m","version":1},"replicas":2}
//   {"op":"unload","model":{...}}                     the explicit load ends (the bounds and SLO stay)
//   {"op":"scale","model":{...},"min":1,"max":4}      max 0: the model's own max_replicas
//   {"op":"slo","model":{...},"deadline_us":250000,"percentile":0.98}   deadline 0: `slo MODEL off`
//   {"op":"drain","node":"n1"}
//   {"op":"left","node":"n1"}                          a drained node left: its drain ends with it
//
// apply() folds a record into the state; snapshot() is the whole state as one JSON value, and
// from_snapshot() reads it back: {"version":1,"models":[{"model":{...},"load":2,"min":1,"max":4,
// "slo":{"deadline_us":...,"percentile":...}}],"drained":["n1"]} (absent keys: not decided). What the manager does
// with the state after a restart (load again, set the bounds and SLOs) is the caller's.
//
// Errors: corrupt, naming what, for a record or snapshot that does not read (unknown op, a field
// missing or of the wrong type); unsupported for a snapshot of a newer version. Plain C++, no CAF;
// values, any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "actors/cluster/state_journal.hpp"
#include "actors/loading_messages.hpp"
#include "actors/model_key.hpp"
#include "base/status.hpp"

namespace ember {

struct ModelIntent {
  std::optional<uint32_t> load;  // replicas of an explicit load that stands (0: at least one)
  std::optional<uint32_t> min, max;  // the console's bounds (max 0: the model's own max_replicas)
  std::optional<slo_setting> slo;

  bool empty() const { return !load && !min && !max && !slo; }
  bool operator==(const ModelIntent&) const = default;
};

class DesiredState {
 public:
  static constexpr int kVersion = 1;

  // -- the records of the decisions -------------------------------------------------------------
  static std::string load_record(const model_key& key, uint32_t replicas);
  static std::string unload_record(const model_key& key);
  static std::string scale_record(const model_key& key, uint32_t min, uint32_t max);
  static std::string slo_record(const model_key& key, const slo_setting& slo);
  static std::string drain_record(const std::string& node);
  static std::string left_record(const std::string& node);

  /// Folds one record into the state.
  Status apply(std::string_view record);

  std::string snapshot() const;
  static Result<DesiredState> from_snapshot(std::string_view json);

  /// Every model with a decision standing, by key.
  const std::map<model_key, ModelIntent>& models() const { return models_; }
  /// Whether node `name` was drained and has not left since.
  bool drained(const std::string& name) const { return drained_.count(name) != 0; }
  bool operator==(const DesiredState&) const = default;

 private:
  std::map<model_key, ModelIntent> models_;
  std::set<std::string> drained_;
};

/// Where a DecisionLog keeps the decisions: a StateJournal in a folder (manager.state_dir), or etcd,
/// shared by several managers (manager.etcd: the whole state under one key, each write fenced by the
/// leader key's revision, coord/leader_lease.hpp). keep() returns only once `record` is durable (and
/// `next` is the state with it); an error: the decision must not be acknowledged.
class DecisionStore {
 public:
  virtual ~DecisionStore() = default;
  virtual Status keep(const std::string& record, const DesiredState& next) = 0;
  /// The state as one snapshot, what came before it dropped (a journal's records).
  virtual Status compact(const DesiredState& state) = 0;
  /// Where it keeps them, for messages ("/var/lib/ember/state", "etcd 10.0.0.5:2379 /ember/state").
  virtual std::string where() const = 0;
};

/// The desired state and the store that keeps it. record() puts a decision in the store, then into
/// the state; the manager acknowledges a decision only once it returned OK, so no acknowledged
/// decision is lost. Opened by the manager's process (a refusal stops it from starting), then owned
/// by the manager actor; not thread-safe.
class DecisionLog {
 public:
  /// Records between compactions of a journal (each rewrites the snapshot: the journal stays short).
  static constexpr uint64_t kCompactEvery = 1000;

  /// The folder `dir` (StateJournal::open's errors, and a record that does not read (corrupt), each
  /// naming `dir`).
  static Result<std::unique_ptr<DecisionLog>> open(const std::string& dir);
  /// Any store, holding `state` as read from it.
  static std::unique_ptr<DecisionLog> over(std::unique_ptr<DecisionStore> store, DesiredState state) {
    return std::unique_ptr<DecisionLog>(new DecisionLog(std::move(store), std::move(state)));
  }

  /// `record` (one of DesiredState's) kept, then folded into the state. An error: the decision must
  /// not be acknowledged.
  Status record(const std::string& record);
  /// The state as the snapshot (the manager does it once it restored).
  Status compact() { return store_->compact(state_); }

  const DesiredState& state() const { return state_; }
  std::string where() const { return store_->where(); }

 private:
  DecisionLog(std::unique_ptr<DecisionStore> store, DesiredState state)
      : store_(std::move(store)), state_(std::move(state)) {}

  std::unique_ptr<DecisionStore> store_;
  DesiredState state_;
};

}  // namespace ember
