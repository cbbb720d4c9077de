// The sampling and stopping fields both generate APIs share: each lands in its place of the
// request, null leaves the default, vLLM's top_k -1 means off, a negative seed is kept as its bits,
// a wrong JSON type is refused naming the field, and lists past their bound are refused before they
// are read.
#include "actors/gateway/http/generation_params_json.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace generation_params_json_test {

using nlohmann::json;

/// Reads every field of `object` into a fresh request; the first error's message and param.
Status read_all(const std::string& object, generate_request& r, std::string* param = nullptr) {
  const json parsed = json::parse(object);
  for (const auto& [key, value] : parsed.items()) {
    bool known = false;
    EMBER_RETURN_IF_ERROR(read_generation_param(key, value, r, known, param));
    EXPECT_TRUE(known) << key;
  }
  return {};
}

TEST(GenerationParamsJson, EachFieldLandsInItsPlace) {
  generate_request r;
  const Status s = read_all(R"({"max_tokens": 7, "temperature": 0.25, "top_p": 0.5, "top_k": 40, "min_p": 0.1,
      "seed": 42, "presence_penalty": 1, "frequency_penalty": -1, "repetition_penalty": 1.5,
      "logit_bias": {"50256": -100, "7": 2}, "stop": ["a", "b"], "stop_token_ids": [1, 2], "ignore_eos": true})",
                            r);
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(r.max_tokens, 7u);
  EXPECT_EQ(r.sampling.temperature, 0.25f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_TRUE(r.sampling.has_seed);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_EQ(r.sampling.presence_penalty, 1.0f);
  EXPECT_EQ(r.sampling.frequency_penalty, -1.0f);
  EXPECT_EQ(r.sampling.repetition_penalty, 1.5f);
  ASSERT_EQ(r.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(r.sampling.logit_bias[0].token, 50256);  // object keys in order
  EXPECT_EQ(r.sampling.logit_bias[0].bias, -100.0f);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.stop_token_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_EQ(generation_param_names().size(), 13u);
}

TEST(GenerationParamsJson, NullLeavesTheDefaultAndVllmSpellingsMeanWhatVllmMeans) {
  generate_request r;
  ASSERT_TRUE(read_all(R"({"max_tokens": null, "temperature": null, "seed": null, "stop": null, "logit_bias": null,
                            "stop_token_ids": null, "ignore_eos": null, "top_k": null})",
                       r)
                  .ok());
  EXPECT_EQ(r.max_tokens, 0u);
  EXPECT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.sampling.has_seed);
  EXPECT_TRUE(r.stop.empty());
  ASSERT_TRUE(read_all(R"({"top_k": -1, "seed": -1, "stop": "END"})", r).ok());
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_EQ(r.sampling.seed, UINT64_MAX);  // -1's 64 bits
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  bool known = true;
  EXPECT_TRUE(read_generation_param("prompt", json("x"), r, known, nullptr).ok());
  EXPECT_FALSE(known);
}

TEST(GenerationParamsJson, AWrongTypeOrAListPastItsBoundIsRefusedNamingTheField) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {R"({"temperature": "0.5"})", "temperature", "'temperature' must be a number, not a string"},
      {R"({"max_tokens": 2.5})", "max_tokens", "'max_tokens' must be an integer, not a number"},
      {R"({"max_tokens": 0})", "max_tokens", "'max_tokens' must be at least 1, not 0"},
      {R"({"max_tokens": 4294967296})", "max_tokens", "'max_tokens' must be at most 4294967295, not 4294967296"},
      {R"({"top_k": -2})", "top_k", "'top_k' must be at least -1, not -2"},
      {R"({"seed": "7"})", "seed", "'seed' must be an integer, not a string"},
      {R"({"ignore_eos": 1})", "ignore_eos", "'ignore_eos' must be true or false, not an integer"},
      {R"({"stop": 5})", "stop", "'stop' must be a string or a list of strings, not an integer"},
      {R"({"stop": ["a", 5]})", "stop", "'stop' must hold strings, not an integer"},
      {R"({"stop_token_ids": [1, "2"]})", "stop_token_ids", "'stop_token_ids' must hold token ids (integers)"},
      {R"({"stop_token_ids": [4294967296]})", "stop_token_ids", "'stop_token_ids' holds 4294967296, which is no token id"},
      {R"({"logit_bias": [1]})", "logit_bias", "'logit_bias' must be an object of token ids to biases, not a list"},
      {R"({"logit_bias": {"x1": 2}})", "logit_bias", "'logit_bias' keys must be token ids, not 'x1'"},
      {R"({"logit_bias": {"1": "2"}})", "logit_bias", "'logit_bias' values must be numbers, not a string"},
  };
  for (const auto& [object, field, message] : cases) {
    generate_request r;
    std::string param;
    const Status s = read_all(object, r, &param);
    ASSERT_FALSE(s.ok()) << object;
    EXPECT_EQ(s.error().code(), ErrorCode::invalid_argument);
    EXPECT_EQ(s.error().message(), message) << object;
    EXPECT_EQ(param, field) << object;
  }
  // Past the bound: refused by the count, before a value is read.
  json stop = json::array(), ids = json::array(), bias = json::object();
  for (int i = 0; i <= static_cast<int>(kMaxStopStrings); ++i) stop.push_back(i);  // not even strings
  for (int i = 0; i <= static_cast<int>(kMaxStopTokenIds); ++i) ids.push_back("x");
  for (int i = 0; i <= static_cast<int>(kMaxLogitBias); ++i) bias[std::to_string(i)] = "x";
  generate_request r;
  bool known = false;
  Status s = read_generation_param("stop", stop, r, known, nullptr);
  EXPECT_EQ(s.error().message(), "'stop' holds 17 strings; at most 16");
  s = read_generation_param("stop_token_ids", ids, r, known, nullptr);
  EXPECT_EQ(s.error().message(), "'stop_token_ids' holds 65 token ids; at most 64");
  s = read_generation_param("logit_bias", bias, r, known, nullptr);
  EXPECT_EQ(s.error().message(), "'logit_bias' holds 301 entries; at most 300");
}

TEST(GenerationParamsJson, TextThatIsNotUtf8IsWrittenWithReplacementCharacters) {
  EXPECT_EQ(dump_json(json{{"text", std::string("a\xff") + "b"}}), "{\"text\":\"a\xEF\xBF\xBD" "b\"}");
  EXPECT_EQ(unknown_fields_error({"a", "b"}, "/x", {"c", "d"}, nullptr).message(), "unknown fields 'a', 'b': /x takes c, d");
  EXPECT_EQ(unknown_fields_error({"a"}, "/x", {"c"}, nullptr, "parameter").message(), "unknown parameter 'a': /x takes c");
}

}  // namespace generation_params_json_test
}  // namespace ember
