#include "coord/leader_lease.hpp"

namespace ember::coord {

LeaderLease::Role LeaderLease::step(Clock::time_point now) {
  if (role_ == Role::lost) return role_;
  if (role_ == Role::leader) {
    renew(now);
  } else {
    campaign(now);
  }
  return role_;
}

bool LeaderLease::holds(Clock::time_point now) const {
  return role_ == Role::leader && now - renewed_ < std::chrono::seconds(options_.ttl_s);
}

void LeaderLease::campaign(Clock::time_point now) {
  why_.clear();
  if (lease_ != 0) {  // a standby keeps its lease alive between campaigns
    auto ttl = etcd_.keep_alive(lease_);
    if (!ttl.ok()) lease_ = 0;  // expired meanwhile (or etcd is away): a new one below
  }
  if (lease_ == 0) {
    auto granted = etcd_.grant(options_.ttl_s);
    if (!granted.ok()) {
      why_ = granted.error().message();
      return;
    }
    lease_ = *granted;
  }
  auto created = etcd_.create_if_absent(options_.key, options_.identity, lease_);
  if (!created.ok()) {
    why_ = created.error().message();
    return;
  }
  if (!created->created) {
    leader_ = created->existing ? created->existing->value : "";
    why_ = "the leader key is held by " + leader_;
    return;
  }
  role_ = Role::leader;
  fence_ = created->create_revision;
  leader_ = options_.identity;
  renewed_ = now;  // the lease was granted or renewed before this create, so etcd's expiry is later
}

void LeaderLease::renew(Clock::time_point now) {
  auto ttl = etcd_.keep_alive(lease_);
  if (ttl.ok()) {
    renewed_ = now;  // sent at `now` or later: etcd's expiry is at least ttl from now
    why_.clear();
    return;
  }
  if (ttl.error().code() == ErrorCode::not_found) {
    return lose("its lease expired in etcd (" + ttl.error().message() + ")");
  }
  why_ = ttl.error().message();
  if (now - renewed_ >= std::chrono::seconds(options_.ttl_s)) {
    lose("no renewal for its ttl of " + std::to_string(options_.ttl_s) + " s: " + why_);
  }
}

void LeaderLease::resign() {
  if (lease_ != 0) (void)etcd_.revoke(lease_);
  lease_ = 0;
  if (role_ == Role::leader) lose("it resigned");
}

void LeaderLease::lose(std::string why) {
  role_ = Role::lost;
  fence_ = 0;
  why_ = std::move(why);
}

}  // namespace ember::coord
