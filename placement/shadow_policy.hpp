// Shadow policy (AsyFunc, issue 19): how much one Body with a Shadow can serve, and which layers the
// Shadow should hold. Pure: profile figures in, decisions out.
//
// The model is a sequence of blocks (gpu/shadow_split.hpp's, between valid cut points), each with
// its weights, multiply-adds per sample, the bytes per sample that cross its ends, and its measured
// time at a few batch sizes (model/model_profile.hpp), interpolated linearly in between (and
// extrapolated from the last two beyond). A Shadow holds one contiguous span Φ of blocks; for
// them the batch b is split, b_B rows on the Body and b_S on the Shadow (AsyFunc's Eq. 6):
//
//   t_l(b) = t_np(b) + max(t_Φ(b_B), t_Φ(b_S) + transfer(b_S))
//
// with t_np the blocks outside Φ on the whole batch, and transfer the rows' bytes into Φ and out of
// it over the link between the two devices (fixed_us + bytes · us_per_byte each way). b_B is the
// one that balances the two sides (ties: more rows on the Body).
//
// Decisions where the paper is silent or inconsistent (digest §5), and why:
// - Φ is one contiguous span, not a prefix of blocks sorted by rank, which may be scattered (point
//   6): each separate segment would cost a round trip, and Eq. 6 has one max. Contiguous spans are
//   few enough to try them all (BlockOrder::exhaustive, the default), so the paper's ranking is
//   not needed to choose; it remains as a greedy search for comparison: a span grown from each
//   block towards its better-ranked neighbour, ranked by MACs per weight byte (the paper's) or by
//   measured sensitivity (time at batch 4 minus batch 2) per weight byte.
// - The benefit η of a choice (the paper's b_S/(c·t_l) + b_S/(ρ·m·t_l) counts cores, which a device
//   does not have) is the Shadow's extra rows per second, discounted by the memory it adds relative
//   to a full replica: η = (b / t_l − R_body) / (1 + m_Φ / m). Shadows go back smallest η first.
// - Loading Φ is not charged to every batch (the paper's t_s = t_load + t_l charges it at every
//   feasibility check, point 15, though only the first batch pays it): a choice is feasible when
//   its steady batches meet the SLO, and t_load(Φ) is reported (the time to the added capacity).
// - A span of every block is no Shadow but a second Body (a full replica split by rows), which is
//   model-level scaling's to add: it is never chosen (on a small model it often has the greatest
//   benefit).
// - The search is quadratic in the blocks and in the batch.
// - Capacity (Eq. 1) is max over b of b / t_l(b) with t_l(b) <= SLO, queueing ignored as the paper
//   does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.hpp"

namespace ember::placement {

struct ShadowBlock {
  uint32_t first_layer = 0, last_layer = 0;  // [first, last)
  uint64_t weight_bytes = 0;
  uint64_t macs = 0;            // per sample
  uint64_t in_bytes = 0;        // per sample, what enters the block at its start
  uint64_t out_bytes = 0;       // per sample, what leaves it at its end
  std::vector<double> exec_us;  // per ShadowProfile::batches entry
};

struct ShadowProfile {
  std::vector<uint32_t> batches;  // ascending, positive
  std::vector<ShadowBlock> blocks;
  /// A transfer of b bytes between Body and Shadow takes fixed_us + b · us_per_byte (each way).
  double transfer_fixed_us = 20;
  double transfer_us_per_byte = 1.0 / 12e3;  // 12 GB/s
  /// Loading a Shadow's weights: bytes · load_us_per_byte (from the host cache over PCIe).
  double load_us_per_byte = 1.0 / 12e3;
};

/// How spans are searched: every contiguous span (exact, n(n+1)/2 spans of n blocks: few enough), or
/// grown greedily from each block towards its better-ranked neighbour by the paper's MACs per
/// weight byte or by measured sensitivity per weight byte (for comparison with the paper).
enum class BlockOrder : uint8_t { exhaustive, macs_per_byte, sensitivity };

/// The blocks' time at `batch` rows (us), interpolated in the profile's batches.
double blocks_us(const ShadowProfile& p, size_t first_block, size_t last_block, double batch);
/// The Body alone at batch b: every block.
double body_us(const ShadowProfile& p, uint32_t batch);
/// Eq. 1 for one Body alone: its most rows per second within `slo_us`, and the batch that gives it
/// (0, 0 when not even one row meets the SLO).
struct Capacity {
  double rows_per_s = 0;
  uint32_t batch = 0;
};
Capacity body_capacity(const ShadowProfile& p, double slo_us, uint32_t max_batch);

/// A Body and its Shadow on blocks [first_block, last_block) at batch `batch`: Eq. 6.
struct Split {
  uint32_t body_rows = 0, shadow_rows = 0;
  double latency_us = 0;                        // t_l
  double body_part_us = 0, shadow_part_us = 0;  // t_Φ(b_B), t_Φ(b_S) + transfer
};
Split split_batch(const ShadowProfile& p, size_t first_block, size_t last_block, uint32_t batch);

struct ShadowChoice {
  size_t first_block = 0, last_block = 0;  // Φ = blocks [first, last)
  uint32_t first_layer = 0, last_layer = 0;
  uint32_t batch = 0;  // the pair's batch
  Split split;
  uint64_t weight_bytes = 0;   // m_Φ
  double load_us = 0;          // t_load(Φ)
  double rows_per_s = 0;       // the pair's capacity: batch / t_l
  double gain_rows_per_s = 0;  // over the Body alone
  double benefit = 0;          // η
};

/// Algorithm 2 for one Body (see the header): the span and split with the greatest benefit that
/// carries more rows per second than the Body alone within `slo_us`, batches up to `max_batch`;
/// nullopt when no Shadow helps. With `needed_rows_per_s` > 0 (what the burst asks of this pair
/// beyond the Body alone), the fewest weight bytes that carry that much instead (the paper
/// provisions until the burst is met), or the greatest benefit when none does. invalid_argument
/// for a malformed profile.
Result<std::optional<ShadowChoice>> choose_shadow(const ShadowProfile& p, double slo_us, uint32_t max_batch,
                                                  BlockOrder order = BlockOrder::exhaustive,
                                                  double needed_rows_per_s = 0);

/// Model-level scaling's band (Algorithm 1): scale out when the predicted rate exceeds α of the
/// capacity, in below β of it, hold in between.
enum class BodyScaling : uint8_t { out, hold, in };
BodyScaling model_level(double predicted_rps, double capacity_rps, double alpha = 0.8, double beta = 0.6);

/// Layer-level scaling's trigger: a burst beyond γ times the capacity (of Bodies and their Shadows)
/// calls for Shadows; below it, they may go (smallest benefit first: release_order).
bool needs_shadows(double burst_rps, double capacity_rps, double gamma = 1.0);
/// Indexes of `benefits` in the order Shadows are released: smallest benefit first.
std::vector<size_t> release_order(const std::vector<double>& benefits);

}  // namespace ember::placement
