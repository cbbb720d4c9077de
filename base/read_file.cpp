#include "base/read_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/units.hpp"

namespace ember {

Result<std::string> read_file(const std::string& path, uint64_t max_bytes, std::string_view what) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    const int err = errno;
    std::string msg = path + ": cannot open: " + std::strerror(err);
    return err == ENOENT ? not_found(std::move(msg)) : io_error(std::move(msg));
  }
  std::string text;
  char buf[1 << 16];
  size_t n = 0;
  while (text.size() <= max_bytes && (n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return io_error(path + ": cannot read: " + std::strerror(err));
  if (text.size() > max_bytes) {
    return invalid_argument(path + ": larger than " + format_bytes(max_bytes) + "; not " + std::string(what));
  }
  return text;
}

}  // namespace ember
