// UTF-8 as the tokenizers read and write it: validation, code points, the replacement of broken
// sequences, and the Unicode whitespace sets the tokenizer formats refer to.
//
// Pure: anyone, any thread; nothing allocates except the functions returning a string. Text that
// enters the tokenizer is checked once with valid_utf8(); everything after that (the PCRE2
// pre-tokenizer, BPE, the decoders) may assume valid UTF-8. Text that leaves it is made valid with
// to_valid_utf8(), so a caller never receives a broken sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ember::text {

/// U+FFFD, what replaces a broken sequence ("\xEF\xBF\xBD").
inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

/// True when `s` is well-formed UTF-8 (Unicode Table 3-7: no overlong forms, no surrogates,
/// nothing above U+10FFFF).
bool valid_utf8(std::string_view s);

/// The byte offset of the first ill-formed sequence in `s`, or s.size() when there is none.
size_t first_invalid_utf8(std::string_view s);

/// Bytes of the sequence a lead byte starts (1 for ASCII and for bytes that start no sequence).
int utf8_sequence_length(unsigned char lead);

/// The code point starting at s[i] of valid UTF-8; advances i past it.
char32_t next_code_point(std::string_view s, size_t& i);

/// Appends `cp` (at most U+10FFFF, not a surrogate) encoded as UTF-8.
void append_utf8(std::string& out, char32_t cp);

/// `bytes` with every ill-formed part replaced by one U+FFFD per maximal subpart, as Rust's
/// String::from_utf8_lossy and Hugging Face's tokenizers do. Valid input comes back unchanged.
std::string to_valid_utf8(std::string_view bytes);

/// How many bytes at the end of `bytes` begin a sequence that is well-formed so far but not
/// complete (0 to 3): what a streaming decoder holds back until the next bytes arrive.
size_t incomplete_utf8_tail(std::string_view bytes);

/// Unicode's White_Space property (Rust's char::is_whitespace; Hugging Face's lstrip and rstrip).
bool is_unicode_whitespace(char32_t cp);

/// Python's str.isspace() (Jinja's trim filter and str.strip(); the chat templates): White_Space
/// plus the information separators U+001C..U+001F.
bool is_python_whitespace(char32_t cp);

/// `s` without leading and trailing characters for which is_python_whitespace holds (str.strip()).
std::string_view python_strip(std::string_view s);

/// `text` with every occurrence of `from` (non-empty) replaced by `to` (the tokenizer formats'
/// Replace normalizer and decoder).
std::string replace_all(std::string_view text, std::string_view from, std::string_view to);

}  // namespace ember::text
