// How every Ember process configures CAF: message types and the error category registered, the
// scheduler tuned for low latency on few cores, and the middleman's heartbeat so that a node that
// hangs (not only one that dies) is detected within a bounded time; with security.tls_*, CAF's
// OpenSSL module, so that every connection between processes is mutual TLS.
#pragma once

#include <caf/actor.hpp>
#include <caf/actor_system_config.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "base/host_port.hpp"
#include "base/status.hpp"
#include "security/control_tls.hpp"

namespace ember {

struct ActorSystemOptions {
  /// Worker threads of CAF's scheduler (0: CAF's default, one per core).
  uint32_t scheduler_threads = 0;
  /// Middleman heartbeat period and the silence after which a peer process counts as lost,
  /// microseconds (0: CAF's defaults, which never detect a hung peer).
  uint64_t heartbeat_us = 250'000;
  uint64_t connection_timeout_us = 2'000'000;
  /// Load the middleman (remote actors). Tests of one process may leave it out.
  bool network = true;
  /// Mutual TLS on every control-plane connection (security/control_tls.hpp, checked already):
  /// CAF's OpenSSL module is loaded, and publish_remote and connect_remote use it. None: plain.
  std::optional<ControlTls> tls;
};

/// Fills `cfg` for an Ember process.
void configure_actor_system(caf::actor_system_config& cfg, const ActorSystemOptions& options);

/// Publishes `actor` for other processes at host:port (port 0: an ephemeral one), over TLS when the
/// system was configured with it; the port bound. Typed handles are published as caf::actor
/// (actor_cast): the connecting side (connect_remote) casts to the interface it expects anyway.
Result<uint16_t> publish_remote(caf::actor_system& sys, const caf::actor& actor, const HostPort& at);

/// The actor published at host:port (CAF's middleman `connect`), within `timeout`: CAF's own
/// remote_actor() has no timeout, and it can wait forever while the middleman still tears down an
/// old connection to the same peer (a manager that was killed and restarted). unavailable saying
/// why on failure or timeout. The caller casts the handle to the interface it expects.
Result<caf::actor> connect_remote(caf::actor_system& sys, const std::string& host, uint16_t port,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(5));

/// Sets this process's log level: trace, debug, info, warn, error or off (the console's log-level,
/// carried to every process). invalid_argument naming the levels for any other word.
Status set_log_level(const std::string& level);

}  // namespace ember
