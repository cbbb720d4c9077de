#include "gpu/io_scheduler.hpp"

#include <algorithm>

namespace ember::gpu {

Status IoTicket::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  return status_;
}

bool IoTicket::done() {
  std::lock_guard lock(mu_);
  return done_;
}

void IoTicket::wait_issued(size_t pieces) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return done_ || pieces_issued_ >= pieces; });
}

size_t IoTicket::pieces_issued() {
  std::lock_guard lock(mu_);
  return pieces_issued_;
}

void IoTicket::issued(size_t pieces) {
  {
    std::lock_guard lock(mu_);
    pieces_issued_ = std::max(pieces_issued_, pieces);
  }
  cv_.notify_all();
}

void IoTicket::complete(Status status) {
  {
    std::lock_guard lock(mu_);
    done_ = true;
    status_ = std::move(status);
  }
  cv_.notify_all();
}

IoScheduler::IoScheduler(Device& device, IoSchedulerOptions options)
    : device_(device), options_(options), stream_(device.create_stream()) {
  for (auto& e : in_flight_) e = device.create_event();
  thread_ = std::thread([this] { loop(); });
}

IoScheduler::~IoScheduler() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  thread_.join();
}

std::shared_ptr<IoTicket> IoScheduler::submit(std::vector<CopyPiece> pieces) {
  auto ticket = std::make_shared<IoTicket>();
  {
    std::lock_guard lock(mu_);
    ++stats_.jobs;
    ticket->issued_before_ = stats_.blocks;
    const uint64_t number = ++submitted_;
    if (pieces.empty()) {
      ticket->complete(Status::OK());
      return ticket;
    }
    Job job;
    job.number = number;
    job.pieces = std::move(pieces);
    job.ticket = ticket;
    jobs_.push_back(std::move(job));
  }
  work_.notify_all();
  return ticket;
}

std::vector<IoScheduler::Block> IoScheduler::next_batch(std::vector<std::shared_ptr<IoTicket>>& finishing) {
  std::vector<Block> out;
  while (out.size() < options_.batch && !jobs_.empty()) {
    if (turn_ >= jobs_.size()) turn_ = 0;
    Job& j = jobs_[turn_];
    const CopyPiece& p = j.pieces[j.piece];
    const uint64_t len = std::min(options_.block_bytes, p.bytes - j.offset);
    Block b{p.dst + j.offset, static_cast<const uint8_t*>(p.src) + j.offset, len, nullptr};
    j.offset += len;
    if (j.offset >= p.bytes) {  // the piece's last block carries its event
      b.done = p.done;
      b.ends = j.ticket.get();
      b.piece = j.piece;
      ++j.piece;
      j.offset = 0;
    }
    ++stats_.blocks;
    stats_.bytes += len;
    if (options_.trace) trace_.emplace_back(j.number, j.blocks);
    ++j.blocks;
    out.push_back(b);
    if (j.issued()) {
      finishing.push_back(std::move(j.ticket));
      jobs_.erase(jobs_.begin() + static_cast<std::ptrdiff_t>(turn_));  // turn_ now names the next job
    } else {
      ++turn_;
    }
  }
  ++stats_.batches;
  return out;
}

void IoScheduler::loop() {
  // Batch k goes in slot k % 2: before it is issued, batch k - 2 (the slot's last) must have ended,
  // and the tickets of the jobs it finished complete.
  std::vector<std::shared_ptr<IoTicket>> finishing[2];
  bool used[2] = {false, false};
  auto settle = [&](size_t slot) {
    if (!used[slot]) return;
    Status done = in_flight_[slot]->synchronize();
    for (auto& t : finishing[slot]) t->complete(done);
    finishing[slot].clear();
    used[slot] = false;
  };
  for (uint64_t k = 0;; ++k) {
    const size_t slot = k % 2;
    settle(slot);
    std::vector<Block> batch;
    {
      std::unique_lock lock(mu_);
      if (jobs_.empty()) {
        lock.unlock();
        settle(1 - slot);  // nothing to overlap with: finish what is in flight now
        lock.lock();
        work_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping, and every job finished
      }
      batch = next_batch(finishing[slot]);
    }
    for (const Block& b : batch) {
      if (b.bytes) stream_->copy_to_device(b.dst, b.src, b.bytes);
      if (b.done) stream_->record(*b.done);
    }
    stream_->record(*in_flight_[slot]);
    used[slot] = true;
    for (const Block& b : batch) {
      if (b.ends) b.ends->issued(b.piece + 1);  // alive: held by its job or finishing[slot]
    }
  }
}

std::vector<std::pair<uint64_t, uint32_t>> IoScheduler::trace() const {
  std::lock_guard lock(mu_);
  return trace_;
}

IoScheduler::Stats IoScheduler::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace ember::gpu
