// Secrets kept in files: the console's admin token (one token) and the API's bearer tokens (a
// list, each with its scope), read once at start; and their comparison in constant time.
// Pure: anyone may call; nothing here logs, and no token appears in an error message.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace ember {

/// The token in `path` (at most 4 KiB; leading and trailing whitespace dropped). Errors name `what`
/// (the config key or option that named the file): io_error when it cannot be read,
/// invalid_argument when it is empty or too long.
Result<std::string> read_token_file(const std::string& path, std::string_view what);

/// The tokens in `path`, one per line: surrounding whitespace dropped, blank lines and lines
/// starting with '#' skipped. At most 1 MiB and 4096 tokens. Errors name `what` and the line:
/// io_error when it cannot be read; invalid_argument when it holds no token, or a token with a
/// character outside printable ASCII or a space inside (it could not travel in an HTTP header).
Result<std::vector<std::string>> read_token_list(const std::string& path, std::string_view what);

/// An API bearer token (gateway.api_tokens_file) and its scope. Every token may call the API:
/// inference, metadata, readiness, the repository index, /metrics. One with the admin scope may
/// also change what the cluster serves: load, unload, distribute and evict.
struct ApiToken {
  std::string token;
  bool admin = false;

  bool operator==(const ApiToken&) const = default;
};

/// The tokens in `path` as read_token_list reads them, where a token may be followed, after
/// spaces, by the word `admin`: "TOKEN admin" gives it the admin scope. Any other word after a
/// token is invalid_argument naming the line (a typo never silently drops a scope).
Result<std::vector<ApiToken>> read_api_tokens(const std::string& path, std::string_view what);

/// a == b, in a time that depends on the lengths only, never on where the first difference is.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace ember
