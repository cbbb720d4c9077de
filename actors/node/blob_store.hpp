// BlobStore: the bytes a node's model cache holds, shared with the node's blob server so peers can
// fetch them over the data plane. Pure data with a mutex: the model_cache actor decides what goes
// in and out (LRU, pins, the byte cap); the server thread only looks blobs up.
//
// A blob handed out (to an executor, to the server for a transfer in progress) stays valid after
// it is erased from the store: the shared_ptr keeps the bytes alive. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/model_key.hpp"
#include "actors/transfer/transfer_peer.hpp"
#include "model/host_buffer.hpp"
#include "transport/blob.hpp"
#include "transport/growing_blob.hpp"

namespace ember {

class BlobStore final : public GrowingBlobShelf {
 public:
  std::shared_ptr<const gpu::HostBuffer> find(const std::string& key) const;
  /// `digest`: the SHA-256 of `bytes` when already verified (a fetch checked it), so serving the
  /// blob never hashes it again.
  void put(const std::string& key, const model_key& model, std::shared_ptr<const gpu::HostBuffer> bytes,
           std::optional<transport::Digest> digest = std::nullopt);
  /// A pipeline stage's share of a blob (model_cache_interface.hpp, fetch_blob::part): counted as
  /// `held` bytes (its buffer has the whole blob's size, mostly untouched), not listed by models()
  /// (the node does not hold the model) and not served to peers.
  void put_part(const std::string& key, const model_key& model, std::shared_ptr<const gpu::HostBuffer> bytes,
                uint64_t held);
  void erase(const std::string& key);
  /// A pipeline stage's activations waiting for the next stage to fetch them (stage_request's
  /// tensor_handoff): served, but neither a model nor counted in used_bytes() (a stage holds one
  /// or two at a time; they leave once taken).
  void put_handoff(const std::string& key, std::shared_ptr<const transport::Blob> blob);
  void erase_handoff(const std::string& key);
  size_t handoffs() const;
  /// A blob this node is still receiving as a multicast hop: served (cut-through) to the next hop
  /// while no resident copy exists; not resident (find() and models() do not see it). put() of the
  /// same key supersedes it; erase_growing() removes it if it is still `blob`.
  void put_growing(const std::string& key, std::shared_ptr<const transport::GrowingBlob> blob) override;
  void erase_growing(const std::string& key, const transport::GrowingBlob* blob) override;
  uint64_t used_bytes() const;
  std::vector<model_key> models() const;
  /// Every blob held (whole ones and stages' shares): what a restarted model cache adopts.
  struct Held {
    std::string key;
    model_key model;
    uint64_t bytes = 0;  // as counted in used_bytes()
  };
  std::vector<Held> held() const;

  /// For a transport::BlobServer: serves resident blobs from memory, then blobs still arriving,
  /// not_found otherwise.
  transport::BlobLookup lookup() const;

 private:
  struct Entry {
    model_key model;
    std::shared_ptr<const gpu::HostBuffer> bytes;
    /// What the blob server sends. One per resident blob, so its SHA-256 (sent with every
    /// transfer) is computed once, not once per transfer.
    std::shared_ptr<const transport::Blob> blob;  // null for a stage's share (never served)
    uint64_t held = 0;                            // bytes counted in used_bytes()
  };
  mutable std::mutex mu_;
  std::map<std::string, Entry> blobs_;  // guarded by mu_
  std::map<std::string, std::shared_ptr<const transport::GrowingBlob>> growing_;  // guarded by mu_
  std::map<std::string, std::shared_ptr<const transport::Blob>> handoffs_;        // guarded by mu_
  uint64_t used_ = 0;                   // guarded by mu_
};

}  // namespace ember
