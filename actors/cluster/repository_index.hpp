// RepositoryIndex: the weights files the manager's blob server may serve, by blob key. The cluster
// manager updates it as it rescans the repository; the server's threads look keys up. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/cluster/model_repository.hpp"
#include "transport/blob.hpp"

namespace ember {

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
