#include "actors/cluster/repository_index.hpp"

#include "model/model.hpp"

namespace ember {

void RepositoryIndex::replace(const std::vector<RepositoryEntry>& entries, const std::string& model) {
  std::lock_guard lock(mu_);
  if (model.empty()) {
    files_.clear();
  } else {
    const std::string prefix = model + "/";
    for (auto it = files_.lower_bound(prefix); it != files_.end() && it->first.rfind(prefix, 0) == 0;) {
      it = files_.erase(it);
    }
  }
  for (const auto& e : entries) {
    if (e.error.empty()) files_[blob_key_of(e.key)] = {e.dir + "/" + gpu::kWeightsFile, nullptr};
  }
}

transport::BlobLookup RepositoryIndex::lookup() const {
  return [this](const std::string& key) -> Result<std::shared_ptr<const transport::Blob>> {
    std::lock_guard lock(mu_);
    auto it = files_.find(key);
    if (it == files_.end()) return not_found("the repository has no valid model version '" + key + "'");
    if (!it->second.blob) {
      EMBER_ASSIGN_OR_RETURN(auto blob, transport::FileBlob::open(it->second.path));
      it->second.blob = std::move(blob);
    }
    return it->second.blob;
  };
}

}  // namespace ember
