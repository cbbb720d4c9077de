// TCP plumbing shared by the data plane's server and client: an owned socket, connect with a
// deadline, reads that give up on a silent peer, and gathered writes. Addresses are HostPorts,
// resolved by transport/address.hpp (the one resolve(), shared with UCX).
//
// Owns one file descriptor per Socket (closed on destruction). Callers: BlobServer and fetch_blob
// only; one thread uses a Socket at a time, except that another thread may shutdown() it to wake a
// blocked call (that is how a server stops promptly). Nothing here throws or raises SIGPIPE
// (MSG_NOSIGNAL on every send); every wait is bounded by a timeout given by the caller.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.hpp"
#include "transport/address.hpp"

namespace ember::transport {

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

 private:
  int fd_ = -1;
};

/// TCP_NODELAY (a header must not wait behind Nagle for the next payload) and, when
/// `buffer_bytes` > 0, SO_SNDBUF/SO_RCVBUF of that size. The kernel caps the buffers at
/// net.core.{w,r}mem_max (4 MiB on the measured VM); setting them turns off autotuning.
void tune_socket(int fd, int buffer_bytes);

/// Connects to the first address of `to` that accepts within `timeout` (the whole budget, across
/// addresses). io_error naming host:port: refused, unreachable, timed out, or not resolvable.
Result<Socket> connect_tcp(const HostPort& to, std::chrono::milliseconds timeout, int buffer_bytes);

/// A non-blocking listening socket bound to host:port (port 0 = ephemeral).
Result<Socket> listen_tcp(const HostPort& at, int backlog);

/// The local port a socket is bound to (0 on failure).
uint16_t local_port(int fd);

/// How a bounded read ended when it did not get every byte.
enum class RecvEnd : uint8_t { done, closed, timed_out, failed };

/// Reads exactly `bytes` into `dst`, waiting at most `idle` for each piece of progress (a peer that
/// keeps sending slowly is fine; one that goes silent is cut off) and giving up at `deadline` in
/// any case (`timed_out` both). `got` says how many bytes arrived. On `failed`, `error_text` holds
/// strerror.
RecvEnd recv_exact(int fd, void* dst, size_t bytes, std::chrono::milliseconds idle, size_t& got,
                   std::string& error_text,
                   std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

/// Writes every byte of `iov` (modified in place as it goes) with sendmsg; the socket's SO_SNDTIMEO
/// bounds each wait. io_error "peer stopped reading" on the timeout, or strerror.
Status send_all(int fd, iovec* iov, int iov_count);

/// Sets SO_SNDTIMEO so a blocked send gives up after `timeout`.
void set_send_timeout(int fd, std::chrono::milliseconds timeout);

}  // namespace ember::transport
