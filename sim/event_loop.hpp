// EventLoop: the simulator's discrete-event clock (issue 36; docs/design/simulator.md). Events are
// callbacks at simulated times, in microseconds from 0; run() takes them in time order and, at one
// time, in the order they were scheduled, so a run is a function of what was scheduled: the same
// inputs give the same sequence of callbacks, byte for byte, on any machine.
//
// An event may schedule and cancel others, also at the current time (they run after those already
// due then). now() is the time of the event running, or the time run_until stopped at. A time
// before now() is a caller's bug: it runs at now() (asserted in debug builds). Cancelling an event
// that ran or was cancelled already does nothing and says so.
//
// Memory: one slot per pending event, reused once it ran (an id names a slot and the slot's use, so
// an old id never cancels a newer event); a cancelled event's callback is released at once and its
// heap entry when its time comes (lazy deletion), so cancelling does not scan the queue.
// Single-threaded: the simulator's only thread owns the loop. Never blocks, never reads a clock.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace ember::sim {

/// An event's handle, for cancel(); 0 is never an event.
using EventId = uint64_t;

class EventLoop {
 public:
  using Callback = std::function<void()>;

  /// Simulated microseconds: of the event running, or where run_until stopped.
  uint64_t now() const { return now_; }

  /// `fn` at time `at_us` (not before now()).
  EventId at(uint64_t at_us, Callback fn);
  /// `fn` `delay_us` after now().
  EventId after(uint64_t delay_us, Callback fn) { return at(now_ + delay_us, std::move(fn)); }
  /// Takes a pending event out; false when it already ran or was cancelled (or never existed).
  bool cancel(EventId id);

  /// Runs the next pending event; false when none is left.
  bool step();
  /// Runs every event due at or before `end_us`, then sets now() to `end_us` (when it is later).
  void run_until(uint64_t end_us);
  /// Runs until no event is left.
  void run();

  /// Events pending (not cancelled).
  size_t pending() const { return pending_; }
  /// Events run so far.
  uint64_t executed() const { return executed_; }

 private:
  struct Entry {
    uint64_t at_us;
    uint64_t seq;  // scheduling order: breaks ties at one time
    uint32_t slot;
    bool operator>(const Entry& o) const { return at_us != o.at_us ? at_us > o.at_us : seq > o.seq; }
  };
  struct Slot {
    Callback fn;       // empty: free, ran or cancelled
    uint32_t use = 0;  // bumped each time the slot is taken: the id's upper half
  };

  /// Drops cancelled entries off the heap's top; false when no live one is left.
  bool next_live();

  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;  // slots whose entry left the heap
  uint64_t now_ = 0, seq_ = 0, executed_ = 0;
  size_t pending_ = 0;
};

}  // namespace ember::sim
