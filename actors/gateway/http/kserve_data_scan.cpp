// The inputs' data lists of a KServe v2 request, read from the text (see kserve_data_scan.hpp).
#include "actors/gateway/http/kserve_data_scan.hpp"

#include <algorithm>
#include <charconv>
#include <system_error>

#include "model/tensor.hpp"

namespace ember {

bool is_json_number(std::string_view t) {
  size_t i = 0;
  auto digits = [&] {
    const size_t from = i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    return i > from;
  };
  if (i < t.size() && t[i] == '-') ++i;
  if (i < t.size() && t[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < t.size() && t[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == t.size();
}

namespace {

constexpr int kMaxDepth = 64;

/// Whether a JSON number is within a double's range (no overflow, no underflow to zero): the JSON
/// parser refuses the others, so the scanner leaves them to it. Only a number with an exponent or
/// more than 20 characters can be outside.
bool fits_double(std::string_view t) {
  if (t.size() <= 20 && std::none_of(t.begin(), t.end(), [](char c) { return c == 'e' || c == 'E'; })) return true;
  double d = 0;
  const auto r = std::from_chars(t.data(), t.data() + t.size(), d);
  return r.ec == std::errc() && r.ptr == t.data() + t.size();
}

class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}

  std::optional<std::vector<InputDataSpan>> run() {
    ws();
    if (!object(0, Where::root)) return std::nullopt;
    ws();
    if (i_ != s_.size()) return std::nullopt;
    return std::move(spans_);
  }

 private:
  enum class Where { root, inputs, input, other };

  bool at(char c) const { return i_ < s_.size() && s_[i_] == c; }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }

  /// A string at i_ (its opening quote); `raw` gets what is between the quotes, escapes as written.
  bool string(std::string_view* raw) {
    const size_t from = ++i_;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\\') ++i_;
      ++i_;
    }
    if (i_ >= s_.size()) return false;
    if (raw) *raw = s_.substr(from, i_ - from);
    ++i_;
    return true;
  }

  /// A number, true, false or null: skipped, the full parser checks it.
  bool scalar() {
    const size_t from = i_;
    while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != ']' && s_[i_] != '}' && s_[i_] != ' ' && s_[i_] != '\t' &&
           s_[i_] != '\n' && s_[i_] != '\r') {
      ++i_;
    }
    return i_ > from;
  }

  bool value(int depth, Where where) {
    ws();
    if (at('{')) return object(depth + 1, where);
    if (at('[')) return array(depth + 1, where);
    if (at('"')) return string(nullptr);
    return scalar();
  }

  bool object(int depth, Where where) {
    if (depth > kMaxDepth || !at('{')) return false;
    ++i_;
    ws();
    if (at('}')) return ++i_, true;
    bool data_seen = false;
    for (;;) {
      ws();
      std::string_view key;
      if (!at('"') || !string(&key)) return false;
      ws();
      if (!at(':')) return false;
      ++i_;
      ws();
      if (where == Where::root && key == "inputs") {
        if (inputs_seen_) return false;
        inputs_seen_ = true;
        if (!value(depth, Where::inputs)) return false;
      } else if (where == Where::input && key == "data") {
        if (data_seen) return false;
        data_seen = true;
        if (at('[')) {
          if (!numbers()) return false;
        } else if (!value(depth, Where::other)) {
          return false;
        }
      } else if (!value(depth, Where::other)) {
        return false;
      }
      ws();
      if (at(',')) {
        ++i_;
        continue;
      }
      if (at('}')) return ++i_, true;
      return false;
    }
  }

  bool array(int depth, Where where) {
    if (depth > kMaxDepth || !at('[')) return false;
    ++i_;
    ws();
    if (at(']')) return ++i_, true;
    for (size_t index = 0;; ++index) {
      ws();
      if (where == Where::inputs) input_ = index;
      const Where child = where == Where::inputs && at('{') ? Where::input : Where::other;
      if (!value(depth, child)) return false;
      ws();
      if (at(',')) {
        ++i_;
        continue;
      }
      if (at(']')) return ++i_, true;
      return false;
    }
  }

  /// inputs[input_].data, a list at i_: numbers and lists of them only.
  bool numbers() {
    InputDataSpan span;
    span.input = input_;
    span.begin = i_;
    int depth = 0;
    bool want_value = true;  // after '[' or ','
    bool may_close = true;   // after '[' (empty list) or a value
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++i_;
      } else if (c == '[') {
        if (!want_value || ++depth > static_cast<int>(gpu::Shape::kMaxRank) + 1) return false;
        ++i_;
        may_close = true;
      } else if (c == ']') {
        if (!may_close) return false;
        ++i_;
        want_value = false;
        if (--depth == 0) {
          span.end = i_;
          spans_.push_back(std::move(span));
          return true;
        }
      } else if (c == ',') {
        if (want_value) return false;
        ++i_;
        want_value = true;
        may_close = false;
      } else {
        if (!want_value) return false;
        const size_t from = i_;
        while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != ']' && s_[i_] != ' ' && s_[i_] != '\t' && s_[i_] != '\n' &&
               s_[i_] != '\r') {
          ++i_;
        }
        const std::string_view token = s_.substr(from, i_ - from);
        if (!is_json_number(token) || !fits_double(token)) return false;
        span.numbers.push_back(token);
        want_value = false;
        may_close = true;
      }
    }
    return false;
  }

  std::string_view s_;
  size_t i_ = 0;
  size_t input_ = 0;
  bool inputs_seen_ = false;
  std::vector<InputDataSpan> spans_;
};

}  // namespace

std::optional<std::vector<InputDataSpan>> scan_input_data(std::string_view body) { return Scanner(body).run(); }

}  // namespace ember
