// Secrets kept in files (the console's admin token): read once, surrounding whitespace dropped.
#pragma once

#include <string>
#include <string_view>

#include "base/status.hpp"

namespace ember {

/// The token in `path` (at most 4 KiB; leading and trailing whitespace dropped). Errors name `what`
/// (the config key or option that named the file): io_error when it cannot be read,
/// invalid_argument when it is empty or too long.
Result<std::string> read_token_file(const std::string& path, std::string_view what);

}  // namespace ember
