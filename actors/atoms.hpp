// The atoms (verbs) of Ember's actor messages. Atoms are verbs only, never data; at most 10
// characters each (CAF 0.17).
#pragma once

#include <caf/atom.hpp>

namespace ember {

using join_atom = caf::atom_constant<caf::atom("join")>;  // a node joins the manager
inline constexpr join_atom join_atom_v{};
using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>;  // a gateway subscribes to routing
inline constexpr subscribe_atom subscribe_atom_v{};
using ensure_atom = caf::atom_constant<caf::atom("ensure")>;  // make sure a model has a replica
inline constexpr ensure_atom ensure_atom_v{};
using load_atom = caf::atom_constant<caf::atom("load")>;
inline constexpr load_atom load_atom_v{};
using unload_atom = caf::atom_constant<caf::atom("unload")>;
inline constexpr unload_atom unload_atom_v{};
using index_atom = caf::atom_constant<caf::atom("index")>;
inline constexpr index_atom index_atom_v{};
using nodes_atom = caf::atom_constant<caf::atom("nodes")>;
inline constexpr nodes_atom nodes_atom_v{};
using report_atom = caf::atom_constant<caf::atom("report")>;
inline constexpr report_atom report_atom_v{};
using metrics_atom = caf::atom_constant<caf::atom("metrics")>;
inline constexpr metrics_atom metrics_atom_v{};
using status_atom = caf::atom_constant<caf::atom("status")>;
inline constexpr status_atom status_atom_v{};
using pin_atom = caf::atom_constant<caf::atom("pin")>;
inline constexpr pin_atom pin_atom_v{};
using unpin_atom = caf::atom_constant<caf::atom("unpin")>;
inline constexpr unpin_atom unpin_atom_v{};
using tick_atom = caf::atom_constant<caf::atom("tick")>;
inline constexpr tick_atom tick_atom_v{};
using distribute_atom = caf::atom_constant<caf::atom("distribute")>;  // fill node caches
inline constexpr distribute_atom distribute_atom_v{};
using evict_atom = caf::atom_constant<caf::atom("evict")>;  // drop bytes from node caches
inline constexpr evict_atom evict_atom_v{};
using expire_atom = caf::atom_constant<caf::atom("expire")>;
inline constexpr expire_atom expire_atom_v{};

using restart_atom = caf::atom_constant<caf::atom("restart")>;  // rebuild a faulted executor
inline constexpr restart_atom restart_atom_v{};
using weights_atom = caf::atom_constant<caf::atom("weights")>;  // where a model's device copy lives
inline constexpr weights_atom weights_atom_v{};
using scale_atom = caf::atom_constant<caf::atom("scale")>;  // the autoscaler's tick; a gateway's report tick
inline constexpr scale_atom scale_atom_v{};
using credit_atom = caf::atom_constant<caf::atom("credit")>;  // a pipeline stage took a request
inline constexpr credit_atom credit_atom_v{};
using manager_atom = caf::atom_constant<caf::atom("manager")>;  // a standalone gateway reached its manager
inline constexpr manager_atom manager_atom_v{};
using admin_atom = caf::atom_constant<caf::atom("admin")>;  // the console asks for the admin interface
inline constexpr admin_atom admin_atom_v{};
using drain_atom = caf::atom_constant<caf::atom("drain")>;  // the console drains a node
inline constexpr drain_atom drain_atom_v{};
using log_level_atom = caf::atom_constant<caf::atom("log_level")>;  // the console sets the log level
inline constexpr log_level_atom log_level_atom_v{};
using transfers_atom = caf::atom_constant<caf::atom("transfers")>;  // the console lists live chains
inline constexpr transfers_atom transfers_atom_v{};
using fault_atom = caf::atom_constant<caf::atom("fault")>;  // inject a fault (--allow-faults nodes)
inline constexpr fault_atom fault_atom_v{};
using slo_atom = caf::atom_constant<caf::atom("slo")>;  // set a model's latency objective
inline constexpr slo_atom slo_atom_v{};
using replace_atom = caf::atom_constant<caf::atom("replace")>;  // a supervisor replaced a dead actor
inline constexpr replace_atom replace_atom_v{};
using forget_atom = caf::atom_constant<caf::atom("forget")>;  // an executor drops every model it holds
inline constexpr forget_atom forget_atom_v{};
using handover_atom = caf::atom_constant<caf::atom("handover")>;  // a newer load's sources for a fetch in flight
inline constexpr handover_atom handover_atom_v{};
using ping_atom = caf::atom_constant<caf::atom("ping")>;  // the manager asks a node's router if it lives
inline constexpr ping_atom ping_atom_v{};
using roster_atom = caf::atom_constant<caf::atom("roster")>;  // a node supervisor's current actors
inline constexpr roster_atom roster_atom_v{};
// Workflows (issue 18): a node runs a workflow request; an executor drops values it kept on its
// device for a later step, or says where they are for another device to copy them.
using workflow_atom = caf::atom_constant<caf::atom("workflow")>;
inline constexpr workflow_atom workflow_atom_v{};
using release_atom = caf::atom_constant<caf::atom("release")>;
inline constexpr release_atom release_atom_v{};
using lend_atom = caf::atom_constant<caf::atom("lend")>;
inline constexpr lend_atom lend_atom_v{};
/// Drop the Shadow an executor holds for a model (AsyFunc).
using shadow_atom = caf::atom_constant<caf::atom("shadow")>;
inline constexpr shadow_atom shadow_atom_v{};
/// Text generation (issue 35): stop a generation by its request id (the client went away).
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
inline constexpr cancel_atom cancel_atom_v{};
/// The manager tells a node the other members' published endpoints (issue 37: nodes dial each other).
using peers_atom = caf::atom_constant<caf::atom("peers")>;
inline constexpr peers_atom peers_atom_v{};

}  // namespace ember
