#include "text/incremental_decoder.hpp"

#include "text/utf8.hpp"

namespace ember::text {

namespace incremental_decoder_detail {

bool ends_with_replacement(std::string_view s) {
  return s.size() >= kReplacementChar.size() && s.substr(s.size() - kReplacementChar.size()) == kReplacementChar;
}

/// The largest offset <= at that starts a character of `s`.
size_t char_boundary(std::string_view s, size_t at) {
  if (at >= s.size()) return s.size();
  while (at > 0 && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) --at;
  return at;
}

}  // namespace incremental_decoder_detail

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens,
                                       std::span<const int32_t> prompt_ids)
    : tokenizer_(&tokenizer) {
  options_.skip_special_tokens = skip_special_tokens;
  options_.clean_up_tokenization_spaces = false;
  const size_t keep = std::min(prompt_ids.size(), kPromptContext);
  ids_.assign(prompt_ids.end() - static_cast<ptrdiff_t>(keep), prompt_ids.end());
  prefix_ = 0;
  read_ = ids_.size();
}

Result<std::string> IncrementalDecoder::decode_range(size_t from, size_t to) const {
  return tokenizer_->decode(std::span<const int32_t>(ids_).subspan(from, to - from), options_);
}

Result<std::string> IncrementalDecoder::push(int32_t id) {
  namespace d = incremental_decoder_detail;
  if (!tokenizer_->id_to_token(id)) {
    return invalid_argument("token id " + std::to_string(id) + " has no token (vocabulary size " +
                            std::to_string(tokenizer_->vocab_size()) + ")");
  }
  ids_.push_back(id);
  ++generated_;
  auto before = decode_range(prefix_, read_);
  auto after = decode_range(prefix_, ids_.size());
  if (!before.ok()) return before.error();
  if (!after.ok()) return after.error();
  if (after->size() <= before->size() || d::ends_with_replacement(*after)) return std::string();
  // `before` is a prefix of `after` for every decoder read here; were it not, cutting at a character
  // boundary still never returns a broken character.
  std::string out = after->substr(d::char_boundary(*after, before->size()));
  prefix_ = read_;
  read_ = ids_.size();
  // Drop ids no later window reaches, so a long generation keeps a small vector.
  if (prefix_ > 256) {
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<ptrdiff_t>(prefix_));
    read_ -= prefix_;
    prefix_ = 0;
  }
  return out;
}

std::string IncrementalDecoder::finish() {
  auto before = decode_range(prefix_, read_);
  auto after = decode_range(prefix_, ids_.size());
  std::string out;
  if (before.ok() && after.ok() && after->size() > before->size()) {
    out = after->substr(incremental_decoder_detail::char_boundary(*after, before->size()));
  }
  ids_.erase(ids_.begin(), ids_.end());
  prefix_ = read_ = 0;
  return out;
}

}  // namespace ember::text
