// libFuzzer target for text/: Tokenizer::parse on any tokenizer.json and tokenizer_config.json, then
// encode, decode and streaming decode of any text and ids with what parsed, and the chat templates.
//
// Input: u32 n, n bytes of tokenizer.json; u32 m, m bytes of tokenizer_config.json (m = 0: none); the
// rest is a text. On success the tokenizer must keep what tokenizer.hpp promises: encoding valid text
// succeeds unless a pre-tokenizer regex gives up (invalid_argument), every id is below vocab_size()
// and has a token, decoding those ids succeeds and gives valid UTF-8 (with and without special tokens,
// with clean-up); invalid text is refused; ids made from the text's bytes decode to valid UTF-8 or are
// refused by id; the streaming decoder's pieces are valid UTF-8. A chat template chosen from the
// config renders valid UTF-8 for a conversation carrying the text. On failure the Error names the file.
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_common.hpp"
#include "text/chat_template.hpp"
#include "text/incremental_decoder.hpp"
#include "text/tokenizer.hpp"
#include "text/utf8.hpp"

using namespace ember;
using namespace ember::text;

namespace {

void check_ids(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  for (const int32_t id : ids) {
    EMBER_FUZZ_CHECK(id >= 0 && id < tok.vocab_size());
    EMBER_FUZZ_CHECK(tok.id_to_token(id).has_value());
  }
  for (const DecodeOptions& o : {DecodeOptions{}, DecodeOptions{.skip_special_tokens = true},
                                 DecodeOptions{.clean_up_tokenization_spaces = true}}) {
    auto text = tok.decode(ids, o);
    EMBER_FUZZ_CHECK(text.ok());
    EMBER_FUZZ_CHECK(valid_utf8(*text));
  }
  IncrementalDecoder stream(tok, false);
  for (const int32_t id : ids) {
    auto piece = stream.push(id);
    EMBER_FUZZ_CHECK(piece.ok() && valid_utf8(*piece));
  }
  EMBER_FUZZ_CHECK(valid_utf8(stream.finish()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const size_t n = std::min<size_t>(fuzz::take_u32(data, size), size);
  const std::string_view json = fuzz::as_text(data, n);
  data += n;
  size -= n;
  const size_t m = std::min<size_t>(fuzz::take_u32(data, size), size);
  const std::string_view config = fuzz::as_text(data, m);
  data += m;
  size -= m;
  const std::string_view text = fuzz::as_text(data, size);

  auto tok = Tokenizer::parse(json, config);
  if (!tok.ok()) {
    const std::string& msg = tok.error().message();
    EMBER_FUZZ_CHECK(msg.starts_with("tokenizer.json") || msg.starts_with("tokenizer_config.json"));
    return 0;
  }
  EMBER_FUZZ_CHECK(tok->vocab_size() >= 0);
  for (const bool special : {true, false}) {
    auto ids = tok->encode(text, {.add_special_tokens = special, .special_in_text = special});
    if (!valid_utf8(text)) {
      EMBER_FUZZ_CHECK(!ids.ok() && ids.error().code() == ErrorCode::invalid_argument);
      continue;
    }
    if (!ids.ok()) {
      EMBER_FUZZ_CHECK(ids.error().code() == ErrorCode::invalid_argument);  // a regex that gave up
      continue;
    }
    check_ids(*tok, *ids);
  }
  // Ids from the text's bytes: each either has a token or is refused.
  std::vector<int32_t> raw;
  for (size_t i = 0; i + 1 < text.size() && raw.size() < 64; i += 2) {
    raw.push_back(static_cast<int32_t>(static_cast<uint8_t>(text[i]) | static_cast<uint8_t>(text[i + 1]) << 8));
  }
  bool all_known = true;
  for (const int32_t id : raw) all_known = all_known && tok->id_to_token(id).has_value();
  auto decoded = tok->decode(raw);
  EMBER_FUZZ_CHECK(decoded.ok() == all_known);
  if (decoded.ok()) check_ids(*tok, raw);

  auto chat = ChatTemplate::for_tokenizer(*tok);
  if (chat.ok() && valid_utf8(text)) {
    const std::vector<ChatMessage> messages = {{"system", "s"}, {"user", std::string(text)}};
    auto prompt = chat->render(messages, true);
    EMBER_FUZZ_CHECK(prompt.ok() && valid_utf8(*prompt));
  }
  return 0;
}
