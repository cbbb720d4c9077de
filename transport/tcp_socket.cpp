#include "transport/tcp_socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace ember::transport {

namespace {

using Clock = std::chrono::steady_clock;

int poll_ms(std::chrono::milliseconds ms) {
  return static_cast<int>(std::clamp<int64_t>(ms.count(), 0, 1 << 30));
}

}  // namespace

// ---------------------------------------------------------------- Socket

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

// ---------------------------------------------------------------- options

void tune_socket(int fd, int buffer_bytes) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (buffer_bytes > 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof(buffer_bytes));
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof(buffer_bytes));
  }
}

void set_send_timeout(int fd, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

uint16_t local_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return 0;
}

// ---------------------------------------------------------------- connect and listen

Result<Socket> connect_tcp(const HostPort& to, std::chrono::milliseconds timeout, int buffer_bytes) {
  const std::string where = to.to_string();
  EMBER_ASSIGN_OR_RETURN(std::vector<SockAddr> addrs, resolve(to, /*passive=*/false));
  const auto deadline = Clock::now() + timeout;
  std::string last = "no address";
  for (const SockAddr& a : addrs) {
    Socket s(::socket(a.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.valid()) {
      last = std::strerror(errno);
      continue;
    }
    // Buffers before connect: the window scale is agreed in the handshake.
    tune_socket(s.fd(), buffer_bytes);
    int rc = ::connect(s.fd(), a.get(), a.length);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{s.fd(), POLLOUT, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      do {
        rc = ::poll(&p, 1, poll_ms(left));
      } while (rc < 0 && errno == EINTR);
      if (rc == 0) {
        return io_error("cannot connect to " + where + ": timed out after " + std::to_string(timeout.count()) + " ms");
      }
      int err = 0;
      socklen_t len = sizeof(err);
      if (rc < 0) err = errno;
      else ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
      errno = err;
      rc = err == 0 ? 0 : -1;
    }
    if (rc != 0) {
      last = std::strerror(errno);
      if (Clock::now() >= deadline) break;
      continue;
    }
    // Back to blocking: sends then block under SO_SNDTIMEO and reads wait in poll().
    ::fcntl(s.fd(), F_SETFL, ::fcntl(s.fd(), F_GETFL) & ~O_NONBLOCK);
    return s;
  }
  return io_error("cannot connect to " + where + ": " + last);
}

Result<Socket> listen_tcp(const HostPort& at, int backlog) {
  const std::string where = at.to_string();
  EMBER_ASSIGN_OR_RETURN(std::vector<SockAddr> addrs, resolve(at, /*passive=*/true));
  std::string last = "no address";
  for (const SockAddr& a : addrs) {
    Socket s(::socket(a.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.valid()) {
      last = std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(s.fd(), a.get(), a.length) != 0 || ::listen(s.fd(), backlog) != 0) {
      last = std::strerror(errno);
      continue;
    }
    return s;
  }
  return io_error("cannot listen on " + where + ": " + last);
}

// ---------------------------------------------------------------- bounded I/O

RecvEnd recv_exact(int fd, void* dst, size_t bytes, std::chrono::milliseconds idle, size_t& got,
                   std::string& error_text, Clock::time_point deadline) {
  auto* p = static_cast<uint8_t*>(dst);
  got = 0;
  while (got < bytes) {
    // Try first: on a busy stream the data is usually there, and the poll would be a wasted call.
    const ssize_t n = ::recv(fd, p + got, bytes - got, MSG_DONTWAIT);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return RecvEnd::closed;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      error_text = std::strerror(errno);
      return errno == ECONNRESET ? RecvEnd::closed : RecvEnd::failed;
    }
    auto wait = idle;
    if (deadline != Clock::time_point::max()) {
      const auto now = Clock::now();
      if (now >= deadline) return RecvEnd::timed_out;
      wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(deadline - now));
    }
    pollfd pf{fd, POLLIN, 0};
    const int rc = ::poll(&pf, 1, poll_ms(wait));
    if (rc == 0) return RecvEnd::timed_out;
    if (rc < 0 && errno != EINTR) {
      error_text = std::strerror(errno);
      return RecvEnd::failed;
    }
    // Readable, hung up or in error: the next recv says which.
  }
  return RecvEnd::done;
}

Status send_all(int fd, iovec* iov, int iov_count) {
  while (iov_count > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(iov_count);
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return io_error("peer stopped reading (send timed out)");
      return io_error(std::string("send failed: ") + std::strerror(errno));
    }
    auto left = static_cast<size_t>(n);
    while (iov_count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --iov_count;
    }
    if (iov_count > 0) {
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return Status::OK();
}

}  // namespace ember::transport
