#include "text/byte_level.hpp"

#include <array>

#include "text/utf8.hpp"

namespace ember::text {

namespace byte_level_detail {

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<std::string, 256> to_utf8;
  /// Inverse for U+0000..U+01FF, where every character of the alphabet lies; -1 elsewhere.
  std::array<int16_t, 512> to_byte{};

  Tables() {
    to_byte.fill(-1);
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
      to_char[static_cast<size_t>(b)] = c;
      append_utf8(to_utf8[static_cast<size_t>(b)], c);
      to_byte[c] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace byte_level_detail

char32_t byte_to_char(uint8_t b) { return byte_level_detail::tables().to_char[b]; }

std::string_view byte_to_utf8(uint8_t b) { return byte_level_detail::tables().to_utf8[b]; }

int char_to_byte(char32_t c) { return c < 512 ? byte_level_detail::tables().to_byte[c] : -1; }

void append_byte_level(std::string& out, std::string_view bytes) {
  const auto& t = byte_level_detail::tables();
  for (const char ch : bytes) out.append(t.to_utf8[static_cast<uint8_t>(ch)]);
}

}  // namespace ember::text
