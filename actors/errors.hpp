// Errors across actors and processes: ember::ErrorCode registered as a CAF error category, with
// the Error's message carried in the error's context, so a remote caller sees exactly what the
// callee said. CAF's own errors (timeouts, lost connections) map to unavailable /
// deadline_exceeded, which callers treat as retryable.
#pragma once

#include <caf/error.hpp>
#include <caf/sec.hpp>
#include <string>

#include "base/status.hpp"

CAF_ERROR_CODE_ENUM(ember::ErrorCode, "ember")

namespace ember {

caf::error to_caf(const Error& e);
Error from_caf(const caf::error& e);

/// HTTP status for an error, as the KServe v2 REST protocol uses them: 400 bad input, 404 unknown
/// model, 503 retryable (no capacity now, node lost), 504 deadline, 500 anything else.
int http_status(ErrorCode code);

/// True for errors a client may retry (possibly elsewhere).
bool retryable(ErrorCode code);

}  // namespace ember
