// importer/hf_config.cpp: config.json read into a family's numbers (the refusals, which the import
// reports, are in hf_import_test.cpp's table), the rotary tables against torch's float32 values,
// GPT-2's scale and activation options.
#include <gtest/gtest.h>

#include <cstring>

#include "importer/hf_config.hpp"
#include "tests/importer/hf_fixture.hpp"

namespace ember::importer {
namespace hf_config_test {

using ember::testing::must;
using hf_fixture::json;

TEST(HfConfig, ReadsEachFamilysKeys) {
  hf_fixture::Llama f;
  f.model_type = "mistral";
  f.head_dim = 8;
  json j = f.config();
  j["eos_token_id"] = {2, 7};
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};  // the older spelling of rope_type
  const HfConfig c = must(parse_hf_config(j.dump(), "config.json"));
  EXPECT_EQ(c.family, HfFamily::llama);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.kv_heads, 2);
  EXPECT_EQ(c.context_length, 64);
  EXPECT_EQ(c.rope, RopeScaling::linear);
  EXPECT_EQ(c.rope_factor, 2.0);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{2, 7}));
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(attention_scale(c, 1), 1.0f / std::sqrt(8.0f));

  const HfConfig g = must(parse_hf_config(hf_fixture::Gpt2().config().dump(), "config.json"));
  EXPECT_EQ(g.family, HfFamily::gpt2);
  EXPECT_EQ(g.kv_heads, 2);
  EXPECT_EQ(g.head_dim, 4);
  EXPECT_EQ(g.intermediate, 32);
  EXPECT_TRUE(g.tie_word_embeddings);
  EXPECT_EQ(g.activation, HfActivation::gelu_tanh);
}

TEST(HfConfig, RotaryTablesAreTransformersFloat32) {
  HfConfig c;
  c.family = HfFamily::llama;
  c.head_dim = 8;
  c.rope_theta = 10000.0;
  const std::vector<float> plain = rope_inv_freq(c);
  EXPECT_EQ(plain, (std::vector<float>{1.0f, 0.1f, 0.01f, 0.001f}));
  // Llama 3.1 scaling at theta 500000, D = 16, factor 8, original context 64: the first frequency
  // kept, the second smoothed, the rest divided; torch's float32 values (tools/llm_reference.py).
  c.head_dim = 16;
  c.rope_theta = 500000.0;
  c.rope = RopeScaling::llama3;
  c.rope_factor = 8;
  c.low_freq_factor = 1;
  c.high_freq_factor = 4;
  c.original_context = 64;
  const uint32_t torch_bits[] = {0x3f800000, 0x3da29e0c, 0x3b9a08c8, 0x3a6ef74f,
                                 0x39395d21, 0x380fc8f8, 0x36df10c4, 0x35ad07a7};
  const std::vector<float> scaled = rope_inv_freq(c);
  ASSERT_EQ(scaled.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &scaled[i], 4);
    // Within one unit in the last place: libm's powf and torch's may round the last bit apart.
    EXPECT_LE(std::abs(static_cast<int64_t>(bits) - static_cast<int64_t>(torch_bits[i])), 1) << i;
  }
}

TEST(HfConfig, Gpt2OptionsSetTheScaleAndActivation) {
  json c = hf_fixture::Gpt2().config();
  c["scale_attn_by_inverse_layer_idx"] = true;
  c["activation_function"] = "gelu";
  HfConfig h = must(parse_hf_config(c.dump(), "config.json"));
  EXPECT_FLOAT_EQ(attention_scale(h, 0), 0.5f);
  EXPECT_FLOAT_EQ(attention_scale(h, 3), 0.125f);
  EXPECT_EQ(h.activation, HfActivation::gelu);
  c["activation_function"] = "swish";
  auto bad = parse_hf_config(c.dump(), "config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("activation_function 'swish'"), std::string::npos);
  c["activation_function"] = "gelu_new";
  c["add_cross_attention"] = true;
  bad = parse_hf_config(c.dump(), "config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("add_cross_attention"), std::string::npos);
}

}  // namespace hf_config_test
}  // namespace ember::importer
