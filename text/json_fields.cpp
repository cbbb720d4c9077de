#include "text/json_fields.hpp"

namespace ember::text {

std::string field_path(std::string_view where, std::string_view key) {
  if (where.empty()) return std::string(key);
  return std::string(where) + "." + std::string(key);
}

std::string json_type_name(const nlohmann::json& j) {
  if (j.is_number_integer() || j.is_number_unsigned()) return "integer";
  return j.type_name();
}

const nlohmann::json* member(const nlohmann::json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

Error type_error(std::string_view where, std::string_view what, const nlohmann::json& j) {
  return invalid_argument(std::string(where) + ": expected " + std::string(what) + ", got " + json_type_name(j));
}

Result<std::string> string_field(const nlohmann::json& j, std::string_view key, std::string_view where) {
  const nlohmann::json* v = member(j, key);
  if (v == nullptr) return invalid_argument(field_path(where, key) + ": missing");
  if (!v->is_string()) return type_error(field_path(where, key), "a string", *v);
  return v->get<std::string>();
}

Result<std::optional<std::string>> optional_string_field(const nlohmann::json& j, std::string_view key,
                                                         std::string_view where) {
  const nlohmann::json* v = member(j, key);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return type_error(field_path(where, key), "a string", *v);
  return std::optional<std::string>(v->get<std::string>());
}

Result<bool> bool_field(const nlohmann::json& j, std::string_view key, bool fallback, std::string_view where) {
  const nlohmann::json* v = member(j, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return type_error(field_path(where, key), "a boolean", *v);
  return v->get<bool>();
}

Result<int64_t> int_field(const nlohmann::json& j, std::string_view key, int64_t lo, int64_t hi,
                          std::string_view where) {
  const nlohmann::json* v = member(j, key);
  if (v == nullptr) return invalid_argument(field_path(where, key) + ": missing");
  if (!v->is_number_integer()) return type_error(field_path(where, key), "an integer", *v);
  // An unsigned value above int64's range reads as negative here and fails the range check.
  const int64_t x =
      v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ? INT64_MIN : v->get<int64_t>();
  if (x < lo || x > hi) {
    return invalid_argument(field_path(where, key) + ": " + v->dump() + " is outside [" + std::to_string(lo) + ", " +
                            std::to_string(hi) + "]");
  }
  return x;
}

}  // namespace ember::text
