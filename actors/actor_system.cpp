#include "actors/actor_system.hpp"

#include <spdlog/spdlog.h>

#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/publish.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/timespan.hpp>
#include <set>
#include <thread>

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

namespace {

/// Whether `actor` has terminated: a proxy of a peer process whose connection closed. Monitoring a
/// terminated actor delivers its down message at once, so the answer needs no wait.
bool terminated(caf::scoped_actor& self, const caf::actor& actor) {
  self->monitor(actor);
  bool down = false;
  self->receive([&](caf::down_msg& msg) { down = msg.source == actor.address(); },
                caf::after(std::chrono::seconds(0)) >> [] {});
  if (!down) self->demonitor(actor);
  return down;
}

}  // namespace

Result<caf::actor> connect_remote(caf::actor_system& sys, const std::string& host, uint16_t port,
                                  std::chrono::milliseconds timeout) {
  const std::string at = host + ":" + std::to_string(port);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  caf::scoped_actor self{sys};
  const auto& broker =
      sys.has_openssl_manager() ? sys.openssl_manager().actor_handle() : sys.middleman().actor_handle();
  for (;;) {
    Result<caf::actor> out = unavailable("no answer from " + at);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return out;
    self->request(broker, left, caf::connect_atom::value, host, port)
        .receive(
            [&](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
              if (ptr) {
                out = caf::actor_cast<caf::actor>(std::move(ptr));
              } else {
                out = unavailable("no actor is published at " + at);
              }
            },
            [&](caf::error& e) { out = unavailable("cannot connect to " + at + ": " + caf::to_string(e)); });
    // The middleman keeps the actor it found at an endpoint until it hears of that actor's end, and
    // hears it just after the callers that monitor it (CAF 0.17.6, middleman_actor_impl's
    // cached_tcp_): asked at once when a peer went away (a restarted manager, a node rejoining it), it
    // may still hand out the old proxy, which drops every message without a word (a join then waits
    // out its timeout: integration.control_tls saw "joining ... failed: no answer in time"). Such a
    // handle is never returned: asked again until the middleman forgot it.
    if (!out.ok() || !terminated(self, *out)) return out;
    spdlog::debug("the middleman still knows the old actor at {}; asking again", at);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
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
