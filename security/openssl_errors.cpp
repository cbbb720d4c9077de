#include "security/openssl_errors.hpp"

#include <openssl/err.h>

namespace ember::security {

std::string openssl_errors() {
  std::string out;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no detail from OpenSSL" : out;
}

}  // namespace ember::security
