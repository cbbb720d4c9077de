// node_supervisor (see node_supervisor.hpp).
#include "actors/node/node_supervisor.hpp"

#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <random>

#include "actors/errors.hpp"
#include "actors/fault_messages.hpp"
#include "actors/node/inline_runs.hpp"
#include "actors/node/node_instruments.hpp"
#include "actors/peer_dials.hpp"

namespace ember {

namespace {

/// A child that dies this often within kRestartWindow is left dead (a restart loop helps nobody).
constexpr size_t kMaxRestarts = 20;
constexpr auto kRestartWindow = std::chrono::seconds(60);

using SupervisorTime = caf::actor_clock::time_point;

struct supervisor_state {
  static inline const char* name = "ember.node_supervisor";

  supervisor_state() = default;
  supervisor_state(const supervisor_state&) = delete;
  supervisor_state& operator=(const supervisor_state&) = delete;
  /// The supervisor's children end with it (stopped, or killed: the node is gone as a whole). Not
  /// links: a child killed with exit_reason::kill would take a linked supervisor down with it.
  ~supervisor_state() {
    if (router) caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
    if (stages) caf::anon_send_exit(stages, caf::exit_reason::user_shutdown);
    if (cache) caf::anon_send_exit(cache, caf::exit_reason::user_shutdown);
    for (const auto& e : executors) caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
  }

  /// Drops, delays or duplicates the messages to the router (fault injection).
  struct Interposer {
    FaultKind kind = FaultKind::drop;  // drop, delay or duplicate
    double probability = 1.0;
    std::chrono::milliseconds delay{0};
    std::optional<SupervisorTime> until;  // unset: until healed
    uint64_t seed = 0;
    std::mt19937_64 rng;
    uint64_t seen = 0;
    uint64_t hit = 0;
  };
  /// A delayed message with the promise of its answer: the router answers the original sender.
  struct Delayed {
    caf::response_promise promise;
    caf::message message;
  };

  SupervisorConfig config;
  node_router_actor router;
  std::vector<gpu_executor_actor> executors;
  model_cache_actor cache;
  stage_host_actor stages;
  std::map<std::string, std::deque<SupervisorTime>> restarts;  // per child: recent restarts
  std::optional<Interposer> interposer;
  /// stop-heartbeats: the manager's pings go unanswered until then.
  std::optional<SupervisorTime> deaf_until;
  std::map<uint64_t, Delayed> delayed;
  uint64_t next_delayed = 1;
  /// The node's connections to the other members (actors/peer_dials.hpp).
  PeerDialing dialing;
};

using supervisor_pointer = caf::stateful_actor<supervisor_state>*;

/// The manager's list of the members: the node dials the others, so that what it sends them (a
/// pipeline's hand-offs and credits) takes their own connection, not the manager's process.
void dial_members(supervisor_pointer self, const std::vector<peer_endpoint>& members) {
  auto& st = self->state;
  if (!st.dialing.queue) return;  // a node inside `ember serve`: its peers are this process's own actors
  if (st.config.manager && !st.config.manager->is(self->current_sender())) {
    spdlog::warn("node {}: a list of members from another than the manager it joined; ignored", st.config.node);
    return;
  }
  std::vector<peer_endpoint> others;
  for (const auto& m : members) {
    if (m.node != st.config.node) others.push_back(m);
  }
  st.dialing.dials.want(others);
  dial_peers(self, [](supervisor_pointer s) -> PeerDialing& { return s->state.dialing; });
}

/// False (and says so once) when `child` died too often lately to be restarted again.
bool may_restart(supervisor_pointer self, const std::string& child) {
  auto& recent = self->state.restarts[child];
  const SupervisorTime now = self->clock().now();
  while (!recent.empty() && now - recent.front() > kRestartWindow) recent.pop_front();
  if (recent.size() >= kMaxRestarts) {
    spdlog::error("node {}: its {} died {} times within {} s; it is not restarted again (the node refuses its work)",
                  self->state.config.node, child, recent.size() + 1, kRestartWindow.count());
    return false;
  }
  recent.push_back(now);
  return true;
}

void child_down(supervisor_pointer self, const caf::down_msg& down) {
  auto& st = self->state;
  const std::string why = caf::to_string(down.reason);
  if (down.source == st.router.address()) {
    if (!may_restart(self, "router")) return;
    st.router = st.config.spawn_router(st.executors, st.cache, st.stages);
    self->monitor(st.router);
    if (st.config.instruments) st.config.instruments->count_actor_restart("router");
    spdlog::warn("node {}: its router died ({}); restarted", st.config.node, why);
    return;
  }
  if (down.source == st.cache.address() && st.config.spawn_cache) {
    if (!may_restart(self, "model cache")) return;
    st.cache = st.config.spawn_cache();
    self->monitor(st.cache);
    self->send(st.router, replace_atom_v, cache_replaced{st.cache});
    if (st.config.instruments) st.config.instruments->count_actor_restart("cache");
    spdlog::warn("node {}: its model cache died ({}); restarted", st.config.node, why);
    return;
  }
  if (down.source == st.stages.address() && st.config.spawn_stages) {
    if (!may_restart(self, "stage host")) return;
    st.stages = st.config.spawn_stages();
    self->monitor(st.stages);
    self->send(st.router, replace_atom_v, stages_replaced{st.stages});
    if (st.config.instruments) st.config.instruments->count_actor_restart("stages");
    spdlog::warn("node {}: its stage host died ({}); restarted", st.config.node, why);
    return;
  }
  for (uint32_t i = 0; i < st.executors.size(); ++i) {
    if (down.source != st.executors[i].address()) continue;
    if (!may_restart(self, "executor " + std::to_string(i))) return;
    st.executors[i] = st.config.spawn_executor(i);
    self->monitor(st.executors[i]);
    self->send(st.router, replace_atom_v, executor_replaced{i, st.executors[i]});
    if (st.config.instruments) st.config.instruments->count_actor_restart("executor");
    spdlog::warn("node {}: its executor {} died ({}); replaced", st.config.node, i, why);
    return;
  }
}

void end_interposer(supervisor_pointer self, const char* how) {
  auto& st = self->state;
  if (!st.interposer) return;
  const auto& ip = *st.interposer;
  spdlog::warn("node {}: fault {} on the router {}: it took {} of {} message(s) (seed {})", st.config.node,
               to_string(ip.kind), how, ip.hit, ip.seen, ip.seed);
  st.interposer.reset();
  if (st.config.inline_runs) st.config.inline_runs->suspend(false);
}

/// Every message for the router: passed on, unless the interposer takes it.
caf::result<caf::message> pass_on(supervisor_pointer self, caf::message msg) {
  auto& st = self->state;
  auto router = caf::actor_cast<caf::actor>(st.router);
  if (st.interposer && st.interposer->until && self->clock().now() >= *st.interposer->until) {
    end_interposer(self, "ended");
  }
  if (st.deaf_until && self->clock().now() < *st.deaf_until && msg.match_elements<ping_atom>()) {
    return caf::delegated<caf::message>{};  // a hang as the manager sees it: no answer
  }
  if (st.interposer) {
    auto& ip = *st.interposer;
    ++ip.seen;
    if (std::uniform_real_distribution<double>(0.0, 1.0)(ip.rng) < ip.probability) {
      ++ip.hit;
      if (ip.kind == FaultKind::drop) return caf::delegated<caf::message>{};  // nobody answers: the sender times out
      if (ip.kind == FaultKind::delay) {
        const uint64_t id = st.next_delayed++;
        st.delayed.emplace(id, supervisor_state::Delayed{self->make_response_promise(), std::move(msg)});
        self->delayed_send(self, ip.delay, expire_atom_v, id);
        return caf::delegated<caf::message>{};
      }
      // duplicate: an extra copy, anonymous so that its answer goes nowhere
      caf::anon_send(router, msg);
    }
  }
  return self->delegate(router, std::move(msg));
}

void counted(supervisor_state& st, FaultKind kind) {
  if (st.config.instruments) st.config.instruments->count_fault(std::string(to_string(kind)));
}

/// The targets of the kinds that act on the node's actors (router, cache, executor:N, hop): a target
/// that names one the node has. The kind checks which of them it takes.
Status check_actor_target(const supervisor_state& st, const fault_command& f) {
  switch (f.target) {
    case FaultTarget::router:
    case FaultTarget::cache:
      return Status::OK();
    case FaultTarget::hop:
      if (f.kind != FaultKind::kill) return invalid_argument("a multicast hop takes only kill");
      return Status::OK();
    case FaultTarget::executor:
      if (f.executor < st.executors.size()) return Status::OK();
      return invalid_argument("node " + st.config.node + " has executors 0.." +
                              std::to_string(st.executors.size() - 1) + ", not '" + std::to_string(f.executor) + "'");
    case FaultTarget::data:
    case FaultTarget::hops:
      break;
  }
  return invalid_argument(std::string(to_string(f.kind)) + " targets router, cache, hop or executor:N, not '" +
                          target_name(f) + "'");
}

/// corrupt-chunk: a knob the data plane reads.
caf::result<std::string> corrupt_chunks(supervisor_pointer self, const fault_command& f) {
  auto& st = self->state;
  const std::string& node = st.config.node;
  if (f.target != FaultTarget::data) {
    return to_caf(invalid_argument("corrupt-chunk targets data, not '" + target_name(f) + "'"));
  }
  if (!st.config.corrupt_next) return to_caf(unsupported("node " + node + " has no data-plane fault knob"));
  if (f.count == 0) return to_caf(invalid_argument("corrupt-chunk needs count >= 1"));
  st.config.corrupt_next->fetch_add(f.count);
  counted(st, f.kind);
  spdlog::warn("node {}: fault injected: corrupt the next {} data frame(s) the blob server sends", node, f.count);
  return "the next " + std::to_string(f.count) + " data frame(s) node " + node + " sends are corrupted";
}

/// throttle and stall: knobs the hops read.
caf::result<std::string> hold_hops(supervisor_pointer self, const fault_command& f) {
  auto& st = self->state;
  const std::string& node = st.config.node;
  const std::string kind(to_string(f.kind));
  const bool throttle = f.kind == FaultKind::throttle;
  if (f.target != FaultTarget::hops) {
    return to_caf(invalid_argument(kind + " targets hops, not '" + target_name(f) + "'"));
  }
  if (!st.config.hop_fault) return to_caf(unsupported("node " + node + " has no hop fault knob"));
  if (f.duration_ms == 0) return to_caf(invalid_argument(kind + " needs a duration (for=...)"));
  if (throttle && f.rate == 0) return to_caf(invalid_argument("throttle needs a rate (rate=...)"));
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(f.duration_ms);
  st.config.hop_fault->rate.store(throttle ? f.rate : 0);
  st.config.hop_fault->until_ns.store(until.time_since_epoch() / std::chrono::nanoseconds(1));
  counted(st, f.kind);
  const std::string what =
      (throttle ? "throttle the multicast hops of node " + node + " to " + std::to_string(f.rate) + " bytes/s"
                : "stall the multicast hops of node " + node) +
      " for " + std::to_string(f.duration_ms) + " ms";
  spdlog::warn("node {}: fault injected: {}", node, what);
  return what;
}

/// kill hop: the cache kills its live hops (and replaces each); an error when none runs.
caf::result<std::string> kill_hops(supervisor_pointer self) {
  auto& st = self->state;
  const std::string node = st.config.node;
  auto rp = self->make_response_promise<std::string>();
  self->request(st.cache, std::chrono::seconds(5), fault_atom_v, std::string("kill-hops"))
      .then(
          [self, rp, node](uint32_t killed) mutable {
            if (killed == 0) {
              rp.deliver(to_caf(not_found("node " + node + " runs no multicast hop now: nothing to kill")));
              return;
            }
            counted(self->state, FaultKind::kill);
            spdlog::warn("node {}: fault injected: kill hop ({} hop(s))", node, killed);
            rp.deliver("killed " + std::to_string(killed) + " multicast hop(s) of node " + node +
                       " (the model cache starts each again from its verified offset)");
          },
          [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
  return rp;
}

/// kill: the target dies at once (exit_reason::kill); its supervisor (this one, or the cache for
/// hops) restarts it.
caf::result<std::string> kill(supervisor_pointer self, const fault_command& f) {
  auto& st = self->state;
  const std::string& node = st.config.node;
  if (auto s = check_actor_target(st, f); !s.ok()) return to_caf(s.error());
  if (f.target == FaultTarget::hop) return kill_hops(self);
  counted(st, f.kind);
  spdlog::warn("node {}: fault injected: kill {}", node, target_name(f));
  if (f.target == FaultTarget::executor) {
    self->send_exit(st.executors[f.executor], caf::exit_reason::kill);
  } else if (f.target == FaultTarget::cache) {
    self->send_exit(st.cache, caf::exit_reason::kill);
  } else {
    self->send_exit(st.router, caf::exit_reason::kill);
  }
  return "killed " + target_name(f) + " of node " + node + " (its supervisor restarts it)";
}

/// drop, delay and duplicate: an interposer in front of the router (one at a time: a new one
/// replaces the old).
caf::result<std::string> interpose(supervisor_pointer self, const fault_command& f) {
  auto& st = self->state;
  const std::string& node = st.config.node;
  const std::string kind(to_string(f.kind));
  if (auto s = check_actor_target(st, f); !s.ok()) return to_caf(s.error());
  if (f.target != FaultTarget::router) {
    return to_caf(invalid_argument(kind + " stands in front of the router: its target is router"));
  }
  if (!(f.probability > 0.0 && f.probability <= 1.0)) {
    return to_caf(invalid_argument("the probability is in (0, 1], not " + std::to_string(f.probability)));
  }
  if (f.kind == FaultKind::delay && f.delay_ms == 0) {
    return to_caf(invalid_argument("delay needs a delay (delay=...)"));
  }
  if (st.interposer) end_interposer(self, "replaced");
  supervisor_state::Interposer ip;
  ip.kind = f.kind;
  ip.probability = f.probability;
  ip.delay = std::chrono::milliseconds(f.delay_ms);
  ip.seed = f.seed ? f.seed : std::random_device{}();
  ip.rng.seed(ip.seed);
  if (f.duration_ms) {
    ip.until = self->clock().now() + std::chrono::milliseconds(f.duration_ms);
    self->delayed_send(self, std::chrono::milliseconds(f.duration_ms), expire_atom_v);
  }
  const std::string what = kind + " the router's messages with probability " + fmt::format("{:g}", f.probability) +
                           (f.kind == FaultKind::delay ? ", " + std::to_string(f.delay_ms) + " ms each" : "") + ", " +
                           (f.duration_ms ? "for " + std::to_string(f.duration_ms) + " ms" : "until healed") +
                           ", seed " + std::to_string(ip.seed);
  st.interposer = std::move(ip);
  // Every request passes the router while its messages are interposed: none runs inline.
  if (st.config.inline_runs) st.config.inline_runs->suspend(true);
  counted(st, f.kind);
  spdlog::warn("node {}: fault injected: {}", node, what);
  return what;
}

/// stop-heartbeats: the manager's pings go unanswered for a while (a hang without a crash).
caf::result<std::string> stop_heartbeats(supervisor_pointer self, const fault_command& f) {
  auto& st = self->state;
  const std::string& node = st.config.node;
  if (auto s = check_actor_target(st, f); !s.ok()) return to_caf(s.error());
  if (f.target != FaultTarget::router) {
    return to_caf(invalid_argument("stop-heartbeats targets router, not '" + target_name(f) + "'"));
  }
  if (f.duration_ms == 0) return to_caf(invalid_argument("stop-heartbeats needs a duration (for=...)"));
  st.deaf_until = self->clock().now() + std::chrono::milliseconds(f.duration_ms);
  counted(st, f.kind);
  spdlog::warn("node {}: fault injected: the router answers no heartbeat for {} ms", node, f.duration_ms);
  return "the router of node " + node + " answers no heartbeat for " + std::to_string(f.duration_ms) + " ms";
}

/// heal: the interposer stops.
caf::result<std::string> heal(supervisor_pointer self, const fault_command& f) {
  auto& st = self->state;
  const std::string& node = st.config.node;
  if (auto s = check_actor_target(st, f); !s.ok()) return to_caf(s.error());
  if (!st.interposer) return std::string("no interposer was active on node " + node);
  end_interposer(self, "healed");
  return std::string("healed the router of node " + node);
}

/// fail-alloc and fault-kernel: armed in the executor's engine.
caf::result<std::string> arm_executor(supervisor_pointer self, const fault_command& f) {
  auto& st = self->state;
  const std::string kind(to_string(f.kind));
  if (auto s = check_actor_target(st, f); !s.ok()) return to_caf(s.error());
  if (f.target != FaultTarget::executor) return to_caf(invalid_argument(kind + " targets an executor (executor:N)"));
  counted(st, f.kind);
  spdlog::warn("node {}: fault injected: {} on {} (count {})", st.config.node, kind, target_name(f), f.count);
  return self->delegate(st.executors[f.executor], fault_atom_v, f);
}

caf::result<std::string> inject(supervisor_pointer self, fault_command& f) {
  auto& st = self->state;
  if (!st.config.allow_faults) {
    return to_caf(
        permission_denied("node " + st.config.node + " was not started with --allow-faults: it takes no fault"));
  }
  if (st.config.manager && !st.config.manager->is(self->current_sender())) {
    return to_caf(permission_denied("node " + st.config.node +
                                    " takes a fault only from the manager it joined, which passes on the console's "
                                    "(ember console fault, with the admin token)"));
  }
  switch (f.kind) {
    case FaultKind::kill:
      return kill(self, f);
    case FaultKind::drop:
    case FaultKind::delay:
    case FaultKind::duplicate:
      return interpose(self, f);
    case FaultKind::heal:
      return heal(self, f);
    case FaultKind::fail_alloc:
    case FaultKind::fault_kernel:
      return arm_executor(self, f);
    case FaultKind::corrupt_chunk:
      return corrupt_chunks(self, f);
    case FaultKind::throttle:
    case FaultKind::stall:
      return hold_hops(self, f);
    case FaultKind::stop_heartbeats:
      return stop_heartbeats(self, f);
  }
  // Only a peer that sent a value this build does not know gets here.
  return to_caf(invalid_argument("no fault kind " + std::to_string(static_cast<int>(f.kind))));
}

caf::behavior supervisor_behavior(supervisor_pointer self, SupervisorConfig config, node_router_actor router,
                                  std::vector<gpu_executor_actor> executors, model_cache_actor cache,
                                  stage_host_actor stages) {
  auto& st = self->state;
  st.config = std::move(config);
  st.router = std::move(router);
  st.executors = std::move(executors);
  st.cache = std::move(cache);
  st.stages = std::move(stages);
  st.dialing.queue = st.config.dial_queue;
  st.dialing.retry = st.config.dial_retry;
  st.dialing.who = "node " + st.config.node;
  st.dialing.peer_word = "peer";
  st.dialing.meanwhile = "what it sends there goes through another process meanwhile";
  self->monitor(st.router);
  self->monitor(st.cache);
  if (st.stages) self->monitor(st.stages);
  for (const auto& e : st.executors) self->monitor(e);
  self->set_down_handler([self](caf::down_msg& down) { child_down(self, down); });
  self->set_default_handler([self](caf::scheduled_actor*, caf::message_view& view) -> caf::result<caf::message> {
    return pass_on(self, view.move_content_to_message());
  });
  return {
      [self](fault_atom, fault_command& f) -> caf::result<std::string> { return inject(self, f); },
      [self](peers_atom, const std::vector<peer_endpoint>& members) { dial_members(self, members); },
      resume_offloaded(),
      [self](roster_atom) {
        return node_roster{self->state.router, self->state.executors, self->state.cache, self->state.stages};
      },
      // A delayed message's time is up: on to the router, which answers its sender.
      [self](expire_atom, uint64_t id) {
        auto it = self->state.delayed.find(id);
        if (it == self->state.delayed.end()) return;
        auto d = std::move(it->second);
        self->state.delayed.erase(it);
        d.promise.delegate(caf::actor_cast<caf::actor>(self->state.router), std::move(d.message));
      },
      [self](expire_atom) {
        auto& ip = self->state.interposer;
        if (ip && ip->until && self->clock().now() >= *ip->until) end_interposer(self, "ended");
      },
  };
}

}  // namespace

node_router_actor spawn_node_supervisor(caf::actor_system& sys, SupervisorConfig config, node_router_actor router,
                                        std::vector<gpu_executor_actor> executors, model_cache_actor cache,
                                        stage_host_actor stages) {
  auto actor = sys.spawn(supervisor_behavior, std::move(config), std::move(router), std::move(executors),
                         std::move(cache), std::move(stages));
  return caf::actor_cast<node_router_actor>(actor);
}

}  // namespace ember
