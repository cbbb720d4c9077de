#include "actors/console/admin.hpp"

#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/errors.hpp"
#include "actors/fault_messages.hpp"
#include "base/token_file.hpp"

namespace ember {

namespace {

struct admin_state {
  static inline const char* name = "ember.admin";
  admin_state() = default;  // not an aggregate: CAF would build it from the actor's pointer
  cluster_manager_actor manager;
  AdminSettings settings;
};

using admin_pointer = admin_actor::stateful_pointer<admin_state>;

/// "m/2", or "m" for version 0 (the latest, or every version).
std::string describe_key(const model_key& key) { return key.version ? key.to_string() : key.name; }

/// The command, checked, asked of the manager and its answer passed on; else the refusal. Asked,
/// not delegated: the manager takes the console's own commands (drain, scale, slo, transfers,
/// fault, log-level) only when this actor is their sender, so a member of the control plane that
/// reaches the manager cannot send them without the token.
template <class T, class... Ts>
caf::result<T> pass(admin_pointer self, const admin_auth& who, const std::string& change, Ts&&... command) {
  if (auto ok = check_admin(self->state.settings, who, change); !ok.ok()) return to_caf(ok.error());
  auto rp = self->make_response_promise<T>();
  self->request(self->state.manager, caf::infinite, std::forward<Ts>(command)...)
      .then([rp](T& answer) mutable { rp.deliver(std::move(answer)); },
            [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

std::string describe_slo(const slo_command& cmd) {
  const slo_setting& slo = cmd.slo;
  return "slo " + describe_key(cmd.model) +
         (slo.deadline_us
              ? " " + std::to_string(slo.deadline_us) + " us at p" + std::to_string(slo.percentile * 100).substr(0, 5)
              : std::string(" off"));
}

admin_actor::behavior_type admin_behavior(admin_pointer self, cluster_manager_actor manager, AdminSettings settings) {
  self->state.manager = std::move(manager);
  self->state.settings = std::move(settings);
  self->monitor(self->state.manager);
  self->set_down_handler([self](caf::down_msg& msg) { self->quit(msg.reason); });
  using models = std::vector<model_state>;
  using keys = std::vector<model_key>;
  return {
      [self](const admin_auth& who, nodes_atom) -> caf::result<std::vector<node_report>> {
        return pass<std::vector<node_report>>(self, who, "", nodes_atom_v);
      },
      [self](const admin_auth& who, index_atom) -> caf::result<models> {
        return pass<models>(self, who, "", index_atom_v);
      },
      [self](const admin_auth& who, metrics_atom) -> caf::result<metrics_snapshot> {
        return pass<metrics_snapshot>(self, who, "", metrics_atom_v);
      },
      [self](const admin_auth& who, transfers_atom) -> caf::result<std::vector<hop_progress>> {
        return pass<std::vector<hop_progress>>(self, who, "", transfers_atom_v);
      },
      [self](const admin_auth& who, load_atom, model_command& cmd) -> caf::result<model_state> {
        const std::string what = "load " + describe_key(cmd.model) +
                                 (cmd.replicas ? " with " + std::to_string(cmd.replicas) + " replicas" : "");
        return pass<model_state>(self, who, what, load_atom_v, std::move(cmd));
      },
      [self](const admin_auth& who, unload_atom, model_command& cmd) -> caf::result<model_state> {
        return pass<model_state>(self, who, "unload " + describe_key(cmd.model), unload_atom_v, std::move(cmd));
      },
      [self](const admin_auth& who, distribute_atom, distribute_request& req) -> caf::result<distribute_result> {
        const std::string what = "distribute " + describe_key(req.model);
        return pass<distribute_result>(self, who, what, distribute_atom_v, std::move(req));
      },
      [self](const admin_auth& who, evict_atom, distribute_request& req) -> caf::result<distribute_result> {
        return pass<distribute_result>(self, who, "evict " + describe_key(req.model), evict_atom_v, std::move(req));
      },
      [self](const admin_auth& who, drain_atom, std::string& name) -> caf::result<keys> {
        return pass<keys>(self, who, "drain " + name, drain_atom_v, std::move(name));
      },
      [self](const admin_auth& who, scale_atom, const model_key& key, uint32_t min,
             uint32_t max) -> caf::result<model_state> {
        const std::string what = "scale " + describe_key(key) + " to " + std::to_string(min) + ".." +
                                 (max ? std::to_string(max) : std::string("max"));
        return pass<model_state>(self, who, what, scale_atom_v, key, min, max);
      },
      [self](const admin_auth& who, slo_atom, slo_command& cmd) -> caf::result<models> {
        return pass<models>(self, who, describe_slo(cmd), slo_atom_v, std::move(cmd));
      },
      [self](const admin_auth& who, log_level_atom, std::string& level) -> caf::result<uint32_t> {
        return pass<uint32_t>(self, who, "log-level " + level, log_level_atom_v, std::move(level));
      },
      [self](const admin_auth& who, fault_atom, std::string& name, fault_command& f) -> caf::result<std::string> {
        const std::string what = "fault " + name + " " + std::string(to_string(f.kind)) + " " + target_name(f);
        return pass<std::string>(self, who, what, fault_atom_v, std::move(name), std::move(f));
      },
  };
}

}  // namespace

Status check_admin(const AdminSettings& settings, const admin_auth& auth, const std::string& change) {
  const bool read = change.empty();
  if (read && settings.open_reads) return Status::OK();
  if (settings.token.empty()) {
    return permission_denied("no admin token is configured (manager.admin_token_file): the console may only read");
  }
  if (!constant_time_equal(auth.token, settings.token)) {
    spdlog::warn("manager: console command from {} refused: wrong or missing admin token", auth.who);
    return permission_denied("wrong or missing admin token");
  }
  if (!read) spdlog::info("manager: {} asked: {}", auth.who.empty() ? "(someone)" : auth.who, change);
  return Status::OK();
}

admin_actor spawn_admin(caf::actor_system& sys, cluster_manager_actor manager, AdminSettings settings) {
  return sys.spawn(admin_behavior, std::move(manager), std::move(settings));
}

std::function<admin_actor(cluster_manager_actor)> make_admin_factory(caf::actor_system& sys, AdminSettings settings) {
  return [&sys, settings = std::move(settings)](cluster_manager_actor manager) {
    return spawn_admin(sys, std::move(manager), settings);
  };
}

}  // namespace ember
