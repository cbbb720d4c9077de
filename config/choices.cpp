#include "config/choices.hpp"

#include <string>

namespace ember {

namespace {

// The two words of a choice, in enum order.
template <class E>
struct Words {
  std::string_view first, second;
  std::string_view of(E e) const { return static_cast<int>(e) == 0 ? first : second; }
  Result<E> parse(std::string_view word) const {
    if (word == first) return static_cast<E>(0);
    if (word == second) return static_cast<E>(1);
    return invalid_argument("'" + std::string(word) + "' is neither " + std::string(first) + " nor " +
                            std::string(second));
  }
};

constexpr Words<BindingMode> kBindingModes{"late", "pinned"};
constexpr Words<SwapScheduler> kSchedulers{"torpor", "random"};
constexpr Words<EvictionRule> kEvictionRules{"torpor", "lru"};
constexpr Words<TransportKind> kTransports{"tcp", "ucx"};

static_assert(static_cast<int>(BindingMode::pinned) == 1 && static_cast<int>(SwapScheduler::random) == 1 &&
              static_cast<int>(EvictionRule::lru) == 1 && static_cast<int>(TransportKind::ucx) == 1);

}  // namespace

std::string_view to_string(BindingMode mode) { return kBindingModes.of(mode); }
std::string_view to_string(SwapScheduler scheduler) { return kSchedulers.of(scheduler); }
std::string_view to_string(EvictionRule rule) { return kEvictionRules.of(rule); }
std::string_view to_string(TransportKind kind) { return kTransports.of(kind); }

Result<BindingMode> parse_binding_mode(std::string_view word) { return kBindingModes.parse(word); }
Result<SwapScheduler> parse_swap_scheduler(std::string_view word) { return kSchedulers.parse(word); }
Result<EvictionRule> parse_eviction_rule(std::string_view word) { return kEvictionRules.parse(word); }
Result<TransportKind> parse_transport_kind(std::string_view word) { return kTransports.parse(word); }

}  // namespace ember
