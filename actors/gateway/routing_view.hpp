// RoutingView: a read-only snapshot of the gateway's routing table for the HTTP threads, which
// answer metadata, readiness and index-free queries from it without a message to any actor. The
// gateway actor publishes a new snapshot after each routing update; readers take a shared_ptr and
// keep it for the duration of one HTTP request. Thread-safe; never blocks beyond a short mutex.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "actors/messages.hpp"

namespace ember {

struct ModelSignature;

struct ModelView {
  model_state state;
  /// The KServe v2 model metadata body ({"name", "versions", "platform", "inputs", "outputs"}),
  /// shared with the gateway's ModelCatalog and every later snapshot until it changes.
  std::shared_ptr<const std::string> metadata_json;
  /// Its inputs and outputs as model.json declares them (empty when it does not parse), for the
  /// gRPC metadata answer; shared the same way.
  std::shared_ptr<const ModelSignature> signature;
  bool ready = false;
};

struct RoutingSnapshot {
  /// model name -> version -> view.
  std::map<std::string, std::map<uint32_t, ModelView>> models;
  /// The gateway has received the manager's table at least once.
  bool subscribed = false;

  /// The version a request means (0: the highest), or nullptr.
  const ModelView* find(const std::string& name, uint32_t version) const {
    auto m = models.find(name);
    if (m == models.end() || m->second.empty()) return nullptr;
    if (version == 0) return &m->second.rbegin()->second;
    auto v = m->second.find(version);
    return v == m->second.end() ? nullptr : &v->second;
  }
};

class RoutingView {
 public:
  std::shared_ptr<const RoutingSnapshot> snapshot() const {
    std::lock_guard lock(mu_);
    return current_;
  }
  void publish(std::shared_ptr<const RoutingSnapshot> next) {
    std::lock_guard lock(mu_);
    current_ = std::move(next);
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const RoutingSnapshot> current_ = std::make_shared<RoutingSnapshot>();  // guarded by mu_
};

}  // namespace ember
