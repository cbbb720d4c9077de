// Secrets kept in files: the console's admin token (one token) and the API's bearer tokens (a
// list, each with its scopes and rates), read once at start; and their comparison in constant time.
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

/// An API bearer token (gateway.api_tokens_file): what it may do (its scopes) and how much (its
/// rates). A line is the token and, after spaces, words in any order:
///   admin                  every scope: infer on every model, repository, metrics
///   infer                  inference, generation and model reads on every model and workflow
///   infer=NAME[,NAME...]   the same on these models and workflows only
///   repository             change what the cluster serves (load, unload, distribute, evict) and
///                          read every model's metadata
///   metrics                GET /metrics
///   rate=R                 at most R calls per second on average (R > 0, a decimal) ...
///   burst=N                ... and N at once from rest (default: R rounded up, at least 1)
///   concurrent=N           at most N calls in flight at once (a stream until it ends)
///   name=LABEL             what the metrics call it (default line-N; [A-Za-z0-9_.:-], 64 at most)
/// A line with no scope word has the scopes every token had before scopes existed: infer and
/// metrics. Every token may read the server's metadata, readiness and the repository's index.
struct ApiToken {
  std::string token;
  std::string name;
  /// Inference on every model (true), else only on `models`.
  bool infer_all = true;
  std::vector<std::string> models;
  bool repository = false;
  bool metrics = true;
  /// Calls per second (0: no limit) and the most at once from rest.
  double rate = 0;
  uint32_t burst = 0;
  /// Calls in flight at once (0: no limit).
  uint32_t concurrent = 0;

  /// Whether it may infer on (and read) the model or workflow `model`.
  bool may_infer(std::string_view model) const;

  bool operator==(const ApiToken&) const = default;
};

/// One line of the file: a token and its words, named `default_name` unless it says name=. The
/// error says what is wrong, without the line's place.
Result<ApiToken> parse_api_token(std::string_view line, std::string default_name);

/// The tokens in `path` as read_token_list reads them, each with the words above. A word that is
/// not one of them, a bad number or name, the same word twice, burst without rate, a name or a
/// token on two lines are invalid_argument naming the line (a typo never silently widens or
/// drops a scope).
Result<std::vector<ApiToken>> read_api_tokens(const std::string& path, std::string_view what);

/// a == b, in a time that depends on the lengths only, never on where the first difference is.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace ember
