// text_tokenize_tool: Ember's tokenizer on a corpus, printing what tools/tokenizer_reference.js prints
// for the same files, so that npm_tokenizers_test.py can compare the two; plus, per text,
// "decoded_plain": decode(ids_plain), "streamed": the pieces IncrementalDecoder gives for ids_plain,
// joined, and "pieces_valid": whether every piece was valid UTF-8. A test helper, not a product binary.
//
//   text_tokenize_tool DIR CORPUS.json
//
// Exit status: 0 done, 1 a text could not be encoded or decoded (the message says which), 2 bad
// arguments or files.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "text/incremental_decoder.hpp"
#include "text/tokenizer.hpp"
#include "text/utf8.hpp"

namespace {

nlohmann::json optional_id(const std::optional<int32_t>& id) { return id ? nlohmann::json(*id) : nlohmann::json(); }

}  // namespace

int main(int argc, char** argv) {
  using namespace ember::text;
  if (argc != 3) {
    std::cerr << "usage: text_tokenize_tool DIR CORPUS.json\n";
    return 2;
  }
  auto tok = Tokenizer::load(argv[1]);
  if (!tok.ok()) {
    std::cerr << "text_tokenize_tool: " << tok.error().to_string() << "\n";
    return 2;
  }
  std::ifstream in(argv[2]);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const nlohmann::json texts = nlohmann::json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
  if (!texts.is_array()) {
    std::cerr << "text_tokenize_tool: " << argv[2] << ": not a JSON list\n";
    return 2;
  }
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& t : texts) {
    const std::string text = t.get<std::string>();
    auto ids = tok->encode(text);
    auto plain = tok->encode(text, {.add_special_tokens = false});
    if (!ids.ok() || !plain.ok()) {
      std::cerr << "text_tokenize_tool: encode: " << (ids.ok() ? plain.error() : ids.error()).to_string() << "\n";
      return 1;
    }
    auto decoded = tok->decode(*ids);
    auto skip = tok->decode(*ids, {.skip_special_tokens = true});
    auto clean = tok->decode(*ids, {.clean_up_tokenization_spaces = tok->clean_up_tokenization_spaces()});
    if (!decoded.ok() || !skip.ok() || !clean.ok()) {
      std::cerr << "text_tokenize_tool: decode failed\n";
      return 1;
    }
    auto decoded_plain = tok->decode(*plain);
    if (!decoded_plain.ok()) {
      std::cerr << "text_tokenize_tool: decode failed\n";
      return 1;
    }
    IncrementalDecoder stream(*tok, /*skip_special_tokens=*/false);
    std::string streamed;
    bool valid = true;
    for (const int32_t id : *plain) {
      auto piece = stream.push(id);
      if (!piece.ok()) {
        std::cerr << "text_tokenize_tool: stream: " << piece.error().to_string() << "\n";
        return 1;
      }
      valid = valid && ember::text::valid_utf8(*piece);
      streamed += *piece;
    }
    streamed += stream.finish();
    cases.push_back({{"text", text},
                     {"ids", *ids},
                     {"ids_plain", *plain},
                     {"decoded", *decoded},
                     {"decoded_skip", *skip},
                     {"decoded_clean", *clean},
                     {"decoded_plain", *decoded_plain},
                     {"streamed", streamed},
                     {"pieces_valid", valid}});
  }
  const nlohmann::json out = {{"vocab_size", tok->vocab_size()},
                              {"bos_id", optional_id(tok->bos_id())},
                              {"eos_id", optional_id(tok->eos_id())},
                              {"cases", cases}};
  std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}
