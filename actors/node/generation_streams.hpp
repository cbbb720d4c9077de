// GenerationStreams: the node router's record of the generations it routed, by request id, for
// cancel (generate_request::id, cancel_atom): whether each is still queued (the held request it is,
// node_router_late.cpp) or joined a loop on a device (whose executor a cancel goes to), and which
// sink actor its chunks go to.
//
//   add (queued: held id) ──joined(device)──▶ running ──▶ gone: cancel (take), its sink went down
//    │                                                        (sink_down), or its node let go
//    └──refused / cancelled while queued (take)──▶ gone
//
// The router never sees chunks (they go from the engine to the sink directly), so it cannot tell when
// a stream ended: a stream stays recorded until it is cancelled or its sink is down (the router
// monitors each sink), and the record is bounded: at most `capacity` streams, add() refusing more
// with unavailable (counted by the caller as a rejection).
//
// Owner: the node_router, on its actor only (not thread-safe). Pure: no CAF, no clock; a sink is
// named by its actor id.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/model_key.hpp"
#include "base/status.hpp"

namespace ember {

class GenerationStreams {
 public:
  struct Stream {
    model_key model;
    uint64_t sink = 0;                // the sink actor's id
    uint64_t held = 0;                // the held request while queued (HeldRequests' id)
    std::optional<uint32_t> device;   // set once it joined a loop there
  };

  /// At most `capacity` streams recorded at once (> 0).
  explicit GenerationStreams(size_t capacity = 1u << 16) : capacity_(capacity == 0 ? 1 : capacity) {}

  /// Records stream `id`, queued as held request `held`. invalid_argument when `id` is recorded
  /// already (a request id generates once at a time); unavailable when `capacity` streams are.
  Status add(const std::string& id, const model_key& model, uint64_t sink, uint64_t held);
  /// Stream `id` joined a loop on `device` (no-op when not recorded).
  void joined(const std::string& id, uint32_t device);
  /// Stream `id`, or null.
  const Stream* find(const std::string& id) const;
  /// Removes stream `id` (cancelled, or refused); nullopt when not recorded.
  std::optional<Stream> take(const std::string& id);
  /// Removes every stream whose chunks go to `sink` (its actor is down), returned by id.
  std::vector<std::pair<std::string, Stream>> sink_down(uint64_t sink);
  /// Whether another stream still sends to `sink` (the router monitors a sink once).
  bool has_sink(uint64_t sink) const;
  size_t size() const { return by_id_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_;
  std::map<std::string, Stream> by_id_;
};

}  // namespace ember
