#include "text/added_tokens.hpp"

#include <algorithm>

#include "text/json_fields.hpp"
#include "text/regex.hpp"
#include "text/utf8.hpp"

namespace ember::text {

namespace added_tokens_detail {

/// A letter, a digit or '_' (single_word's notion of a word character).
bool word_char_at(std::string_view text, size_t pos) {
  static const Result<Regex> word = Regex::compile(R"([\p{L}\p{N}_])");
  if (!word.ok()) return false;
  const auto r = word->matches_at(text, pos);
  return r.ok() && *r;
}

/// Byte offset of the code point that ends right before `pos`.
size_t previous_code_point(std::string_view text, size_t pos) {
  size_t p = pos - 1;
  while (p > 0 && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
  return p;
}

}  // namespace added_tokens_detail

void AddedTokens::Trie::insert(std::string_view s, int32_t token) {
  first_byte[static_cast<unsigned char>(s[0])] = true;
  int32_t node = 0;
  for (const char ch : s) {
    const auto b = static_cast<unsigned char>(ch);
    int32_t next = child(node, b);
    if (next < 0) {
      next = static_cast<int32_t>(nodes.size());
      nodes.emplace_back();
      auto& children = nodes[static_cast<size_t>(node)].children;
      children.insert(std::upper_bound(children.begin(), children.end(), std::make_pair(b, int32_t{-1})), {b, next});
    }
    node = next;
  }
  nodes[static_cast<size_t>(node)].token = token;
}

int32_t AddedTokens::Trie::child(int32_t node, unsigned char b) const {
  const auto& children = nodes[static_cast<size_t>(node)].children;
  const auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(b, int32_t{-1}));
  return it != children.end() && it->first == b ? it->second : -1;
}

Result<AddedTokens> AddedTokens::parse(const nlohmann::json& j, int64_t id_bound) {
  AddedTokens a;
  if (j.is_null()) return a;
  if (!j.is_array()) return type_error("added_tokens", "an array", j);
  if (j.size() > kMaxAddedTokens) return invalid_argument("added_tokens: " + std::to_string(j.size()) + " tokens");
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    const nlohmann::json& e = j[i];
    if (!e.is_object()) return type_error(where, "an object", e);
    AddedToken t;
    auto id = int_field(e, "id", 0, id_bound - 1, where);
    auto content = string_field(e, "content", where);
    if (!id.ok()) return id.error();
    if (!content.ok()) return content.error();
    t.id = static_cast<int32_t>(*id);
    t.content = std::move(*content);
    if (t.content.empty()) return invalid_argument(where + ".content: empty");
    if (t.content.size() > kMaxContentBytes) return invalid_argument(where + ".content: longer than 4096 bytes");
    for (auto [key, flag] : {std::pair{"special", &t.special},
                             {"lstrip", &t.lstrip},
                             {"rstrip", &t.rstrip},
                             {"single_word", &t.single_word},
                             {"normalized", &t.normalized}}) {
      auto b = bool_field(e, key, false, where);
      if (!b.ok()) return b.error();
      *flag = *b;
    }
    if (a.find_content(t.content) != nullptr) return invalid_argument(where + ": \"" + t.content + "\" added twice");
    if (a.find_id(t.id) != nullptr) return invalid_argument(where + ": id " + std::to_string(t.id) + " added twice");
    a.by_id_.emplace(t.id, a.tokens_.size());
    a.by_content_.insert(t.content, static_cast<int32_t>(a.tokens_.size()));
    a.tokens_.push_back(std::move(t));
  }
  for (size_t i = 0; i < a.tokens_.size(); ++i) {
    const AddedToken& t = a.tokens_[i];
    (t.normalized ? a.normalized_ : a.raw_).insert(t.content, static_cast<int32_t>(i));
  }
  return a;
}

const AddedToken* AddedTokens::find_id(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedTokens::find_content(std::string_view content) const {
  const auto index = by_content_.find(content);
  return index ? &tokens_[static_cast<size_t>(*index)] : nullptr;
}

bool AddedTokens::accept(const AddedToken& t, std::string_view text, size_t begin, size_t end,
                         bool special_in_text) const {
  namespace d = added_tokens_detail;
  if (t.special && !special_in_text) return false;
  if (!t.single_word) return true;
  if (begin > 0 && d::word_char_at(text, d::previous_code_point(text, begin))) return false;
  if (end < text.size() && d::word_char_at(text, end)) return false;
  return true;
}

void AddedTokens::split(std::string_view text, bool normalized_pass, bool special_in_text,
                        std::vector<TextSection>& out) const {
  namespace d = added_tokens_detail;
  const Trie& trie = normalized_pass ? normalized_ : raw_;
  size_t last = 0;  // end of the last section emitted
  size_t i = 0;
  while (i < text.size()) {
    if (!trie.first_byte[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    int32_t node = 0;
    int32_t best = -1;
    size_t best_end = 0;
    for (size_t k = i; k < text.size(); ++k) {
      node = trie.child(node, static_cast<unsigned char>(text[k]));
      if (node < 0) break;
      if (const int32_t tok = trie.nodes[static_cast<size_t>(node)].token; tok >= 0) {
        best = tok;
        best_end = k + 1;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    const AddedToken& t = tokens_[static_cast<size_t>(best)];
    if (!accept(t, text, i, best_end, special_in_text)) {
      i = best_end;  // as Hugging Face does: the skipped match stays ordinary text
      continue;
    }
    size_t begin = i;
    size_t end = best_end;
    if (t.lstrip) {
      while (begin > last) {
        const size_t p = d::previous_code_point(text, begin);
        size_t q = p;
        if (!is_unicode_whitespace(next_code_point(text, q))) break;
        begin = p;
      }
    }
    if (t.rstrip) {
      while (end < text.size()) {
        size_t q = end;
        if (!is_unicode_whitespace(next_code_point(text, q))) break;
        end = q;
      }
    }
    if (begin > last) out.push_back({last, begin, -1});
    out.push_back({begin, end, t.id});
    last = end;
    i = end;
  }
  if (last < text.size()) out.push_back({last, text.size(), -1});
}

}  // namespace ember::text
