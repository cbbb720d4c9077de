#include "text/utf8.hpp"

namespace ember::text {

namespace utf8_detail {

/// The allowed range of the second byte after a lead byte (Unicode Table 3-7); later bytes are
/// always 80..BF.
struct SecondByte {
  unsigned char lo, hi;
};

SecondByte second_byte_range(unsigned char lead) {
  switch (lead) {
    case 0xE0:
      return {0xA0, 0xBF};
    case 0xED:
      return {0x80, 0x9F};
    case 0xF0:
      return {0x90, 0xBF};
    case 0xF4:
      return {0x80, 0x8F};
    default:
      return {0x80, 0xBF};
  }
}

/// At s[i]: the length of the well-formed sequence there (>= 1), or 0 when it is ill-formed, with
/// `subpart` the length of its maximal subpart (the bytes one U+FFFD replaces, >= 1) and `truncated`
/// whether the sequence was well-formed until the end of `s` cut it short.
size_t sequence_at(std::string_view s, size_t i, size_t& subpart, bool& truncated) {
  truncated = false;
  const auto lead = static_cast<unsigned char>(s[i]);
  if (lead < 0x80) return 1;
  int need = 0;
  if (lead >= 0xC2 && lead <= 0xDF)
    need = 2;
  else if (lead >= 0xE0 && lead <= 0xEF)
    need = 3;
  else if (lead >= 0xF0 && lead <= 0xF4)
    need = 4;
  if (need == 0) {
    subpart = 1;
    return 0;
  }
  const SecondByte second = second_byte_range(lead);
  size_t k = 1;
  for (; k < static_cast<size_t>(need); ++k) {
    if (i + k >= s.size()) {
      subpart = k;
      truncated = true;
      return 0;
    }
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned char lo = k == 1 ? second.lo : 0x80;
    const unsigned char hi = k == 1 ? second.hi : 0xBF;
    if (b < lo || b > hi) {
      subpart = k;
      return 0;
    }
  }
  return static_cast<size_t>(need);
}

}  // namespace utf8_detail

size_t first_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t subpart = 0;
    bool truncated = false;
    const size_t n = utf8_detail::sequence_at(s, i, subpart, truncated);
    if (n == 0) return i;
    i += n;
  }
  return s.size();
}

bool valid_utf8(std::string_view s) { return first_invalid_utf8(s) == s.size(); }

int utf8_sequence_length(unsigned char lead) {
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  return 1;
}

char32_t next_code_point(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const int n = utf8_sequence_length(b0);
  char32_t cp = 0;
  switch (n) {
    case 1:
      cp = b0;
      break;
    case 2:
      cp = b0 & 0x1Fu;
      break;
    case 3:
      cp = b0 & 0x0Fu;
      break;
    default:
      cp = b0 & 0x07u;
      break;
  }
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
  i += static_cast<size_t>(n);
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string to_valid_utf8(std::string_view bytes) {
  const size_t bad = first_invalid_utf8(bytes);
  if (bad == bytes.size()) return std::string(bytes);
  std::string out(bytes.substr(0, bad));
  size_t i = bad;
  while (i < bytes.size()) {
    size_t subpart = 0;
    bool truncated = false;
    const size_t n = utf8_detail::sequence_at(bytes, i, subpart, truncated);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out.append(kReplacementChar);
      i += subpart;
    }
  }
  return out;
}

size_t incomplete_utf8_tail(std::string_view bytes) {
  // A sequence is at most 4 bytes, so only a lead byte among the last 3 can start an incomplete one.
  const size_t from = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (size_t i = from; i < bytes.size(); ++i) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (b < 0xC2 || b > 0xF4) continue;  // ASCII, a continuation byte, or no lead at all
    size_t subpart = 0;
    bool truncated = false;
    if (utf8_detail::sequence_at(bytes, i, subpart, truncated) == 0 && truncated) return bytes.size() - i;
  }
  return 0;
}

bool is_unicode_whitespace(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool is_python_whitespace(char32_t cp) { return is_unicode_whitespace(cp) || (cp >= 0x1C && cp <= 0x1F); }

std::string_view python_strip(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    size_t next = begin;
    if (!is_python_whitespace(next_code_point(s, next))) break;
    begin = next;
  }
  size_t end = s.size();
  while (end > begin) {
    size_t start = end - 1;  // back to the lead byte of the last code point
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t next = start;
    if (!is_python_whitespace(next_code_point(s, next))) break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

}  // namespace ember::text
