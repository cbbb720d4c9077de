#include "base/token_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace ember {

namespace {
constexpr size_t kMaxTokenFileBytes = 4096;
}  // namespace

Result<std::string> read_token_file(const std::string& path, std::string_view what) {
  const std::string at = std::string(what) + " (" + path + ")";
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(at + ": cannot read: " + std::strerror(errno));
  std::string text;
  text.resize(kMaxTokenFileBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxTokenFileBytes) {
    return invalid_argument(at + ": longer than " + std::to_string(kMaxTokenFileBytes) + " bytes: not a token file");
  }
  const char* space = " \t\r\n";
  const size_t first = text.find_first_not_of(space);
  if (first == std::string::npos) return invalid_argument(at + ": the file is empty");
  const size_t last = text.find_last_not_of(space);
  return text.substr(first, last - first + 1);
}

}  // namespace ember
