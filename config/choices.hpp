// The enumerated choices of the config file, held as enums everywhere and spelled as words only
// at the edges (YAML, model.json, logs, the HTTP API): binding.mode, binding.scheduler,
// binding.eviction, transfer.transport and autoscale.policy. Lower layers use these types directly
// (placement::EvictionRule and transport::TransportKind are these), so a choice is parsed once,
// where the file is read.
//
// Pure; anyone, any thread; never throws. A word that is not a choice is an invalid_argument Error
// "'<word>' is neither <a> nor <b>" (or "is not one of <a>, <b>, ..."; the config parser adds the file
// and key in front).
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.hpp"

namespace ember {

/// binding.mode: "late" (Torpor: swapped onto a device per request) or "pinned" (bound at load).
enum class BindingMode : uint8_t { late, pinned };
/// binding.scheduler: "torpor" (Algorithm 1) or "random" (the Torpor-Random ablation).
enum class SwapScheduler : uint8_t { torpor, random };
/// binding.eviction: "torpor" (duplicates, light LRU, heavy LRU; Torpor §5.4) or "lru" (plain LRU).
enum class EvictionRule : uint8_t { torpor, lru };
/// transfer.transport: "tcp" or "ucx" (the data plane).
enum class TransportKind : uint8_t { tcp, ucx };
/// autoscale.policy: which signal sets a model's replica need (placement/autoscaler.hpp has the
/// formulas): "ongoing_requests" (requests in flight and queued per replica, Ray Serve's
/// target_ongoing_requests and Knative's concurrency; the default), "arrival_rate" (rate times
/// execution time with headroom, Flashpoint's ATL), "queue_latency" (the expected queueing delay
/// against a target, TSK), "requests_per_minute" (per replica, SageMaker's) or "model_level" (the rate
/// against one replica's capacity within the SLO, batching included, from the model's profile:
/// AsyFunc's model-level scaling).
enum class ScalingPolicy : uint8_t { ongoing_requests, arrival_rate, queue_latency, requests_per_minute, model_level };
/// Where new replicas go (autoscale.placement): "locality" (nodes whose host cache holds the bytes,
/// then the most free device memory, then the fewest replicas; the default) or "random" (any node
/// with room, uniformly: Knative's scheduler, a baseline).
enum class PlacementPolicy : uint8_t { locality, random };
/// binding.bodies: "free" (any idle device may take a copy of a model whose requests wait) or
/// "model_level" (AsyFunc's model-level scaling bounds the copies; actors/node/shadow_pairs.hpp).
enum class BodyScalingMode : uint8_t { free, model_level };

std::string_view to_string(BindingMode mode);
std::string_view to_string(SwapScheduler scheduler);
std::string_view to_string(EvictionRule rule);
std::string_view to_string(TransportKind kind);
std::string_view to_string(ScalingPolicy policy);
std::string_view to_string(PlacementPolicy policy);
std::string_view to_string(BodyScalingMode mode);

Result<BindingMode> parse_binding_mode(std::string_view word);
Result<SwapScheduler> parse_swap_scheduler(std::string_view word);
Result<EvictionRule> parse_eviction_rule(std::string_view word);
Result<TransportKind> parse_transport_kind(std::string_view word);
Result<ScalingPolicy> parse_scaling_policy(std::string_view word);
Result<PlacementPolicy> parse_placement_policy(std::string_view word);
Result<BodyScalingMode> parse_body_scaling(std::string_view word);

}  // namespace ember
