// The sampling and stopping fields both generate APIs share (see generation_params_json.hpp).
#include "actors/gateway/http/generation_params_json.hpp"

#include <charconv>
#include <cstdint>
#include <limits>

namespace ember {

namespace {

using nlohmann::json;

Status read_number(std::string_view name, const json& v, float& out, std::string* param) {
  if (!v.is_number()) {
    return field_error(param, name, "'" + std::string(name) + "' must be a number, not " + json_kind(v));
  }
  out = v.get<float>();
  return {};
}

}  // namespace

Status read_integer(std::string_view name, const json& v, int64_t lo, int64_t hi, int64_t& out, std::string* param) {
  const std::string quoted = "'" + std::string(name) + "'";
  if (!v.is_number_integer()) return field_error(param, name, quoted + " must be an integer, not " + json_kind(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    return field_error(param, name, quoted + " must be at most " + std::to_string(hi) + ", not " + v.dump());
  }
  const int64_t n = v.get<int64_t>();
  if (n < lo) return field_error(param, name, quoted + " must be at least " + std::to_string(lo) + ", not " + v.dump());
  if (n > hi) return field_error(param, name, quoted + " must be at most " + std::to_string(hi) + ", not " + v.dump());
  out = n;
  return {};
}

Status read_token_ids(std::string_view name, const json& v, size_t most, std::vector<int32_t>& out,
                      std::string* param) {
  const std::string quoted = "'" + std::string(name) + "'";
  if (!v.is_array()) return field_error(param, name, quoted + " must be a list of token ids, not " + json_kind(v));
  if (v.size() > most) {
    return field_error(param, name,
                       quoted + " holds " + std::to_string(v.size()) + " token ids; at most " + std::to_string(most));
  }
  out.clear();
  out.reserve(v.size());
  for (const auto& id : v) {
    if (!id.is_number_integer()) return field_error(param, name, quoted + " must hold token ids (integers)");
    if (id.is_number_unsigned() ? id.get<uint64_t>() > INT32_MAX
                                : id.get<int64_t>() > INT32_MAX || id.get<int64_t>() < INT32_MIN) {
      return field_error(param, name, quoted + " holds " + id.dump() + ", which is no token id");
    }
    out.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return {};
}

namespace {

Status read_stop_strings(const json& v, std::vector<std::string>& out, std::string* param) {
  out.clear();
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
    return {};
  }
  if (!v.is_array()) return field_error(param, "stop", "'stop' must be a string or a list of strings, not " + json_kind(v));
  if (v.size() > kMaxStopStrings) {
    return field_error(param, "stop",
                       "'stop' holds " + std::to_string(v.size()) + " strings; at most " + std::to_string(kMaxStopStrings));
  }
  for (const auto& s : v) {
    if (!s.is_string()) return field_error(param, "stop", "'stop' must hold strings, not " + json_kind(s));
    out.push_back(s.get<std::string>());
  }
  return {};
}

Status read_logit_bias(const json& v, std::vector<token_bias>& out, std::string* param) {
  if (!v.is_object()) {
    return field_error(param, "logit_bias", "'logit_bias' must be an object of token ids to biases, not " + json_kind(v));
  }
  if (v.size() > kMaxLogitBias) {
    return field_error(param, "logit_bias",
                       "'logit_bias' holds " + std::to_string(v.size()) + " entries; at most " +
                           std::to_string(kMaxLogitBias));
  }
  out.clear();
  for (const auto& [key, bias] : v.items()) {
    int32_t token = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), token);
    if (key.empty() || ec != std::errc() || end != key.data() + key.size()) {
      return field_error(param, "logit_bias", "'logit_bias' keys must be token ids, not '" + key + "'");
    }
    if (!bias.is_number()) {
      return field_error(param, "logit_bias", "'logit_bias' values must be numbers, not " + json_kind(bias));
    }
    out.push_back({token, bias.get<float>()});
  }
  return {};
}

}  // namespace

const std::vector<std::string_view>& generation_param_names() {
  static const std::vector<std::string_view> kNames = {
      "max_tokens",       "temperature",       "top_p",      "top_k", "min_p",          "seed",      "presence_penalty",
      "frequency_penalty", "repetition_penalty", "logit_bias", "stop",  "stop_token_ids", "ignore_eos"};
  return kNames;
}

Status read_generation_param(std::string_view name, const json& value, generate_request& r, bool& known,
                             std::string* param) {
  known = true;
  sampling_params& s = r.sampling;
  if (name == "max_tokens") {
    if (value.is_null()) return {};
    int64_t n = 0;
    EMBER_RETURN_IF_ERROR(read_integer(name, value, 1, std::numeric_limits<uint32_t>::max(), n, param));
    r.max_tokens = static_cast<uint32_t>(n);
    return {};
  }
  if (name == "top_k") {
    if (value.is_null()) return {};
    int64_t n = 0;
    EMBER_RETURN_IF_ERROR(read_integer(name, value, -1, std::numeric_limits<int32_t>::max(), n, param));
    s.top_k = n == -1 ? 0 : static_cast<int32_t>(n);
    return {};
  }
  if (name == "seed") {
    if (value.is_null()) return {};
    if (!value.is_number_integer()) return field_error(param, name, "'seed' must be an integer, not " + json_kind(value));
    s.has_seed = true;
    s.seed = value.is_number_unsigned() ? value.get<uint64_t>() : static_cast<uint64_t>(value.get<int64_t>());
    return {};
  }
  if (name == "ignore_eos") {
    if (value.is_null()) return {};
    if (!value.is_boolean()) return field_error(param, name, "'ignore_eos' must be true or false, not " + json_kind(value));
    r.ignore_eos = value.get<bool>();
    return {};
  }
  if (name == "stop") return value.is_null() ? Status{} : read_stop_strings(value, r.stop, param);
  if (name == "stop_token_ids") return value.is_null() ? Status{} : read_token_ids(name, value, kMaxStopTokenIds, r.stop_token_ids, param);
  if (name == "logit_bias") return value.is_null() ? Status{} : read_logit_bias(value, s.logit_bias, param);
  float* f = name == "temperature"          ? &s.temperature
             : name == "top_p"              ? &s.top_p
             : name == "min_p"              ? &s.min_p
             : name == "presence_penalty"   ? &s.presence_penalty
             : name == "frequency_penalty"  ? &s.frequency_penalty
             : name == "repetition_penalty" ? &s.repetition_penalty
                                            : nullptr;
  if (!f) {
    known = false;
    return {};
  }
  return value.is_null() ? Status{} : read_number(name, value, *f, param);
}

std::string json_kind(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "a list";
    case json::value_t::object:
      return "an object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    default:
      return "another kind of value";
  }
}

Error field_error(std::string* param, std::string_view field, std::string message) {
  if (param) *param = std::string(field);
  return invalid_argument(std::move(message));
}

Error unknown_fields_error(const std::vector<std::string>& unknown, std::string_view api,
                           const std::vector<std::string_view>& accepted, std::string* param, std::string_view noun) {
  std::string names;
  for (const auto& n : unknown) names += (names.empty() ? "'" : ", '") + n + "'";
  std::string takes;
  for (auto n : accepted) takes += (takes.empty() ? "" : ", ") + std::string(n);
  return field_error(param, unknown.empty() ? std::string_view() : std::string_view(unknown.front()),
                     "unknown " + std::string(noun) + (unknown.size() == 1 ? " " : "s ") + names + ": " +
                         std::string(api) + " takes " + takes);
}

std::string dump_json(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace ember
