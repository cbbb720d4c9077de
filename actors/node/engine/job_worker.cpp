#include "actors/node/engine/job_worker.hpp"

namespace ember::engine {

bool JobWorker::broken() const {
  std::lock_guard lock(mu_);
  return !broken_.empty();
}

std::string JobWorker::fail(std::string why) {
  std::lock_guard lock(mu_);
  broken_ = std::move(why);
  return broken_;
}

}  // namespace ember::engine
