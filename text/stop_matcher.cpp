#include "text/stop_matcher.hpp"

#include <algorithm>
#include <utility>

namespace ember::text {

namespace {

// The length of the longest prefix of text[0, n) that does not end inside a multibyte UTF-8
// character: n, or the start of an unfinished sequence among the last three bytes. Bytes that are
// not UTF-8 (a stray continuation byte, 0xF8 and up) count as whole, so nothing is held forever.
size_t whole_characters(std::string_view text, size_t n) {
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto b = static_cast<unsigned char>(text[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    size_t need = 1;
    if ((b & 0xE0) == 0xC0) need = 2;
    else if ((b & 0xF0) == 0xE0) need = 3;
    else if ((b & 0xF8) == 0xF0) need = 4;
    return back < need ? n - back : n;
  }
  return n;
}

std::vector<uint32_t> borders(std::string_view s) {
  std::vector<uint32_t> fail(s.size(), 0);
  uint32_t k = 0;
  for (size_t i = 1; i < s.size(); ++i) {
    while (k > 0 && s[i] != s[k]) k = fail[k - 1];
    if (s[i] == s[k]) ++k;
    fail[i] = k;
  }
  return fail;
}

}  // namespace

Result<StopMatcher> StopMatcher::create(std::vector<std::string> stops) {
  if (stops.size() > kMaxStopStrings)
    return invalid_argument("stop: " + std::to_string(stops.size()) + " stop strings, at most " +
                            std::to_string(kMaxStopStrings) + " are allowed");
  std::vector<Stop> built;
  built.reserve(stops.size());
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) return invalid_argument("stop: stop string " + std::to_string(i) + " is empty");
    if (stops[i].size() > kMaxStopStringBytes)
      return invalid_argument("stop: stop string " + std::to_string(i) + " is " + std::to_string(stops[i].size()) +
                              " bytes, at most " + std::to_string(kMaxStopStringBytes) + " are allowed");
    Stop stop;
    stop.fail = borders(stops[i]);
    stop.text = std::move(stops[i]);
    built.push_back(std::move(stop));
  }
  return StopMatcher(std::move(built));
}

StopMatcher::Emit StopMatcher::push(std::string_view piece) {
  Emit out;
  if (stopped()) {
    out.stopped = true;
    out.stop_index = stop_index_;
    return out;
  }
  const size_t from = pending_.size();
  pending_.append(piece);
  for (size_t pos = from; pos < pending_.size(); ++pos) {
    const char c = pending_[pos];
    int32_t winner = -1;
    for (size_t k = 0; k < stops_.size(); ++k) {
      Stop& s = stops_[k];
      while (s.state > 0 && s.text[s.state] != c) s.state = s.fail[s.state - 1];
      if (s.text[s.state] == c) ++s.state;
      if (s.state == s.text.size() && (winner < 0 || s.text.size() > stops_[static_cast<size_t>(winner)].text.size()))
        winner = static_cast<int32_t>(k);
    }
    if (winner >= 0) {
      // Every automaton counts only bytes still pending (the held tail covers the longest state), so
      // the stop string starts inside pending_.
      const size_t start = pos + 1 - stops_[static_cast<size_t>(winner)].text.size();
      out.text = pending_.substr(0, start);
      out.stopped = true;
      out.stop_index = stop_index_ = winner;
      pending_.clear();
      return out;
    }
  }
  size_t held = 0;
  for (const Stop& s : stops_) held = std::max<size_t>(held, s.state);
  const size_t safe = whole_characters(pending_, pending_.size() - held);
  out.text = pending_.substr(0, safe);
  pending_.erase(0, safe);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(pending_);
  for (Stop& s : stops_) s.state = 0;
  return out;
}

}  // namespace ember::text
