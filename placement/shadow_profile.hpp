// A profiled model as the Shadow policy sees it (placement/shadow_policy.hpp): the adapter from the
// model format (model/model.hpp, model/model_profile.hpp) to the policy's own types. Pure: anyone,
// any thread; no I/O (the profile was read by the caller).
#pragma once

#include <cstdint>

#include "model/model.hpp"
#include "model/model_profile.hpp"
#include "placement/shadow_policy.hpp"

namespace ember::placement {

/// The Shadow policy's view of a profiled model (placement/shadow_policy.hpp): its blocks, each
/// with its layers' weight bytes, multiply-adds and times per profiled batch summed, and the bytes
/// per sample that enter it (what crosses the cut before it; the model inputs for the first) and
/// leave it. The profile must match the model (ModelProfile::check_matches).
ShadowProfile shadow_profile(const gpu::Model& model, const gpu::ModelProfile& profile);
/// One replica's capacity within `slo_us` at batches up to `max_batch` (AsyFunc's Eq. 1; rows a
/// second, 0 when not even one row meets it), from the profile alone: the layers' times summed.
double replica_capacity(const gpu::ModelProfile& profile, double slo_us, uint32_t max_batch);

}  // namespace ember::placement
