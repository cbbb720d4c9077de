// fmt's formatter for model_key, for the node's logs: "<name>/<version>", as model_key::to_string()
// writes it, but built only when the line is logged (a debug line per dispatch costs nothing when
// debug is off). Included by the node's actor files only; pure: anyone.
#pragma once

#include <fmt/format.h>

#include "actors/model_key.hpp"

template <>
struct fmt::formatter<ember::model_key> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(const ember::model_key& key, FormatContext& ctx) const {
    return fmt::format_to(ctx.out(), "{}/{}", key.name, key.version);
  }
};
