#include "actors/actor_system.hpp"

#include <spdlog/spdlog.h>

#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/publish.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/timespan.hpp>
#include <set>

#include "actors/errors.hpp"
#include "actors/type_ids.hpp"

namespace ember {

void configure_actor_system(caf::actor_system_config& cfg, const ActorSystemOptions& options) {
  cfg.add_message_types<caf::id_block::ember_actors>();
  cfg.add_error_category(caf::atom("ember"), [](uint8_t code, caf::atom_value, const caf::message& context) {
    std::string text(to_string(static_cast<ErrorCode>(code)));
    if (context.match_elements<std::string>()) text += ": " + context.get_as<std::string>(0);
    return text;
  });
  // Work sharing beat work stealing for request/response latency on 2 cores
  // (../shared/dependencies.md §3: about 2x more round trips per second).
  cfg.set("scheduler.policy", caf::atom("sharing"));
  if (options.scheduler_threads) cfg.set("scheduler.max-threads", options.scheduler_threads);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  if (options.network) {
    cfg.load<caf::io::middleman>();
    if (options.heartbeat_us) {
      cfg.set("middleman.heartbeat-interval", caf::timespan{std::chrono::microseconds(options.heartbeat_us)});
      cfg.set("middleman.connection-timeout", caf::timespan{std::chrono::microseconds(options.connection_timeout_us)});
    }
    if (options.tls) {
      // All four set, and checked (security/control_tls.hpp): CAF falls back to anonymous TLS,
      // which authenticates nobody, when certificate, key, passphrase and CA are all empty.
      cfg.load<caf::openssl::manager>();
      cfg.openssl_certificate = options.tls->certificate;
      cfg.openssl_key = options.tls->key;
      cfg.openssl_passphrase = options.tls->passphrase;
      cfg.openssl_cafile = options.tls->ca;
    }
  }
}

Result<uint16_t> publish_remote(caf::actor_system& sys, const caf::actor& actor, const HostPort& at) {
  auto port = sys.has_openssl_manager() ? caf::openssl::publish(actor, at.port, at.host.c_str(), true)
                                        : sys.middleman().publish(actor, at.port, at.host.c_str(), true);
  if (!port) return unavailable("cannot listen on " + at.to_string() + ": " + caf::to_string(port.error()));
  return *port;
}

Result<caf::actor> connect_remote(caf::actor_system& sys, const std::string& host, uint16_t port,
                                  std::chrono::milliseconds timeout) {
  const std::string at = host + ":" + std::to_string(port);
  Result<caf::actor> out = unavailable("no answer from " + at);
  caf::scoped_actor self{sys};
  const auto& broker =
      sys.has_openssl_manager() ? sys.openssl_manager().actor_handle() : sys.middleman().actor_handle();
  self->request(broker, timeout, caf::connect_atom::value, host, port)
      .receive(
          [&](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
            if (ptr) {
              out = caf::actor_cast<caf::actor>(std::move(ptr));
            } else {
              out = unavailable("no actor is published at " + at);
            }
          },
          [&](caf::error& e) { out = unavailable("cannot connect to " + at + ": " + caf::to_string(e)); });
  return out;
}

Status set_log_level(const std::string& level) {
  static const char* const kLevels[] = {"trace", "debug", "info", "warn", "error", "off"};
  for (const char* name : kLevels) {
    if (level != name) continue;
    spdlog::set_level(spdlog::level::from_str(level));
    spdlog::info("log level set to {}", level);
    return Status::OK();
  }
  return invalid_argument("no log level '" + level + "' (trace, debug, info, warn, error, off)");
}

}  // namespace ember
