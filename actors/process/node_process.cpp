#include "actors/process/node_process.hpp"

#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <thread>

#include "actors/actor_system.hpp"
#include "actors/errors.hpp"
#include "actors/node/blob_store.hpp"
#include "actors/node/engine/executor_engine.hpp"
#include "actors/node/gpu_executor.hpp"
#include "actors/node/inline_runs.hpp"
#include "actors/node/model_cache.hpp"
#include "actors/node/node_instruments.hpp"
#include "actors/node/node_router.hpp"
#include "actors/node/node_supervisor.hpp"
#include "actors/node/replica_ledger.hpp"
#include "actors/node/stage_host.hpp"
#include "actors/process/data_server_options.hpp"
#include "base/service_notify.hpp"
#include "base/units.hpp"
#include "gpu/device_registry.hpp"
#include "security/certs.hpp"
#include "transport/data_plane.hpp"

namespace ember {

namespace {

/// Concurrent fetches of the model cache (local repository reads and fetches from sources; one per
/// blob at most, so more threads only help when several models load at once).
constexpr size_t kFetchThreads = 2;
/// Multicast hops a node receives at once. A hop's attempt holds a thread for the whole transfer
/// (it forwards while receiving); hops beyond these wait for one to end. Each idle thread costs a
/// stack's virtual memory only.
constexpr size_t kHopThreads = 16;
/// Fetches of the tensors an upstream pipeline stage handed over: one per stage at a time (a stage
/// takes the next request once the current one ran), so a few cover the stages a node holds.
constexpr size_t kHandoffThreads = 4;

/// The node's topology for the swap scheduler, from `devices:` (bandwidths in GB/s).
Result<placement::NodeTopology> node_topology(const DevicesConfig& devices, uint32_t count) {
  std::vector<uint32_t> switches = devices.pcie_switch;
  if (switches.empty()) {
    for (uint32_t i = 0; i < count; ++i) switches.push_back(i);
  }
  std::vector<std::vector<double>> links(count, std::vector<double>(count, 0.0));
  for (size_t a = 0; a < devices.link_bytes_per_s.size() && a < count; ++a) {
    for (size_t b = 0; b < devices.link_bytes_per_s[a].size() && b < count; ++b) {
      links[a][b] = devices.link_bytes_per_s[a][b] / 1e9;
    }
  }
  // Unthrottled sim devices copy as fast as memcpy: any positive figure does (only order matters).
  const double pcie = devices.sim.pcie_bytes_per_s > 0 ? devices.sim.pcie_bytes_per_s / 1e9 : 16.0;
  switches.resize(count, 0);
  return placement::NodeTopology::create(switches, links, std::vector<double>(count, pcie));
}

Result<LateBinding> late_binding(const NodeConfig& node, const BindingConfig& binding, const DevicesConfig& devices,
                                 std::vector<uint64_t> pool_bytes, std::vector<uint64_t> workspace_bytes) {
  EMBER_ASSIGN_OR_RETURN(auto topology, node_topology(devices, static_cast<uint32_t>(pool_bytes.size())));
  SwapControllerOptions options;
  options.scheduler = binding.scheduler;
  options.eviction = binding.eviction;
  options.queue.window_us = static_cast<int64_t>(binding.window_us);
  options.queue.repartition_period_us = static_cast<int64_t>(binding.repartition_us);
  options.queue.alpha_period_us = static_cast<int64_t>(binding.alpha_period_us);
  options.queue.max_queued_per_model = node.max_queued_per_model;
  options.queue.max_queued_total = node.max_queued_total;
  options.seed = binding.seed;
  options.run_ahead = binding.run_ahead;
  options.streams = binding.streams;
  LateBinding late{options, std::move(topology), std::move(pool_bytes), std::move(workspace_bytes)};
  late.heavy_factor = binding.heavy_factor;
  late.slo_factor = binding.slo_factor;
  late.slo_deadline_us = binding.slo_deadline_us;
  late.slo_percentile = binding.slo_percentile;
  late.scaling.model_level = binding.bodies == BodyScalingMode::model_level;
  late.scaling.shadows = binding.shadows;
  late.scaling.adaptive_batching = binding.adaptive_batching;
  late.scaling.burst_window_us = binding.burst_window_us;
  late.scaling.period_us = binding.scaling_period_us;
  return late;
}

/// The `generation:` section as every generative model's loop bounds (each names its own KV cache).
engine::GenerationLoopConfig generation_loop_config(const GenerationConfig& g) {
  engine::GenerationLoopConfig c;
  c.batcher.max_num_seqs = g.max_num_seqs;
  c.batcher.max_num_batched_tokens = g.max_num_batched_tokens;
  c.batcher.max_waiting = g.max_waiting;
  c.kv.pool_fraction = g.kv_cache_fraction;
  c.kv.budget_bytes = g.kv_cache_bytes;
  c.kv.host_bytes = g.kv_swap_space;
  return c;
}

}  // namespace

NodeProcess::NodeProcess(caf::actor_system& sys)
    : sys_(sys),
      fetches_(WorkQueueOptions{.threads = kFetchThreads}),
      hops_(WorkQueueOptions{.threads = kHopThreads}),
      handoffs_(WorkQueueOptions{.threads = kHandoffThreads}),
      maintenance_(WorkQueueOptions{.threads = 1}),
      dials_(WorkQueueOptions{.threads = 1, .capacity = 4096}) {}

Result<std::unique_ptr<NodeProcess>> NodeProcess::start(caf::actor_system& sys, const NodeConfig& node,
                                                        const DevicesConfig& devices, const TransferConfig& transfer,
                                                        const BindingConfig& binding, const SecurityConfig& security,
                                                        const GenerationConfig& generation) {
  std::unique_ptr<NodeProcess> p(new NodeProcess(sys));
  p->name_ = node.name.empty() ? default_node_name() : node.name;
  if (security.ticket_names_certificate) {
    // Tickets for this node name it; the blob servers will hold them to its certificate's name.
    EMBER_ASSIGN_OR_RETURN(std::string named, security::certificate_name(security.tls_certificate));
    if (named != p->name_) {
      return invalid_argument("security.ticket_receiver: certificate: this node is named '" + p->name_ +
                              "' but its certificate (" + security.tls_certificate + ") names '" + named +
                              "', so every ticket for it would be refused: start it with --name " + named +
                              " or give it a certificate issued for " + p->name_ + " (ember certs issue --name " +
                              p->name_ + ")");
    }
  }
  p->instruments_ = std::make_unique<NodeInstruments>();
  if (binding.inline_runs) p->inline_runs_ = std::make_shared<InlineRuns>(p->name_, p->instruments_.get());
  EMBER_ASSIGN_OR_RETURN(auto opened, gpu::open_devices(devices));
  std::vector<device_report> reports;
  std::vector<uint64_t> pools, workspaces;
  std::vector<engine_factory> reopens;  // per device: what a replacement executor reopens
  EngineOptions engine_options;
  engine_options.max_queue = node.max_queue;
  engine_options.workspace_bytes = binding.workspace_bytes;
  engine_options.group_bytes = binding.group_bytes;
  engine_options.streams = binding.streams;
  engine_options.io_batch = binding.io_batch;
  engine_options.node = std::make_shared<NodeEngines>();
  engine_options.staging_bytes = binding.staging_bytes;
  engine_options.generation = generation_loop_config(generation);
  for (auto& d : opened.devices) {
    const uint32_t ordinal = d->info().ordinal;
    EMBER_ASSIGN_OR_RETURN(auto engine, ExecutorEngine::create(std::move(d), engine_options));
    if (generation.kv_cache_bytes > engine->engine_memory().pool_capacity) {
      return invalid_argument("generation.kv_cache: " + format_bytes(generation.kv_cache_bytes) + " is more than " +
                              engine->device_info().name + "'s model pool (" +
                              format_bytes(engine->engine_memory().pool_capacity) + ")");
    }
    const auto mem = engine->memory();
    reports.push_back({engine->device_info().name, mem.capacity_bytes, mem.used_bytes});
    pools.push_back(engine->engine_memory().pool_capacity);
    workspaces.push_back(engine->engine_memory().workspace);
    p->instruments_->set_device_memory(engine->device_info().name,
                                       {.capacity = mem.capacity_bytes, .used = mem.used_bytes});
    engine_factory reopen;
    if (opened.reopen) {
      reopen = [reopen_device = opened.reopen, ordinal, engine_options]() -> Result<std::unique_ptr<ExecutorEngine>> {
        EMBER_ASSIGN_OR_RETURN(auto fresh, reopen_device(ordinal));
        return ExecutorEngine::create(std::move(fresh), engine_options);
      };
    }
    reopens.push_back(reopen);
    const InlineSlot slot{p->inline_runs_, static_cast<uint32_t>(p->executors_.size())};
    p->executors_.push_back(spawn_gpu_executor(sys, std::move(engine), p->name_, p->instruments_.get(), p->maintenance_,
                                               std::move(reopen), slot));
  }
  p->store_ = std::make_shared<BlobStore>();
  EMBER_ASSIGN_OR_RETURN(transport::BlobServerOptions server, data_server_options(transfer, security));
  server.listen = node.data_listen;
  server.corrupt_frame = transfer.fault_corrupt_frame;
  auto corrupt_next = std::make_shared<std::atomic<uint64_t>>(0);
  auto hop_fault = std::make_shared<HopFault>();
  if (node.allow_faults) server.corrupt_next = corrupt_next;
  const TransportKind kind = transfer.transport;
  EMBER_ASSIGN_OR_RETURN(p->blob_server_, transport::start_data_server(kind, server, p->store_->lookup()));
  ModelCacheConfig cache;
  cache.capacity_bytes = node.cache_bytes;
  cache.repository = node.repository;
  cache.transport = kind;
  cache.tls = server.tls;
  cache.transfer.tls = server.tls;
  cache.transfer.node = p->name_;
  cache.transfer.transport = kind;
  cache.transfer.progress_interval = std::chrono::milliseconds(transfer.progress_interval_us / 1000);
  cache.transfer.idle_timeout = std::chrono::milliseconds(transfer.idle_timeout_us / 1000);
  cache.transfer.max_attempts = transfer.max_attempts;
  cache.transfer.socket_buffer_bytes = static_cast<int>(transfer.socket_buffer_bytes);
  cache.transfer.throttle_bytes_per_s = transfer.fault_receive_bytes_per_s;
  if (node.allow_faults) cache.transfer.fault = hop_fault;
  p->cache_ = spawn_model_cache(sys, cache, p->store_, p->instruments_.get(), p->fetches_, p->hops_);
  NodeRouterConfig router{p->name_, {node.data_listen.host, p->blob_server_->port()}, transfer.rack, std::nullopt};
  StageHostConfig stage_host{p->name_, router.data,
                             StageHandoff{p->store_, kind, &p->handoffs_, server.tickets, server.tls}};
  p->stages_ = spawn_stage_host(sys, stage_host, p->instruments_.get());
  router.stages = p->stages_;
  router.ledger = std::make_shared<ReplicaLedger>();
  router.inline_runs = p->inline_runs_;
  router.direct_requests = !node.allow_faults;
  if (binding.mode == BindingMode::late) {
    EMBER_ASSIGN_OR_RETURN(auto late, late_binding(node, binding, devices, pools, workspaces));
    router.late = std::move(late);
  }
  auto first = spawn_node_router(sys, router, p->executors_, reports, p->cache_, p->instruments_.get());
  SupervisorConfig supervision;
  supervision.node = p->name_;
  supervision.allow_faults = node.allow_faults;
  supervision.instruments = p->instruments_.get();
  supervision.inline_runs = p->inline_runs_;
  supervision.manager = p->joined_;
  if (node.manager) {  // a node of a cluster dials the other members (not one inside `ember serve`)
    supervision.dial_queue = &p->dials_;
    supervision.dial_retry = std::chrono::microseconds(node.rejoin_interval_us);
  }
  if (node.allow_faults) {
    supervision.corrupt_next = corrupt_next;
    supervision.hop_fault = hop_fault;
  }
  supervision.spawn_router = [&sys, router, reports, instruments = p->instruments_.get()](
                                 const std::vector<gpu_executor_actor>& executors, const model_cache_actor& cache,
                                 const stage_host_actor& stages) {
    NodeRouterConfig config = router;
    config.stages = stages;
    return spawn_node_router(sys, std::move(config), executors, reports, cache, instruments);
  };
  supervision.spawn_stages = [&sys, stage_host, instruments = p->instruments_.get()] {
    return spawn_stage_host(sys, stage_host, instruments);
  };
  supervision.spawn_cache = [&sys, cache, store = p->store_, instruments = p->instruments_.get(),
                             fetches = &p->fetches_, hops = &p->hops_] {
    return spawn_model_cache(sys, cache, store, instruments, *fetches, *hops);
  };
  supervision.spawn_executor = [&sys, reports, reopens, name = p->name_, instruments = p->instruments_.get(),
                                maintenance = &p->maintenance_, runs = p->inline_runs_](uint32_t device) {
    return spawn_replacement_executor(sys, reports[device].name, name, instruments, *maintenance, reopens[device],
                                      InlineSlot{runs, device});
  };
  p->router_ =
      spawn_node_supervisor(sys, std::move(supervision), std::move(first), p->executors_, p->cache_, p->stages_);
  if (node.allow_faults) spdlog::warn("node {}: fault injection is allowed (--allow-faults)", p->name_);
  if (node.manager) {
    // A node of a cluster (not one inside `ember serve`): gateways dial its router directly.
    auto port = publish_remote(sys, caf::actor_cast<caf::actor>(p->router_), node.listen);
    if (!port.ok()) return io_error("node: cannot listen for gateways: " + port.error().message());
    p->control_ = {node.listen.host, *port};
  }
  uint64_t memory = 0;
  for (const auto& r : reports) memory += r.memory_bytes;
  spdlog::info("node {}: {} device(s) ({} of device memory), cache {}, data plane {}:{}{}", p->name_, reports.size(),
               format_bytes(memory), format_bytes(node.cache_bytes), router.data.host, router.data.port,
               p->control_.port ? ", router at " + p->control_.to_string() : "");
  return p;
}

std::shared_ptr<InlineRunner> NodeProcess::inline_runner() const { return inline_runs_; }

NodeProcess::~NodeProcess() {
  if (blob_server_) blob_server_->stop();
  // The actors use instruments_ and store_: wait until they are gone before those are.
  caf::scoped_actor self{sys_};
  auto stop = [&](const auto& actor) {
    if (!actor) return;
    self->send_exit(actor, caf::exit_reason::user_shutdown);
    self->wait_for(actor);
  };
  // The supervisor first (it would restart what stops), then what it holds now: the actors it
  // restarted replaced those this process spawned.
  node_roster roster{router_, executors_, cache_, stages_};
  if (router_) {
    self->request(caf::actor_cast<caf::actor>(router_), std::chrono::seconds(10), roster_atom_v)
        .receive([&](node_roster& r) { roster = std::move(r); }, [](caf::error&) {});
  }
  stop(router_);
  stop(roster.router);
  stop(roster.stages);
  stop(roster.cache);  // waits for the hops it spawned too
  for (auto& e : roster.executors) stop(e);
  // The members go now: the queues run what is left (the executors' engines among it) and join.
}

namespace {

std::string manager_list(const std::vector<HostPort>& managers) {
  std::string out;
  for (const auto& m : managers) out += (out.empty() ? "" : ",") + m.to_string();
  return out;
}

Result<node_report> ask_report(caf::scoped_actor& self, const node_router_actor& router) {
  Result<node_report> out = internal_error("no report");
  self->request(router, std::chrono::seconds(10), report_atom_v)
      .receive([&](node_report& r) { out = std::move(r); }, [&](caf::error& e) { out = from_caf(e); });
  return out;
}

}  // namespace

Result<uint64_t> NodeProcess::join_local(const cluster_manager_actor& manager) {
  caf::scoped_actor self{sys_};
  EMBER_ASSIGN_OR_RETURN(node_report report, ask_report(self, router_));
  report.control = control_;
  Result<uint64_t> id = internal_error("no answer");
  // Before the answer: the manager sends the member list as it answers, and the supervisor takes
  // it only from the manager joined.
  joined_->set(manager);
  self->request(manager, std::chrono::seconds(10), join_atom_v, report, router_)
      .receive([&](uint64_t x) { id = x; }, [&](caf::error& e) { id = from_caf(e); });
  return id;
}

void NodeProcess::serve_remote(const NodeConfig& config, const std::atomic<bool>& stop) {
  const auto interval = std::chrono::microseconds(config.rejoin_interval_us);
  // Several managers (manager.etcd): tried in turn; only the leader listens, so whichever answers leads.
  std::vector<HostPort> managers{*config.manager};
  managers.insert(managers.end(), config.standby_managers.begin(), config.standby_managers.end());
  size_t next = 0;
  bool said_unreachable = false;
  while (!stop) {
    const HostPort at = managers[next];
    auto found = connect_remote(sys_, at.host, at.port);
    if (!found.ok()) {
      next = (next + 1) % managers.size();
      if (!said_unreachable && next == 0) {  // every one tried
        spdlog::warn("node {}: manager{} {} unreachable ({}); retrying every {} ms", name_,
                     managers.size() > 1 ? "s" : "", manager_list(managers), found.error().message(),
                     config.rejoin_interval_us / 1000);
        (void)notify_service_manager("STATUS=manager " + manager_list(managers) + " unreachable; retrying");
        said_unreachable = true;
      }
      if (next == 0) std::this_thread::sleep_for(interval);
      continue;
    }
    said_unreachable = false;
    auto manager = caf::actor_cast<cluster_manager_actor>(*found);
    auto id = join_local(manager);
    if (!id.ok()) {
      spdlog::warn("node {}: joining {} failed: {}", name_, at.to_string(), id.error().message());
      std::this_thread::sleep_for(interval);
      continue;
    }
    spdlog::info("node {}: joined the cluster at {} as #{}", name_, at.to_string(), *id);
    (void)notify_service_manager("STATUS=joined the cluster at " + at.to_string() + " as #" + std::to_string(*id));
    caf::scoped_actor self{sys_};
    self->monitor(manager);
    bool lost = false;
    while (!stop && !lost) {
      self->receive([&](caf::down_msg&) { lost = true; },
                    caf::after(std::chrono::milliseconds(200)) >> [] { /* check `stop` */ });
    }
    if (lost) {
      spdlog::warn("node {}: lost the manager; rejoining", name_);
      (void)notify_service_manager("STATUS=lost the manager; rejoining");
    }
  }
}

}  // namespace ember
