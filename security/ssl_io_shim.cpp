// Clears OpenSSL's error queue before each TLS I/O call of the process: CAF 0.17.6's OpenSSL
// sessions do not.
//
// SSL_get_error() looks at the calling thread's error queue first: an entry left there makes it
// report SSL_ERROR_SSL for a call that merely wants more data ("The current thread's error queue
// must be empty before the TLS/SSL I/O operation is attempted, or SSL_get_error() will not work
// reliably", SSL_get_error(3)). CAF's session (libcaf_openssl, session.cpp) empties the queue only
// inside a log statement, which Debian's build compiles out, and every session of a process runs
// on the middleman's one thread. So one failed handshake (a peer without a certificate, one of
// another CA, a port scanner) left entries that made the next SSL_read of an authenticated peer
// look like a fatal error, and CAF closed that peer's connection: measured before this file, 5
// garbage TCP connections to a manager's TLS port dropped its node 4 times.
//
// The executable defines SSL_read, SSL_write, SSL_accept and SSL_connect, so the dynamic linker
// binds libcaf_openssl's calls (and every other library's) here first; each clears the queue and
// calls OpenSSL's own. That is what a correct caller does before each call, so the other users of
// OpenSSL (cpp-httplib, gRPC) are unaffected. Linked into the `ember` executable only
// (security/CMakeLists.txt: an object library, so the linker cannot drop it).
#include <dlfcn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstdio>
#include <cstdlib>

namespace {

template <class Fn>
Fn openssl_own(const char* name) {
  // The version libssl 3 exports them under; any other would be a libssl this file was not written for.
  void* f = dlvsym(RTLD_NEXT, name, "OPENSSL_3.0.0");
  if (!f) f = dlsym(RTLD_NEXT, name);
  if (!f) {
    std::fprintf(stderr, "ember: libssl has no %s\n", name);
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

}  // namespace

extern "C" {

int SSL_read(SSL* ssl, void* buf, int num) {
  static const auto own = openssl_own<int (*)(SSL*, void*, int)>("SSL_read");
  ERR_clear_error();
  return own(ssl, buf, num);
}

int SSL_write(SSL* ssl, const void* buf, int num) {
  static const auto own = openssl_own<int (*)(SSL*, const void*, int)>("SSL_write");
  ERR_clear_error();
  return own(ssl, buf, num);
}

int SSL_accept(SSL* ssl) {
  static const auto own = openssl_own<int (*)(SSL*)>("SSL_accept");
  ERR_clear_error();
  return own(ssl);
}

int SSL_connect(SSL* ssl) {
  static const auto own = openssl_own<int (*)(SSL*)>("SSL_connect");
  ERR_clear_error();
  return own(ssl);
}

}  // extern "C"
