#include "actors/process/manager_leadership.hpp"

#include <spdlog/spdlog.h>

#include "actors/cluster/etcd_decisions.hpp"

namespace ember {

Result<std::unique_ptr<ManagerLeadership>> ManagerLeadership::win(const ManagerConfig& config,
                                                                  const std::atomic<bool>& stop) {
  std::unique_ptr<ManagerLeadership> l(new ManagerLeadership());
  const int64_t ttl_s = static_cast<int64_t>((config.lease_ttl_us + 999'999) / 1'000'000);
  l->step_ = std::chrono::milliseconds(ttl_s * 1000 / 3);
  const auto timeout = std::min<std::chrono::milliseconds>(l->step_, std::chrono::milliseconds(2000));
  l->etcd_ = std::make_shared<coord::EtcdClient>(config.etcd, timeout);
  const std::string identity = config.listen.to_string();
  l->lease_ = std::make_unique<coord::LeaderLease>(
      *l->etcd_, coord::LeaderLease::Options{config.etcd_prefix + "/leader", identity, ttl_s});
  std::string said;
  while (!stop) {
    const auto role = l->lease_->step(coord::LeaderLease::Clock::now());
    if (role == coord::LeaderLease::Role::leader) break;
    const std::string now = l->lease_->leader().empty() ? l->lease_->why() : l->lease_->leader();
    if (now != said) {
      if (l->lease_->leader().empty()) {
        spdlog::warn("manager {}: standing by; cannot campaign in etcd: {}", identity, l->lease_->why());
      } else {
        spdlog::info("manager {}: standing by; the manager at {} leads", identity, l->lease_->leader());
      }
      said = now;
    }
    std::this_thread::sleep_for(l->step_);
  }
  if (stop) return unavailable("stopped while standing by");
  l->fence_ = l->lease_->fence();
  spdlog::info("manager {}: leads (etcd {}, lease {} s, fence revision {})", identity, config.etcd_prefix, ttl_s,
               l->fence_);
  EtcdDecisionsOptions options{config.etcd_prefix + "/state", config.etcd_prefix + "/leader", l->fence_};
  auto decisions = open_etcd_decisions(l->etcd_, options);
  if (!decisions.ok()) {
    l->lease_->resign();
    return decisions.error();
  }
  l->decisions_ = std::move(*decisions);
  return l;
}

void ManagerLeadership::keep(std::function<void(const std::string&)> on_lost) {
  renewer_ = std::thread([this, on_lost = std::move(on_lost)] {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      wake_.wait_for(lock, step_, [this] { return stopping_; });
      if (stopping_) return;
      lock.unlock();
      const auto role = lease_->step(coord::LeaderLease::Clock::now());
      lock.lock();
      if (role == coord::LeaderLease::Role::lost) {
        on_lost(lease_->why());
        return;
      }
    }
  });
}

ManagerLeadership::~ManagerLeadership() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  if (lease_ && lease_->role() == coord::LeaderLease::Role::leader) lease_->resign();  // a standby takes over now
}

}  // namespace ember
