#include "actors/errors.hpp"

#include <caf/message.hpp>

namespace ember {

caf::error to_caf(const Error& e) { return caf::make_error(e.code(), e.message()); }

Error from_caf(const caf::error& e) {
  if (e.category() == caf::atom("ember")) {
    std::string message;
    if (e.context().match_elements<std::string>()) message = e.context().get_as<std::string>(0);
    return Error(static_cast<ErrorCode>(e.code()), std::move(message));
  }
  if (e.category() == caf::atom("system")) {
    switch (static_cast<caf::sec>(e.code())) {
      case caf::sec::request_timeout:
        return deadline_exceeded("no answer in time");
      case caf::sec::request_receiver_down:
      case caf::sec::remote_linking_failed:
      case caf::sec::cannot_connect_to_node:
      case caf::sec::no_route_to_receiving_node:
      case caf::sec::connection_timeout:
        return unavailable("the serving actor is gone (" + caf::to_string(e) + ")");
      default:
        break;
    }
  }
  return unavailable(caf::to_string(e));
}

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument:
    case ErrorCode::corrupt:
    case ErrorCode::unsupported:
      return 400;
    case ErrorCode::not_found:
      return 404;
    case ErrorCode::out_of_memory:
    case ErrorCode::unavailable:
    case ErrorCode::device_fault:
    case ErrorCode::io_error:
      return 503;
    case ErrorCode::deadline_exceeded:
      return 504;
    case ErrorCode::permission_denied:
      return 403;
    case ErrorCode::unauthenticated:
      return 401;
    case ErrorCode::resource_exhausted:
      return 429;
    case ErrorCode::internal:
      return 500;
  }
  return 500;
}

bool retryable(ErrorCode code) { return http_status(code) == 503 || code == ErrorCode::deadline_exceeded; }

}  // namespace ember
