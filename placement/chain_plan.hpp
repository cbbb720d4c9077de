// ChainPlan: the live state of one chain (chain_builder.hpp) while a model's bytes flow down it:
// whom each hop pulls from, how far each hop has got, and which hops to splice out.
//
// Owner: the cluster manager's chain controller, one ChainPlan per chain, called from that one
// actor. A plain value type: not thread-safe, never blocks; no I/O, no clock (every time is a
// `now_ms` parameter from the caller's monotonic clock), no randomness. Decisions come out as
// Splice values for the controller to send; the plan never talks to a hop.
//
// Pull model (Ember's take on Flashpoint §6.2, where the controller "re-routes the transfer to the
// next recipient in the chain"): each hop pulls [its offset, blob_bytes) from its upstream. A hop
// that dies or stalls is spliced out by re-pointing its downstream at the nearest live upstream;
// the downstream resumes from the offset it already holds, so the plan decides only the upstream.
//
// Hop lifecycle (other transitions are rejected by on_done or ignored, as stated per method):
//
//   receiving ──on_done──────────────────────────► done ──on_failed──► failed
//       ├──────on_failed────────────────────────────────────────────► failed
//       └──check_stalls──► spliced_out ──on_done──► done
//                               └────────on_failed──────────────────► failed
//
// done -> failed departs from "done is final" on purpose: a node that completed and then died can
// no longer serve the hop pulling from it, which must be re-pointed. failed is final.
//
// Invariants:
//  - upstream_of(h) is the nearest predecessor of h in the original order that is receiving or
//    done, else the source. So a done hop keeps serving its downstream: its node must keep the
//    bytes until finished(). A spliced_out hop keeps receiving as a leaf; nobody pulls from it.
//  - A hop's offset only grows, never exceeds blob_bytes, and is blob_bytes once done.
//  - The source holds all blob_bytes all the time: its offset is blob_bytes and its progress over
//    any window is 0. A done upstream is the same once done. Hence the slow rule (StallOptions)
//    never fires for a hop whose upstream held everything through the window; only the stall rule
//    can splice it out (there is no reference rate to call it slow against). A slow source is the
//    controller's to replace (replace_source), not the plan's to detect.
//  - Memory: per hop at most kMaxSamplesPerHop progress samples, covering the stall window.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "placement/chain_builder.hpp"

namespace ember::placement {

enum class HopState : uint8_t { receiving, done, failed, spliced_out };

/// "receiving", "done", "failed", "spliced_out".
std::string_view to_string(HopState state);

/// A hop's own choice while its controller is away (issue 37: a chain goes on without the manager).
/// `upstreams` are what the controller gave the hop: its predecessors in the chain, nearest first,
/// then the chain's source (the order upstream_of follows). After `failed`, the next one in that
/// order, wrapping round to the nearest (a neighbour or a manager restarted meanwhile is tried
/// again); `failed` not listed, or the only one: index 0. The hop cannot see which predecessor
/// lives, so it tries them in turn where the controller would pick the nearest live one at once.
size_t next_upstream_after(const std::vector<std::string>& upstreams, const std::string& failed);

/// Tell `hop` to pull from `new_upstream` (a hop name, or the chain's source name) from the offset
/// it already holds.
struct Splice {
  std::string hop;
  std::string new_upstream;

  friend bool operator==(const Splice&, const Splice&) = default;
};

struct StallOptions {
  /// Stalled: the hop's offset did not move for stall_ms while its upstream holds more bytes. Also
  /// the window of the slow rule and the grace a hop gets after start or after a re-point. Lower
  /// values splice out sooner but mistake a reconnect or a GC pause for a stall.
  int64_t stall_ms = 2000;
  /// Slow: over the last stall_ms the hop gained less than slow_fraction of what its upstream
  /// gained, while it lags its upstream by at least lag_bytes.
  double slow_fraction = 0.25;
  uint64_t lag_bytes = 64ull << 20;
  /// Too slow in absolute terms: over the last stall_ms the hop gained less than
  /// min_bytes_per_s * stall_ms, while it lags its upstream by at least lag_bytes. The only rule
  /// that judges a hop fed by the source (whose own progress is not observed). 0 = off.
  uint64_t min_bytes_per_s = 0;
};

/// One hop for metrics and logs.
struct HopView {
  std::string name;
  HopState state = HopState::receiving;
  uint64_t offset_bytes = 0;
  std::string upstream;  // upstream_of(name)
};

/// Progress samples kept per hop: a report every 4 ms over the default 2 s window. Beyond it the
/// second-oldest sample is dropped (the oldest anchors the window start), which can overstate that
/// hop's gain over the window; counted in samples_dropped().
inline constexpr size_t kMaxSamplesPerHop = 512;

class ChainPlan {
 public:
  /// Every hop starts receiving at offset 0 at now_ms. `chain` must come from build_chains (hop
  /// names unique and non-empty, none equal to the source): anything else is a programmer error.
  ChainPlan(Chain chain, uint64_t blob_bytes, int64_t now_ms);

  const std::string& source() const { return chain_.source; }
  /// The chain as built, with the source as last replaced.
  const Chain& chain() const { return chain_; }
  uint64_t blob_bytes() const { return blob_bytes_; }

  /// Whom `hop` should pull from now (see the invariants). not_found for an unknown hop.
  Result<std::string> upstream_of(const std::string& hop) const;

  /// A hop its downstream reported unreachable, though the node may live: it keeps receiving as a
  /// leaf and nobody pulls from it. Returns the splices for its downstream; nothing for a hop that
  /// is not receiving. Idempotent.
  std::vector<Splice> splice_out(const std::string& hop);

  /// The hop holds [0, offset) verified. Ignored for an unknown hop, a hop that is done or failed,
  /// an offset not above the current one, or one beyond blob_bytes. Records a sample at now_ms.
  void on_progress(const std::string& hop, uint64_t offset, int64_t now_ms);
  /// The hop holds all bytes, digest checked. OK again for a done hop; not_found for an unknown
  /// hop; invalid_argument for a failed one (failed is final). Changes nobody's upstream.
  Status on_done(const std::string& hop, int64_t now_ms);
  /// The hop died or gave up (also valid when done or spliced_out). Returns a splice for each hop
  /// still receiving or spliced_out whose upstream changed, in chain order; re-pointed hops get a
  /// fresh stall grace starting at the latest now_ms the plan has seen (this call has none). A
  /// failed or unknown hop returns nothing (idempotent).
  std::vector<Splice> on_failed(const std::string& hop);
  /// The source is gone; the chain continues from `replacement` (another holder outside this chain,
  /// or the repository). Returns the splice for the first live hop and for any spliced_out hop
  /// before it (they pulled from the source too). Same name -> nothing. invalid_argument when
  /// `replacement` is empty or a hop of this chain.
  Result<std::vector<Splice>> replace_source(const std::string& replacement);
  /// Judges each hop that is receiving, has been since its start or last re-point for at least
  /// stall_ms, and has a receiving hop pulling from it (so never the last live hop, nor a hop whose
  /// next live hop is done); stalled or slow ones (StallOptions) are marked spliced_out, all judged
  /// on the state before this call. Returns the splices for their downstreams, as on_failed does.
  std::vector<Splice> check_stalls(int64_t now_ms, const StallOptions& options);

  /// receiving/done/failed/spliced_out; failed for an unknown hop.
  HopState state(const std::string& hop) const;
  /// Bytes the hop holds; 0 for an unknown hop.
  uint64_t offset(const std::string& hop) const;
  bool contains(const std::string& hop) const { return index_.count(hop) > 0; }
  /// Every hop in chain order.
  std::vector<HopView> hops() const;
  /// True when every hop is done or failed (a spliced_out hop still receiving is not finished; the
  /// controller times such a leaf out with on_failed).
  bool finished() const;
  /// Samples dropped by the kMaxSamplesPerHop bound since construction.
  uint64_t samples_dropped() const { return samples_dropped_; }

 private:
  struct Sample {
    int64_t t_ms;
    uint64_t offset;
  };
  struct Hop {
    std::string name;
    HopState state = HopState::receiving;
    uint64_t offset = 0;
    int64_t last_advance_ms = 0;  // when the offset last grew
    int64_t judged_from_ms = 0;   // start, or the last re-point: no judgement before + stall_ms
    std::deque<Sample> samples;   // ascending t_ms
  };
  static constexpr size_t kSource = static_cast<size_t>(-1);

  size_t upstream_index(size_t i) const;
  const std::string& upstream_name(size_t i) const;
  uint64_t held_by(size_t upstream) const;
  uint64_t offset_at(const Hop& h, int64_t t_ms) const;
  void record(Hop& h, int64_t now_ms);
  void advance_clock(int64_t now_ms);
  std::vector<std::string> upstream_snapshot() const;
  std::vector<Splice> splices_since(const std::vector<std::string>& before);

  Chain chain_;
  uint64_t blob_bytes_;
  int64_t clock_ms_;                // latest now_ms seen: the time of re-points made without one
  int64_t window_ms_;               // stall_ms of the latest check_stalls: how far back samples go
  std::vector<Hop> hops_;           // chain order
  std::map<std::string, size_t> index_;
  uint64_t samples_dropped_ = 0;
};

}  // namespace ember::placement
