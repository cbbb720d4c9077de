#include "actors/node/engine/lanes.hpp"

#include <algorithm>

namespace ember::engine {

Lanes::Lanes(gpu::Device& device, uint32_t streams)
    : device_(device), threads_(std::make_unique<WorkQueue>(WorkQueueOptions{.threads = streams})) {}

Lanes::~Lanes() { threads_.reset(); }

void Lanes::beside(const model_key& key, std::function<void()> run) {
  {
    std::lock_guard lock(mu_);
    auto it = strands_.find(key);
    if (it != strands_.end()) {  // the model runs: this run waits its turn behind it
      it->second.push_back(std::move(run));
      ++waiting_;
      return;
    }
    strands_.emplace(key, std::deque<std::function<void()>>{});
  }
  // One run per lane task; the strand's next run goes to the back of the lanes' queue, so models
  // with many runs waiting take turns with the others.
  threads_->post([this, key, run = std::move(run)] { step(key, run); });
}

void Lanes::step(const model_key& key, const std::function<void()>& run) {
  {
    std::lock_guard lock(mu_);
    peak_ = std::max(peak_, ++active_);
  }
  run();
  std::lock_guard lock(mu_);
  --active_;
  auto it = strands_.find(key);
  if (it->second.empty()) {
    strands_.erase(it);
    if (strands_.empty()) idle_.notify_all();
    return;
  }
  threads_->post([this, key, next = std::move(it->second.front())] { step(key, next); });
  it->second.pop_front();
  --waiting_;
}

void Lanes::drain() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [&] { return strands_.empty(); });
}

bool Lanes::in_lane(const model_key& key) const {
  std::lock_guard lock(mu_);
  return strands_.count(key) > 0;
}

std::unique_ptr<gpu::Stream> Lanes::take_stream() {
  {
    std::lock_guard lock(mu_);
    if (!streams_.empty()) {
      auto s = std::move(streams_.back());
      streams_.pop_back();
      return s;
    }
  }
  return device_.create_stream();
}

void Lanes::give_stream(std::unique_ptr<gpu::Stream> stream) {
  std::lock_guard lock(mu_);
  streams_.push_back(std::move(stream));
}

uint32_t Lanes::running() const {
  std::lock_guard lock(mu_);
  return active_;
}

uint32_t Lanes::peak() const {
  std::lock_guard lock(mu_);
  return peak_;
}

size_t Lanes::waiting() const {
  std::lock_guard lock(mu_);
  return waiting_;
}

}  // namespace ember::engine
