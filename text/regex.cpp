#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/regex.hpp"

#include <pcre2.h>

#include <string>

#include "text/utf8.hpp"

namespace ember::text {

namespace regex_detail {

/// PCRE2's limits for one match: backtracking steps, and heap for the interpreter's frames (KiB).
/// Real tokenizer patterns on real text stay many orders of magnitude below both.
constexpr uint32_t kMatchLimit = 10'000'000;
constexpr uint32_t kHeapLimitKib = 64 * 1024;
/// The JIT's own stack grows from 32 KiB to this (its default is a fixed 32 KiB).
constexpr size_t kJitStackMaxBytes = 1 << 20;

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof buffer);
  return n < 0 ? "PCRE2 error " + std::to_string(code) : std::string(reinterpret_cast<const char*>(buffer));
}

/// One thread's match scratch: match data (only the whole match is read) and a match context
/// with the limits and a JIT stack. Thread-local, so a shared Regex is matched without locks.
struct Scratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;

  Scratch() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(32 * 1024, kJitStackMaxBytes, nullptr);
    if (context != nullptr) {
      pcre2_set_match_limit(context, kMatchLimit);
      pcre2_set_heap_limit(context, kHeapLimitKib);
      if (jit_stack != nullptr) pcre2_jit_stack_assign(context, nullptr, jit_stack);
    }
  }
  ~Scratch() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

/// pcre2_match at `start`: 1 and the match in `m` when it matches, 0 when not, an error otherwise.
Result<int> match_once(const pcre2_code* code, std::string_view text, size_t start, uint32_t options, Span& m) {
  Scratch& s = scratch();
  if (s.data == nullptr || s.context == nullptr) return out_of_memory("cannot allocate PCRE2 match data");
  const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start,
                             options | PCRE2_NO_UTF_CHECK, s.data, s.context);
  if (rc == PCRE2_ERROR_NOMATCH) return 0;
  if (rc < 0) return invalid_argument("gave up on this text: " + pcre2_message(rc));
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
  m = {ov[0], ov[1]};
  return 1;
}

}  // namespace regex_detail

Result<Regex> Regex::compile_with(std::string_view pattern, uint32_t options) {
  if (pattern.size() > kMaxPatternBytes) {
    return invalid_argument("regex pattern of " + std::to_string(pattern.size()) + " bytes (at most " +
                            std::to_string(kMaxPatternBytes) + ")");
  }
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    options | PCRE2_UTF | ((options & PCRE2_LITERAL) ? 0 : PCRE2_UCP), &error, &offset, nullptr);
  if (code == nullptr) {
    return invalid_argument("regex /" + std::string(pattern) + "/ does not compile at offset " +
                            std::to_string(offset) + ": " + regex_detail::pcre2_message(error));
  }
  // A JIT failure (no JIT on this platform) leaves the interpreter, which gives the same matches.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return Regex(std::shared_ptr<pcre2_real_code_8>(code, [](pcre2_code* c) { pcre2_code_free(c); }),
               std::string(pattern));
}

Result<Regex> Regex::compile(std::string_view pattern) { return compile_with(pattern, 0); }

Result<Regex> Regex::literal(std::string_view text) { return compile_with(text, PCRE2_LITERAL); }

Status Regex::find_all(std::string_view text, std::vector<Span>& out) const {
  size_t start = 0;
  while (start <= text.size()) {
    Span m;
    auto rc = regex_detail::match_once(code_.get(), text, start, 0, m);
    if (!rc.ok()) return rc.error().with_context("regex /" + pattern_ + "/");
    if (*rc == 0) break;
    if (m.end > m.begin) {
      out.push_back(m);
      start = m.end;
      continue;
    }
    // An empty match: look again from the next character.
    if (m.begin >= text.size()) break;
    start = m.begin + static_cast<size_t>(utf8_sequence_length(static_cast<unsigned char>(text[m.begin])));
  }
  return Status::OK();
}

Result<bool> Regex::matches_at(std::string_view text, size_t pos) const {
  Span m;
  auto rc = regex_detail::match_once(code_.get(), text, pos, PCRE2_ANCHORED, m);
  if (!rc.ok()) return rc.error().with_context("regex /" + pattern_ + "/");
  return *rc == 1;
}

}  // namespace ember::text
