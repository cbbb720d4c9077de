#include "base/json_text.hpp"

namespace ember {

Result<nlohmann::json> parse_json_text(std::string_view text, int max_depth) {
  bool too_deep = false;
  nlohmann::json value = nlohmann::json::parse(
      text.begin(), text.end(),
      [&too_deep, max_depth](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
        if (depth > max_depth) too_deep = true;
        return !too_deep;  // keep nothing once too deep
      },
      /*allow_exceptions=*/false);
  if (too_deep) return invalid_argument("JSON nested deeper than " + std::to_string(max_depth) + " levels");
  if (value.is_discarded()) return invalid_argument("not valid JSON");
  return value;
}

}  // namespace ember
