#include "text/chat_template.hpp"

#include <array>

#include "text/tokenizer.hpp"
#include "text/utf8.hpp"

namespace ember::text {

namespace chat_template_detail {

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

/// What the built-in templates do not render; a template using any of them is not recognised.
constexpr std::array<std::string_view, 5> kUnrendered = {"tools", "documents", "Cutting Knowledge", "date_string",
                                                         "strftime_now"};

/// Jinja string-literal escapes (\n, \t, \\, \', \") resolved.
std::string unescape_literal(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out.push_back(s[i]);
      continue;
    }
    const char c = s[++i];
    out.push_back(c == 'n' ? '\n' : c == 't' ? '\t' : c);
  }
  return out;
}

/// Qwen2-Instruct's default system message: the literal text of '<|im_start|>system\n...<|im_end|>'
/// in a branch taken when the first message is not a system message. Empty when there is none.
std::string chatml_default_system(std::string_view source) {
  if (!contains(source, "messages[0]['role'] != 'system'") &&
      !contains(source, "messages[0][\"role\"] != \"system\"")) {
    return {};
  }
  constexpr std::string_view kHead = "<|im_start|>system";
  for (size_t at = source.find(kHead); at != std::string_view::npos; at = source.find(kHead, at + 1)) {
    std::string_view rest = source.substr(at + kHead.size());
    if (rest.substr(0, 2) == "\\n")
      rest.remove_prefix(2);
    else if (rest.substr(0, 1) == "\n")
      rest.remove_prefix(1);
    else
      continue;
    const size_t end = rest.find("<|im_end|>");
    if (end == std::string_view::npos || end == 0) continue;
    const std::string_view text = rest.substr(0, end);
    // Only a literal: an expression ("' + message['content'] + '") is not a default.
    if (text.find_first_of("'\"{}") != std::string_view::npos) continue;
    return unescape_literal(text);
  }
  return {};
}

Error not_recognised(std::string_view why) {
  return unsupported("chat_template: " + std::string(why) +
                     "; Ember renders built-in templates only (llama3, llama2, chatml, plain): name the family in "
                     "the model's config to use one");
}

Status check_messages(std::span<const ChatMessage> messages) {
  if (messages.empty()) return invalid_argument("chat: no messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (m.role != "system" && m.role != "user" && m.role != "assistant") {
      return invalid_argument(where + ".role \"" + m.role + "\": expected system, user or assistant");
    }
    if (m.role == "system" && i != 0) return invalid_argument(where + ": a system message may only come first");
    if (!valid_utf8(m.content)) return invalid_argument(where + ".content: not valid UTF-8");
  }
  return Status::OK();
}

}  // namespace chat_template_detail

std::string_view to_string(ChatFamily family) {
  switch (family) {
    case ChatFamily::llama3:
      return "llama3";
    case ChatFamily::llama2:
      return "llama2";
    case ChatFamily::chatml:
      return "chatml";
    case ChatFamily::plain:
      return "plain";
  }
  return "?";
}

Result<ChatTemplate> ChatTemplate::for_family(std::string_view family, std::string bos, std::string eos) {
  ChatFamily f;
  if (family == "llama3")
    f = ChatFamily::llama3;
  else if (family == "llama2")
    f = ChatFamily::llama2;
  else if (family == "chatml")
    f = ChatFamily::chatml;
  else if (family == "plain")
    f = ChatFamily::plain;
  else
    return invalid_argument("chat family \"" + std::string(family) + "\": expected llama3, llama2, chatml or plain");
  if ((f == ChatFamily::llama3 || f == ChatFamily::llama2) && bos.empty()) {
    return invalid_argument("chat family " + std::string(family) + " needs the tokenizer's BOS token, and it has none");
  }
  if (f == ChatFamily::llama2 && eos.empty()) {
    return invalid_argument("chat family llama2 needs the tokenizer's EOS token, and it has none");
  }
  return ChatTemplate(f, std::move(bos), std::move(eos));
}

Result<ChatTemplate> ChatTemplate::recognise(std::string_view source, std::string bos, std::string eos) {
  namespace d = chat_template_detail;
  for (std::string_view feature : d::kUnrendered) {
    if (d::contains(source, feature)) {
      return d::not_recognised("the template uses \"" + std::string(feature) + "\", which no built-in one renders");
    }
  }
  if (d::contains(source, "<|start_header_id|>") && d::contains(source, "<|eot_id|>")) {
    auto t = for_family("llama3", std::move(bos), std::move(eos));
    if (t.ok()) t->always_generation_prompt_ = !d::contains(source, "add_generation_prompt");
    return t;
  }
  if (d::contains(source, "[INST]") && d::contains(source, "<<SYS>>"))
    return for_family("llama2", std::move(bos), std::move(eos));
  if (d::contains(source, "<|im_start|>")) {
    auto t = for_family("chatml", std::move(bos), std::move(eos));
    if (t.ok()) t->default_system_ = d::chatml_default_system(source);
    return t;
  }
  return d::not_recognised("not a template Ember knows");
}

Result<ChatTemplate> ChatTemplate::for_tokenizer(const Tokenizer& tokenizer, std::string_view family) {
  if (!family.empty()) return for_family(family, tokenizer.bos_token(), tokenizer.eos_token());
  if (tokenizer.chat_template().empty()) {
    return unsupported(
        "the tokenizer has no chat_template; name a chat family (llama3, llama2, chatml, plain) in the "
        "model's config");
  }
  return recognise(tokenizer.chat_template(), tokenizer.bos_token(), tokenizer.eos_token());
}

Result<std::string> ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  if (Status s = chat_template_detail::check_messages(messages); !s.ok()) return s.error();
  std::string out;
  switch (family_) {
    case ChatFamily::llama3:
      for (size_t i = 0; i < messages.size(); ++i) {
        if (i == 0) out += bos_;
        out += "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n";
        out += python_strip(messages[i].content);
        out += "<|eot_id|>";
      }
      if (add_generation_prompt || always_generation_prompt_)
        out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
    case ChatFamily::llama2: {
      const bool has_system = messages[0].role == "system";
      const auto turns = messages.subspan(has_system ? 1 : 0);
      if (turns.empty()) return invalid_argument("chat: a system message and no user message");
      for (size_t k = 0; k < turns.size(); ++k) {
        const ChatMessage& m = turns[k];
        if ((m.role == "user") != (k % 2 == 0)) {
          return invalid_argument("messages[" + std::to_string(k + (has_system ? 1 : 0)) +
                                  "]: conversation roles must alternate user/assistant/user/assistant/...");
        }
        std::string content = m.content;
        if (k == 0 && has_system) content = "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n" + m.content;
        const std::string_view stripped = python_strip(content);
        if (m.role == "user") {
          out += bos_ + "[INST] ";
          out += stripped;
          out += " [/INST]";
        } else {
          out += " ";
          out += stripped;
          out += " " + eos_;
        }
      }
      return out;
    }
    case ChatFamily::chatml:
      for (size_t i = 0; i < messages.size(); ++i) {
        if (i == 0 && messages[0].role != "system" && !default_system_.empty()) {
          out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
        }
        out += "<|im_start|>" + messages[i].role + "\n" + messages[i].content + "<|im_end|>\n";
      }
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      return out;
    case ChatFamily::plain:
      for (const ChatMessage& m : messages) {
        out += m.role == "system" ? "System: " : m.role == "user" ? "User: " : "Assistant: ";
        out += m.content + "\n";
      }
      if (add_generation_prompt) out += "Assistant:";
      return out;
  }
  return internal_error("chat: unknown family");
}

}  // namespace ember::text
