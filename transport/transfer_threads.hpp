// TransferThreads: the records of a blob server's transfers in progress, one thread each, for both
// servers (BlobServer in tcp_blob_server.cpp, UcxBlobServer in ucx_blob_server.cpp). A record is
// the transport's own struct with at least `std::thread thread` and `std::atomic<bool> done`, which
// its thread sets as its last act; the socket or UCX worker it also holds is freed with it, after
// the join.
//
// Thread-safe: the acceptor adds and reaps, stop() reaps everything; a transfer's thread only sets
// its own `done`. Never throws beyond what std::thread's join does for a programmer error. Bounded
// by the server's max_transfers (the acceptor admits no more).
#pragma once

#include <list>
#include <memory>
#include <mutex>

namespace ember::transport {

template <class Record>
class TransferThreads {
 public:
  /// Keeps `record` (whose thread the caller starts afterwards) and returns it.
  Record& add(std::unique_ptr<Record> record) {
    std::lock_guard lock(mutex_);
    records_.push_back(std::move(record));
    return *records_.back();
  }

  /// Calls `f(record)` for every record under the lock, e.g. to wake every transfer at stop().
  template <class F>
  void for_each(F f) {
    std::lock_guard lock(mutex_);
    for (auto& r : records_) f(*r);
  }

  /// Joins and drops the records whose thread is done, or all of them (stop()). The joins run
  /// outside the lock.
  void reap(bool all) {
    std::list<std::unique_ptr<Record>> finished;
    {
      std::lock_guard lock(mutex_);
      for (auto it = records_.begin(); it != records_.end();) {
        if (all || (*it)->done.load()) {
          finished.splice(finished.end(), records_, it++);
        } else {
          ++it;
        }
      }
    }
    for (auto& r : finished) {
      if (r->thread.joinable()) r->thread.join();  // then what the record holds goes with it
    }
  }

 private:
  std::mutex mutex_;
  std::list<std::unique_ptr<Record>> records_;
};

}  // namespace ember::transport
