// IoScheduler: one device's host-to-device copies shared by concurrent functions (StreamBox §3.3,
// PCIe sharing). Without it, a copy engine serves commands in the order they were issued, so the
// first model that starts loading issues all its weight groups at once and every later copy (the
// next model's first layer, a request's input) waits for all of them.
//
// Each job (a model's swap-in, say) is a list of pieces (host source, device destination, bytes),
// each with an optional event recorded once its last byte arrived (a layer group's event, which
// gates that group's compute). The scheduler cuts pieces into blocks of at most `block_bytes` (the
// measured copy elbow: smaller blocks pay a per-copy cost; pieces already group small layers) and
// issues them on its own stream in batches of `batch` blocks, taking one block from each active
// job in turn (round robin, the turn carried from batch to batch). It issues a batch once the batch
// before the last has completed: at most two batches are in flight, so a job submitted meanwhile is
// admitted at the next batch, waiting at most two batches' copy time behind the others, and a copy
// issued on another stream waits at most as long. Results are the same bytes whatever the order.
//
// Thread-safe. The destructor finishes every job submitted (each ticket completes), then joins its
// thread; sources and destinations must stay valid until their job's ticket completed.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.hpp"
#include "gpu/device.hpp"

namespace ember::gpu {

struct IoSchedulerOptions {
  /// Largest block, bytes (> 0): the copy elbow.
  uint64_t block_bytes = 2ull << 20;
  /// Blocks per batch (> 0). StreamBox: 6 blocks of 2 MB.
  uint32_t batch = 6;
  /// Keep the order blocks were issued in (tests, benchmarks).
  bool trace = false;
};

/// One piece of a job: bytes [src, src + bytes) to [dst, dst + bytes); `done` (may be null) is
/// recorded on the scheduler's stream after the piece's last block.
struct CopyPiece {
  DevicePtr dst{};
  const void* src = nullptr;
  uint64_t bytes = 0;
  Event* done = nullptr;
};

/// A job's completion: wait() blocks until every block of the job has been copied (the device's
/// status then: a fault makes it an error).
class IoTicket {
 public:
  Status wait();
  bool done();
  /// Blocks the scheduler had issued when the job came (its first block is in the next batch).
  uint64_t issued_before() const { return issued_before_; }
  /// Blocks until the first `pieces` pieces are issued: their events recorded on the scheduler's
  /// stream, so that a stream may wait for them (an event not yet recorded is no wait at all).
  void wait_issued(size_t pieces);
  /// Pieces issued so far.
  size_t pieces_issued();

 private:
  friend class IoScheduler;
  void complete(Status status);
  void issued(size_t pieces);
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
  uint64_t issued_before_ = 0;
  size_t pieces_issued_ = 0;  // guarded by mu_
};

class IoScheduler {
 public:
  IoScheduler(Device& device, IoSchedulerOptions options);
  ~IoScheduler();
  IoScheduler(const IoScheduler&) = delete;
  IoScheduler& operator=(const IoScheduler&) = delete;

  /// Queues a job (see the header); returns at once.
  std::shared_ptr<IoTicket> submit(std::vector<CopyPiece> pieces);

  const IoSchedulerOptions& options() const { return options_; }
  /// Blocks issued so far as (job number, block number within the job), in issue order; jobs are
  /// numbered from 1 in submission order. Empty unless options.trace.
  std::vector<std::pair<uint64_t, uint32_t>> trace() const;
  struct Stats {
    uint64_t jobs = 0, batches = 0, blocks = 0, bytes = 0;
  };
  Stats stats() const;

 private:
  struct Job {
    uint64_t number = 0;
    std::vector<CopyPiece> pieces;
    size_t piece = 0;     // the next block starts in this piece ...
    uint64_t offset = 0;  // ... at this offset
    uint32_t blocks = 0;  // issued so far
    std::shared_ptr<IoTicket> ticket;
    bool issued() const { return piece >= pieces.size(); }
  };
  struct Block {
    DevicePtr dst{};
    const void* src = nullptr;
    uint64_t bytes = 0;
    Event* done = nullptr;
    /// The block ends piece `piece` of this ticket's job (null: it ends no piece).
    IoTicket* ends = nullptr;
    size_t piece = 0;
  };
  void loop();
  /// The next batch (mu_ held): blocks taken round robin; jobs fully issued move to `finishing`.
  std::vector<Block> next_batch(std::vector<std::shared_ptr<IoTicket>>& finishing);

  Device& device_;
  const IoSchedulerOptions options_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<Event> in_flight_[2];  // the last two batches' completion

  mutable std::mutex mu_;
  std::condition_variable work_;
  std::deque<Job> jobs_;  // guarded by mu_: jobs with blocks still to issue
  size_t turn_ = 0;       // guarded by mu_: the job whose block comes next
  uint64_t submitted_ = 0;
  bool stopping_ = false;
  Stats stats_;                                        // guarded by mu_
  std::vector<std::pair<uint64_t, uint32_t>> trace_;  // guarded by mu_
  std::thread thread_;  // last: started once everything else is
};

}  // namespace ember::gpu
