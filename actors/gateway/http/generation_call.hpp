// GenerationCall: one generation between the GenerationService's sink (actors/gateway/
// generation_service.hpp), called on the service's threads, and the HTTP thread that answers the
// client. The sink appends; the HTTP thread takes, in order, waiting a bounded time per call.
//
//   service threads ── sink(chunk | Error) ──▶ [ at most kMaxQueuedChunks ] ──▶ next() on the HTTP thread
//                                               │ full
//                                               └─▶ overflowed: later chunks dropped; next() reports it
//                                                   once the queue is drained (the front end cancels
//                                                   and ends the stream with an error event)
//
// Overflow policy: cut off the slow client. A client that reads slower than the model generates
// would otherwise make the gateway hold its whole answer; kMaxQueuedChunks is a few seconds of the
// fastest decoding at one chunk per token, far beyond what a reading client falls behind.
//
// The sink holds the call (a shared pointer), never the service; it never blocks and never calls
// anything but this object. What breaks the service's contract is absorbed, never a crash: an Error
// after a chunk becomes a final error chunk; anything after the final call is dropped.
//
// Thread-safety: the sink from any threads (the service promises one at a time); next() from one
// thread (the HTTP thread serving the request). Pure: no socket, no clock but the wait's bound.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "actors/gateway/generation_service.hpp"
#include "actors/generation_messages.hpp"
#include "base/status.hpp"

namespace ember {

class GenerationCall : public std::enable_shared_from_this<GenerationCall> {
 public:
  /// Chunks that may wait for the HTTP thread (see the header).
  static constexpr size_t kMaxQueuedChunks = 4096;

  static std::shared_ptr<GenerationCall> make(size_t max_queued = kMaxQueuedChunks) {
    return std::shared_ptr<GenerationCall>(new GenerationCall(max_queued));
  }

  /// The sink to hand to GenerationService::generate.
  GenerationService::Sink sink();

  /// What next() found.
  enum class Next {
    chunk,       // `chunk` holds the next chunk (the last one is final)
    refused,     // `refusal` holds the Error the service answered before any chunk
    overflowed,  // every chunk that fit was taken; the rest were dropped (see the header)
    idle,        // nothing within `wait`
  };
  /// The next thing in order, waiting at most `wait` for it.
  Next next(std::chrono::milliseconds wait, generate_chunk& chunk, std::optional<Error>& refusal);

  /// The final call (chunk or refusal) arrived, or the queue overflowed: nothing more will come.
  bool closed() const;
  /// The queue overflowed (see the header): the sink's owner may cut its reader off at once.
  bool overflowed() const;

 private:
  explicit GenerationCall(size_t max_queued) : max_queued_(max_queued) {}
  void push(Result<generate_chunk> item);

  const size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable arrived_;
  std::deque<generate_chunk> queue_;
  std::optional<Error> refusal_;
  bool any_chunk_ = false;  // a chunk arrived (a later Error is a failure after the first token)
  bool final_ = false;      // the final call arrived
  bool overflowed_ = false;
};

}  // namespace ember
