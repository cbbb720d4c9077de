#include "actors/cluster/etcd_decisions.hpp"

namespace ember {

namespace {

class EtcdStore final : public DecisionStore {
 public:
  EtcdStore(std::shared_ptr<coord::EtcdClient> etcd, EtcdDecisionsOptions options)
      : etcd_(std::move(etcd)), options_(std::move(options)) {}

  Status keep(const std::string&, const DesiredState& next) override { return write(next); }
  Status compact(const DesiredState& state) override { return write(state); }
  std::string where() const override {
    return "etcd " + (etcd_->endpoints().empty() ? std::string("?") : etcd_->endpoints()[0].to_string()) + " " +
           options_.state_key;
  }

 private:
  Status write(const DesiredState& state) {
    EMBER_ASSIGN_OR_RETURN(bool written,
                           etcd_->put_fenced(options_.state_key, state.snapshot(), options_.fence_key, options_.fence));
    if (!written) {
      return permission_denied("this manager no longer leads (" + options_.fence_key +
                               " was won by another since revision " + std::to_string(options_.fence) + ")");
    }
    return Status::OK();
  }

  std::shared_ptr<coord::EtcdClient> etcd_;
  EtcdDecisionsOptions options_;
};

}  // namespace

Result<std::unique_ptr<DecisionLog>> open_etcd_decisions(std::shared_ptr<coord::EtcdClient> etcd,
                                                         EtcdDecisionsOptions options) {
  EMBER_ASSIGN_OR_RETURN(auto held, etcd->get(options.state_key));
  DesiredState state;
  if (held) {
    auto s = DesiredState::from_snapshot(held->value);
    if (!s.ok()) return Error(s.error().code(), "etcd " + options.state_key + ": " + s.error().message());
    state = std::move(*s);
  }
  return DecisionLog::over(std::make_unique<EtcdStore>(std::move(etcd), std::move(options)), std::move(state));
}

}  // namespace ember
