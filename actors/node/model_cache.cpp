// model_cache: host-memory copies of model bytes with LRU eviction under a byte cap, and
// de-duplicated fetches (see model_cache_interface.hpp).
#include "actors/node/model_cache.hpp"

#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "actors/errors.hpp"
#include "actors/model_cache_interface.hpp"
#include "actors/node/blob_store.hpp"
#include "actors/offload.hpp"
#include "actors/transfer/transfer_peer.hpp"
#include "base/units.hpp"
#include "model/model.hpp"
#include "transport/blob.hpp"
#include "transport/data_plane.hpp"

namespace ember {

namespace {

using Clock = std::chrono::steady_clock;

// Keeps a receiver at no more than `max_bytes_per_s` (0: no limit): after a chunk that arrived
// early it sleeps (on the fetch queue's thread), and the data plane's flow control slows the sender.
class Pacer {
 public:
  explicit Pacer(uint64_t max_bytes_per_s) : rate_(max_bytes_per_s) {}
  void received(uint64_t bytes) {
    if (rate_ == 0) return;
    total_ += bytes;
    std::this_thread::sleep_until(start_ + std::chrono::microseconds(total_ * 1'000'000 / rate_));
  }

 private:
  uint64_t rate_;
  uint64_t total_ = 0;
  Clock::time_point start_ = Clock::now();
};

// Receives a fetched blob straight into a new host buffer, paced.
class BufferSink final : public transport::BlobSink {
 public:
  explicit BufferSink(uint64_t max_bytes_per_s = 0) : pacer_(max_bytes_per_s) {}
  uint8_t* allocate(uint64_t blob_bytes) override {
    auto b = gpu::HostBuffer::allocate(blob_bytes);
    if (!b.ok()) return nullptr;
    buffer = std::move(*b);
    return buffer->data();
  }
  void on_chunk(uint64_t, uint64_t length) override { pacer_.received(length); }
  std::shared_ptr<gpu::HostBuffer> buffer;

 private:
  Pacer pacer_;
};

// Runs on the node's fetch queue: the node's own repository directory first, then each source in
// order. Measures real elapsed time (not the actor clock): it is on a thread of its own.
Result<blob_ref> fetch_from_sources(const ModelCacheConfig& config, const fetch_blob& req) {
  const auto start = Clock::now();
  auto elapsed_us = [&] {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count());
  };
  std::string failures;
  if (!config.repository.empty()) {
    const std::string dir = gpu::repository_version_dir(config.repository, req.model.name, req.model.version);
    if (!dir.empty()) {
      auto bytes = gpu::HostBuffer::read_file(dir + "/" + gpu::kWeightsFile, UINT64_MAX);
      if (bytes.ok() && (req.blob_bytes == 0 || (*bytes)->size() == req.blob_bytes)) {
        const uint64_t size = (*bytes)->size();
        return blob_ref{std::move(*bytes), SourceTier::local_disk, "", size, elapsed_us()};
      }
      failures += " local repository: " +
                  (bytes.ok() ? "size " + std::to_string((*bytes)->size()) + " differs from the expected " +
                                    std::to_string(req.blob_bytes)
                              : bytes.error().message()) +
                  ";";
    }
  }
  for (const blob_source& src : req.sources) {
    BufferSink sink(req.max_bytes_per_s);
    transport::FetchOptions options;
    options.expected_bytes = req.blob_bytes;
    options.ticket = src.ticket;
    options.tls = config.tls;
    auto got = transport::fetch_blob(config.transport, src.endpoint, req.blob_key, options, sink);
    if (got.ok()) {
      return blob_ref{std::move(sink.buffer), src.kind, src.name, got->bytes_received, elapsed_us(), got->digest};
    }
    spdlog::warn("fetch of {} from {} {} failed: {}", req.blob_key, to_string(src.kind), src.name, got.error().message());
    failures += " " + std::string(to_string(src.kind)) + " " + src.name + ": " + got.error().message() + ";";
  }
  if (failures.empty()) failures = " no source was given and the node's repository does not have it";
  return unavailable("cannot fetch model " + req.model.to_string() + ":" + failures);
}

// Receives ranges of a blob into one whole-blob buffer, remembering where the verified bytes of the
// current range end (a retry from another source resumes there); paced.
class PartSink final : public transport::BlobSink {
 public:
  explicit PartSink(std::shared_ptr<gpu::HostBuffer> buffer, uint64_t max_bytes_per_s = 0)
      : buffer_(std::move(buffer)), pacer_(max_bytes_per_s) {}
  uint8_t* allocate(uint64_t blob_bytes) override { return blob_bytes == buffer_->size() ? buffer_->data() : nullptr; }
  void on_chunk(uint64_t offset, uint64_t length) override {
    verified_end = offset + length;
    pacer_.received(length);
  }
  uint64_t verified_end = 0;

 private:
  std::shared_ptr<gpu::HostBuffer> buffer_;
  Pacer pacer_;
};

std::string hex_of(const uint8_t* data, uint64_t bytes) {
  return transport::to_hex(transport::Sha256::of(data, bytes));
}

// A part (from a message: input) that describes a share of a `blob_bytes` blob: one digest per
// layer, its layers after the header and inside the blob. invalid_argument otherwise.
Status check_part_fits(const blob_part& part, uint64_t blob_bytes, const std::string& blob_key) {
  if (part.layer_bytes.size() != part.layer_sha256.size() || part.offset < part.header_bytes ||
      part.header_bytes > blob_bytes || part.offset + part.length() > blob_bytes) {
    return invalid_argument("layers [" + std::to_string(part.first_layer) + ", " + std::to_string(part.last_layer) +
                            ") as described do not fit the " + std::to_string(blob_bytes) + " bytes of " + blob_key);
  }
  return Status::OK();
}

// The header and every layer of `part` in `buffer` against their digests: corrupt naming the
// first that differs.
Status check_part(const gpu::HostBuffer& buffer, const blob_part& part) {
  if (hex_of(buffer.data(), part.header_bytes) != part.header_sha256) {
    return corrupt("the header (" + std::to_string(part.header_bytes) + " bytes) does not match its digest");
  }
  uint64_t at = part.offset;
  for (size_t i = 0; i < part.layer_bytes.size(); ++i) {
    if (hex_of(buffer.data() + at, part.layer_bytes[i]) != part.layer_sha256[i]) {
      return corrupt("layer " + std::to_string(part.first_layer + i) + " (" + std::to_string(part.layer_bytes[i]) +
                     " bytes at file offset " + std::to_string(at) + ") does not match its digest");
    }
    at += part.layer_bytes[i];
  }
  return Status::OK();
}

// Fetches [from, to) of the blob from one source into `sink`'s buffer.
Status fetch_range(const ModelCacheConfig& config, const blob_source& src, const fetch_blob& req, PartSink& sink,
                   uint64_t from, uint64_t to, uint64_t& received) {
  if (to <= from) return Status::OK();
  transport::FetchOptions options;
  options.expected_bytes = req.blob_bytes;
  options.ticket = src.ticket;
  options.tls = config.tls;
  options.range_offset = from;
  options.range_length = to - from;
  sink.verified_end = from;
  auto got = transport::fetch_blob(config.transport, src.endpoint, req.blob_key, options, sink);
  if (got.ok()) {
    received += got->bytes_received;
    return Status::OK();
  }
  // One resume from the verified prefix on the same source (a dropped connection mid-range).
  if (got.error().code() == ErrorCode::io_error && sink.verified_end > from && sink.verified_end < to) {
    options.resume_offset = sink.verified_end;
    received += sink.verified_end - from;
    got = transport::fetch_blob(config.transport, src.endpoint, req.blob_key, options, sink);
    if (got.ok()) {
      received += got->bytes_received;
      return Status::OK();
    }
  }
  return got.error();
}

// A stage's share: the node's own repository first, then each source in order; every piece
// verified against the part's digests.
Result<blob_ref> fetch_part_from_sources(const ModelCacheConfig& config, const fetch_blob& req) {
  const auto start = Clock::now();
  auto elapsed_us = [&] {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count());
  };
  const blob_part& part = *req.part;
  EMBER_RETURN_IF_ERROR(check_part_fits(part, req.blob_bytes, req.blob_key));
  EMBER_ASSIGN_OR_RETURN(std::shared_ptr<gpu::HostBuffer> buffer, gpu::HostBuffer::allocate(req.blob_bytes));
  std::string failures;
  if (!config.repository.empty()) {
    const std::string dir = gpu::repository_version_dir(config.repository, req.model.name, req.model.version);
    if (!dir.empty()) {
      auto file = transport::FileBlob::open(dir + "/" + gpu::kWeightsFile);
      Status st = file.ok() ? Status::OK() : Status(file.error());
      if (st.ok() && (*file)->size() != req.blob_bytes)
        st = corrupt("the file has " + std::to_string((*file)->size()) + " bytes");
      if (st.ok()) st = (*file)->read(0, buffer->data(), part.header_bytes);
      if (st.ok()) st = (*file)->read(part.offset, buffer->data() + part.offset, part.length());
      if (st.ok()) st = check_part(*buffer, part);
      if (st.ok()) return blob_ref{buffer, SourceTier::local_disk, "", part.header_bytes + part.length(), elapsed_us()};
      failures += " local repository: " + st.error().message() + ";";
    }
  }
  for (const blob_source& src : req.sources) {
    PartSink sink(buffer);
    uint64_t received = 0;
    Status st = fetch_range(config, src, req, sink, 0, part.header_bytes, received);
    if (st.ok()) st = fetch_range(config, src, req, sink, part.offset, part.offset + part.length(), received);
    if (st.ok()) st = check_part(*buffer, part);
    if (st.ok()) return blob_ref{buffer, src.kind, src.name, received, elapsed_us()};
    spdlog::warn("fetch of layers [{}, {}) of {} from {} {} failed: {}", part.first_layer, part.last_layer,
                 req.blob_key, to_string(src.kind), src.name, st.error().message());
    failures += " " + std::string(to_string(src.kind)) + " " + src.name + ": " + st.error().message() + ";";
  }
  if (failures.empty()) failures = " no source was given and the node's repository does not have it";
  return unavailable("cannot fetch layers [" + std::to_string(part.first_layer) + ", " +
                     std::to_string(part.last_layer) + ") of model " + req.model.to_string() + ":" + failures);
}

// A whole blob of which a stage's share is at hand: the share's bytes copied, the rest fetched
// (from each source in order, paced as asked), every layer checked against its digest.
Result<blob_ref> fetch_rest_from_sources(const ModelCacheConfig& config, const fetch_blob& req,
                                         std::shared_ptr<const gpu::HostBuffer> share) {
  const auto start = Clock::now();
  const blob_part& have = *req.reuse;
  const blob_part& all = *req.layers;
  const uint64_t have_end = have.offset + have.length();
  EMBER_RETURN_IF_ERROR(check_part_fits(have, req.blob_bytes, req.blob_key));
  EMBER_RETURN_IF_ERROR(check_part_fits(all, req.blob_bytes, req.blob_key));
  if (share->size() != req.blob_bytes || have.header_bytes != all.header_bytes) {
    return invalid_argument("the stage's share does not fit " + req.blob_key);
  }
  EMBER_ASSIGN_OR_RETURN(std::shared_ptr<gpu::HostBuffer> buffer, gpu::HostBuffer::allocate(req.blob_bytes));
  std::memcpy(buffer->data(), share->data(), have.header_bytes);
  std::memcpy(buffer->data() + have.offset, share->data() + have.offset, have.length());
  std::string failures;
  for (const blob_source& src : req.sources) {
    PartSink sink(buffer, req.max_bytes_per_s);
    uint64_t received = 0;
    Status st = fetch_range(config, src, req, sink, have.header_bytes, have.offset, received);
    if (st.ok()) st = fetch_range(config, src, req, sink, have_end, req.blob_bytes, received);
    if (st.ok()) st = check_part(*buffer, all);
    if (st.ok()) {
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
      return blob_ref{buffer, src.kind, src.name, received, static_cast<uint64_t>(us)};
    }
    spdlog::warn("fetch of the rest of {} from {} {} failed: {}", req.blob_key, to_string(src.kind), src.name,
                 st.error().message());
    failures += " " + std::string(to_string(src.kind)) + " " + src.name + ": " + st.error().message() + ";";
  }
  if (failures.empty()) failures = " no source was given";
  return unavailable("cannot fetch the rest of model " + req.model.to_string() + ":" + failures);
}

struct cache_state {
  static inline const char* name = "ember.model_cache";

  cache_state() = default;
  cache_state(const cache_state&) = delete;
  cache_state& operator=(const cache_state&) = delete;
  /// A cache that dies (killed by a fault) answers its fetches in flight as unavailable and stops
  /// its hops; the bytes it held stay in the store for its successor.
  ~cache_state() {
    const caf::error gone = to_caf(unavailable("the model cache died during the fetch; retry"));
    for (auto& [key, f] : inflight)
      for (auto& w : f.waiters)
        if (w.pending()) w.deliver(gone);
    if (!exiting) {
      for (const auto& [addr, hop] : hops_alive) caf::anon_send_exit(hop.actor, caf::exit_reason::user_shutdown);
    }
  }

  struct Resident {
    model_key model;
    uint64_t bytes = 0;
    uint64_t last_use = 0;
    uint32_t pins = 0;
  };
  struct Inflight {
    model_key model;
    uint64_t bytes = 0;
    std::vector<caf::typed_response_promise<blob_ref>> waiters;
    bool part = false;  // a stage's share (fetch_blob::part)
  };

  ModelCacheConfig config;
  std::shared_ptr<BlobStore> store;
  NodeInstruments* instruments = nullptr;
  /// The node's queues (they outlive the actor): fetches from sources, and multicast hops.
  WorkQueue* fetches = nullptr;
  WorkQueue* hops = nullptr;
  std::map<std::string, Resident> resident;
  std::map<std::string, Inflight> inflight;
  uint64_t reserved = 0;  // bytes promised to fetches in flight
  uint64_t clock = 0;     // logical time for LRU
  /// A multicast hop this cache spawned: its actor, the request it serves and what it received.
  /// A hop that dies before it reported (killed) is replaced by one that goes on from its
  /// verified offset over the same buffer, at most kHopRestarts times per request.
  struct Hop {
    caf::actor actor;
    fetch_blob req;
    std::shared_ptr<HopBuffer> buffer;
    uint32_t restarts = 0;
  };
  static constexpr uint32_t kHopRestarts = 5;
  /// The hops that still live (monitored). The cache outlives them: asked to exit, it stops them
  /// and quits once the last is down, so that whoever waits for the cache (the node process) may
  /// then destroy the hop queue they use.
  std::map<caf::actor_addr, Hop> hops_alive;
  std::optional<caf::error> exiting;  // set once asked to exit while hops live

  void publish() {
    if (instruments) instruments->set_cache(store->used_bytes(), resident.size(), config.capacity_bytes);
  }

  // Evicts least recently used unpinned blobs until `bytes` more fit; false (evicting nothing)
  // when even evicting every unpinned blob would not make room.
  bool make_room(uint64_t bytes) {
    uint64_t evictable = 0;
    for (const auto& [key, r] : resident)
      if (r.pins == 0) evictable += r.bytes;
    const uint64_t used = store->used_bytes() + reserved;
    if (used + bytes > config.capacity_bytes + evictable) return false;
    while (store->used_bytes() + reserved + bytes > config.capacity_bytes) {
      auto victim = resident.end();
      for (auto it = resident.begin(); it != resident.end(); ++it) {
        if (it->second.pins == 0 && (victim == resident.end() || it->second.last_use < victim->second.last_use)) {
          victim = it;
        }
      }
      if (victim == resident.end()) return false;
      spdlog::info("model cache: evicting {} ({})", victim->second.model.to_string(),
                   format_bytes(victim->second.bytes));
      store->erase(victim->first);
      resident.erase(victim);
    }
    return true;
  }
};

using cache_pointer = model_cache_actor::stateful_pointer<cache_state>;

/// Spawns a hop for `req` (monitored), over `resume` when it replaces a dead one.
void start_hop(cache_pointer self, fetch_blob req, std::shared_ptr<HopBuffer> resume, uint32_t restarts) {
  auto& st = self->state;
  TransferPeerConfig peer = st.config.transfer;
  peer.instruments = st.instruments ? &st.instruments->transfers() : nullptr;
  fetch_blob kept = req;
  auto hop = spawn_transfer_peer(self->system(), std::move(peer), std::move(req), st.store,
                                 caf::actor_cast<model_cache_actor>(self), *st.hops, std::move(resume));
  self->monitor(hop.actor);
  st.hops_alive.emplace(hop.actor.address(), cache_state::Hop{caf::actor_cast<caf::actor>(hop.actor), std::move(kept),
                                                              std::move(hop.buffer), restarts});
}

void fetched(cache_pointer self, const std::string& blob_key, Result<blob_ref>& result);

bool same_sources(const std::vector<blob_source>& a, const std::vector<blob_source>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const blob_source& x, const blob_source& y) {
    return x.kind == y.kind && x.name == y.name && x.endpoint == y.endpoint;
  });
}

/// A load that joins a multicast hop in flight, from another controller's chain (a new manager
/// placed the model while the dead one's chain still runs here) or from other sources: the hop is
/// handed them (chain_handover; it decides whether to follow), and a replacement hop would start
/// from them.
void hand_over(cache_pointer self, const fetch_blob& req) {
  if (req.sources.empty() || req.part) return;
  for (auto& [addr, hop] : self->state.hops_alive) {
    if (hop.req.blob_key != req.blob_key) continue;
    if (req.controller ? hop.req.controller == req.controller : same_sources(hop.req.sources, req.sources)) continue;
    if (req.controller) {
      hop.req.transfer_id = req.transfer_id;
      hop.req.controller = req.controller;
    }
    hop.req.sources = req.sources;
    self->send(caf::actor_cast<transfer_peer_actor>(hop.actor),
               chain_handover{req.controller ? req.transfer_id : 0, req.controller, req.sources});
  }
}

caf::result<blob_ref> fetch(cache_pointer self, fetch_blob& req) {
  auto& st = self->state;
  const std::string source_key = req.blob_key;  // what the sources serve it under
  if (req.part) {
    // A stage's share lives under its own key and counts only the bytes it holds.
    req.blob_key = part_key_of(req.blob_key, *req.part);
    req.transfer_id = 0;
  }
  const uint64_t held = req.part ? req.part->header_bytes + req.part->length() : req.blob_bytes;
  if (auto it = st.resident.find(req.blob_key); it != st.resident.end()) {
    it->second.last_use = ++st.clock;
    if (st.instruments) st.instruments->add_fetched(SourceTier::cache, it->second.bytes);
    return blob_ref{st.store->find(req.blob_key), SourceTier::cache, "", 0, 0};
  }
  if (auto it = st.inflight.find(req.blob_key); it != st.inflight.end()) {
    auto rp = self->make_response_promise<blob_ref>();
    it->second.waiters.push_back(rp);
    hand_over(self, req);
    return rp;
  }
  if (!st.make_room(held)) {
    return to_caf(out_of_memory("the model cache (" + format_bytes(st.config.capacity_bytes) + ", " +
                                format_bytes(st.store->used_bytes()) + " used by pinned models, " +
                                format_bytes(st.reserved) + " being fetched) cannot hold " + req.model.to_string() +
                                " (" + format_bytes(held) + ")"));
  }
  auto rp = self->make_response_promise<blob_ref>();
  st.reserved += held;
  st.inflight[req.blob_key] = {req.model, held, {rp}, req.part.has_value()};
  auto handle = caf::actor_cast<model_cache_actor>(self);
  if (req.transfer_id != 0 && !req.sources.empty() && req.controller) {
    // A hop of a multicast chain: the transfer_peer pulls, forwards and reports cache_fetch_done.
    start_hop(self, std::move(req), nullptr, 0);
    return rp;
  }
  const std::string key = req.blob_key;
  std::shared_ptr<const gpu::HostBuffer> share;
  if (!req.part && req.reuse && req.layers) share = st.store->find(part_key_of(req.blob_key, *req.reuse));
  const bool taken = offload(
      self, *st.fetches,
      [config = st.config, req = std::move(req), share = std::move(share), source_key] {
        if (share) return fetch_rest_from_sources(config, req, share);
        // The original blob key for the sources; the cache's key for the part.
        if (!req.part) return fetch_from_sources(config, req);
        fetch_blob whole = req;
        whole.blob_key = source_key;
        return fetch_part_from_sources(config, whole);
      },
      [self, key](Result<blob_ref>& result) { fetched(self, key, result); });
  if (!taken) {
    // The queue is full (cannot happen below its 1024 fetches: one per blob) or the node stops.
    Result<blob_ref> refused = unavailable("the fetch queue of the model cache is full");
    fetched(self, key, refused);
  }
  return rp;
}

void fetched(cache_pointer self, const std::string& blob_key, Result<blob_ref>& result) {
  auto& st = self->state;
  auto it = st.inflight.find(blob_key);
  if (it == st.inflight.end()) return;
  cache_state::Inflight entry = std::move(it->second);
  st.inflight.erase(it);
  st.reserved -= entry.bytes;
  if (!result.ok()) {
    spdlog::warn("model cache: {} could not be fetched: {}", entry.model.to_string(), result.error().message());
    for (auto& w : entry.waiters) w.deliver(to_caf(result.error()));
    return;
  }
  const uint64_t bytes = entry.bytes;  // a stage's share: what it holds, not its buffer's size
  if (entry.part) {
    st.store->put_part(blob_key, entry.model, result->bytes, bytes);
  } else {
    st.store->put(blob_key, entry.model, result->bytes, result->digest);
  }
  st.resident[blob_key] = {entry.model, bytes, ++st.clock, 0};
  if (st.instruments) {
    st.instruments->add_fetched(result->source, result->bytes_fetched);
  }
  st.publish();
  spdlog::info("model cache: {} resident ({}, from {} in {:.1f} ms)", entry.model.to_string(), format_bytes(bytes),
               describe_source(result->source, result->source_peer), static_cast<double>(result->fetch_us) / 1000.0);
  for (auto& w : entry.waiters) w.deliver(*result);
}

/// A hop died before it reported its end (killed): a new one goes on from the verified offset,
/// unless it died too often; then the fetch fails (retryable) and the next hop is told.
void hop_died(cache_pointer self, cache_state::Hop hop, const caf::error& reason) {
  auto& st = self->state;
  const std::string key = hop.req.blob_key;
  if (!st.inflight.count(key)) return;  // it reported first: nothing is lost
  const uint64_t at = verified_bytes(*hop.buffer);
  if (hop.restarts >= cache_state::kHopRestarts) {
    Error e = unavailable("the multicast hop for " + hop.req.model.to_string() + " died " +
                          std::to_string(hop.restarts + 1) + " times; retry");
    spdlog::warn("model cache: transfer {}: {}", hop.req.transfer_id, e.message());
    abandon_hop(*hop.buffer, e);
    if (st.instruments) st.instruments->count_unrestored("hop");
    Result<blob_ref> failed = e;
    return fetched(self, key, failed);
  }
  spdlog::warn(
      "model cache: transfer {}: the hop receiving {} died ({}) at offset {} of {}; a new one goes on from "
      "there",
      hop.req.transfer_id, hop.req.model.to_string(), caf::to_string(reason), at, hop.req.blob_bytes);
  if (st.instruments) st.instruments->count_actor_restart("hop");
  start_hop(self, std::move(hop.req), std::move(hop.buffer), hop.restarts + 1);
}

/// Exit with the hops: see cache_state::hops_alive. A hop that dies on its own is replaced.
void supervise_hops(cache_pointer self) {
  self->set_down_handler([self](caf::down_msg& down) {
    auto& st = self->state;
    auto it = st.hops_alive.find(down.source);
    if (it == st.hops_alive.end()) return;
    cache_state::Hop hop = std::move(it->second);
    st.hops_alive.erase(it);
    if (st.exiting) {
      if (st.hops_alive.empty()) self->quit(*st.exiting);
      return;
    }
    if (down.reason) hop_died(self, std::move(hop), down.reason);
  });
  self->set_exit_handler([self](caf::exit_msg& exit) {
    if (!exit.reason) return;  // a normal exit of a linked actor: ignored, as CAF's default does
    auto& st = self->state;
    if (st.hops_alive.empty()) return self->quit(exit.reason);
    if (st.exiting) return;
    st.exiting = exit.reason;
    for (const auto& [addr, hop] : st.hops_alive) self->send_exit(hop.actor, exit.reason);
  });
}

model_cache_actor::behavior_type cache_behavior(cache_pointer self, ModelCacheConfig config,
                                                std::shared_ptr<BlobStore> store, NodeInstruments* instruments,
                                                WorkQueue* fetches, WorkQueue* hops) {
  self->state.fetches = fetches;
  self->state.hops = hops;
  self->state.config = std::move(config);
  self->state.store = std::move(store);
  self->state.instruments = instruments;
  // A restarted cache adopts what its predecessor left in the store (unpinned: the router pins its
  // replicas' bytes again).
  for (const auto& h : self->state.store->held()) {
    self->state.resident[h.key] = {h.model, h.bytes, ++self->state.clock, 0};
  }
  if (!self->state.resident.empty()) {
    spdlog::warn("model cache: restarted; {} blob(s) adopted from the store", self->state.resident.size());
  }
  self->state.publish();
  supervise_hops(self);
  return {
      [self](fetch_blob& req) -> caf::result<blob_ref> { return fetch(self, req); },
      [self](handover_atom, const fetch_blob& req) { hand_over(self, req); },
      [self](cache_fetch_done& done) { fetched(self, done.blob_key, done.result); },
      resume_offloaded(),
      [self](pin_atom, const std::string& key) {
        if (auto it = self->state.resident.find(key); it != self->state.resident.end()) ++it->second.pins;
      },
      [self](unpin_atom, const std::string& key) {
        if (auto it = self->state.resident.find(key); it != self->state.resident.end() && it->second.pins > 0) {
          --it->second.pins;
        }
      },
      [self](evict_atom, const std::string& key) -> bool {
        auto& st = self->state;
        auto it = st.resident.find(key);
        if (it == st.resident.end() || it->second.pins > 0) return false;
        spdlog::info("model cache: {} evicted by request ({})", it->second.model.to_string(),
                     format_bytes(it->second.bytes));
        st.store->erase(key);
        st.resident.erase(it);
        st.publish();
        return true;
      },
      [self](fault_atom, const std::string& what) -> caf::result<uint32_t> {
        auto& st = self->state;
        if (what != "kill-hops") return to_caf(invalid_argument("the model cache takes no fault '" + what + "'"));
        for (const auto& [addr, hop] : st.hops_alive) self->send_exit(hop.actor, caf::exit_reason::kill);
        return static_cast<uint32_t>(st.hops_alive.size());
      },
      [self](status_atom) -> cache_status {
        return {self->state.config.capacity_bytes, self->state.store->used_bytes(), self->state.store->models()};
      },
  };
}

}  // namespace

std::string part_key_of(const std::string& blob_key, const blob_part& part) {
  return gpu::stage_name(blob_key, {part.first_layer, part.last_layer});
}

model_cache_actor spawn_model_cache(caf::actor_system& sys, ModelCacheConfig config, std::shared_ptr<BlobStore> store,
                                    NodeInstruments* instruments, WorkQueue& fetches, WorkQueue& hops) {
  return sys.spawn(cache_behavior, std::move(config), std::move(store), instruments, &fetches, &hops);
}

}  // namespace ember
