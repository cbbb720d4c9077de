// What the HTTP front end reads from a cpp-httplib request (its body, the model named in its path),
// and the words for the errors cpp-httplib answers by itself.
//
// Request bodies. RFC 9112 §6.3 (rule 7): a request with neither Content-Length nor
// Transfer-Encoding has a body of length zero. cpp-httplib 0.11 instead reads such a POST "until
// the connection closes" (Server::routing -> read_content -> detail::read_content_without_length),
// so `curl -X POST URL`, which sends neither header and keeps the connection open, waited for the
// read timeout (5 s) and got 400 with no body before any handler ran. The front end therefore
// registers every POST route as a content-reader handler (httplib runs those before it reads
// anything) and reads the body with read_body(): nothing when the request frames none, the framed
// bytes (Content-Length, or chunked) otherwise, never more than max_body bytes.
//
// Who may call: the HTTP threads, inside a handler. Never throws; blocks only as long as
// cpp-httplib's reader does (its read timeout).
#pragma once

#include <httplib.h>

#include <cstdint>
#include <string>

#include "actors/model_key.hpp"

namespace ember {

struct RequestBody {
  std::string text;
  /// 0: read (text may be empty). Otherwise the status to answer with `error`: 400 (the framing
  /// broke or the connection ended early), 413 (over max_body), 415 (multipart form data).
  int error_status = 0;
  std::string error;
};

/// The request's body by RFC 9112's framing (see the header).
RequestBody read_body(const httplib::Request& req, const httplib::ContentReader& reader, uint64_t max_bytes);

/// The model a route's path names: matches[1] the name, matches[2] (optional, digits) the version;
/// 0 when absent ("the highest"); UINT32_MAX, which names no version, when it does not fit.
model_key model_key_from_path(const httplib::Request& req);

/// The message for an error status cpp-httplib produced without a handler (no route, a malformed
/// request, a body over the limit...), so that no error answer is a bare status line. `max_bytes`
/// is the body limit a 413 names.
std::string describe_library_error(int status, const std::string& method, const std::string& path, uint64_t max_bytes);

}  // namespace ember
