// importer/hf_generation.cpp: the generation section from a folder's generation_config.json and
// tokenizer files: special tokens from each source, sampling defaults, the chat template's family
// (from tokenizer_config.json or the files beside it), and malformed files refused.
#include <gtest/gtest.h>

#include "importer/hf_generation.hpp"
#include "tests/importer/hf_fixture.hpp"

namespace ember::importer {
namespace hf_generation_test {

using ember::testing::must;
using gpu::DType;
using gpu::testing::TempDir;
using gpu::testing::write_file;
using hf_fixture::json;

HfConfig llama(std::vector<int64_t> eos = {2}, std::optional<int64_t> bos = 1) {
  hf_fixture::Llama f;
  HfConfig c = must(parse_hf_config(f.config().dump(), "config.json"));
  c.eos_token_ids = std::move(eos);
  c.bos_token_id = bos;
  return c;
}

TEST(HfGeneration, RecognisesChatTemplates) {
  EXPECT_EQ(recognise_chat_template("{{ '<|start_header_id|>' + m.role + '<|end_header_id|>\n\n' }}"), "llama3");
  EXPECT_EQ(recognise_chat_template("{{ '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>' }}"), "chatml");
  EXPECT_EQ(recognise_chat_template("{{ bos_token + '[INST] <<SYS>>\n' + system + '\n<</SYS>>\n\n' }}"), "llama2");
  EXPECT_EQ(recognise_chat_template("{{ '[INST] ' + m.content + ' [/INST]' }}"), "");  // Mistral's: no built-in
  EXPECT_EQ(recognise_chat_template(""), "");
}

TEST(HfGeneration, FillsTheSectionFromEverySource) {
  TempDir dir;
  write_file(dir / "generation_config.json", R"({"eos_token_id": [2, 3], "temperature": 0.7, "top_p": 0.8, "top_k": 5})");
  write_file(dir / "tokenizer.json", hf_fixture::tokenizer_json());
  write_file(dir / "tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "x"},
      {"name": "default", "template": "<|im_start|>{{ m }}<|im_end|>"}]})");
  const HfGeneration g = must(read_hf_generation(dir.path(), llama(), DType::bf16));
  EXPECT_EQ(g.spec.family, "llama");
  EXPECT_EQ(g.spec.kv_dtype, DType::bf16);
  EXPECT_EQ(g.spec.num_kv_layers, 2u);
  EXPECT_EQ(g.spec.eos_token_ids, (std::vector<int64_t>{2, 3}));  // config.json's, then the new ones
  EXPECT_EQ(g.spec.bos_token_id, 1);
  EXPECT_EQ(g.spec.temperature, 0.7);
  EXPECT_EQ(g.spec.top_p, 0.8);
  EXPECT_EQ(g.spec.top_k, 5);
  EXPECT_EQ(g.spec.chat_template, "chatml");
  EXPECT_EQ(g.spec.tokenizer, "tokenizer.json");
  EXPECT_EQ(g.files.tokenizer, hf_fixture::tokenizer_json());
}

TEST(HfGeneration, SpecialTokensByTheirTextWhenNoConfigNumbersThem) {
  TempDir dir;
  write_file(dir / "tokenizer.json", hf_fixture::tokenizer_json());
  write_file(dir / "tokenizer_config.json", R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "<|eot|>"})");
  write_file(dir / "chat_template.jinja", "{{ '<|start_header_id|>' + role + '<|end_header_id|>' }}");
  const HfGeneration g = must(read_hf_generation(dir.path(), llama({}, std::nullopt), DType::f32));
  EXPECT_EQ(g.spec.bos_token_id, 1);
  EXPECT_EQ(g.spec.eos_token_ids, (std::vector<int64_t>{3}));
  EXPECT_EQ(g.spec.chat_template, "llama3");
  EXPECT_FALSE(g.spec.temperature.has_value());
}

TEST(HfGeneration, NoFilesNoTokenizer) {
  TempDir dir;
  const HfGeneration g = must(read_hf_generation(dir.path(), llama(), DType::f32));
  EXPECT_TRUE(g.spec.tokenizer.empty());
  EXPECT_TRUE(g.spec.tokenizer_config.empty());
  EXPECT_TRUE(g.spec.chat_template.empty());
  EXPECT_FALSE(g.files.tokenizer.has_value());
  EXPECT_EQ(g.spec.eos_token_ids, (std::vector<int64_t>{2}));
}

TEST(HfGeneration, RefusesMalformedFilesNamingThem) {
  struct Case {
    const char* file;
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {"generation_config.json", R"({"eos_token_id": "two"})", "generation_config.json: field 'eos_token_id'"},
      {"generation_config.json", R"({"eos_token_id": 24})", "eos id 24 is not below vocab_size"},
      {"generation_config.json", R"({"top_p": 1.5})", "field 'top_p'"},
      {"generation_config.json", R"({"top_k": 100})", "field 'top_k'"},
      {"generation_config.json", "[1, 2]", "generation_config.json: must be a JSON object"},
      {"tokenizer.json", "{\"model\": ", "tokenizer.json"},
      {"tokenizer_config.json", "not json", "tokenizer_config.json"},
  };
  for (const auto& c : cases) {
    TempDir dir;
    write_file(dir / "tokenizer.json", hf_fixture::tokenizer_json());
    write_file(dir / c.file, c.text);
    auto g = read_hf_generation(dir.path(), llama(), DType::f32);
    ASSERT_FALSE(g.ok()) << c.file << " " << c.text;
    EXPECT_NE(g.error().message().find(c.expect), std::string::npos) << g.error().message();
  }
}

}  // namespace hf_generation_test
}  // namespace ember::importer
