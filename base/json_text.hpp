// Parsing JSON text that comes from outside (model.json, safetensors headers, request bodies).
//
// Pure; anyone, any thread; never throws. nlohmann's parser is iterative, but dump() and the
// destructor recurse, so a value nested thousands deep (a 200 KB file of brackets) would overflow
// the stack when an error message prints it. parse_json_text refuses such text while parsing.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "base/status.hpp"

namespace ember {

/// Real inputs nest at most 6 deep (nested KServe data); this leaves room and stops abuse.
inline constexpr int kMaxJsonDepth = 64;

/// The parsed value, or invalid_argument "not valid JSON" / "JSON nested deeper than 64 levels"
/// (callers add the file or field and may map the code, e.g. to corrupt for weight files).
Result<nlohmann::json> parse_json_text(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace ember
