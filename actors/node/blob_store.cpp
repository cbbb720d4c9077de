#include "actors/node/blob_store.hpp"

namespace ember {

std::shared_ptr<const gpu::HostBuffer> BlobStore::find(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = blobs_.find(key);
  return it == blobs_.end() ? nullptr : it->second.bytes;
}

void BlobStore::put(const std::string& key, const model_key& model, std::shared_ptr<const gpu::HostBuffer> bytes,
                    std::optional<transport::Digest> digest) {
  std::lock_guard lock(mu_);
  auto& e = blobs_[key];
  if (e.bytes) used_ -= e.held;
  used_ += bytes->size();
  const uint8_t* data = bytes->data();
  const uint64_t size = bytes->size();
  auto blob = std::make_shared<transport::MemoryBlob>(bytes, data, size, digest);
  e = {model, std::move(bytes), std::move(blob), size};
  growing_.erase(key);
}

void BlobStore::put_part(const std::string& key, const model_key& model, std::shared_ptr<const gpu::HostBuffer> bytes,
                         uint64_t held) {
  std::lock_guard lock(mu_);
  auto& e = blobs_[key];
  if (e.bytes) used_ -= e.held;
  used_ += held;
  e = {model, std::move(bytes), nullptr, held};
}

void BlobStore::put_growing(const std::string& key, std::shared_ptr<const transport::GrowingBlob> blob) {
  std::lock_guard lock(mu_);
  growing_[key] = std::move(blob);
}

void BlobStore::erase_growing(const std::string& key, const transport::GrowingBlob* blob) {
  std::lock_guard lock(mu_);
  auto it = growing_.find(key);
  if (it != growing_.end() && it->second.get() == blob) growing_.erase(it);
}

void BlobStore::erase(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = blobs_.find(key);
  if (it == blobs_.end()) return;
  used_ -= it->second.held;
  blobs_.erase(it);
}

void BlobStore::put_handoff(const std::string& key, std::shared_ptr<const transport::Blob> blob) {
  std::lock_guard lock(mu_);
  handoffs_[key] = std::move(blob);
}

void BlobStore::erase_handoff(const std::string& key) {
  std::lock_guard lock(mu_);
  handoffs_.erase(key);
}

size_t BlobStore::handoffs() const {
  std::lock_guard lock(mu_);
  return handoffs_.size();
}

uint64_t BlobStore::used_bytes() const {
  std::lock_guard lock(mu_);
  return used_;
}

std::vector<model_key> BlobStore::models() const {
  std::lock_guard lock(mu_);
  std::vector<model_key> out;
  for (const auto& [key, e] : blobs_)
    if (e.blob) out.push_back(e.model);
  return out;
}

std::vector<BlobStore::Held> BlobStore::held() const {
  std::lock_guard lock(mu_);
  std::vector<Held> out;
  for (const auto& [key, e] : blobs_) out.push_back({key, e.model, e.held});
  return out;
}

transport::BlobLookup BlobStore::lookup() const {
  return [this](const std::string& key) -> Result<std::shared_ptr<const transport::Blob>> {
    std::lock_guard lock(mu_);
    if (auto it = blobs_.find(key); it != blobs_.end() && it->second.blob) {
      return std::shared_ptr<const transport::Blob>(it->second.blob);
    }
    if (auto it = growing_.find(key); it != growing_.end()) return std::shared_ptr<const transport::Blob>(it->second);
    if (auto it = handoffs_.find(key); it != handoffs_.end()) return it->second;
    return not_found("this node's cache does not hold '" + key + "'");
  };
}

}  // namespace ember
