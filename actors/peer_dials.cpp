#include "actors/peer_dials.hpp"

#include <spdlog/spdlog.h>

namespace ember {

void PeerDials::want(const std::vector<peer_endpoint>& peers) {
  std::map<std::string, HostPort> next;
  for (const auto& p : peers) {
    if (p.control.port != 0) next[p.node] = p.control;
  }
  auto stale = [&](const std::string& peer, const HostPort& at) {
    auto it = next.find(peer);
    return it == next.end() || !(it->second == at);
  };
  for (auto it = dialing_.begin(); it != dialing_.end();) {
    it = stale(it->first, it->second) ? dialing_.erase(it) : std::next(it);
  }
  for (auto it = connected_.begin(); it != connected_.end();) {
    it = stale(it->first, it->second.at) ? connected_.erase(it) : std::next(it);
  }
  wanted_ = std::move(next);
}

std::vector<PeerDials::Dial> PeerDials::due() {
  std::vector<Dial> out;
  for (const auto& [peer, at] : wanted_) {
    if (connected_.count(peer) || dialing_.count(peer)) continue;
    dialing_[peer] = at;
    out.push_back({peer, at});
  }
  return out;
}

bool PeerDials::connected(const Dial& dial, caf::actor handle) {
  auto it = dialing_.find(dial.peer);
  if (it == dialing_.end() || !(it->second == dial.at)) return false;  // forgotten or moved meanwhile
  dialing_.erase(it);
  connected_[dial.peer] = Held{dial.at, std::move(handle)};
  return true;
}

void PeerDials::failed(const Dial& dial) {
  auto it = dialing_.find(dial.peer);
  if (it != dialing_.end() && it->second == dial.at) dialing_.erase(it);
}

void PeerDials::forget(const std::string& peer) {
  dialing_.erase(peer);
  connected_.erase(peer);
}

void log_dial(const PeerDialing& d, const PeerDials::Dial& dial, const Result<caf::actor>& got) {
  if (got.ok()) {
    spdlog::info("{}: connected to {} {} at {} directly", d.who, d.peer_word, dial.peer, dial.at.to_string());
    return;
  }
  spdlog::warn("{}: cannot connect to {} {} at {} directly ({}); {}, trying again in {} ms", d.who, d.peer_word,
               dial.peer, dial.at.to_string(), got.error().message(), d.meanwhile,
               std::chrono::duration_cast<std::chrono::milliseconds>(d.retry).count());
}

}  // namespace ember
