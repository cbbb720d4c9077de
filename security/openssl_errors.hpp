// OpenSSL's error queue as one line, for error messages (certificates here, TLS contexts in the gateway).
#pragma once

#include <string>

namespace ember::security {

/// Drains OpenSSL's error queue of this thread into "first; second; ..." ("no detail from OpenSSL"
/// when it is empty).
std::string openssl_errors();

}  // namespace ember::security
