#include "placement/kv_preemption.hpp"

#include <algorithm>

namespace ember::placement {

std::string_view to_string(KvPreemption how) { return how == KvPreemption::swap ? "swap" : "recompute"; }

KvPreemptionChoice choose_kv_preemption(const KvPreemptionInput& in, std::optional<KvPreemption> previous,
                                        double margin) {
  KvPreemptionChoice c;
  if (in.host_bytes_per_s > 0) {
    const double one_way = static_cast<double>(in.blocks) * std::max(0.0, in.copy_fixed_us) +
                           static_cast<double>(in.bytes) / in.host_bytes_per_s * 1e6;
    c.swap_us = 2 * one_way;
  }
  if (in.prefill_us_per_token > 0) c.recompute_us = static_cast<double>(in.tokens) * in.prefill_us_per_token;
  if (in.host_bytes_per_s <= 0 || in.prefill_us_per_token <= 0 || !in.host_room || in.bytes == 0 || in.tokens == 0) {
    return c;  // recompute: see the header
  }
  const double m = std::max(0.0, margin);
  const bool swap = previous == KvPreemption::swap ? c.swap_us <= c.recompute_us * (1 + m)
                                                   : c.swap_us * (1 + m) < c.recompute_us;
  c.how = swap ? KvPreemption::swap : KvPreemption::recompute;
  return c;
}

}  // namespace ember::placement
