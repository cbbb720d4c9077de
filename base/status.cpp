#include "base/status.hpp"

namespace ember {

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::not_found: return "not_found";
    case ErrorCode::corrupt: return "corrupt";
    case ErrorCode::out_of_memory: return "out_of_memory";
    case ErrorCode::io_error: return "io_error";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::device_fault: return "device_fault";
    case ErrorCode::internal: return "internal";
    case ErrorCode::unavailable: return "unavailable";
    case ErrorCode::deadline_exceeded: return "deadline_exceeded";
    case ErrorCode::permission_denied:
      return "permission_denied";
    case ErrorCode::unauthenticated:
      return "unauthenticated";
    case ErrorCode::resource_exhausted:
      return "resource_exhausted";
  }
  return "unknown";
}

Error Error::with_context(std::string_view prefix) const {
  std::string m(prefix);
  m += ": ";
  m += message_;
  return Error(code_, std::move(m));
}

std::string Error::to_string() const {
  std::string s(ember::to_string(code_));
  s += ": ";
  s += message_;
  return s;
}

}  // namespace ember
