// Chain building: which source feeds which receivers, and in which order, when one model's bytes
// go to many nodes at once by chained multicast (Flashpoint §6.2, "TCP chaining": each receiver
// forwards the stream to the next host while still receiving, so one source's uplink feeds N hosts
// instead of splitting N ways).
//
// Pure: anyone, any thread; no I/O, no clocks, no randomness. The cluster manager's chain
// controller calls build_chains once per multicast with a snapshot of who holds the bytes and who
// needs them, then tracks each resulting chain with a ChainPlan (chain_plan.hpp).
//
// Invariants of the result: every remaining receiver appears in exactly one chain, once; no chain
// is empty; no source is a hop; the same input gives the same output (every tie goes to name
// order). Flashpoint's map_senders_to_receivers is only "approximately even" and leaves chain order
// and length unspecified; the rack-aware order and the length cap below are Ember's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"

namespace ember::placement {

/// A holder of the model's bytes that can feed a chain.
struct ChainSource {
  std::string name;
  /// Rack (top-of-rack switch) of the holder; "" = unknown, never the same rack as anything.
  std::string rack;
  /// The model repository rather than a node's memory: slower, used only when no node holds the
  /// bytes (Flashpoint's "cloud storage by default").
  bool repository = false;
};

/// A node that needs the model's bytes.
struct ChainReceiver {
  std::string name;
  /// "" = unknown, never the same rack as anything.
  std::string rack;
};

/// One chain: hops[0] pulls from `source`, hops[i] pulls from hops[i-1].
struct Chain {
  std::string source;
  std::vector<std::string> hops;

  friend bool operator==(const Chain&, const Chain&) = default;
};

struct ChainOptions {
  /// Most hops in one chain; 0 = unlimited (default). A longer chain is split into
  /// ceil(len / max) contiguous parts whose lengths differ by at most one, each fed by the same
  /// source. Lower values shorten the time to first byte at the tail (Flashpoint's known drawback
  /// of long chains) at the cost of one more stream on the source's uplink per part.
  uint32_t max_chain_length = 0;
};

/// The chains that carry one model's bytes from `sources` to `receivers`.
///
/// Exactly what it does:
///  1. Validation: an empty source or receiver name, a duplicate source name or a duplicate
///     receiver name -> invalid_argument. Receivers named by any source are dropped (they already
///     hold the bytes). No receiver left -> empty vector (even with no source).
///  2. Sources: the node sources (repository == false) if any, else the repository sources; none
///     -> unavailable. Sorted by name; each gets at most one chain (before the length split).
///  3. Sizes: n receivers over k sources get q = n / k each and n % k of them one more, so the
///     per-source totals differ by at most one. With k > n only n sources get a chain.
///  4. Which sources get the n % k extra slots: first the sources in racks whose receivers outnumber
///     q * (sources in that rack) (racks in name order, sources in name order, at most that excess
///     per rack), then the others in name order. This maximises the number of receivers fed by a
///     source in their own rack under the evenness constraint: each extra slot given to such a rack
///     keeps one more receiver in-rack, and no assignment beats min(receivers, capacity) per rack.
///  5. Same-rack: each known rack's receivers (name order) fill its sources' slots (name order).
///  6. Leftovers (racks with more receivers than local slots, racks with no source, unknown racks),
///     sorted by rack then name, unknown rack last, fill the remaining slots of the sources in name
///     order, sequentially; so a rack is split between two chains only where a chain fills up.
///  7. Order in a chain: receivers in the source's rack first, then the leftovers rack by rack. A
///     chain therefore enters each foreign rack once: its rack crossings equal the number of
///     distinct foreign racks among its hops, the minimum for that set of hops.
///  8. options.max_chain_length splits each chain as described there.
/// Output: chains in source-name order, a split chain's parts in hop order.
Result<std::vector<Chain>> build_chains(const std::vector<ChainSource>& sources,
                                        const std::vector<ChainReceiver>& receivers,
                                        const ChainOptions& options = {});

}  // namespace ember::placement
