#include "transport/tls_stream.hpp"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "security/certs.hpp"
#include "security/openssl_errors.hpp"
#include "security/private_key.hpp"

namespace ember::transport {

namespace {

using Clock = std::chrono::steady_clock;

/// Waits for `events` on `fd` at most `wait` (and not past `deadline`): true when ready.
bool wait_for(int fd, short events, std::chrono::milliseconds wait, Clock::time_point deadline) {
  if (deadline != Clock::time_point::max()) {
    const auto now = Clock::now();
    if (now >= deadline) return false;
    wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(deadline - now));
  }
  pollfd pf{fd, events, 0};
  for (;;) {
    const int rc = ::poll(&pf, 1, static_cast<int>(std::max<int64_t>(wait.count(), 1)));
    if (rc < 0 && errno == EINTR) continue;
    return rc > 0;
  }
}

}  // namespace

Result<std::shared_ptr<const DataTls>> DataTls::make(const std::string& certificate, const std::string& key,
                                                     const std::string& passphrase, const std::string& ca) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_method());
  if (!ctx) return internal_error("the data plane's TLS context: " + security::openssl_errors());
  std::shared_ptr<const DataTls> out(new DataTls(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (SSL_CTX_use_certificate_chain_file(ctx, certificate.c_str()) != 1 ||
      SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) != 1) {
    return invalid_argument("the data plane's TLS (" + certificate + ", " + ca + "): " + security::openssl_errors());
  }
  EMBER_ASSIGN_OR_RETURN(auto pkey, security::load_private_key(key, passphrase, "security.tls_key",
                                                               passphrase.empty() ? "" : "its passphrase"));
  EMBER_RETURN_IF_ERROR(
      security::use_private_key(ctx, pkey.get(), "security.tls_key", key, "security.tls_certificate", certificate));
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return out;
}

DataTls::~DataTls() { SSL_CTX_free(ctx_); }

Stream::~Stream() {
  if (ssl_) SSL_free(ssl_);  // no close_notify: the protocol's end frame says where the data ends
}

std::string Stream::peer_name() const {
  if (!ssl_) return {};
  X509* cert = SSL_get1_peer_certificate(ssl_);
  if (!cert) return {};
  std::string name = security::common_name(cert);
  X509_free(cert);
  return name;
}

Result<Stream> Stream::handshake(int fd, const DataTls& tls, bool server, Clock::time_point deadline) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  ERR_clear_error();
  SSL* ssl = SSL_new(tls.ctx());
  if (!ssl) return internal_error("SSL_new: " + security::openssl_errors());
  Stream s(fd, ssl);
  SSL_set_fd(ssl, fd);
  for (;;) {
    ERR_clear_error();
    const int rc = server ? SSL_accept(ssl) : SSL_connect(ssl);
    if (rc == 1) return s;
    const int err = SSL_get_error(ssl, rc);
    const short events = err == SSL_ERROR_WANT_READ ? POLLIN : err == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
    if (events == 0) {
      return io_error("TLS handshake failed: " +
                      (ERR_peek_error() == 0
                           ? std::string("the peer closed the connection (plain TCP, or it refused this "
                                         "certificate)")
                           : security::openssl_errors()));
    }
    if (!wait_for(fd, events, std::chrono::hours(1), deadline)) return io_error("TLS handshake timed out");
  }
}

RecvEnd Stream::read_exact(void* dst, size_t bytes, std::chrono::milliseconds idle, size_t& got,
                           std::string& error_text, Clock::time_point deadline) {
  if (!ssl_) return recv_exact(fd_, dst, bytes, idle, got, error_text, deadline);
  auto* p = static_cast<uint8_t*>(dst);
  got = 0;
  while (got < bytes) {
    ERR_clear_error();
    const int chunk = static_cast<int>(std::min<size_t>(bytes - got, 1u << 30));
    const int n = SSL_read(ssl_, p + got, chunk);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    const int err = SSL_get_error(ssl_, n);
    if (err == SSL_ERROR_ZERO_RETURN) return RecvEnd::closed;
    if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
      if (errno != 0 && errno != ECONNRESET) error_text = std::strerror(errno);
      return RecvEnd::closed;
    }
    const short events = err == SSL_ERROR_WANT_READ ? POLLIN : err == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
    if (events == 0) {
      error_text = "TLS: " + security::openssl_errors();
      return RecvEnd::failed;
    }
    if (!wait_for(fd_, events, idle, deadline)) return RecvEnd::timed_out;
  }
  return RecvEnd::done;
}

Status Stream::write_all(iovec* iov, int iov_count, std::chrono::milliseconds timeout) {
  if (!ssl_) return send_all(fd_, iov, iov_count);
  for (int i = 0; i < iov_count; ++i) {
    const auto* p = static_cast<const uint8_t*>(iov[i].iov_base);
    size_t left = iov[i].iov_len;
    while (left > 0) {
      ERR_clear_error();
      const int chunk = static_cast<int>(std::min<size_t>(left, 1u << 20));
      const int n = SSL_write(ssl_, p, chunk);
      if (n > 0) {
        p += n;
        left -= static_cast<size_t>(n);
        continue;
      }
      const int err = SSL_get_error(ssl_, n);
      const short events = err == SSL_ERROR_WANT_READ ? POLLIN : err == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
      if (events == 0) return io_error("TLS send failed: " + security::openssl_errors());
      if (!wait_for(fd_, events, timeout, Clock::time_point::max())) {
        return io_error("peer stopped reading (send timed out)");
      }
    }
  }
  return Status::OK();
}

}  // namespace ember::transport
