// What `ember sim` prints and writes from a SimResult (issue 36; docs/design/simulator.md): the
// summary the network-namespace replay prints for an arm (bench/autoscale_replay.py's table: mean
// and p99 end-to-end, SLO attainment, cold starts and their mean by source tier, replica-seconds,
// requests lost), the per-request CSV, a Chrome trace (chrome://tracing or Perfetto JSON) of a
// window, and an SVG plot of replicas and latency over time.
//
// Definitions, as the replay's: end-to-end = answer - arrival; a lost request counts in `requests`
// and `lost`, not in the latencies; SLO attainment = answered within the model's SLO / all
// requests; p99 is the nearest-rank percentile (the smallest latency with at least 99% at or below
// it). A cold start's tier is where its bytes came from (cache: the node's own host memory; peer:
// another node's memory, also a chain hop; repository: cloud storage; stage: a partitioned cold
// start's stage, from the repository, ready when its layers are bound; the table's columns are the
// first three, the JSON has every tier seen).
//
// Pure: functions of their arguments, any thread; writers append to the stream they are given.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "sim/request_trace.hpp"
#include "sim/sim_cluster.hpp"

namespace ember::sim {

struct TierStats {
  uint64_t count = 0;
  double mean_ms = 0;
};

struct SimSummary {
  uint64_t requests = 0, lost = 0, cold_requests = 0;
  double mean_ms = 0, p50_ms = 0, p99_ms = 0;
  double slo_pct = 0;
  std::map<std::string, TierStats> tiers;  // "cache", "peer", "repository"; "stage" when a start was partitioned
  double cold_start_mean_ms = 0;           // over every tier
  uint64_t cold_starts = 0;
  double replica_seconds = 0;
  uint32_t max_replicas = 0, chains = 0;
  uint64_t pipeline_requests = 0;
  uint64_t retried = 0;  // requests sent again after their host failed
  uint64_t events = 0;
  double simulated_s = 0;
};

/// `slo_us[m]` is the SLO of the trace's model m.
SimSummary summarize(const SimResult& result, const std::vector<uint64_t>& slo_us);

/// One markdown row per arm, under the replay's header; `label` names the arm.
std::string summary_header();
std::string summary_row(const std::string& label, const SimSummary& s);

/// The summary as one JSON object (label, requests, lost, mean_ms, p50_ms, p99_ms, slo_pct,
/// cold_starts {tier: {count, mean_ms}}, cold_start_mean_ms, replica_seconds, max_replicas, chains,
/// events, simulated_s), for scripts.
std::string summary_json(const std::string& label, const SimSummary& s);

/// time_s,model,host,cold,lost,start_s,end_s,latency_ms,retries (arrival order; empty fields for a
/// lost one; retries: times it was sent again because its host failed).
void write_requests_csv(std::ostream& out, const SimResult& result, const RequestTrace& trace);

/// The Chrome trace event format's JSON (one process per host, a thread per model's requests and one
/// for loads) of what happened within [from_us, to_us): requests as complete events from start to
/// answer, cold starts from the decision to the replica's answer, and a counter of replicas.
void write_chrome_trace(std::ostream& out, const SimResult& result, const RequestTrace& trace,
                        const std::vector<std::string>& cluster_models, uint64_t from_us, uint64_t to_us);

/// An SVG of two panels over simulated time: replicas per model (the samples), and the requests'
/// end-to-end latency (each second's mean and max, log scale; lost requests marked).
void write_plot_svg(std::ostream& out, const SimResult& result, const std::vector<std::string>& cluster_models,
                    const std::string& title);

}  // namespace ember::sim
