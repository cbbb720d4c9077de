// transfer_peer: one hop of a multicast chain (see transfer_peer_interface.hpp).
#include "actors/transfer/transfer_peer.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <mutex>
#include <optional>
#include <thread>

#include "actors/errors.hpp"
#include "actors/offload.hpp"
#include "actors/transfer/transfer_instruments.hpp"
#include "base/units.hpp"
#include "model/host_buffer.hpp"
#include "transport/data_plane.hpp"
#include "transport/growing_blob.hpp"

namespace ember {

/// Real time, for the fetch thread's throttle only; the actor reads the actor clock.
using Clock = std::chrono::steady_clock;
/// How long the hop waits for the controller to name a new upstream.
constexpr auto kControllerTimeout = std::chrono::seconds(10);
/// A corrupt chunk is re-fetched from the same upstream this many times before the hop asks the
/// controller for another one (a flaky link, not a lying peer, is the likely cause).
constexpr uint32_t kCorruptRetries = 2;
/// An upstream hop that does not hold the blob yet (its own transfer_peer is still starting) is
/// asked again after kNotYetDelay (on the actor clock), up to kNotYetRetries times, before the
/// controller is asked.
constexpr auto kNotYetDelay = std::chrono::milliseconds(50);
constexpr uint32_t kNotYetRetries = 100;
/// How often a hop whose controller does not answer tries its upstream again (see orphan_window).
constexpr auto kOrphanRetry = std::chrono::seconds(1);

/// What the fetch (on the node's hop queue) and the actor share: the buffer, its GrowingBlob in the
/// node's store, and the verified offset. The buffer is written only by the fetch, one attempt at a
/// time: an attempt holds `attempt_mu` while it runs, so a replacement hop's first attempt waits
/// for the cancelled one of the hop it replaces.
struct HopBuffer final : transport::BlobSink {
  std::mutex attempt_mu;
  std::string key;
  std::shared_ptr<GrowingBlobShelf> store;
  std::shared_ptr<gpu::HostBuffer> buffer;
  std::shared_ptr<transport::GrowingBlob> growing;
  std::atomic<uint64_t> verified{0};

  uint8_t* allocate(uint64_t blob_bytes) override {
    if (buffer) return buffer->size() == blob_bytes ? buffer->data() : nullptr;
    auto b = gpu::HostBuffer::allocate(blob_bytes);
    if (!b.ok()) return nullptr;
    buffer = std::move(*b);
    growing = std::make_shared<transport::GrowingBlob>(buffer, buffer->data(), blob_bytes);
    store->put_growing(key, growing);  // the next hop may pull from here from now on
    return buffer->data();
  }
  void on_chunk(uint64_t offset, uint64_t length) override {
    verified.store(offset + length, std::memory_order_release);
    growing->advance(offset + length);
    if (throttle_bytes_per_s > 0) {  // the slow-peer fault seam: hold the fetch thread back
      throttled += length;
      std::this_thread::sleep_until(throttle_start + std::chrono::microseconds(throttled * 1'000'000 / throttle_bytes_per_s));
    }
    if (fault) {  // an injected throttle or stall, bounded by its end
      const int64_t now = Clock::now().time_since_epoch() / std::chrono::nanoseconds(1);
      const int64_t until = fault->until_ns.load();
      if (now < until) {
        const uint64_t rate = fault->rate.load();
        int64_t wait = until - now;
        if (rate > 0) wait = std::min<int64_t>(wait, static_cast<int64_t>(length * 1'000'000'000 / rate));
        std::this_thread::sleep_for(std::chrono::nanoseconds(wait));
      }
    }
  }
  std::shared_ptr<HopFault> fault;
  uint64_t throttle_bytes_per_s = 0;
  uint64_t throttled = 0;
  Clock::time_point throttle_start = Clock::now();
};

uint64_t verified_bytes(const HopBuffer& hop) { return hop.verified.load(std::memory_order_acquire); }

void abandon_hop(HopBuffer& hop, const Error& why) {
  if (!hop.growing) return;
  hop.growing->fail(why);
  hop.store->erase_growing(hop.key, hop.growing.get());
}

namespace {

struct peer_state {
  static inline const char* name = "ember.transfer_peer";

  TransferPeerConfig config;
  fetch_blob req;
  model_cache_actor cache;
  chain_controller_actor controller;
  std::shared_ptr<HopBuffer> hop;
  /// The node's hop queue (outlives the actor). One attempt of this hop at a time runs there:
  /// `running` is true from start_attempt until its result is back.
  WorkQueue* hops = nullptr;
  blob_source upstream;
  std::optional<blob_source> next_upstream;  // a splice that arrived while an attempt runs
  std::shared_ptr<transport::FetchCancel> cancel;
  uint64_t attempt = 0;
  bool running = false;
  bool finished = false;
  uint32_t corrupt_in_a_row = 0;
  uint32_t not_found_retries = 0;
  /// Since when the controller has not answered (see TransferPeerConfig::orphan_window), and the
  /// attempts made meanwhile (they do not count against max_attempts).
  std::optional<caf::actor_clock::time_point> orphaned_since;
  uint32_t orphan_retries = 0;
  /// The controller is monitored: once it is down (its process died, or its connection), the hop
  /// no longer asks it, and a question in flight (ask_seq) is not waited out.
  bool controller_gone = false;
  uint64_t ask_seq = 0;  // the question in flight (0: none)
  std::optional<Error> ask_why;
  uint64_t quarters_logged = 0;  // progress lines logged: one per quarter of the blob
  uint64_t bytes_received = 0;
  caf::actor_clock::time_point started;  // the actor clock's, at spawn

  /// A hop stopped early (its cache exits, or a fault kills it) lets go of its upstream at once:
  /// the fetch still on the hop queue returns, and its continuation finds no actor. Its buffer and
  /// growing blob stay: the cache may start a replacement over them.
  ~peer_state() {
    if (cancel) cancel->cancel();
    if (!finished && config.instruments) config.instruments->add_active_hop(-1);
  }
};

using peer_pointer = transfer_peer_actor::stateful_pointer<peer_state>;

chain_progress progress_of(peer_pointer self, placement::HopState state, const std::string& error = {}) {
  auto& st = self->state;
  return {st.req.transfer_id,
          st.config.node,
          st.upstream.name,
          st.hop->verified.load(std::memory_order_acquire),
          st.req.blob_bytes,
          state,
          error,
          caf::actor_cast<caf::actor>(self)};
}

void attempt_done(peer_pointer self, uint64_t attempt, Result<transport::FetchResult>& result);
void fail(peer_pointer self, const Error& e);

/// Fails the hop from its next message rather than from the caller (which may be the actor's
/// initialisation, where it cannot quit yet).
void fail_soon(peer_pointer self, Error e) {
  self->send(self, offload_done{[self, e = std::move(e)] {
               if (!self->state.finished) fail(self, e);
             }});
}

/// Puts attempt `attempt` on the hop queue, unless a later one has started or the hop ended.
void launch(peer_pointer self, uint64_t attempt, transport::FetchOptions options) {
  auto& st = self->state;
  if (st.finished || attempt != st.attempt) return;
  const bool taken = offload(
      self, *st.hops,
      [hop = st.hop, from = st.upstream.endpoint, key = st.req.blob_key, options,
       kind = st.config.transport]() mutable {
        // After the attempt before it on this buffer (perhaps a dead hop's, cancelled) returned;
        // from what is verified now.
        std::lock_guard lock(hop->attempt_mu);
        options.resume_offset = hop->verified.load(std::memory_order_acquire);
        return transport::fetch_blob(kind, from, key, options, *hop);
      },
      [self, attempt](Result<transport::FetchResult>& result) { attempt_done(self, attempt, result); });
  if (!taken) fail_soon(self, unavailable("the hop queue of node " + st.config.node + " is full"));
}

void start_attempt(peer_pointer self, std::chrono::milliseconds delay = std::chrono::milliseconds(0)) {
  auto& st = self->state;
  st.running = true;
  const uint64_t attempt = ++st.attempt;
  st.cancel = std::make_shared<transport::FetchCancel>();
  transport::FetchOptions options;
  options.transfer_id = st.req.transfer_id;
  options.expected_bytes = st.req.blob_bytes;
  options.resume_offset = st.hop->verified.load(std::memory_order_acquire);
  options.idle_timeout = st.config.idle_timeout;
  options.socket_buffer_bytes = st.config.socket_buffer_bytes;
  options.cancel = st.cancel;
  options.ticket = st.upstream.ticket;  // the manager's, with this upstream
  options.tls = st.config.tls;
  if (attempt > 1 && delay.count() == 0) {
    spdlog::info("transfer {}: node {} resumes {} from {} at offset {} (attempt {})", st.req.transfer_id,
                 st.config.node, st.req.model.to_string(), st.upstream.name, options.resume_offset, attempt);
  }
  if (delay.count() == 0) return launch(self, attempt, std::move(options));
  // Waits on the actor clock, still `running`: a splice meanwhile cancels this attempt's fetch,
  // which then returns at once and resumes from the new upstream.
  self->delayed_send(self, delay, offload_done{[self, attempt, options] { launch(self, attempt, options); }});
}

void finish(peer_pointer self, Result<blob_ref> result) {
  auto& st = self->state;
  st.finished = true;
  if (auto* m = st.config.instruments) {
    m->add_active_hop(-1);
    m->count_hop(result.ok() ? "ok" : std::string(to_string(result.error().code())));
    m->set_hop_progress(st.req.model, st.hop->verified.load(), st.req.blob_bytes);
  }
  if (result.ok()) {
    self->send(st.controller, progress_of(self, placement::HopState::done));
  } else if (st.hop->growing) {
    st.hop->growing->fail(result.error());
    st.hop->store->erase_growing(st.req.blob_key, st.hop->growing.get());
    self->send(st.controller, progress_of(self, placement::HopState::failed, result.error().message()));
  } else {
    self->send(st.controller, progress_of(self, placement::HopState::failed, result.error().message()));
  }
  self->send(st.cache, cache_fetch_done{st.req.blob_key, std::move(result)});
  self->quit();
}

void fail(peer_pointer self, const Error& e) {
  auto& st = self->state;
  spdlog::warn("transfer {}: node {} gives {} up at offset {}: {}", st.req.transfer_id, st.config.node,
               st.req.model.to_string(), st.hop->verified.load(), e.message());
  finish(self, e);
}

/// The upstream failed: a new one from the controller, then resume.
/// The controller cannot answer (down, or its question failed): while within the orphan window,
/// the same upstream again shortly, from the verified offset (the manager may be restarting, and
/// its repository server comes back at its address with it); then the hop fails.
void controller_away(peer_pointer self, const Error& err, const Error& why) {
  auto& s = self->state;
  if (s.finished || s.running) return;
  const auto now = self->clock().now();
  if (!s.orphaned_since) s.orphaned_since = now;
  if (now - *s.orphaned_since >= s.config.orphan_window) {
    return fail(self, err.with_context("no new upstream after: " + why.message()));
  }
  ++s.orphan_retries;
  if (s.config.instruments) s.config.instruments->count_hop_resume("controller_away");
  // The next of the upstreams the controller gave (the hops before this one, nearest first, then
  // the chain's source): the chain goes on around a lost hop without its controller.
  std::vector<std::string> names;
  for (const auto& u : s.req.sources) names.push_back(u.name);
  const std::string failed = s.upstream.name;
  if (!s.req.sources.empty()) s.upstream = s.req.sources[placement::next_upstream_after(names, failed)];
  spdlog::warn("transfer {}: node {}: the chain controller is away ({}); {} failed, trying {} in {} s from offset {}",
               s.req.transfer_id, s.config.node, err.message(), failed, s.upstream.name,
               std::chrono::duration_cast<std::chrono::seconds>(kOrphanRetry).count(), s.hop->verified.load());
  start_attempt(self, kOrphanRetry);
}

void ask_for_upstream(peer_pointer self, const Error& why) {
  auto& st = self->state;
  if (st.attempt - st.not_found_retries - st.orphan_retries >= st.config.max_attempts) {
    return fail(self, unavailable("transfer " + std::to_string(st.req.transfer_id) + " gave up after " +
                                  std::to_string(st.attempt) + " attempts; last: " + why.message()));
  }
  if (st.controller_gone) return controller_away(self, unavailable("its process or connection is down"), why);
  chain_upstream_request ask{st.req.transfer_id, st.config.node, st.upstream.name,
                             st.hop->verified.load(std::memory_order_acquire), why.message()};
  const uint64_t seq = ++st.ask_seq;
  st.ask_why = why;
  self->request(st.controller, kControllerTimeout, std::move(ask))
      .then(
          [self, seq](blob_source& next) {
            auto& s = self->state;
            if (s.ask_seq != seq) return;  // given up on when the controller went down
            s.ask_why.reset();
            s.orphaned_since.reset();
            if (s.finished || s.running) return;  // a splice got there first
            if (s.config.instruments) s.config.instruments->count_hop_resume("upstream_lost");
            s.upstream = std::move(next);
            start_attempt(self);
          },
          [self, seq, why](caf::error& err) {
            if (self->state.ask_seq != seq) return;
            self->state.ask_why.reset();
            controller_away(self, from_caf(err), why);
          });
}

void attempt_done(peer_pointer self, uint64_t attempt, Result<transport::FetchResult>& result) {
  auto& st = self->state;
  if (attempt != st.attempt || st.finished) return;
  st.running = false;
  if (result.ok()) {
    st.bytes_received += result->bytes_received;
    st.hop->growing->complete(result->digest);
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(self->clock().now() - st.started).count();
    spdlog::info("transfer {}: node {} holds {} ({} verified, {:.2f} s, {} attempt(s), last upstream {})",
                 st.req.transfer_id, st.config.node, st.req.model.to_string(), format_bytes(result->blob_bytes),
                 static_cast<double>(us) / 1e6, st.attempt, st.upstream.name);
    return finish(self, blob_ref{st.hop->buffer, st.upstream.kind, st.upstream.name, st.bytes_received,
                                 static_cast<uint64_t>(us), result->digest});
  }
  st.bytes_received = st.hop->verified.load();  // approximate: counts what the attempts verified
  if (st.next_upstream) {  // cancelled by a splice: go on from the new upstream
    if (st.config.instruments) st.config.instruments->count_hop_resume("splice");
    st.upstream = std::move(*st.next_upstream);
    st.next_upstream.reset();
    return start_attempt(self);
  }
  const Error& e = result.error();
  if (e.code() == ErrorCode::out_of_memory || e.code() == ErrorCode::invalid_argument) return fail(self, e);
  if (e.code() == ErrorCode::not_found && st.upstream.kind == SourceTier::peer &&
      st.not_found_retries++ < kNotYetRetries) {
    // The upstream hop was told about the transfer at the same time as this one and has not
    // started receiving yet: ask it again shortly.
    return start_attempt(self, kNotYetDelay);
  }
  if (e.code() == ErrorCode::corrupt && st.corrupt_in_a_row++ < kCorruptRetries) {
    if (st.config.instruments) st.config.instruments->count_hop_resume("corrupt");
    spdlog::warn("transfer {}: node {}: {}; re-fetching from offset {}", st.req.transfer_id, st.config.node,
                 e.message(), st.hop->verified.load());
    return start_attempt(self);
  }
  st.corrupt_in_a_row = 0;
  spdlog::warn("transfer {}: node {} lost upstream {} at offset {}: {}", st.req.transfer_id, st.config.node,
               st.upstream.name, st.hop->verified.load(), e.message());
  ask_for_upstream(self, e);
}

void spliced(peer_pointer self, chain_splice& splice) {
  auto& st = self->state;
  if (st.finished || splice.transfer_id != st.req.transfer_id) return;
  if (splice.upstream.endpoint == st.upstream.endpoint && !st.next_upstream) return;
  spdlog::info("transfer {}: node {} spliced from {} to {} at offset {}", st.req.transfer_id, st.config.node,
               st.upstream.name, splice.upstream.name, st.hop->verified.load());
  if (st.running) {
    st.next_upstream = std::move(splice.upstream);
    st.cancel->cancel();  // the attempt ends with `cancelled`; attempt_done starts the next
  } else {
    st.upstream = std::move(splice.upstream);
    start_attempt(self);
  }
}

/// A newer load of the same blob joined this hop (chain_handover): follow a new controller's chain,
/// or, orphaned, the new load's sources; from the verified offset, without waiting out the orphan
/// window of a controller that is gone.
void handed_over(peer_pointer self, chain_handover& h) {
  auto& st = self->state;
  if (st.finished || h.sources.empty()) return;
  if (h.controller ? h.controller == caf::actor_cast<caf::actor>(st.controller)
                   : !st.controller_gone && !st.orphaned_since) {
    return;
  }
  if (h.controller) {
    spdlog::info("transfer {}: node {} goes on with {} as a hop of transfer {} of another chain controller, from {} "
                 "at offset {}",
                 st.req.transfer_id, st.config.node, st.req.model.to_string(), h.transfer_id, h.sources.front().name,
                 st.hop->verified.load());
    if (st.controller) self->demonitor(st.controller.address());
    st.req.transfer_id = h.transfer_id;
    st.req.controller = std::move(h.controller);
    st.controller = caf::actor_cast<chain_controller_actor>(st.req.controller);
    self->monitor(st.controller);
    st.controller_gone = false;
    ++st.ask_seq;  // an answer of the old controller no longer applies
    st.ask_why.reset();
  } else {
    spdlog::info("transfer {}: node {}: its controller away, goes on with {} from the sources of a new load ({} first) "
                 "at offset {}",
                 st.req.transfer_id, st.config.node, st.req.model.to_string(), h.sources.front().name,
                 st.hop->verified.load());
  }
  st.req.sources = std::move(h.sources);
  st.orphaned_since.reset();
  st.next_upstream.reset();
  if (st.config.instruments) st.config.instruments->count_hop_resume("handover");
  // The attempt under way (or waiting to retry) is called off and left stale; the next one, from
  // the new upstream, starts now (after it, on the buffer: attempt_mu).
  if (st.cancel) st.cancel->cancel();
  st.upstream = st.req.sources.front();
  start_attempt(self);
}

transfer_peer_actor::behavior_type peer_behavior(peer_pointer self, TransferPeerConfig config, fetch_blob req,
                                                 model_cache_actor cache, WorkQueue* hops,
                                                 std::shared_ptr<HopBuffer> hop, bool resumed) {
  auto& st = self->state;
  st.started = self->clock().now();
  st.hops = hops;
  st.config = std::move(config);
  st.cache = std::move(cache);
  st.controller = caf::actor_cast<chain_controller_actor>(req.controller);
  st.upstream = req.sources.front();
  st.hop = std::move(hop);
  st.req = std::move(req);
  // Allocate now when the size is known, so the next hop can connect before the first byte.
  if (st.req.blob_bytes > 0 && st.hop->allocate(st.req.blob_bytes) == nullptr) {
    fail_soon(self,
              out_of_memory("cannot allocate " + format_bytes(st.req.blob_bytes) + " for " + st.req.model.to_string()));
  }
  if (st.config.instruments) {
    st.config.instruments->add_active_hop(1);
    st.config.instruments->set_hop_progress(st.req.model, 0, st.req.blob_bytes);
  }
  if (resumed) {
    if (st.config.instruments) st.config.instruments->count_hop_resume("hop_restart");
    spdlog::info("transfer {}: node {}: a new hop goes on with {} from {} at offset {}", st.req.transfer_id,
                 st.config.node, st.req.model.to_string(), st.upstream.name, st.hop->verified.load());
  } else {
    spdlog::info("transfer {}: node {} receives {} ({}) from {}", st.req.transfer_id, st.config.node,
                 st.req.model.to_string(), format_bytes(st.req.blob_bytes), st.upstream.name);
  }
  if (st.hop->buffer || st.req.blob_bytes == 0) start_attempt(self);
  self->delayed_send(self, st.config.progress_interval, tick_atom_v);
  if (st.controller) self->monitor(st.controller);
  self->set_down_handler([self](caf::down_msg& down) {
    auto& s = self->state;
    if (down.source != s.controller.address() || s.controller_gone) return;
    s.controller_gone = true;
    spdlog::warn("transfer {}: node {}: the chain controller is down ({})", s.req.transfer_id, s.config.node,
                 caf::to_string(down.reason));
    if (!s.ask_why) return;
    const Error why = *s.ask_why;  // a question in flight: not waited out
    s.ask_why.reset();
    ++s.ask_seq;
    controller_away(self, unavailable("its process or connection went down"), why);
  });
  return {
      [self](chain_splice& splice) { spliced(self, splice); },
      [self](chain_handover& h) { handed_over(self, h); },
      resume_offloaded(),
      [self](tick_atom) {
        auto& s = self->state;
        if (s.finished) return;
        const uint64_t verified = s.hop->verified.load(std::memory_order_acquire);
        if (s.config.instruments) s.config.instruments->set_hop_progress(s.req.model, verified, s.req.blob_bytes);
        if (s.req.blob_bytes > 0 && verified * 4 / s.req.blob_bytes > s.quarters_logged) {
          s.quarters_logged = verified * 4 / s.req.blob_bytes;
          spdlog::info("transfer {}: node {} has {} of {} ({}%) from {}", s.req.transfer_id, s.config.node,
                       format_bytes(verified), format_bytes(s.req.blob_bytes), verified * 100 / s.req.blob_bytes,
                       s.upstream.name);
        }
        self->send(self->state.controller, progress_of(self, placement::HopState::receiving));
        self->delayed_send(self, self->state.config.progress_interval, tick_atom_v);
      },
  };
}

}  // namespace

SpawnedHop spawn_transfer_peer(caf::actor_system& sys, TransferPeerConfig config, fetch_blob req,
                               std::shared_ptr<GrowingBlobShelf> store, model_cache_actor cache, WorkQueue& hops,
                               std::shared_ptr<HopBuffer> resume) {
  const bool resumed = resume != nullptr;
  if (!resumed) {
    // A resumed buffer keeps what the hop it replaces set (whose fetch may still be returning).
    resume = std::make_shared<HopBuffer>();
    resume->key = req.blob_key;
    resume->store = std::move(store);
    resume->throttle_bytes_per_s = config.throttle_bytes_per_s;
    resume->fault = config.fault;
  }
  auto actor = sys.spawn(peer_behavior, std::move(config), std::move(req), std::move(cache), &hops, resume, resumed);
  return {actor, std::move(resume)};
}

}  // namespace ember
