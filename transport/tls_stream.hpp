// TLS on the data plane (security.data_plane: tls): the bytes of a TCP fetch, request and frames,
// encrypted, and both ends authenticated by the cluster CA's certificates (the control plane's
// security.tls_* files). Without it, a Stream is the plain socket, through the same calls.
//
// DataTls is immutable after make() and shared by every connection of a process; a Stream belongs
// to one thread at a time (as a Socket does). Every wait is bounded: the handshake by a deadline,
// reads by the idle timeout and deadline, writes by the write timeout. Nothing throws.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <memory>
#include <string>

#include "base/status.hpp"
#include "transport/tcp_socket.hpp"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace ember::transport {

class DataTls {
 public:
  /// A context for both ends: this process's certificate and key (`passphrase` decrypts it), peers'
  /// certificates required and checked against `ca`. TLS 1.2 or later. The files were checked at
  /// start already (security/control_tls.hpp); an error here names them anyway.
  static Result<std::shared_ptr<const DataTls>> make(const std::string& certificate, const std::string& key,
                                                     const std::string& passphrase, const std::string& ca);
  ~DataTls();
  DataTls(const DataTls&) = delete;
  DataTls& operator=(const DataTls&) = delete;
  SSL_CTX* ctx() const { return ctx_; }

 private:
  explicit DataTls(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;
};

class Stream {
 public:
  /// The plain socket `fd` (not owned).
  explicit Stream(int fd) : fd_(fd) {}
  ~Stream();
  Stream(Stream&& other) noexcept : fd_(other.fd_), ssl_(other.ssl_) { other.ssl_ = nullptr; }
  Stream& operator=(Stream&&) = delete;
  Stream(const Stream&) = delete;

  /// TLS over `fd` (not owned; made non-blocking), as the server or the client, its handshake done
  /// by `deadline`. io_error naming the reason (a peer without a certificate the CA signed, a plain
  /// peer, a timeout).
  static Result<Stream> handshake(int fd, const DataTls& tls, bool server,
                                  std::chrono::steady_clock::time_point deadline);

  bool tls() const { return ssl_ != nullptr; }
  /// The common name of the certificate the peer presented in the handshake ("" on a plain stream
  /// or for a certificate without one): whom the cluster CA vouched for.
  std::string peer_name() const;
  /// recv_exact (tcp_socket.hpp), through TLS when on.
  RecvEnd read_exact(void* dst, size_t bytes, std::chrono::milliseconds idle, size_t& got, std::string& error_text,
                     std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());
  /// send_all (tcp_socket.hpp), through TLS when on: each wait at most `timeout`.
  Status write_all(iovec* iov, int iov_count, std::chrono::milliseconds timeout);

 private:
  Stream(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {}
  int fd_;
  SSL* ssl_ = nullptr;
};

}  // namespace ember::transport
