// Reading one mapping of a YAML config file (`devices:`, `manager:`, ...) with the messages every
// config parser of Ember gives: "<file>: <section>.<key>: <what is wrong>".
//
// Internal to config/: only config/*.cpp include it (it pulls in yaml-cpp, which ember_config links
// privately). Header-only, so a build that compiles a single parser from its sources (the fuzz build
// lists them one by one) needs no extra file. Pure: anyone, any thread. Never throws: yaml-cpp's
// exceptions stop here and become invalid_argument Errors.
//
// Conventions it enforces, shared by every section:
//   - an absent or null section reads as empty: every field keeps its default;
//   - a present section must be a mapping; every key must be known (a typo is never a default);
//   - a value must be a scalar (`key:` with nothing after it is null, not a scalar, so an error);
//   - a value that does not parse is an error quoting the text, prefixed with "<file>: <section>.<key>".
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.hpp"

namespace ember::config_yaml {

/// Parses a whole document. An empty one (or only comments) gives a null node; anything else must be
/// a mapping.
inline Result<YAML::Node> load_document(std::string_view text, std::string_view source) {
  const std::string at(source);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return invalid_argument(at + ": not valid YAML: " + e.what());
  }
  if (!root || root.IsNull()) return YAML::Node(YAML::NodeType::Null);
  if (!root.IsMap()) return invalid_argument(at + ": the document must be a mapping");
  return root;
}

/// What the values of a mapping may be, for check_keys.
enum class Values { scalars, anything };

class YamlSection {
 public:
  /// `root[name]` of a document from load_document (null root: an empty section). Absent or null:
  /// an empty section. Present but not a mapping: "<file>: <name>: must be a mapping".
  static Result<YamlSection> open(const YAML::Node& root, std::string name, std::string_view source) {
    if (!root || !root.IsMap()) return YamlSection(YAML::Node(), std::move(name), source);
    // Bind with the constructor: Node::operator= assigns through to the node's value and throws on a
    // lookup that found nothing.
    const YAML::Node node = root[name];
    if (!node || node.IsNull()) return YamlSection(YAML::Node(), std::move(name), source);
    if (!node.IsMap()) return invalid_argument(std::string(source) + ": " + name + ": must be a mapping");
    return YamlSection(node, std::move(name), source);
  }

  /// The document itself as a section whose keys are the section names (messages: "<file>: <key>").
  static YamlSection root(const YAML::Node& root, std::string_view source) {
    return YamlSection(root && root.IsMap() ? root : YAML::Node(), "", source);
  }

  bool present() const { return node_.IsDefined() && node_.IsMap(); }
  bool has(std::string_view key) const { return present() && static_cast<bool>(node_[std::string(key)]); }

  /// "<file>: <section>.<key>" (or "<file>: <key>" at the root): the prefix of messages about a key.
  std::string where(std::string_view key) const {
    std::string s = source_ + ": " + name_;
    if (!name_.empty()) s += '.';
    s += key;
    return s;
  }

  /// Every key must be one of `known`; with Values::scalars every value must be a scalar too. Keys
  /// are checked in document order and the first offender is reported; an unknown key's message
  /// lists the known ones.
  Status check_keys(std::initializer_list<std::string_view> known, Values values = Values::scalars) const {
    if (!present()) return Status::OK();
    for (const auto& kv : node_) {
      const auto key = kv.first.as<std::string>("");
      bool found = false;
      for (auto k : known) found = found || k == key;
      if (!found) {
        std::string list;
        for (auto k : known) {
          if (!list.empty()) list += ", ";
          list += k;
        }
        return invalid_argument(where(key) + ": unknown key (known: " + list + ")");
      }
      if (values == Values::scalars && !kv.second.IsScalar()) {
        return invalid_argument(where(key) + ": must be a scalar");
      }
    }
    return Status::OK();
  }

  /// Each of `keys` that is present must have a scalar value ("<file>: <section>.<key>: must be a
  /// scalar"): for a section that mixes scalars and lists, checked with Values::anything.
  Status check_scalars(std::initializer_list<std::string_view> keys) const {
    for (auto key : keys) {
      if (has(key) && !node_[std::string(key)].IsScalar()) return invalid_argument(where(key) + ": must be a scalar");
    }
    return Status::OK();
  }

  /// The value of `key` as yaml-cpp holds it, for lists and matrices; an undefined node when absent.
  YAML::Node value(std::string_view key) const { return present() ? node_[std::string(key)] : YAML::Node(); }

  /// No key may appear twice. yaml-cpp keeps both entries and a lookup sees only the first, so a
  /// repeated key would silently ignore the later value.
  Status check_unique_keys() const {
    if (!present()) return Status::OK();
    std::set<std::string> seen;
    for (const auto& kv : node_) {
      const auto key = kv.first.as<std::string>("");
      if (!seen.insert(key).second) return invalid_argument(where(key) + ": appears twice");
    }
    return Status::OK();
  }

  /// The scalar text of `key`. Only after check_keys (Values::scalars) and has(key).
  std::string text(std::string_view key) const { return node_[std::string(key)].as<std::string>(""); }

  /// A decimal integer in 0..max into `out`; absent keys leave `out` unchanged.
  Status read_uint(std::string_view key, uint64_t max, uint64_t& out) const {
    if (!has(key)) return Status::OK();
    const std::string t = text(key);
    try {
      size_t used = 0;
      long long v = std::stoll(t, &used);
      if (used != t.size() || v < 0 || static_cast<uint64_t>(v) > max) throw std::out_of_range("");
      out = static_cast<uint64_t>(v);
    } catch (const std::exception&) {
      return invalid_argument(where(key) + ": '" + t + "' is not an integer in 0.." + std::to_string(max));
    }
    return Status::OK();
  }

  /// Like read_uint into a narrower integer (max must fit in it).
  template <class Int>
  Status read_uint_as(std::string_view key, uint64_t max, Int& out) const {
    uint64_t v = out;
    EMBER_RETURN_IF_ERROR(read_uint(key, max, v));
    out = static_cast<Int>(v);
    return Status::OK();
  }

  /// `parse(text) -> Result<T>` (parse_bytes, parse_duration_us, parse_host_port, ...) into `out`;
  /// its Error gets the "<file>: <section>.<key>" prefix. Absent keys leave `out` unchanged.
  template <class T, class Parse>
  Status read(std::string_view key, T& out, Parse&& parse) const {
    if (!has(key)) return Status::OK();
    auto r = parse(text(key));
    if (!r.ok()) return r.error().with_context(where(key));
    out = std::move(r).value();
    return Status::OK();
  }

  /// A word of a fixed set (an enum's), read with `parse`; an empty word is "must not be empty".
  template <class T, class Parse>
  Status read_word(std::string_view key, T& out, Parse&& parse) const {
    if (has(key) && text(key).empty()) return invalid_argument(where(key) + ": must not be empty");
    return read(key, out, std::forward<Parse>(parse));
  }

  /// true/false (YAML 1.1 spellings yes/no/on/off are accepted too, as yaml-cpp reads them).
  Status read_bool(std::string_view key, bool& out) const {
    if (!has(key)) return Status::OK();
    bool v = false;
    if (!YAML::convert<bool>::decode(node_[std::string(key)], v)) {
      return invalid_argument(where(key) + ": '" + text(key) + "' is not a boolean (true or false)");
    }
    out = v;
    return Status::OK();
  }

  /// A non-empty string.
  Status read_string(std::string_view key, std::string& out) const {
    if (!has(key)) return Status::OK();
    std::string t = text(key);
    if (t.empty()) return invalid_argument(where(key) + ": must not be empty");
    out = std::move(t);
    return Status::OK();
  }

 private:
  YamlSection(YAML::Node node, std::string name, std::string_view source)
      : node_(std::move(node)), name_(std::move(name)), source_(source) {}

  YAML::Node node_;
  std::string name_;
  std::string source_;
};

}  // namespace ember::config_yaml
