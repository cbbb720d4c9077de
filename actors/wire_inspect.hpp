// The wire form of the lower rooms' types that the actors' messages carry: CAF 0.17 `inspect`
// overloads for model_key (actors/model_key.hpp, which stays free of CAF for the engine room),
// base's HostPort and transport's Ticket. No conversation of its own: every *_messages.hpp that
// carries one of these includes this file.
//
// Pure data; anyone may use them on any thread.
#pragma once

#include <caf/meta/type_name.hpp>

#include "actors/model_key.hpp"
#include "base/host_port.hpp"
#include "transport/ticket.hpp"

namespace ember::transport {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Ticket& x) {
  return f(caf::meta::type_name("ticket"), x.receiver, x.not_after, x.mac);
}

}  // namespace ember::transport

namespace ember {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, HostPort& x) {
  return f(caf::meta::type_name("host_port"), x.host, x.port);
}

/// model_key (actors/model_key.hpp) in messages.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, model_key& x) {
  return f(caf::meta::type_name("model_key"), x.name, x.version);
}

}  // namespace ember
