// read_file: a whole file into a string, bounded. For the text inputs Ember reads at start (the
// cluster config, a simulation's request trace): one place says why a file cannot be read.
//
// Errors: not_found ("PATH: cannot open: No such file or directory") when it does not exist,
// io_error when it cannot be opened or read (a directory, permissions), invalid_argument
// ("PATH: larger than N; not WHAT") past `max_bytes`: it stops reading there. Any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.hpp"

namespace ember {

Result<std::string> read_file(const std::string& path, uint64_t max_bytes, std::string_view what);

}  // namespace ember
