#include "text/bpe_model.hpp"

#include <cstdio>
#include <mutex>
#include <queue>
#include <unordered_map>

#include "text/json_fields.hpp"
#include "text/utf8.hpp"

namespace ember::text {

namespace bpe_model_detail {

/// Lets the cache, keyed by std::string, be searched with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

}  // namespace bpe_model_detail

struct BpeModel::Cache {
  mutable std::mutex mutex;
  std::unordered_map<std::string, std::vector<int32_t>, bpe_model_detail::StringHash, std::equal_to<>> words;
};

BpeModel::BpeModel() : cache_(std::make_unique<Cache>()) { byte_ids_.fill(-1); }
BpeModel::~BpeModel() = default;
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;

namespace bpe_model_detail {

/// An empty string or null counts as absent (GPT-2's file writes "", Llama 2's null).
Result<bool> has_text(const nlohmann::json& model, std::string_view key) {
  const nlohmann::json* v = member(model, key);
  if (v == nullptr) return false;
  if (!v->is_string()) return type_error(field_path("model", key), "a string or null", *v);
  return !v->get_ref<const std::string&>().empty();
}

/// One merge, "a b" (tokenizers < 0.20) or ["a", "b"].
Status merge_parts(const nlohmann::json& m, size_t i, std::string& a, std::string& b) {
  const std::string where = "model.merges[" + std::to_string(i) + "]";
  if (m.is_string()) {
    const auto& s = m.get_ref<const std::string&>();
    const size_t space = s.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == s.size() ||
        s.find(' ', space + 1) != std::string::npos) {
      return invalid_argument(where + ": \"" + s + "\" is not two tokens separated by one space");
    }
    a = s.substr(0, space);
    b = s.substr(space + 1);
    return Status::OK();
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    a = m[0].get<std::string>();
    b = m[1].get<std::string>();
    return Status::OK();
  }
  return type_error(where, "\"a b\" or [\"a\", \"b\"]", m);
}

/// One symbol of a word being merged: a token id and its neighbours (-1: none). `gone` once merged
/// into its left neighbour.
struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool gone;
};

/// A candidate merge of the symbol at `pos` with its right neighbour. The queue pops the lowest rank,
/// then the leftmost position.
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t id;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace bpe_model_detail

Result<BpeModel> BpeModel::parse(const nlohmann::json& model) {
  namespace d = bpe_model_detail;
  if (!model.is_object()) return type_error("model", "an object", model);
  auto type = optional_string_field(model, "type", "model");
  if (!type.ok()) return type.error();
  if (type->has_value() && **type != "BPE") {
    return unsupported("model.type \"" + **type +
                       "\" is not supported: Ember's tokenizer reads BPE models (byte-level as GPT-2 and Llama 3, "
                       "SentencePiece-style as Llama 2), not WordPiece, Unigram or WordLevel");
  }
  if (!type->has_value() && member(model, "merges") == nullptr) {
    return unsupported("model: no type and no merges (not a BPE model)");
  }
  if (const nlohmann::json* dropout = member(model, "dropout")) {
    if (!dropout->is_number()) return type_error("model.dropout", "a number or null", *dropout);
    if (dropout->get<double>() != 0.0) return unsupported("model.dropout: BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto has = d::has_text(model, key);
    if (!has.ok()) return has.error();
    if (*has) return unsupported(field_path("model", key) + " is not supported (BERT- and CLIP-style BPE)");
  }

  BpeModel m;
  auto byte_fallback = bool_field(model, "byte_fallback", false, "model");
  auto fuse_unk = bool_field(model, "fuse_unk", false, "model");
  auto ignore_merges = bool_field(model, "ignore_merges", false, "model");
  if (!byte_fallback.ok()) return byte_fallback.error();
  if (!fuse_unk.ok()) return fuse_unk.error();
  if (!ignore_merges.ok()) return ignore_merges.error();
  m.byte_fallback_ = *byte_fallback;
  m.fuse_unk_ = *fuse_unk;
  m.ignore_merges_ = *ignore_merges;

  const nlohmann::json* vocab = member(model, "vocab");
  if (vocab == nullptr) return invalid_argument("model.vocab: missing");
  if (!vocab->is_object()) return type_error("model.vocab", "an object of token: id", *vocab);
  if (static_cast<int64_t>(vocab->size()) > kMaxVocab) {
    return invalid_argument("model.vocab: " + std::to_string(vocab->size()) + " tokens (at most " +
                            std::to_string(kMaxVocab) + ")");
  }
  m.vocab_.reserve(vocab->size());
  int64_t limit = 0;
  for (const auto& [token, id_json] : vocab->items()) {
    if (!id_json.is_number_integer()) return type_error("model.vocab[\"" + token + "\"]", "an integer id", id_json);
    const int64_t id = id_json.is_number_unsigned()
                           ? static_cast<int64_t>(std::min<uint64_t>(id_json.get<uint64_t>(), INT64_MAX))
                           : id_json.get<int64_t>();
    if (id < 0 || id >= kMaxVocab) {
      return invalid_argument("model.vocab[\"" + token + "\"]: id " + std::to_string(id) + " outside [0, " +
                              std::to_string(kMaxVocab) + ")");
    }
    if (token.size() > kMaxTokenBytes) {
      return invalid_argument("model.vocab: a token of " + std::to_string(token.size()) + " bytes");
    }
    m.vocab_.insert(token, static_cast<int32_t>(id));  // JSON object keys are unique
    limit = std::max(limit, id + 1);
  }
  m.by_id_.assign(static_cast<size_t>(limit), -1);
  for (size_t i = 0; i < m.vocab_.size(); ++i) {
    int32_t& slot = m.by_id_[static_cast<size_t>(m.vocab_.id_at(i))];
    if (slot >= 0) {
      return invalid_argument("model.vocab: id " + std::to_string(m.vocab_.id_at(i)) + " is given to both \"" +
                              std::string(m.vocab_.token_at(static_cast<size_t>(slot))) + "\" and \"" +
                              std::string(m.vocab_.token_at(i)) + "\"");
    }
    slot = static_cast<int32_t>(i);
  }

  auto unk = optional_string_field(model, "unk_token", "model");
  if (!unk.ok()) return unk.error();
  if (unk->has_value()) {
    auto id = m.token_to_id(**unk);
    if (!id) return invalid_argument("model.unk_token \"" + **unk + "\" is not in the vocabulary");
    m.unk_id_ = *id;
  }
  if (m.byte_fallback_) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      m.byte_ids_[static_cast<size_t>(b)] = m.token_to_id(name).value_or(-1);
    }
  }

  const nlohmann::json* merges = member(model, "merges");
  if (merges != nullptr) {
    if (!merges->is_array()) return type_error("model.merges", "an array", *merges);
    if (merges->size() > kMaxMerges) {
      return invalid_argument("model.merges: " + std::to_string(merges->size()) + " merges (at most " +
                              std::to_string(kMaxMerges) + ")");
    }
    m.merges_.reserve(merges->size());
    std::string a, b, ab;
    for (size_t i = 0; i < merges->size(); ++i) {
      if (Status s = d::merge_parts((*merges)[i], i, a, b); !s.ok()) return s.error();
      ab.assign(a).append(b);
      const auto ia = m.token_to_id(a);
      const auto ib = m.token_to_id(b);
      const auto ic = m.token_to_id(ab);
      if (!ia || !ib || !ic) {
        const std::string& missing = !ia ? a : !ib ? b : ab;
        return invalid_argument("model.merges[" + std::to_string(i) + "]: \"" + missing +
                                "\" is not in the vocabulary");
      }
      // A repeated pair keeps its last rank, as Hugging Face's map does.
      m.merges_.set(*ia, *ib, {static_cast<int32_t>(i), *ic});
    }
  }
  return m;
}

std::optional<std::string_view> BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= by_id_.size()) return std::nullopt;
  const int32_t index = by_id_[static_cast<size_t>(id)];
  if (index < 0) return std::nullopt;
  return vocab_.token_at(static_cast<size_t>(index));
}

size_t BpeModel::cached_words() const {
  std::lock_guard lock(cache_->mutex);
  return cache_->words.size();
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (auto id = token_to_id(piece)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = piece.size() < kCacheWordBytes;
  if (cacheable) {
    std::lock_guard lock(cache_->mutex);
    const auto it = cache_->words.find(piece);
    if (it != cache_->words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  encode_word(piece, out);
  if (cacheable) {
    std::lock_guard lock(cache_->mutex);
    if (cache_->words.size() < kCacheWords) {
      cache_->words.emplace(std::string(piece),
                            std::vector<int32_t>(out.begin() + static_cast<ptrdiff_t>(first), out.end()));
    }
  }
}

void BpeModel::encode_word(std::string_view piece, std::vector<int32_t>& out) const {
  namespace d = bpe_model_detail;
  std::vector<d::Symbol> symbols;
  symbols.reserve(piece.size());
  auto add = [&symbols](int32_t id) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, -1, false});
    if (n > 0) symbols[static_cast<size_t>(n - 1)].next = n;
  };
  bool pending_unk = false;  // an unk symbol not yet added (fuse_unk extends it)
  size_t i = 0;
  while (i < piece.size()) {
    const size_t start = i;
    next_code_point(piece, i);
    const std::string_view ch = piece.substr(start, i - start);
    if (auto id = token_to_id(ch)) {
      if (pending_unk) add(*unk_id_);
      pending_unk = false;
      add(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (const char c : ch) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        if (pending_unk) add(*unk_id_);
        pending_unk = false;
        for (const char c : ch) add(byte_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (!unk_id_) continue;  // no unk token: the character is dropped
    if (pending_unk && !fuse_unk_) add(*unk_id_);
    pending_unk = true;
  }
  if (pending_unk) add(*unk_id_);

  std::priority_queue<d::Candidate, std::vector<d::Candidate>, std::greater<>> queue;
  auto consider = [&](int32_t pos) {
    const d::Symbol& s = symbols[static_cast<size_t>(pos)];
    if (s.next < 0) return;
    if (const MergeTable::Merge* m = merges_.find(s.id, symbols[static_cast<size_t>(s.next)].id)) {
      queue.push({m->rank, pos, m->id});
    }
  };
  for (int32_t p = 0; p + 1 < static_cast<int32_t>(symbols.size()); ++p) consider(p);
  while (!queue.empty()) {
    const d::Candidate c = queue.top();
    queue.pop();
    d::Symbol& left = symbols[static_cast<size_t>(c.pos)];
    if (left.gone || left.next < 0) continue;
    d::Symbol& right = symbols[static_cast<size_t>(left.next)];
    // Stale when either side changed since the candidate was queued.
    const MergeTable::Merge* now = merges_.find(left.id, right.id);
    if (now == nullptr || now->id != c.id) continue;
    left.id = c.id;
    right.gone = true;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = c.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(c.pos);
  }
  for (const d::Symbol& s : symbols) {
    if (!s.gone) out.push_back(s.id);
  }
}

}  // namespace ember::text
