// The fields OpenAI's completions and chat bodies and KServe's generate parameters share: how to
// sample and when to stop, read from JSON into a generate_request (actors/generation_messages.hpp).
// openai_json.hpp and kserve_generate_json.hpp read their own envelopes and hand every other field
// here.
//
//   max_tokens          integer >= 1                    generate_request::max_tokens
//   temperature         number                          sampling.temperature
//   top_p               number                          sampling.top_p
//   top_k               integer; -1 or 0: off (vLLM)    sampling.top_k (0 for -1)
//   min_p               number (vLLM)                   sampling.min_p
//   seed                integer (a negative one is its 64-bit two's complement)
//   presence_penalty    number                          sampling.presence_penalty
//   frequency_penalty   number                          sampling.frequency_penalty
//   repetition_penalty  number (vLLM)                   sampling.repetition_penalty
//   logit_bias          {"<token id>": number, ...}     sampling.logit_bias
//   stop                string, or list of strings      stop
//   stop_token_ids      list of integers (vLLM)         stop_token_ids
//   ignore_eos          boolean (vLLM)                  ignore_eos
//
// null means "not given" for every field (OpenAI's clients send it for unset fields). A value of
// the wrong JSON type is refused here; ranges are check_generate_request's. Lists and objects past
// their bound (kMaxStopStrings, kMaxStopTokenIds, kMaxLogitBias) are refused before they are read,
// so that a large body cannot make a large request.
//
// Who may call: pure, anyone, any thread; never throws.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "actors/generation_messages.hpp"
#include "base/status.hpp"

namespace ember {

/// The shared fields' names, in the order above.
const std::vector<std::string_view>& generation_param_names();

/// Reads field `name` = `value` into `r` when it is one of the shared fields; `known` says whether
/// it was. invalid_argument naming the field ("'temperature' must be a number, not a string"),
/// with `param` (when given) set to the name.
Status read_generation_param(std::string_view name, const nlohmann::json& value, generate_request& r, bool& known,
                             std::string* param);

// -- helpers the envelopes share --

/// "a string", "a list", "an integer"...: a JSON value's kind as an error message says it.
std::string json_kind(const nlohmann::json& value);

/// An integer in [lo, hi] (errors: "'<name>' must be an integer, not a string", "... at least lo",
/// "... at most hi").
Status read_integer(std::string_view name, const nlohmann::json& value, int64_t lo, int64_t hi, int64_t& out,
                    std::string* param);

/// A list of at most `most` token ids (int32; the sign is check_generate_request's). Lists past
/// `most` are refused before they are read, in check_generate_request's words.
Status read_token_ids(std::string_view name, const nlohmann::json& value, size_t most, std::vector<int32_t>& out,
                      std::string* param);

/// invalid_argument `message`, setting `param` to `field`.
Error field_error(std::string* param, std::string_view field, std::string message);

/// The request's "unknown field(s) 'a', 'b': <api> takes …" refusal; `api` names the endpoint
/// ("/v1/completions"), `accepted` what it takes, `noun` what they are ("field", "parameter").
/// `param` is set to the first unknown name.
Error unknown_fields_error(const std::vector<std::string>& unknown, std::string_view api,
                           const std::vector<std::string_view>& accepted, std::string* param,
                           std::string_view noun = "field");

/// `v` dumped as JSON, with invalid UTF-8 replaced by U+FFFD (never throws; generated text may
/// carry what a tokenizer decoded from bytes).
std::string dump_json(const nlohmann::json& v);

}  // namespace ember
