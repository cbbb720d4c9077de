// GPT-2's byte-to-unicode alphabet: the 256 characters byte-level BPE writes bytes as, so that every
// byte string is a printable string and no token holds a space or a control character.
//
// Pure: anyone, any thread; the tables are built once, at first use, and never change. The map is
// OpenAI's `bytes_to_unicode()` (GPT-2's encoder.py), which Hugging Face's ByteLevel pre-tokenizer
// and decoder copy: the printable bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves,
// the other 68 bytes take U+0100 onwards in byte order (so ' ' is U+0120 'Ġ', '\n' is U+010A 'Ċ').
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ember::text {

/// The character byte `b` is written as.
char32_t byte_to_char(uint8_t b);

/// The same character, UTF-8 encoded (1 or 2 bytes).
std::string_view byte_to_utf8(uint8_t b);

/// The byte character `c` stands for, or -1 when `c` is not in the alphabet.
int char_to_byte(char32_t c);

/// Appends the alphabet's spelling of `bytes` (each byte one character).
void append_byte_level(std::string& out, std::string_view bytes);

}  // namespace ember::text
