#include "sim/event_loop.hpp"

#include <cassert>

namespace ember::sim {

EventId EventLoop::at(uint64_t at_us, Callback fn) {
  assert(at_us >= now_ && "EventLoop::at: a time before now()");
  if (at_us < now_) at_us = now_;
  uint32_t slot = 0;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[slot];
  s.fn = std::move(fn);
  ++s.use;
  queue_.push(Entry{at_us, seq_++, slot});
  ++pending_;
  return (static_cast<uint64_t>(s.use) << 32) | slot;
}

bool EventLoop::cancel(EventId id) {
  const uint64_t slot = id & 0xffffffffu;
  if (slot >= slots_.size()) return false;
  Slot& s = slots_[slot];
  if (s.use != (id >> 32) || !s.fn) return false;
  s.fn = nullptr;  // its heap entry is dropped when it comes up; the slot is freed then
  --pending_;
  return true;
}

bool EventLoop::next_live() {
  while (!queue_.empty() && !slots_[queue_.top().slot].fn) {
    free_.push_back(queue_.top().slot);
    queue_.pop();
  }
  return !queue_.empty();
}

bool EventLoop::step() {
  if (!next_live()) return false;
  const Entry e = queue_.top();
  queue_.pop();
  Callback fn = std::move(slots_[e.slot].fn);
  slots_[e.slot].fn = nullptr;
  free_.push_back(e.slot);
  --pending_;
  now_ = e.at_us;
  ++executed_;
  fn();
  return true;
}

void EventLoop::run_until(uint64_t end_us) {
  while (next_live() && queue_.top().at_us <= end_us) step();
  if (end_us > now_) now_ = end_us;
}

void EventLoop::run() {
  while (step()) {
  }
}

}  // namespace ember::sim
