#include "transport/address.hpp"

#include <netdb.h>

#include <cstring>
#include <string>

namespace ember::transport {

Result<std::vector<SockAddr>> resolve(const HostPort& where, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* out = nullptr;
  const std::string service = std::to_string(where.port);
  const int rc = ::getaddrinfo(where.host.empty() ? nullptr : where.host.c_str(), service.c_str(), &hints, &out);
  if (rc != 0) return io_error("cannot resolve " + where.to_string() + ": " + ::gai_strerror(rc));
  std::vector<SockAddr> addrs;
  for (addrinfo* ai = out; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_addrlen > sizeof(sockaddr_storage)) continue;
    SockAddr a;
    std::memcpy(&a.storage, ai->ai_addr, ai->ai_addrlen);
    a.length = ai->ai_addrlen;
    addrs.push_back(a);
  }
  ::freeaddrinfo(out);
  if (addrs.empty()) return io_error("cannot resolve " + where.to_string() + ": no address");
  return addrs;
}

}  // namespace ember::transport
