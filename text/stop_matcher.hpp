// Stop strings on streamed text: what of a generation's text may be sent now, and where it ends.
//
// One StopMatcher per request, fed the detokenized text piece by piece as tokens come; used by one
// thread at a time (the generation loop's or the front end's), pure otherwise: no clock, no I/O,
// never blocks. OpenAI's semantics: the text returned ends before the stop string, which is never
// sent; nothing after it is either.
//
// How it decides (byte-wise, so a multibyte UTF-8 stop string needs nothing special):
// - The first stop string to be completed in the stream wins; of several completed by the same
//   byte, the longest (it starts first). The text sent is everything before the winner's start. The
//   result does not depend on how the text was cut into pieces.
// - Until a stop, push() returns all it has except the longest tail that is a prefix of some stop
//   string (it may still become one), and, when the text is valid UTF-8, except an unfinished
//   multibyte character at the end: what is sent is always whole characters. So at most
//   kMaxStopStringBytes - 1 + 3 bytes are held.
// - flush() at the end of the generation returns what is held (a tail that never became a stop
//   string, or an unfinished character, as it is).
// Each stop string runs a Knuth-Morris-Pratt automaton, so a byte costs O(stop strings), amortised.
//
// Lifecycle: matching -> (push completes a stop string) -> stopped, final: every later push
// returns nothing, and flush() returns "". flush() while matching returns the held tail and leaves
// the matcher matching on an empty history (a new text).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace ember::text {

/// A request's stop list may hold at most kMaxStopStrings non-empty strings of at most
/// kMaxStopStringBytes bytes each (OpenAI allows 4; these bound the bytes held and the per-byte
/// cost). Beyond them StopMatcher::create refuses the list.
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopStringBytes = 256;

class StopMatcher {
 public:
  /// invalid_argument, naming the string, for more than kMaxStopStrings strings, an empty string,
  /// or one over kMaxStopStringBytes. An empty list never stops (push returns everything).
  static Result<StopMatcher> create(std::vector<std::string> stops);

  struct Emit {
    std::string text;      // safe to send now; before the stop string when `stopped`
    bool stopped = false;  // a stop string was completed (now or before)
    int32_t stop_index = -1;  // which one, as an index into the list create() got; -1 if none
  };
  Emit push(std::string_view piece);
  /// The held tail, at the end of the generation ("" after a stop).
  std::string flush();

  bool stopped() const { return stop_index_ >= 0; }
  int32_t stop_index() const { return stop_index_; }
  /// Bytes pushed but neither sent nor dropped.
  size_t held_bytes() const { return pending_.size(); }

 private:
  struct Stop {
    std::string text;
    std::vector<uint32_t> fail;  // KMP: the longest proper border of text[0, i]
    uint32_t state = 0;          // the longest prefix of text that ends the bytes seen
  };
  explicit StopMatcher(std::vector<Stop> stops) : stops_(std::move(stops)) {}

  std::vector<Stop> stops_;
  std::string pending_;
  int32_t stop_index_ = -1;
};

}  // namespace ember::text
