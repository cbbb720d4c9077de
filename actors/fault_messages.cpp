#include "actors/fault_messages.hpp"

#include <charconv>

namespace ember {

namespace {

constexpr FaultKind kKinds[] = {FaultKind::kill,         FaultKind::drop,           FaultKind::delay,
                                FaultKind::duplicate,    FaultKind::heal,           FaultKind::fail_alloc,
                                FaultKind::fault_kernel, FaultKind::corrupt_chunk,  FaultKind::throttle,
                                FaultKind::stall,        FaultKind::stop_heartbeats};

std::string_view word_of(FaultTarget target) {
  switch (target) {
    case FaultTarget::router:
      return "router";
    case FaultTarget::cache:
      return "cache";
    case FaultTarget::executor:
      return "executor";
    case FaultTarget::hop:
      return "hop";
    case FaultTarget::data:
      return "data";
    case FaultTarget::hops:
      return "hops";
  }
  return "unknown";
}

}  // namespace

std::string_view to_string(FaultKind kind) {
  switch (kind) {
    case FaultKind::kill:
      return "kill";
    case FaultKind::drop:
      return "drop";
    case FaultKind::delay:
      return "delay";
    case FaultKind::duplicate:
      return "duplicate";
    case FaultKind::heal:
      return "heal";
    case FaultKind::fail_alloc:
      return "fail-alloc";
    case FaultKind::fault_kernel:
      return "fault-kernel";
    case FaultKind::corrupt_chunk:
      return "corrupt-chunk";
    case FaultKind::throttle:
      return "throttle";
    case FaultKind::stall:
      return "stall";
    case FaultKind::stop_heartbeats:
      return "stop-heartbeats";
  }
  return "unknown";
}

Result<FaultKind> parse_fault_kind(std::string_view word) {
  std::string valid;
  for (FaultKind kind : kKinds) {
    if (word == to_string(kind)) return kind;
    valid += (valid.empty() ? "" : ", ") + std::string(to_string(kind));
  }
  if (word.empty()) return invalid_argument("no fault kind (" + valid + ")");
  return invalid_argument("no fault kind '" + std::string(word) + "' (" + valid + ")");
}

std::string target_name(const fault_command& f) {
  if (f.target == FaultTarget::executor) return "executor:" + std::to_string(f.executor);
  return std::string(word_of(f.target));
}

Status parse_fault_target(fault_command& f, std::string_view word) {
  for (FaultTarget target :
       {FaultTarget::router, FaultTarget::cache, FaultTarget::hop, FaultTarget::data, FaultTarget::hops}) {
    if (word == word_of(target)) {
      f.target = target;
      return {};
    }
  }
  constexpr std::string_view prefix = "executor:";
  if (word.substr(0, prefix.size()) == prefix) {
    const std::string_view n = word.substr(prefix.size());
    uint32_t index = 0;
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), index);
    if (!n.empty() && ec == std::errc() && end == n.data() + n.size()) {
      f.target = FaultTarget::executor;
      f.executor = index;
      return {};
    }
  }
  return invalid_argument("a fault targets router, cache, executor:N, hop, data or hops, not '" + std::string(word) +
                          "'");
}

}  // namespace ember
