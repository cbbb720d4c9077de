// The model repository on disk, as the cluster manager scans it (model/model.hpp's repository_version_dir
// is the layout, which a node also uses to read its own local repository): one folder per model holding
// numbered version folders, as Triton's repositories do:
//
//   ROOT/<model>/<version>/model.json            version = 1, 2, ... (digits only)
//   ROOT/<model>/<version>/weights.safetensors
//   ROOT/<model>/model.json                      a model folder that is itself a version: version 1
//   ROOT/<workflow>/workflow.json                a workflow of models (config/workflow_config.hpp)
//
// The folder name is the model's name on the API. Every version is validated as Model::load would
// (manifest, weights header, byte layout) without reading the weights, and a version that fails
// stays listed with its error so that `load` can report it. A version's profile.json is read when
// present and kept only when it matches the version (its model, file size and layers).
//
// Pure file reading; anyone, any thread; blocking (the manager calls it through offload, never inline).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/loading_messages.hpp"
#include "actors/routing.hpp"
#include "config/autoscale_config.hpp"
#include "model/model_profile.hpp"

namespace ember {

struct RepositoryEntry {
  model_key key;
  std::string dir;
  /// model.json as read (empty when unreadable).
  std::string manifest_json;
  uint64_t weights_bytes = 0;
  /// Empty when the version is valid; otherwise why not (names the file and field).
  std::string error;
  /// model.json's serving.autoscale (valid versions only): the model's own autoscaling keys.
  AutoscaleOverrides autoscale;
  /// model.json's serving.slo_deadline_ms and slo_percentile (deadline 0: none declared).
  slo_setting declared_slo;
  /// profile.json beside the version (`ember model profile`): per-layer bytes, digests, times and
  /// activation sizes, what a partitioned cold start is planned from. Null when absent, stale (its
  /// sizes or layers differ from the version's) or unreadable; then `profile_error` says why.
  std::shared_ptr<const gpu::ModelProfile> profile;
  std::string profile_error;
  /// One replica's rows a second within the declared SLO (dynamic batching's max_batch, or 1), from
  /// the profile: what autoscale.policy model_level scales by. 0 without a profile or an SLO.
  double capacity_rps = 0;
};

/// Every version of every model under `root`, sorted by name then version.
std::vector<RepositoryEntry> scan_repository(const std::string& root);

/// Every workflow under `root` (folders holding workflow.json), sorted by name, each parsed: one that
/// does not parse, or whose folder also holds a model, is listed with its error. Whether its steps'
/// models exist is checked when a request runs it (models come and go between scans).
std::vector<workflow_entry> scan_workflows(const std::string& root);

/// The versions of one model (empty when the folder does not exist).
std::vector<RepositoryEntry> scan_repository_model(const std::string& root, const std::string& name);

/// What a rescan found: the versions of `model` ("": of every model, and then the workflows too).
struct RepositoryScan {
  std::vector<RepositoryEntry> models;
  std::optional<std::vector<workflow_entry>> workflows;
};
RepositoryScan rescan_repository(const std::string& root, const std::string& model);

}  // namespace ember

