#include "base/service_notify.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace ember {

Status notify_service_manager(const std::string& state) {
  const char* where = std::getenv("NOTIFY_SOCKET");
  if (where == nullptr || where[0] == '\0') return Status::OK();
  const std::string path = where;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path) || (path[0] != '/' && path[0] != '@')) {
    return io_error("NOTIFY_SOCKET '" + path + "' is neither an absolute path nor an abstract socket (@name)");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (path[0] == '@') addr.sun_path[0] = '\0';  // the abstract namespace
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return io_error(std::string("NOTIFY_SOCKET: socket: ") + std::strerror(errno));
  const ssize_t sent = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr), len);
  const int err = errno;
  ::close(fd);
  if (sent != static_cast<ssize_t>(state.size())) {
    return io_error("NOTIFY_SOCKET '" + path + "': " + (sent < 0 ? std::strerror(err) : "short write"));
  }
  return Status::OK();
}

}  // namespace ember
