// Reading the fields of tokenizer.json and tokenizer_config.json, which are untrusted: every access
// checks the type and says which field was wrong ("pre_tokenizer.pretokenizers[1].behavior: expected
// a string, got number"), so a malformed file is a clear error and never an exception or a crash.
//
// Pure: anyone, any thread. `where` is the JSON path of `j` used in messages ("" for the root).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.hpp"

namespace ember::text {

/// "where.key" (or "key" when where is empty).
std::string field_path(std::string_view where, std::string_view key);

/// JSON's name for the type of `j` ("string", "number", "object"...).
std::string json_type_name(const nlohmann::json& j);

/// j[key] when `j` is an object that has it and it is not null; nullptr otherwise.
const nlohmann::json* member(const nlohmann::json& j, std::string_view key);

/// j[key], which must be a string.
Result<std::string> string_field(const nlohmann::json& j, std::string_view key, std::string_view where);

/// j[key] when present and not null, which must then be a string.
Result<std::optional<std::string>> optional_string_field(const nlohmann::json& j, std::string_view key,
                                                         std::string_view where);

/// j[key] when present and not null, which must then be a boolean; `fallback` otherwise.
Result<bool> bool_field(const nlohmann::json& j, std::string_view key, bool fallback, std::string_view where);

/// j[key], which must be an integer in [lo, hi].
Result<int64_t> int_field(const nlohmann::json& j, std::string_view key, int64_t lo, int64_t hi,
                          std::string_view where);

/// invalid_argument "<where>: expected <what>, got <type of j>".
Error type_error(std::string_view where, std::string_view what, const nlohmann::json& j);

}  // namespace ember::text
