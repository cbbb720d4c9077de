// The console's admin actor (actors/admin_interface.hpp): one per manager process, beside the
// cluster manager. It owns the console's side of the manager: the admin token check (in constant
// time), the refusal log and the "who asked" log of every change; a command that passes is
// asked of the manager's plain interface (cluster_manager_interface.hpp) and its answer passed on
// to the console. It holds no other state and never blocks.
//
// Decided here, and why:
// - An actor of its own rather than the manager checking tokens: the manager's interface stays one
//   set of plain messages (those the gateways and nodes send, and a few only this actor sends:
//   drain, scale, slo, transfers, fault, log-level), and the token is checked in exactly one place.
// - Reached through the manager (admin_atom answers its handle) rather than published on a port of
//   its own: the console keeps dialling manager.listen as it always did, over the one connection
//   (and its mutual TLS) it already has; CAF publishes one actor per port.
// - Spawned by the manager, through the factory the manager process puts in ClusterManagerConfig
//   (make_admin_factory), rather than spawned by the process and its handle told to the manager by
//   a message: such a setter would sit in the manager's published interface, where anyone who
//   reaches the manager could put an actor of their own between consoles and the manager (and read
//   their tokens). The handle is fixed when the manager starts.
// - It asks the manager rather than delegating to it: the manager takes the console's own commands
//   (drain, scale, slo, transfers, fault, log-level) only from this actor, its sender, and refuses
//   them from anyone else (permission_denied), so reaching the manager's port is not enough to
//   drain a node or inject a fault without the token. (A member that forges CAF's sender field with
//   a client of its own is not stopped by this; members hold the cluster's certificates.)
// - It monitors the manager and quits with it; the manager holds its handle.
//
// Settings: manager.admin_token_file's content (empty: none; changes are refused) and
// manager.open_reads (reads need no token when true).
#pragma once

#include <caf/fwd.hpp>
#include <functional>
#include <string>

#include "actors/admin_interface.hpp"
#include "actors/cluster_manager_interface.hpp"
#include "base/status.hpp"

namespace ember {

struct AdminSettings {
  /// The admin token (manager.admin_token_file's content); empty: none is configured.
  std::string token;
  /// manager.open_reads: reads (nodes, models, metrics, transfers) need no token.
  bool open_reads = true;
};

/// Spawns the admin actor in front of `manager`.
admin_actor spawn_admin(caf::actor_system& sys, cluster_manager_actor manager, AdminSettings settings);

/// The factory ClusterManagerConfig::admin takes: spawns the admin actor in `sys` with `settings`
/// for the manager that calls it.
std::function<admin_actor(cluster_manager_actor)> make_admin_factory(caf::actor_system& sys, AdminSettings settings);

/// A console command's right to run: `change` names what it changes ("" for a read). Changes need
/// the token (and are logged with who asked); reads need it unless open_reads. Errors:
/// permission_denied saying why (and logged when the token is wrong or missing).
Status check_admin(const AdminSettings& settings, const admin_auth& auth, const std::string& change);

}  // namespace ember
