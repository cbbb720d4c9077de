// must(): a test's premise inside a helper that returns a value, where ASSERT_* cannot stop the
// test. It returns the value of an ok Result, or throws; GoogleTest reports the exception as the
// test's failure, with the error's message and `what`. So a broken premise fails the test at once:
// never undefined behaviour from dereferencing an error, never a silent fallback.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.hpp"

namespace ember::testing {

template <class T>
T must(Result<T> r, std::string_view what = {}) {
  if (!r.ok()) {
    throw std::runtime_error(std::string(what) + (what.empty() ? "" : ": ") + r.error().to_string());
  }
  return std::move(r).value();
}

inline void must(const Status& s, std::string_view what = {}) {
  if (!s.ok()) throw std::runtime_error(std::string(what) + (what.empty() ? "" : ": ") + s.error().to_string());
}

}  // namespace ember::testing
