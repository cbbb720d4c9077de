// The model repository on disk, as the cluster manager reads it: one folder per model holding
// numbered version folders, as Triton's repositories do:
//
//   ROOT/<model>/<version>/model.json            version = 1, 2, ... (digits only)
//   ROOT/<model>/<version>/weights.safetensors
//   ROOT/<model>/model.json                      a model folder that is itself a version: version 1
//
// The folder name is the model's name on the API. Every version is validated as Model::load would
// (manifest, weights header, byte layout) without reading the weights, and a version that fails
// stays listed with its error so that `load` can report it.
//
// Pure file reading; anyone, any thread; blocking (the manager calls it from a scanner thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "actors/messages.hpp"

namespace ember {

struct RepositoryEntry {
  model_key key;
  std::string dir;
  /// model.json as read (empty when unreadable).
  std::string manifest_json;
  uint64_t weights_bytes = 0;
  /// Empty when the version is valid; otherwise why not (names the file and field).
  std::string error;
};

/// Every version of every model under `root`, sorted by name then version.
std::vector<RepositoryEntry> scan_repository(const std::string& root);

/// The versions of one model (empty when the folder does not exist).
std::vector<RepositoryEntry> scan_repository_model(const std::string& root, const std::string& name);

/// The folder of one version under `root` ("" when the repository has no such version).
std::string version_dir(const std::string& root, const model_key& key);

/// The data-plane key of a version's weights ("<name>/<version>") and back.
std::string blob_key_of(const model_key& key);

}  // namespace ember

#include <map>
#include <memory>
#include <mutex>

#include "transport/blob.hpp"

namespace ember {

/// The weights files the manager's blob server may serve, by blob key. The manager updates it as
/// it rescans; the server's threads look keys up. Thread-safe.
class RepositoryIndex {
 public:
  void replace(const std::vector<RepositoryEntry>& entries, const std::string& model = {});
  /// For a transport::BlobServer: weights files of valid versions, read from disk.
  transport::BlobLookup lookup() const;

 private:
  struct File {
    std::string path;
    /// Opened at the first request and kept, so its SHA-256 (sent with every transfer) is computed
    /// once per file, not once per transfer.
    std::shared_ptr<const transport::Blob> blob;
  };
  mutable std::mutex mu_;
  mutable std::map<std::string, File> files_;  // blob key -> weights file; guarded by mu_
};

}  // namespace ember
