#include "config/choices.hpp"

#include <array>
#include <string>

namespace ember {

namespace {

// The words of a choice, in enum order.
template <class E, size_t N>
struct Words {
  std::array<std::string_view, N> words;
  std::string_view of(E e) const {
    const auto i = static_cast<size_t>(e);
    return i < N ? words[i] : "?";
  }
  Result<E> parse(std::string_view word) const {
    for (size_t i = 0; i < N; ++i)
      if (word == words[i]) return static_cast<E>(i);
    std::string message = "'" + std::string(word) + "' is ";
    if (N == 2) return invalid_argument(message + "neither " + std::string(words[0]) + " nor " + std::string(words[1]));
    message += "not one of ";
    for (size_t i = 0; i < N; ++i) message += (i ? ", " : "") + std::string(words[i]);
    return invalid_argument(message);
  }
};

constexpr Words<BindingMode, 2> kBindingModes{{"late", "pinned"}};
constexpr Words<SwapScheduler, 2> kSchedulers{{"torpor", "random"}};
constexpr Words<EvictionRule, 2> kEvictionRules{{"torpor", "lru"}};
constexpr Words<TransportKind, 2> kTransports{{"tcp", "ucx"}};
constexpr Words<ScalingPolicy, 5> kScalingPolicies{
    {"ongoing_requests", "arrival_rate", "queue_latency", "requests_per_minute", "model_level"}};
constexpr Words<PlacementPolicy, 2> kPlacementPolicies{{"locality", "random"}};
constexpr Words<BodyScalingMode, 2> kBodyScaling{{"free", "model_level"}};

static_assert(static_cast<int>(BindingMode::pinned) == 1 && static_cast<int>(SwapScheduler::random) == 1 &&
              static_cast<int>(EvictionRule::lru) == 1 && static_cast<int>(TransportKind::ucx) == 1 &&
              static_cast<int>(ScalingPolicy::model_level) == 4 && static_cast<int>(PlacementPolicy::random) == 1);

}  // namespace

std::string_view to_string(BindingMode mode) { return kBindingModes.of(mode); }
std::string_view to_string(SwapScheduler scheduler) { return kSchedulers.of(scheduler); }
std::string_view to_string(EvictionRule rule) { return kEvictionRules.of(rule); }
std::string_view to_string(TransportKind kind) { return kTransports.of(kind); }
std::string_view to_string(ScalingPolicy policy) { return kScalingPolicies.of(policy); }
std::string_view to_string(PlacementPolicy policy) { return kPlacementPolicies.of(policy); }
std::string_view to_string(BodyScalingMode mode) { return kBodyScaling.of(mode); }

Result<BindingMode> parse_binding_mode(std::string_view word) { return kBindingModes.parse(word); }
Result<SwapScheduler> parse_swap_scheduler(std::string_view word) { return kSchedulers.parse(word); }
Result<EvictionRule> parse_eviction_rule(std::string_view word) { return kEvictionRules.parse(word); }
Result<TransportKind> parse_transport_kind(std::string_view word) { return kTransports.parse(word); }
Result<ScalingPolicy> parse_scaling_policy(std::string_view word) { return kScalingPolicies.parse(word); }
Result<PlacementPolicy> parse_placement_policy(std::string_view word) { return kPlacementPolicies.parse(word); }
Result<BodyScalingMode> parse_body_scaling(std::string_view word) { return kBodyScaling.parse(word); }

}  // namespace ember
