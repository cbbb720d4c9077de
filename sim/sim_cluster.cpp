#include "sim/sim_cluster.hpp"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "actors/cluster/chain_controller.hpp"
#include "actors/cluster/load_planner.hpp"
#include "actors/cluster/membership.hpp"
#include "actors/cluster/model_registry.hpp"
#include "actors/cluster/partition_controller.hpp"
#include "actors/cluster/replica_driver.hpp"
#include "actors/cluster/scale_driver.hpp"
#include "sim/event_loop.hpp"
#include "sim/flow_network.hpp"

namespace ember::sim {

struct SimCluster::Impl {
  SimOptions options;
  std::vector<ModelCosts> models;
  std::vector<uint64_t> exec1;  // each model's ModelCosts::exec_us(1)
  std::map<std::string, uint32_t> model_index;

  EventLoop loop;
  FlowNetwork net;
  std::optional<Topology> topo;

  // The manager's classes, built and wired as manager_state.hpp builds them.
  ModelRegistry registry;
  Membership members;
  ChainController chains;
  LoadPlanner planner{registry, members, chains};
  PartitionController partitions{registry, members, planner};
  ScaleDriver scaler{registry, members, planner};
  ReplicaDriver driver{registry, members, planner, partitions, scaler};
  ReplicaActions act;

  std::map<uint64_t, uint32_t> host_of_node;
  std::map<std::string, uint32_t> host_of_name;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> free_at;  // (model, node) -> when its replica frees
  // (model, node, first layer) -> when that pipeline stage frees
  std::map<std::tuple<uint32_t, uint64_t, uint32_t>, uint64_t> stage_free;
  std::map<std::pair<model_key, uint64_t>, uint32_t> stage_gpu;  // (version, member node) -> its stage's GPU
  std::map<FlowId, std::function<void()>> flow_done;
  std::map<FlowId, uint32_t> flow_host;  // a download's receiving host: it stops when the host fails
  std::vector<bool> down;                // per host: failed
  std::map<uint32_t, uint64_t> node_of_host;
  std::map<uint64_t, std::set<size_t>> running;  // node -> requests sent to its replica, not finished
  std::map<size_t, EventId> finish_event;        // such a request's end
  EventId flow_event = 0;

  // What the simulated gateway reports each tick, per model (cluster index).
  struct Counters {
    uint64_t arrivals = 0, completions = 0, busy_us = 0;
    uint32_t held = 0;
    std::map<uint64_t, uint32_t> in_flight;  // node -> requests sent there, not answered
  };
  std::vector<Counters> counters;
  size_t arrived = 0, settled_count = 0;
  std::map<size_t, EventId> timeouts;  // held requests' cold-start timeouts
  uint64_t in_flight_total = 0;

  const RequestTrace* trace = nullptr;
  std::vector<uint32_t> trace_model;  // trace model index -> models index
  SimResult result;
  std::vector<bool> settled;  // per request: ran or lost
  std::optional<Error> failed;

  int64_t now_ms() const { return static_cast<int64_t>(loop.now() / 1000); }

  // Decision time (SimOptions::decision_clock): what a call into the manager's classes sends takes
  // effect after the call's measured time. A call made inside another is part of it.
  bool deciding = false;
  std::vector<std::function<void()>> decided;

  template <class Call>
  void decide(Call&& call) {
    if (!options.decision_clock || deciding) return call();
    deciding = true;
    const uint64_t t0 = options.decision_clock();
    call();
    const uint64_t took = options.decision_clock() - t0;
    deciding = false;
    ++result.decisions;
    result.decision_us += took;
    if (decided.empty()) return;
    loop.after(took, [effects = std::move(decided)] {
      for (const auto& e : effects) e();
    });
    decided.clear();
  }

  /// An effect of a decision: now, or after the decision's time.
  void effect(std::function<void()> f) {
    if (deciding) return decided.push_back(std::move(f));
    f();
  }
  static model_key key_of(const ModelCosts& m) { return {m.model(), 1}; }

  static constexpr uint32_t kNoHost = UINT32_MAX;

  /// Moves `bytes` over `path` (none: at once) at most at `cap` bytes/s (0: no cap), then `done`;
  /// a download into `host` stops, `done` never called, when the host fails.
  void transfer(const std::vector<LinkId>& path, double bytes, std::function<void()> done, double cap = 0,
                uint32_t host = kNoHost) {
    if (path.empty() || bytes <= 0) {
      loop.after(0, std::move(done));
      return;
    }
    auto id = net.start(path, bytes, loop.now(), cap);
    if (!id.ok()) {
      fail(id.error());
      return;
    }
    if (host != kNoHost) flow_host[*id] = host;
    flow_done[*id] = std::move(done);
    reschedule_flows();
  }

  void reschedule_flows() {
    if (flow_event) loop.cancel(flow_event);
    flow_event = 0;
    const auto next = net.next_completion_us();
    if (!next) return;
    flow_event = loop.at(std::max(*next, loop.now()), [this] {
      flow_event = 0;
      auto ended = net.finished(loop.now());
      if (!ended.ok()) return fail(ended.error());
      std::vector<std::function<void()>> callbacks;
      for (FlowId id : *ended) {
        callbacks.push_back(std::move(flow_done.at(id)));
        flow_done.erase(id);
        flow_host.erase(id);
      }
      reschedule_flows();
      for (auto& cb : callbacks) cb();
    });
  }

  void fail(const Error& e) {
    if (!failed) failed = e;
  }

  /// Runs request `i` on the replica of its model that frees first, else through its pipeline.
  void dispatch(size_t i) {
    RequestOutcome& out = result.requests[i];
    const ModelCosts& m = models[trace_model[out.model]];
    const ModelVersion* v = registry.find(key_of(m));
    if (v && v->replicas.empty() && !v->pipeline.empty()) return through_pipeline(i, *v);
    if (!v || v->replicas.empty()) return lose(i);
    std::optional<std::pair<uint64_t, uint64_t>> best;  // (free at, node)
    for (const auto& [node, device] : v->replicas) {
      const uint64_t at = free_at[{trace_model[out.model], node}];
      if (!best || at < best->first) best = std::pair{at, node};
    }
    out.start_us = std::max(loop.now(), best->first);
    const uint64_t exec = exec1[trace_model[out.model]];  // m.exec_us(1), summed once
    out.end_us = out.start_us + exec;
    const uint32_t cm = trace_model[out.model];
    const uint64_t node = best->second;
    out.host = host_of_node.at(node);
    free_at[{cm, node}] = out.end_us;
    settle(i);
    ++counters[cm].in_flight[node];
    ++in_flight_total;
    const EventId end = loop.at(out.end_us, [this, i, cm, node, exec] {
      Counters& c = counters[cm];
      ++c.completions;
      c.busy_us += exec;
      not_in_flight(cm, node);
      if (options.failures.empty()) return;
      running[node].erase(i);
      finish_event.erase(i);
    });
    if (options.failures.empty()) return;  // nothing will fail: no request needs finding again
    running[node].insert(i);
    finish_event[i] = end;
  }

  void not_in_flight(uint32_t cm, uint64_t node) {
    Counters& c = counters[cm];
    if (--c.in_flight[node] == 0) c.in_flight.erase(node);
    --in_flight_total;
  }

  /// Request `i` failed with its host: sent again now, or held for a replica.
  void retry(size_t i) {
    RequestOutcome& out = result.requests[i];
    ++out.retries;
    out.start_us = out.end_us = 0;
    const ModelVersion* v = registry.find(key_of(models[trace_model[out.model]]));
    if (v && (!v->replicas.empty() || !v->pipeline.empty())) return dispatch(i);
    settled[i] = false;
    --settled_count;
    hold(i);
  }

  /// Host `h`'s process dies: its downloads stop, the manager hears, its requests are retried.
  void fail_host(uint32_t h) {
    if (down[h]) return;
    down[h] = true;
    ++result.failures;
    const uint64_t node = node_of_host.at(h);
    for (auto it = flow_host.begin(); it != flow_host.end();) {
      if (it->second != h) {
        ++it;
        continue;
      }
      (void)net.cancel(it->first, loop.now());
      flow_done.erase(it->first);
      it = flow_host.erase(it);
    }
    reschedule_flows();
    const std::string name = members.find(node)->report.name;
    (void)members.leave(node);
    decide([&] { (void)driver.node_lost(node, name, options.replace_on_failure, now_ms(), act); });
    std::set<size_t> lost_here = std::move(running[node]);
    running.erase(node);
    for (auto it = free_at.begin(); it != free_at.end();) it = it->first.second == node ? free_at.erase(it) : std::next(it);
    for (size_t i : lost_here) {
      loop.cancel(finish_event.at(i));
      finish_event.erase(i);
      not_in_flight(trace_model[result.requests[i].model], node);
      retry(i);
    }
  }

  /// One stage of a pipeline a request runs through.
  struct StageRun {
    uint64_t node = 0;
    uint32_t host = 0;
    uint32_t first = 0, last = 0;  // layers [first, last)
  };

  /// Runs request `i` through the pipeline `v` serves by (a partitioned cold start's stages, as the
  /// routing entry names them): each stage runs its layers when it is free (one request at a time,
  /// in arrival order, so stages work on successive requests at once), then its last layer's output
  /// crosses to the next stage's host over the network; the last stage answers.
  void through_pipeline(size_t i, const ModelVersion& v) {
    PipelineBuild* build = partitions.find(v.key());
    if (!build) return fail(internal_error(v.key().to_string() + " serves through a pipeline no build has"));
    auto stages = std::make_shared<std::vector<StageRun>>();
    for (const PipelineStage& p : v.pipeline) {
      auto spot = std::find_if(build->stages.begin(), build->stages.end(), [&](const StageSpot& s) { return s.node == p.node; });
      if (spot == build->stages.end()) return fail(internal_error(v.key().to_string() + ": a pipeline stage no member holds"));
      stages->push_back({p.node, host_of_node.at(p.node), spot->part.first_layer, spot->part.last_layer});
    }
    const uint32_t cm = trace_model[result.requests[i].model];
    result.requests[i].host = stages->front().host;
    ++result.pipeline_requests;
    settle(i);
    ++counters[cm].in_flight[stages->front().node];
    ++in_flight_total;
    run_stage(i, cm, std::move(stages), 0, 0);
  }

  /// A request through a pipeline whose stage's host failed: sent again.
  void pipeline_failed(size_t i, uint32_t cm, const std::vector<StageRun>& stages) {
    not_in_flight(cm, stages.front().node);
    retry(i);
  }

  void run_stage(size_t i, uint32_t cm, std::shared_ptr<std::vector<StageRun>> stages, size_t k, uint64_t busy) {
    const StageRun& s = (*stages)[k];
    if (down[s.host]) return pipeline_failed(i, cm, *stages);
    uint64_t& free = stage_free[{cm, s.node, s.first}];
    const uint64_t start = std::max(loop.now(), free);
    const uint64_t exec = models[cm].exec_us(1, s.first, s.last);
    free = start + exec;
    if (k == 0) result.requests[i].start_us = start;
    loop.at(start + exec, [this, i, cm, stages, k, busy = busy + exec] {
      if (down[(*stages)[k].host]) return pipeline_failed(i, cm, *stages);
      if (k + 1 < stages->size()) {
        const StageRun& from = (*stages)[k];
        auto path = topo->between(from.host, (*stages)[k + 1].host);
        if (!path.ok()) return fail(path.error());
        const double bytes = static_cast<double>(models[cm].out_bytes(from.last - 1));
        return transfer(*path, bytes, [this, i, cm, stages, k, busy] { run_stage(i, cm, stages, k + 1, busy); });
      }
      result.requests[i].end_us = loop.now();
      Counters& c = counters[cm];
      ++c.completions;
      c.busy_us += busy;
      const uint64_t first = stages->front().node;
      if (--c.in_flight[first] == 0) c.in_flight.erase(first);
      --in_flight_total;
    });
  }

  void settle(size_t i) {
    if (settled[i]) return;
    settled[i] = true;
    ++settled_count;
    if (auto t = timeouts.find(i); t != timeouts.end()) {
      loop.cancel(t->second);
      timeouts.erase(t);
    }
    if (result.requests[i].cold) --counters[trace_model[result.requests[i].model]].held;
  }

  void lose(size_t i) {
    result.requests[i].lost = true;
    settle(i);
  }

  /// The autoscaler's tick: the gateway's report, then the manager's decisions.
  void tick() {
    const int64_t now = static_cast<int64_t>(loop.now());
    load_report report;
    report.reporter = "sim-gateway";
    for (uint32_t cm = 0; cm < models.size(); ++cm) {
      Counters& c = counters[cm];
      model_load l;
      l.model = key_of(models[cm]);
      l.arrivals = c.arrivals;
      l.completions = c.completions;
      l.busy_us = c.busy_us;
      uint32_t flying = 0;
      for (const auto& [node, n] : c.in_flight) {
        l.in_flight.push_back({node, n});
        flying += n;
      }
      l.ongoing = flying + c.held;
      l.queued = c.held;
      report.models.push_back(std::move(l));
      c.arrivals = c.completions = c.busy_us = 0;
    }
    scaler.report(report, now);
    decide([&] { driver.scale(now, act); });
    sample(options.autoscaler.interval_us);
    if (!done()) loop.after(options.autoscaler.interval_us, [this] { tick(); });
  }

  /// Without the autoscaler: only the replicas' sample.
  void sample_tick() {
    sample(options.sample_interval_us);
    if (!done()) loop.after(options.sample_interval_us, [this] { sample_tick(); });
  }

  bool done() const { return arrived == trace->requests.size() && settled_count == arrived && in_flight_total == 0; }

  /// The replicas bound now, each counted for the `interval_us` that ends now.
  void sample(uint64_t interval_us) {
    ReplicaSample s{loop.now(), std::vector<uint32_t>(models.size(), 0), std::vector<uint32_t>(models.size(), 0)};
    uint32_t bound = 0;
    for (uint32_t cm = 0; cm < models.size(); ++cm) {
      const model_key key = key_of(models[cm]);
      const ModelVersion* v = registry.find(key);
      s.draining[cm] = scaler.drains_of(key);
      s.replicas[cm] = (v ? static_cast<uint32_t>(v->replicas.size()) : 0) + s.draining[cm];
      bound += s.replicas[cm];
    }
    result.max_replicas = std::max(result.max_replicas, bound);
    result.replica_seconds += bound * (static_cast<double>(interval_us) / 1e6);
    result.samples.push_back(std::move(s));
  }

  void arrive(size_t i) {
    RequestOutcome& out = result.requests[i];
    const model_key key = key_of(models[trace_model[out.model]]);
    ++arrived;
    ++counters[trace_model[out.model]].arrivals;
    const ModelVersion* v = registry.find(key);
    if (v && (!v->replicas.empty() || !v->pipeline.empty())) return dispatch(i);
    hold(i);
  }

  /// Request `i` waits for a replica (the gateway's ensure), or is lost after cold_start_timeout.
  void hold(size_t i) {
    RequestOutcome& out = result.requests[i];
    out.cold = true;
    ++counters[trace_model[out.model]].held;
    timeouts[i] = loop.after(options.cold_start_timeout_us, [this, i] {
      timeouts.erase(i);
      if (!settled[i]) lose(i);
    });
    ModelWaiter waiter = [this, i](const Result<model_state>& s) {
      if (settled[i]) return;
      if (s.ok()) return dispatch(i);
      lose(i);
    };
    decide([&] { driver.ensure(key_of(models[trace_model[out.model]]), std::move(waiter), now_ms(), act); });
  }

  void schedule_arrival(size_t i) {
    if (i >= trace->requests.size()) return;
    loop.at(trace->requests[i].at_us, [this, i] {
      schedule_arrival(i + 1);
      arrive(i);
    });
  }

  /// One hop of a multicast transfer, waiting for the rest of its transfer's loads.
  struct Hop {
    model_key key;
    uint64_t node = 0, attempt = 0;
    std::string upstream;  // a node's name, or kRepositoryName
  };
  std::map<uint64_t, std::vector<Hop>> pending_chains;  // transfer -> its hops, in the order sent

  bool warming = false;  // SimOptions::warm_replicas being placed: loads are instant

  void send_load(const model_key& key, uint64_t node, uint64_t attempt, const load_replica& load) {
    if (warming) {
      loop.after(0, [this, key, node, attempt, id = load.transfer_id] {
        if (id) hop_done(id, node);
        answer(key, node, attempt, least_bound_gpu(node), SourceTier::cache, 0);
      });
      return;
    }
    if (load.transfer_id != 0 && !load.sources.empty()) {
      // The planner sends every hop of a transfer in one decision: start the chains after it.
      auto& hops = pending_chains[load.transfer_id];
      if (hops.empty()) loop.after(0, [this, id = load.transfer_id] { start_chains(id); });
      hops.push_back({key, node, attempt, load.sources.front().name});
      return;
    }
    const uint32_t host = host_of_node.at(node);
    if (down[host]) return;  // sent to a node already lost: no answer comes
    std::vector<LinkId> path;
    std::string tier = "cache";
    SourceTier source = SourceTier::cache;
    if (!members.caches(node, key) && !load.sources.empty()) {
      const bool peer = load.sources.front().kind == SourceTier::peer;
      auto p = upstream_path(peer ? load.sources.front().name : kRepositoryName, host);
      if (!p.ok()) return fail(p.error());
      path = std::move(*p);
      tier = peer ? "peer" : "repository";
      source = peer ? SourceTier::peer : SourceTier::repository;
    }
    const uint64_t bytes = path.empty() ? 0 : load.blob_bytes;
    ColdStartRecord record{key.name, members.find(node)->report.name, tier, loop.now(), 0, bytes, 0};
    transfer(
        path, static_cast<double>(load.blob_bytes),
        [this, key, node, attempt, source, record, blob = load.blob_bytes] { bind(key, node, attempt, source, record, blob); },
        0, host);
  }

  /// Stage `stage` of a partitioned cold start of `key` on `node`: its layers (and the file's
  /// header) from the load's first source (the repository), into the device the node has bound
  /// least on, then the stage's answer (a cold start of tier "stage").
  void send_stage(const model_key& key, uint64_t node, uint64_t attempt, const load_stage& stage) {
    const uint32_t host = host_of_node.at(node);
    if (down[host]) return;
    const auto& sources = stage.load.sources;
    auto path = upstream_path(sources.empty() ? std::string(kRepositoryName) : sources.front().name, host);
    if (!path.ok()) return fail(path.error());
    const uint64_t bytes = stage.part.header_bytes + stage.part.length();
    const model_key part = stage_key_of(key, stage.part.first_layer, stage.part.last_layer);
    ColdStartRecord record{key.name, members.find(node)->report.name, "stage", loop.now(), 0, bytes, 0};
    auto bound = [this, key, node, attempt, host, bytes, part, record]() mutable {
      if (down[host]) return;
      const uint32_t gpu = least_bound_gpu(node);
      stage_gpu[{key, node}] = gpu;
      auto pcie = topo->to_gpu(host, gpu);
      if (!pcie.ok()) return fail(pcie.error());
      auto answered = [this, key, node, attempt, host, gpu, bytes, part, record]() mutable {
        if (down[host]) return;
        record.ready_us = loop.now();
        replica_info info{part, record.node, "gpu" + std::to_string(gpu), SourceTier::repository, "", bytes,
                          record.ready_us - record.started_us};
        result.cold_starts.push_back(std::move(record));
        decide([&] { driver.stage_answered(key, node, attempt, Result<replica_info>(info), now_ms(), act); });
      };
      transfer(*pcie, static_cast<double>(bytes), std::move(answered), 0, host);
    };
    transfer(*path, static_cast<double>(bytes), std::move(bound), 0, host);
  }

  /// A pipeline member completes into a whole replica: the layers outside its stage from the
  /// load's first source at the load's pace (max_bytes_per_s, autoscale.completion_rate), into its
  /// stage's device, then the completion's answer (not a cold start: the pipeline served already).
  void send_completion(const model_key& key, uint64_t node, uint64_t attempt, const load_replica& load) {
    const uint32_t host = host_of_node.at(node);
    if (down[host]) return;
    auto path = upstream_path(load.sources.empty() ? std::string(kRepositoryName) : load.sources.front().name, host);
    if (!path.ok()) return fail(path.error());
    const uint64_t have =
        std::min(load.blob_bytes, load.reuse.last_layer > 0 ? load.reuse.header_bytes + load.reuse.length() : 0);
    const uint64_t rest = load.blob_bytes - have;
    const uint64_t started = loop.now();
    auto gpu_of = stage_gpu.find({key, node});
    const uint32_t gpu = gpu_of != stage_gpu.end() ? gpu_of->second : least_bound_gpu(node);
    auto pcie = topo->to_gpu(host, gpu);
    if (!pcie.ok()) return fail(pcie.error());
    auto bound = [this, key, node, attempt, gpu, started, host, blob = load.blob_bytes] {
      if (down[host]) return;
      stage_gpu.erase({key, node});
      replica_info info{key, members.find(node)->report.name, "gpu" + std::to_string(gpu), SourceTier::repository,
                        "", blob, loop.now() - started};
      decide([&] { driver.completion_answered(key, node, attempt, Result<replica_info>(info), now_ms(), act); });
    };
    transfer(
        *path, static_cast<double>(rest),
        [this, pcie = *pcie, rest, bound, host] { transfer(pcie, static_cast<double>(rest), bound, 0, host); },
        static_cast<double>(load.max_bytes_per_s), host);
  }

  /// The links from `upstream` (a node's name, or the repository: cloud storage) to `host`.
  Result<std::vector<LinkId>> upstream_path(const std::string& upstream, uint32_t host) const {
    if (upstream == kRepositoryName) return topo->from_cloud(host);
    auto from = host_of_name.find(upstream);
    if (from == host_of_name.end()) return internal_error("a load from unknown node " + upstream);
    return topo->between(from->second, host);
  }

  /// Starts transfer `id`'s chains: each one flow over every hop's links (cut-through).
  void start_chains(uint64_t id) {
    std::vector<Hop> hops = std::move(pending_chains.at(id));
    pending_chains.erase(id);
    ++result.chains;
    std::map<std::string, size_t> by_name;  // a hop's node name -> index in hops
    for (size_t i = 0; i < hops.size(); ++i) by_name[members.find(hops[i].node)->report.name] = i;
    std::map<std::string, size_t> next;  // a hop's name -> the hop that pulls from it (chains are lines)
    for (size_t i = 0; i < hops.size(); ++i) {
      if (!by_name.count(hops[i].upstream)) continue;  // a chain's first hop: several may share a source
      if (!next.emplace(hops[i].upstream, i).second) {
        return fail(internal_error("transfer " + std::to_string(id) + ": two hops pull from " + hops[i].upstream));
      }
    }
    for (size_t i = 0; i < hops.size(); ++i) {
      if (by_name.count(hops[i].upstream)) continue;  // not a chain's first hop
      std::vector<size_t> chain;
      std::vector<LinkId> path;
      std::string upstream = hops[i].upstream;
      for (size_t h = i;;) {
        const uint32_t host = host_of_node.at(hops[h].node);
        auto p = upstream_path(upstream, host);
        if (!p.ok()) return fail(p.error());
        path.insert(path.end(), p->begin(), p->end());
        chain.push_back(h);
        upstream = members.find(hops[h].node)->report.name;
        auto n = next.find(upstream);
        if (n == next.end()) break;
        h = n->second;
      }
      const ModelVersion* v = registry.find(hops[i].key);
      if (!v) return fail(internal_error("transfer " + std::to_string(id) + " of an unknown model"));
      const uint64_t bytes = v->entry.weights_bytes;
      const uint64_t started = loop.now();
      const SourceTier first = hops[i].upstream == kRepositoryName ? SourceTier::repository : SourceTier::peer;
      transfer(path, static_cast<double>(bytes), [this, id, hops, chain, bytes, started, first] {
        // Hop k ends k chunks after the chain's tail-most byte left the source: the chunk's time at
        // the chain's mean rate.
        const double elapsed = static_cast<double>(loop.now() - started);
        const double chunk_us = bytes > 0 ? elapsed * static_cast<double>(std::min(options.chunk_bytes, bytes)) / static_cast<double>(bytes) : 0;
        for (size_t k = 0; k < chain.size(); ++k) {
          const Hop& hop = hops[chain[k]];
          const SourceTier source = k == 0 ? first : SourceTier::peer;
          ColdStartRecord record{hop.key.name, members.find(hop.node)->report.name,
                                 source == SourceTier::repository ? "repository" : "peer", started, 0, bytes, id};
          loop.after(static_cast<uint64_t>(chunk_us * static_cast<double>(k) + 0.5), [this, id, hop, source, record, bytes] {
            if (down[host_of_node.at(hop.node)]) return;  // its hop's answer never comes
            hop_done(id, hop.node);
            bind(hop.key, hop.node, hop.attempt, source, record, bytes);
          });
        }
      });
    }
  }

  /// The GPU of `node` with the fewest bytes bound (ties: the lowest).
  uint32_t least_bound_gpu(uint64_t node) const {
    const ClusterNode* n = members.find(node);
    uint32_t gpu = 0;
    uint64_t least = UINT64_MAX;
    for (uint32_t g = 0; g < topo->spec().gpus_per_host; ++g) {
      auto it = n->device_weights.find("gpu" + std::to_string(g));
      const uint64_t bound = it == n->device_weights.end() ? 0 : it->second;
      if (bound < least) {
        least = bound;
        gpu = g;
      }
    }
    return gpu;
  }

  /// The bytes are in `node`'s memory: into the device it has bound least on (ties: the lowest),
  /// over its PCIe link when modelled, then the load's answer.
  void bind(const model_key& key, uint64_t node, uint64_t attempt, SourceTier source, ColdStartRecord record,
            uint64_t bytes) {
    const uint32_t host = host_of_node.at(node);
    if (down[host]) return;
    const uint32_t gpu = least_bound_gpu(node);
    auto pcie = topo->to_gpu(host, gpu);
    if (!pcie.ok()) return fail(pcie.error());
    transfer(
        *pcie, static_cast<double>(bytes),
        [this, key, node, attempt, source, record, gpu]() mutable {
          record.ready_us = loop.now();
          const uint64_t load_us = record.ready_us - record.started_us;
          result.cold_starts.push_back(std::move(record));
          answer(key, node, attempt, gpu, source, load_us);
        },
        0, host);
  }

  /// Load `attempt` of `key` on `node` is bound on GPU `gpu`: the manager hears it, as the actor
  /// hears a node's answer.
  void answer(const model_key& key, uint64_t node, uint64_t attempt, uint32_t gpu, SourceTier source,
              uint64_t load_us) {
    if (down[host_of_node.at(node)]) return;
    replica_info info;
    info.model = key;
    info.node = members.find(node)->report.name;
    info.device = "gpu" + std::to_string(gpu);
    info.source = source;
    info.load_us = load_us;
    decide([&] { driver.answered(key, node, attempt, Result<replica_info>(info), true, false, now_ms(), act); });
  }

  /// A hop of multicast transfer `id` on `node` has every byte: the ChainController hears it (the
  /// live node's last progress report), and finished transfers are dropped, as ChainRelay does.
  void hop_done(uint64_t id, uint64_t node) {
    chains.on_done(id, members.find(node)->report.name, now_ms());
    for (uint64_t t : chains.finished_transfers()) chains.erase(t);
  }
};

SimCluster::SimCluster(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SimCluster::~SimCluster() = default;

Result<std::unique_ptr<SimCluster>> SimCluster::create(const TopologySpec& topology, std::vector<ModelCosts> models,
                                                       SimOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  EMBER_ASSIGN_OR_RETURN(auto topo, Topology::build(impl->net, topology));
  impl->topo.emplace(std::move(topo));
  std::vector<RepositoryEntry> entries;
  for (uint32_t i = 0; i < models.size(); ++i) {
    if (models[i].weights_bytes() == 0) {
      return invalid_argument("model '" + models[i].model() + "' has no weights to load");
    }
    if (!impl->model_index.emplace(models[i].model(), i).second) {
      return invalid_argument("model '" + models[i].model() + "' is given twice");
    }
    RepositoryEntry e{Impl::key_of(models[i]), "", "{}", models[i].weights_bytes(), ""};
    e.profile = models[i].profile();  // what partitioned cold starts are planned from
    entries.push_back(std::move(e));
  }
  impl->models = std::move(models);
  impl->down.assign(topology.hosts, false);
  for (const SimHostFailure& f : options.failures) {
    if (f.host >= topology.hosts) {
      return invalid_argument("a failure of host" + std::to_string(f.host) + ": the cluster has " +
                              std::to_string(topology.hosts) + " hosts");
    }
  }
  for (const ModelCosts& m : impl->models) impl->exec1.push_back(m.exec_us(1));
  impl->counters.resize(impl->models.size());
  if (options.autoscaler.enabled) {
    EMBER_RETURN_IF_ERROR(check_autoscale_config(options.autoscale, "sim", "autoscale"));
    EMBER_RETURN_IF_ERROR(check_autoscaler_settings(options.autoscaler, "sim", "autoscale"));
    impl->scaler.configure(options.autoscale, options.autoscaler);
  }
  const auto changes = impl->registry.apply_scan("", std::move(entries));
  impl->scaler.scanned(changes, impl->registry.entries(""));
  impl->planner.set_repository({"cloud", 443});
  impl->planner.set_options(PlacementOptions::from(options.autoscaler, options.seed));
  const AutoscalerSettings& a = options.autoscaler;
  impl->partitions.configure(a.partition_stages, a.partition_bandwidth, a.completion_rate);
  // The plan tables the live manager builds off its thread once a version is scanned, built now.
  while (auto job = impl->partitions.next_tables()) {
    impl->partitions.tables_built(*job, PartitionController::build_tables(*job));
  }
  for (uint32_t h = 0; h < topology.hosts; ++h) {
    node_report r;
    r.name = "host" + std::to_string(h);
    r.data = {r.name, 7000};
    for (uint32_t g = 0; g < topology.gpus_per_host; ++g) {
      r.devices.push_back({"gpu" + std::to_string(g), options.device_bytes, 0});
    }
    r.cache_capacity = options.cache_bytes;
    r.rack = "leaf" + std::to_string(impl->topo->leaf_of(h));
    const uint64_t id = impl->members.join(r, {});
    impl->host_of_node[id] = h;
    impl->node_of_host[h] = id;
    impl->host_of_name[r.name] = h;
  }
  Impl* self = impl.get();
  impl->act.send_load = [self](const model_key& key, uint64_t node, uint64_t attempt, load_replica load) {
    self->effect([self, key, node, attempt, load = std::move(load)] { self->send_load(key, node, attempt, load); });
  };
  impl->act.send_stage = [self](const model_key& key, uint64_t node, uint64_t attempt, load_stage stage) {
    self->effect([self, key, node, attempt, stage = std::move(stage)] { self->send_stage(key, node, attempt, stage); });
  };
  impl->act.send_completion = [self](const model_key& key, uint64_t node, uint64_t attempt, load_replica load) {
    self->effect([self, key, node, attempt, load = std::move(load)] { self->send_completion(key, node, attempt, load); });
  };
  // A stage's device memory is its member's reservation (Membership), which the completion's answer
  // turns into the replica's binding; requests already sent through the pipeline finish.
  impl->act.unload_stage = [](uint64_t, const model_key&, int64_t) {};
  impl->act.publish = [](const std::set<model_key>&) {};  // the simulated gateway reads the registry
  impl->act.chain_timer = [] {};                // no hop stalls: nothing to splice
  impl->act.drain_step = [] {};                 // no console drains
  impl->act.check_drains = [] {};               // the autoscaler's ticks end drains (trim needs none)
  impl->act.unbind = [self](const ScaleDriver::Unbind& u) {  // the node unbinds at once
    self->effect([self, drain = u.drain] {
      self->loop.after(0, [self, drain] { (void)self->scaler.unbound(drain, true, static_cast<int64_t>(self->loop.now())); });
    });
  };
  impl->act.evict = [](const ScaleDriver::Evict&) {};  // nothing simulated lives in the host cache
  impl->act.place_later = [self](const model_key& key, int64_t delay_ms) {
    self->effect([self, key, delay_ms] {
      // Not past the trace's end: the round would ask for the next, and the loop would never empty.
      self->loop.after(delay_ms * 1000, [self, key] {
        if (!self->done()) self->decide([&] { self->driver.place_again(key, self->now_ms(), self->act); });
      });
    });
  };
  return std::unique_ptr<SimCluster>(new SimCluster(std::move(impl)));
}

Result<SimResult> SimCluster::run(const RequestTrace& trace) {
  Impl& s = *impl_;
  if (s.trace) return invalid_argument("a SimCluster runs one trace");
  s.trace = &trace;
  for (const std::string& name : trace.models) {
    auto it = s.model_index.find(name);
    if (it == s.model_index.end()) return invalid_argument("the trace asks for model '" + name + "', which the cluster lacks");
    s.trace_model.push_back(it->second);
  }
  s.result.requests.resize(trace.requests.size());
  s.settled.assign(trace.requests.size(), false);
  for (size_t i = 0; i < trace.requests.size(); ++i) {
    s.result.requests[i].arrival_us = trace.requests[i].at_us;
    s.result.requests[i].model = trace.requests[i].model;
  }
  if (s.options.warm_replicas > 0) {
    s.warming = true;
    std::set<uint32_t> asked(s.trace_model.begin(), s.trace_model.end());  // only the trace's models
    for (uint32_t cm : asked) {
      const ModelCosts& m = s.models[cm];
      // As a running service: the count wanted now, not a floor (`load N`'s explicit want would
      // keep it); the autoscaler moves it from the first tick.
      auto wanted = s.registry.want(Impl::key_of(m), 0, false, [](const Result<model_state>&) {});
      if (!wanted) continue;
      s.partitions.forbid(*wanted);  // whole replicas, as a service that ran; the first answer allows it again
      if (ModelVersion* v = s.registry.find(*wanted)) v->wanted = std::max(v->wanted, s.options.warm_replicas);
      s.driver.place(*wanted, 0, s.act);
    }
    s.loop.after(0, [&s] { s.warming = false; });  // after the loads' answers, scheduled first
  }
  if (s.options.load_replicas > 0) {
    s.loop.after(0, [&s] {  // after the warm replicas, if any
      for (uint32_t cm : std::set<uint32_t>(s.trace_model.begin(), s.trace_model.end())) {
        s.decide([&] { s.driver.load(Impl::key_of(s.models[cm]), s.options.load_replicas, [](const Result<model_state>&) {}, s.now_ms(), s.act); });
      }
    });
  }
  for (const SimHostFailure& f : s.options.failures) s.loop.at(f.at_us, [&s, h = f.host] { s.fail_host(h); });
  s.schedule_arrival(0);
  if (s.options.autoscaler.enabled) {
    s.loop.at(s.options.autoscaler.interval_us, [&s] { s.tick(); });
  } else {
    s.loop.at(s.options.sample_interval_us, [&s] { s.sample_tick(); });
  }
  while (!s.failed && s.loop.step()) {
  }
  if (s.failed) return *s.failed;
  for (size_t i = 0; i < s.settled.size(); ++i) {
    if (!s.settled[i]) s.lose(i);  // held for a replica that never came
  }
  s.result.events = s.loop.executed();
  for (const auto& [node, host] : s.host_of_node) s.result.reserved_bytes_left += s.members.reserved(node);
  for (const auto& r : s.result.requests) s.result.end_us = std::max({s.result.end_us, r.arrival_us, r.end_us});
  return std::move(s.result);
}

}  // namespace ember::sim
