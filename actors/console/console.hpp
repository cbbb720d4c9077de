// The console's client: commands typed by an operator (or a script) turned into admin messages
// (actors/admin_interface.hpp, each carrying an admin_auth) and their answers into tables or JSON.
// `ember console` (cli/console_command.cpp) reads the lines; this class runs them. It dials the
// manager, asks it once for its admin actor (admin_atom) and sends every command there.
//
// Blocking, on the caller's thread (a scoped actor waits for each answer, at most the command's
// timeout). Not thread-safe: one per session.
#pragma once

#include <caf/fwd.hpp>
#include <memory>
#include <string>
#include <vector>

#include "actors/admin_interface.hpp"
#include "actors/fault_messages.hpp"
#include "base/host_port.hpp"
#include "base/status.hpp"

namespace ember {

struct ConsoleOptions {
  admin_auth auth;
  bool json = false;  // answers as JSON (one document per command) instead of tables
};

class Console {
 public:
  /// Connects to the manager at `manager` (its manager.listen) and its admin actor. unavailable
  /// when it cannot.
  static Result<std::unique_ptr<Console>> connect(caf::actor_system& sys, const HostPort& manager,
                                                  ConsoleOptions options);

  /// Runs one command line; the text to print (a table, JSON, or what was done). An empty line
  /// gives "". Errors: invalid_argument (an unknown command or bad arguments, with the usage),
  /// permission_denied, and what the manager answers.
  Result<std::string> run(const std::string& line);

  /// The commands, for help and completion.
  static const std::vector<std::string>& commands();
  /// Completions of the word being typed: command names first, then node and model names (as the
  /// last nodes/models listing saw them).
  std::vector<std::string> complete(const std::string& line, const std::string& word) const;
  /// `watch`'s refresh: the models and nodes tables (what `watch` prints every second).
  Result<std::string> snapshot();

 private:
  Console(caf::actor_system& sys, admin_actor admin, ConsoleOptions options);
  Result<std::vector<node_report>> nodes();
  Result<std::vector<model_state>> models();

  caf::actor_system& sys_;
  admin_actor admin_;
  ConsoleOptions options_;
  std::vector<std::string> node_names_, model_names_;  // for completion
};

/// The words of `fault NODE ...` after NODE: KIND [TARGET] [p=P] [for=DURATION] [delay=DURATION]
/// [count=K] [seed=S] [rate=BANDWIDTH]. The target defaults to router (executor:0 for fail-alloc and
/// fault-kernel, data for corrupt-chunk, hops for throttle and stall). Kind and target are parsed
/// here (parse_fault_kind, parse_fault_target: an unknown one is refused with the valid ones
/// listed and never sent); the node checks the rest (its executors, which target a kind takes, the
/// options a kind needs). Errors: invalid_argument.
Result<fault_command> parse_fault(const std::vector<std::string>& words);

/// "user@host" of this process, for admin_auth::who.
std::string console_user();

}  // namespace ember
