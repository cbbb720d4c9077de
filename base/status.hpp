// ember::Error, ember::Result<T> and ember::Status: how every layer of Ember reports failure.
//
// Pure value types; anyone may use them on any thread. Nothing in Ember throws across a module
// boundary: functions that can fail on input (files, requests, config, devices) return a Result
// whose Error names what failed (the file, the field, the device) in `message`. `assert` is kept
// for programmer errors only. The codes are coarse on purpose: they decide what a caller does
// (retry, report 4xx, drop a device), while the message says why.
#pragma once

#include <cassert>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ember {

enum class ErrorCode : uint8_t {
  /// The caller's input is wrong (bad shape, bad config value, unknown op). Not retryable.
  invalid_argument = 1,
  /// A named thing (model, tensor, file, layer) does not exist.
  not_found,
  /// Stored bytes contradict themselves (truncated file, header lying about offsets, bad checksum).
  corrupt,
  /// A bounded memory (device arena, host cache) cannot hold the request. Retryable elsewhere.
  out_of_memory,
  /// The operating system refused an I/O operation.
  io_error,
  /// Well-formed but not implemented here (a dtype or op this build does not run).
  unsupported,
  /// The device failed; its state is unknown and every later call fails until it is rebuilt.
  device_fault,
  /// A bug in Ember: an invariant did not hold.
  internal,
  /// Transient: nothing can serve this right now (no replica came up in time, the node serving it
  /// was lost, a queue is full). Retrying later, possibly elsewhere, may succeed.
  unavailable,
  /// The caller's deadline passed before an answer came.
  deadline_exceeded,
  /// The caller may not do this (a wrong admin or API token). Not retryable.
  permission_denied,
  /// The caller did not say who it is (no credentials, or malformed ones). Not retryable as is.
  unauthenticated,
  /// The caller is over its quota (an API token's rate or concurrent calls). Retryable after a wait.
  resource_exhausted,
};

/// Short stable name of a code, for logs and error bodies ("invalid_argument").
std::string_view to_string(ErrorCode code);

class Error {
 public:
  Error(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  /// Returns a copy whose message is "<prefix>: <message>", to add context while unwinding.
  Error with_context(std::string_view prefix) const;

  /// "<code>: <message>".
  std::string to_string() const;

 private:
  ErrorCode code_;
  std::string message_;
};

/// Holds either a T or an Error. Check ok() before value(); value() on an error is a bug.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}        // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { assert(!ok()); return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

/// Success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), failed_(true) {}   // NOLINT: implicit by design

  static Status OK() { return Status(); }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { assert(failed_); return error_; }

 private:
  Error error_{ErrorCode::internal, {}};
  bool failed_ = false;
};

inline Error invalid_argument(std::string msg) { return {ErrorCode::invalid_argument, std::move(msg)}; }
inline Error not_found(std::string msg) { return {ErrorCode::not_found, std::move(msg)}; }
inline Error corrupt(std::string msg) { return {ErrorCode::corrupt, std::move(msg)}; }
inline Error out_of_memory(std::string msg) { return {ErrorCode::out_of_memory, std::move(msg)}; }
inline Error io_error(std::string msg) { return {ErrorCode::io_error, std::move(msg)}; }
inline Error unsupported(std::string msg) { return {ErrorCode::unsupported, std::move(msg)}; }
inline Error device_fault(std::string msg) { return {ErrorCode::device_fault, std::move(msg)}; }
inline Error internal_error(std::string msg) { return {ErrorCode::internal, std::move(msg)}; }
inline Error unavailable(std::string msg) { return {ErrorCode::unavailable, std::move(msg)}; }
inline Error deadline_exceeded(std::string msg) { return {ErrorCode::deadline_exceeded, std::move(msg)}; }
inline Error permission_denied(std::string msg) { return {ErrorCode::permission_denied, std::move(msg)}; }
inline Error unauthenticated(std::string msg) { return {ErrorCode::unauthenticated, std::move(msg)}; }
inline Error resource_exhausted(std::string msg) { return {ErrorCode::resource_exhausted, std::move(msg)}; }

}  // namespace ember

/// Evaluates a Status or Result expression and returns its Error from the enclosing function.
#define EMBER_RETURN_IF_ERROR(expr)                 \
  do {                                              \
    auto&& ember_status_ = (expr);                  \
    if (!ember_status_.ok()) return ember_status_.error(); \
  } while (0)

#define EMBER_CONCAT_INNER_(a, b) a##b
#define EMBER_CONCAT_(a, b) EMBER_CONCAT_INNER_(a, b)
/// `EMBER_ASSIGN_OR_RETURN(auto x, f());` binds f()'s value or returns its Error.
#define EMBER_ASSIGN_OR_RETURN(lhs, expr)                                   \
  auto EMBER_CONCAT_(ember_result_, __LINE__) = (expr);                     \
  if (!EMBER_CONCAT_(ember_result_, __LINE__).ok())                         \
    return EMBER_CONCAT_(ember_result_, __LINE__).error();                  \
  lhs = std::move(EMBER_CONCAT_(ember_result_, __LINE__)).value()
