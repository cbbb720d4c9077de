// A TCP endpoint written "host:port" in config files and on command lines ("127.0.0.1:7070",
// "gpu-03.rack2:7071", "0.0.0.0:0"): the one address type of the project. The config, placement,
// node reports and the data plane (transport/address.hpp resolves it) all carry a HostPort.
//
// Pure: anyone, any thread. Never resolves names and never touches a socket: it checks the spelling
// only; whether the host resolves is found out when a process listens or connects. Never throws; a
// text that does not parse is an invalid_argument Error whose message quotes it.
//
// Accepted host spellings: an IPv4 address in dotted-quad form (four decimal parts 0..255, no
// leading zeros, since inet_aton would read "010" as octal), or a hostname (labels of letters,
// digits, '-' and '_', 1..63 characters each, not starting or ending with '-', at most 253 in all;
// '_' is outside RFC 1123 but container runtimes hand out such names). A name whose last label is
// all digits is read as an IPv4 address, as RFC 1123 §2.1 says. IPv6 literals are not accepted in
// text yet; a HostPort built in code may still hold one (host "::1"), and to_string() then writes it
// in brackets ("[::1]:80") as URLs and logs do. The port is decimal, 0..65535; what port 0 means (an
// ephemeral port) is up to the listener; a receiver connecting to port 0 is refused by the kernel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>
#include <string_view>

#include "base/status.hpp"

namespace ember {

struct HostPort {
  std::string host;
  uint16_t port = 0;

  /// "host:port", which parse_host_port reads back to an equal value; "[host]:port" when the host
  /// is an IPv6 literal (has a ':').
  std::string to_string() const;
  bool operator==(const HostPort&) const = default;
};

/// "127.0.0.1:7070" -> {"127.0.0.1", 7070}. Surrounding whitespace is ignored.
Result<HostPort> parse_host_port(std::string_view text);
/// "a:7070,b:7070" -> each, in order (at least one); invalid_argument naming the one that is not.
Result<std::vector<HostPort>> parse_host_port_list(std::string_view text);

}  // namespace ember
