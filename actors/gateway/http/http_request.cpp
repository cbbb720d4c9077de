// Request bodies, path keys and library error words (see http_request.hpp).
#include "actors/gateway/http/http_request.hpp"

#include <charconv>
#include <optional>

#include "base/units.hpp"

namespace ember {

namespace {

std::string limit_text(uint64_t max_bytes) {
  return "the request body exceeds the configured limit (gateway.max_body: " + format_bytes(max_bytes) + ")";
}

/// The Content-Length the request declares, or nullopt when absent or not a number.
std::optional<uint64_t> content_length(const httplib::Request& req) {
  if (!req.has_header("Content-Length")) return std::nullopt;
  const std::string text = req.get_header_value("Content-Length");
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

}  // namespace

RequestBody read_body(const httplib::Request& req, const httplib::ContentReader& reader, uint64_t max_bytes) {
  RequestBody out;
  // RFC 9112 §6.3: without either header the body is empty; reading would wait for the peer to close.
  if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) return out;
  if (const auto declared = content_length(req); declared && *declared > max_bytes) {
    // httplib skips (reads and drops) a declared body over its limit, which the front end sets to
    // max_bytes too, so the connection stays usable.
    (void)reader([](const char*, size_t) { return true; });
    out.error_status = 413;
    out.error = limit_text(max_bytes);
    return out;
  }
  bool over = false;
  bool ok = false;
  if (req.is_multipart_form_data()) {
    uint64_t drained = 0;  // read and dropped, so that the connection stays usable
    ok = reader([](const httplib::MultipartFormData&) { return true; },
                [&](const char*, size_t n) {
                  drained += n;
                  over = drained > max_bytes;
                  return !over;
                });
    if (ok) {
      out.error_status = 415;
      out.error = "multipart/form-data bodies are not accepted; send the JSON document itself as the body";
      return out;
    }
  } else {
    ok = reader([&](const char* data, size_t n) {
      if (out.text.size() + n > max_bytes) {
        over = true;
        return false;
      }
      out.text.append(data, n);
      return true;
    });
  }
  if (ok) return out;
  out.text.clear();
  out.error_status = over ? 413 : 400;
  out.error = over ? limit_text(max_bytes)
                   : "the request body could not be read: it ended before its Content-Length or its chunked "
                     "framing was complete, or that framing is malformed";
  return out;
}

model_key model_key_from_path(const httplib::Request& req) {
  model_key key;
  key.name = req.matches[1];
  if (req.matches.size() > 2 && req.matches[2].matched) {
    const std::string digits = req.matches[2].str();
    uint32_t v = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    key.version = ec == std::errc() && end == digits.data() + digits.size() ? v : UINT32_MAX;
  }
  return key;
}

std::string describe_library_error(int status, const std::string& method, const std::string& path, uint64_t max_bytes) {
  switch (status) {
    case 400:
      return "the request is not valid HTTP/1.1: its request line, headers or body framing could not be read";
    case 404:
      return "no such endpoint: " + method + " " + path;
    case 413:
      return limit_text(max_bytes);
    case 414:
      return "the request line is longer than 8192 bytes";
    case 416:
      return "the Range header is malformed or cannot be satisfied";
    case 500:
      return "internal error while serving " + method + " " + path;
    default:
      return "the request for " + method + " " + path + " failed with HTTP " + std::to_string(status) +
             " before reaching a handler";
  }
}

}  // namespace ember
