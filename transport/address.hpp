// Where the data plane listens and connects: a host:port (ember::HostPort, base/host_port.hpp, the
// one address type of the project: config, placement, node reports and both transports use it) and
// the one resolve() that turns it into socket addresses, for TCP (tcp_socket.cpp) and UCX
// (ucx_worker.cpp, ucx_fetch.cpp, ucx_blob_server.cpp) alike.
//
// resolve() calls getaddrinfo, so it may block for as long as name resolution takes (a numeric
// address resolves at once); call it from the thread that connects or listens, never from an actor.
// Anyone, any thread; never throws.
#pragma once

#include <sys/socket.h>

#include <vector>

#include "base/host_port.hpp"
#include "base/status.hpp"

namespace ember::transport {

/// One resolved socket address (IPv4 or IPv6), held by value.
struct SockAddr {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  int family() const { return storage.ss_family; }
};

/// The stream (TCP) addresses of `where`, in getaddrinfo's order: the host may be a name, an IPv4
/// address or an IPv6 literal (without brackets). `passive`: for a listener (an empty host is then
/// every interface). io_error "cannot resolve host:port: <reason>" when there is none.
Result<std::vector<SockAddr>> resolve(const HostPort& where, bool passive);

}  // namespace ember::transport
