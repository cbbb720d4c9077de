// admin: the console's admin interface, one per manager process (actors/console/admin.hpp). Every
// message carries an admin_auth. Changes need the admin token (manager.admin_token_file), reads need
// it unless manager.open_reads; the token is compared in constant time, refusals are logged and
// every change is logged with who asked. A command that passes is handed to the manager's plain
// interface (cluster_manager_interface.hpp), which answers the console directly; the admin actor is
// the only place that checks tokens. Errors: permission_denied (a wrong or missing token, or no
// token configured for a change), then the manager's for the command.
//
// The remote console reaches it through the manager: it connects to the manager's published
// address, asks the manager admin_atom once for this actor's handle, and talks to it over the same
// connection from then on.
#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/fault_messages.hpp"
#include "actors/metrics_messages.hpp"
#include "actors/model_messages.hpp"
#include "actors/node_report_messages.hpp"
#include "actors/transfer_progress_messages.hpp"

namespace ember {

/// What every console (admin) message carries: the admin token (manager.admin_token_file; checked
/// in constant time) and who asks ("user@host", for the log of changes).
struct admin_auth {
  std::string token;
  std::string who;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, admin_auth& x) {
  return f(caf::meta::type_name("admin_auth"), x.token, x.who);
}

using admin_actor = caf::typed_actor<
    /// Reads: every node's report, every model version's state, the manager's metrics, the hops of
    /// the multicast chains in flight.
    caf::replies_to<admin_auth, nodes_atom>::with<std::vector<node_report>>,
    caf::replies_to<admin_auth, index_atom>::with<std::vector<model_state>>,
    caf::replies_to<admin_auth, metrics_atom>::with<metrics_snapshot>,
    caf::replies_to<admin_auth, transfers_atom>::with<std::vector<hop_progress>>,
    /// Changes: the model-repository API and the caches (as the manager's load, unload, distribute
    /// and evict).
    caf::replies_to<admin_auth, load_atom, model_command>::with<model_state>,
    caf::replies_to<admin_auth, unload_atom, model_command>::with<model_state>,
    caf::replies_to<admin_auth, distribute_atom, distribute_request>::with<distribute_result>,
    caf::replies_to<admin_auth, evict_atom, distribute_request>::with<distribute_result>,
    /// Drains node NAME: answered with the models moved once it holds none (it may then be stopped).
    caf::replies_to<admin_auth, drain_atom, std::string>::with<std::vector<model_key>>,
    /// The autoscaler's bounds of a model: MIN and, unless 0, MAX replicas; the model's state.
    caf::replies_to<admin_auth, scale_atom, model_key, uint32_t, uint32_t>::with<model_state>,
    /// Sets or clears (deadline 0) a model's SLO at run time; the versions changed.
    caf::replies_to<admin_auth, slo_atom, slo_command>::with<std::vector<model_state>>,
    /// The log level of the manager's process and every node's; the number of processes told.
    caf::replies_to<admin_auth, log_level_atom, std::string>::with<uint32_t>,
    /// Injects a fault into node NAME (started with --allow-faults); what the node did.
    caf::replies_to<admin_auth, fault_atom, std::string, fault_command>::with<std::string>>;

}  // namespace ember
