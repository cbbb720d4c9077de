#include "actors/node/engine/generation_profile.hpp"

#include <algorithm>
#include <optional>

namespace ember::engine {

GenerationProfiler::GenerationProfiler(GenerationLoop& loop, GenerationProfileSeams seams)
    : loop_(loop), seams_(std::move(seams)) {
  const uint64_t context = loop_.spec().context_window;
  prompt_tokens_ = static_cast<uint32_t>(std::min<uint64_t>(kProfilePromptTokens, std::max<uint64_t>(1, context / 2)));
  decode_tokens_ = static_cast<uint32_t>(std::min<uint64_t>(kProfileDecodeTokens, context - prompt_tokens_));
}

Result<uint64_t> GenerationProfiler::request(const std::string& id, uint64_t& prefill_us) {
  const uint64_t start = seams_.now_us();
  bool done = false;
  std::optional<Error> failed;
  GenerationJob job;
  job.id = id;
  for (uint32_t i = 0; i < prompt_tokens_; ++i) {
    job.prompt.push_back(static_cast<int32_t>((i + 1) % loop_.spec().vocab_size));
  }
  job.sampling.temperature = 0;
  job.stop.max_tokens = decode_tokens_;
  job.stop.ignore_eos = true;
  job.emit = [&](GenerationOutput out) {
    if (!out.final) return;
    done = true;
    if (out.error) failed = *out.error;
  };
  EMBER_RETURN_IF_ERROR(loop_.submit(std::move(job), seams_.now_us()));
  for (bool first = true; !done; first = false) {
    const uint64_t t0 = seams_.now_us();
    bool more = false;
    Status stepped = seams_.guarded([&] {
      more = loop_.step(seams_.now_us());
      return Status::OK();
    });
    if (first) prefill_us = seams_.now_us() - t0;
    plan_bytes_ = std::max(plan_bytes_, seams_.plan_bytes());
    if (!stepped.ok()) {
      if (seams_.fault) seams_.fault(stepped.error());
      return stepped.error();
    }
    if (!more && !done) {
      loop_.cancel(id);
      return internal_error("the profile's generation request of " + seams_.model + " stopped unfinished");
    }
  }
  if (failed) return *failed;
  return seams_.now_us() - start;
}

Result<GenerationProfile> GenerationProfiler::run() {
  GenerationProfile p;
  p.prompt_tokens = prompt_tokens_;
  p.decode_tokens = decode_tokens_;
  auto cold = request("#profile-cold", p.cold_prefill_us);
  if (Status copied = seams_.wait_weights(); !copied.ok()) {
    weights_failed_ = true;
    return copied.error();
  }
  EMBER_ASSIGN_OR_RETURN(p.cold_us, std::move(cold));
  EMBER_ASSIGN_OR_RETURN(p.warm_us, request("#profile-warm", p.warm_prefill_us));
  // The preemption's costs, measured: prefill from the warm prefill step, host copies from the
  // elbow probe (its fastest size) or a timed swap of a few KV blocks.
  KvPreemptionCosts& costs = p.costs;
  costs.prefill_us_per_token = std::max(1e-3, static_cast<double>(p.warm_prefill_us) / prompt_tokens_);
  for (const auto& [bytes, gbps] : seams_.elbow) {
    costs.host_bytes_per_s = std::max(costs.host_bytes_per_s, gbps * 1e9);
  }
  if (costs.host_bytes_per_s == 0) {
    const uint64_t s0 = seams_.now_us();
    auto moved = loop_.probe_swap(kProbeBlocks);
    const uint64_t us = std::max<uint64_t>(1, seams_.now_us() - s0);
    if (moved.ok()) costs.host_bytes_per_s = static_cast<double>(*moved) * 1e6 / static_cast<double>(us);
  }
  loop_.set_costs(costs);
  p.plan_bytes = plan_bytes_;
  return p;
}

}  // namespace ember::engine
