// What the manager's autoscaler hears of the load: every report_interval each gateway sends it a
// load_report (per model a model_load, with the requests in flight per node as node_count), and on
// each autoscaler tick every node's router answers scale_atom with one (only `queued` set: late
// binding's queue). The manager (actors/cluster/scale_driver.hpp) merges them and never sees
// individual requests.
//
// Pure data with CAF `inspect`, registered in actors/type_ids.hpp; anyone may build and read them on
// any thread.
#pragma once

#include <caf/meta/type_name.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/wire_inspect.hpp"

namespace ember {

/// Requests in flight on one node (a load_report's model_load::in_flight).
struct node_count {
  uint64_t node_id = 0;
  uint32_t count = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_count& x) {
  return f(caf::meta::type_name("node_count"), x.node_id, x.count);
}

/// One model's counters in a load_report: what one gateway saw since its previous report (arrivals,
/// completions and their execution time) and what it holds now (in flight, held).
struct model_load {
  model_key model;
  uint64_t arrivals = 0;     // requests received
  uint64_t completions = 0;  // requests answered by a replica
  uint64_t busy_us = 0;      // their execution time on the device (infer_reply::compute_us), summed
  uint32_t ongoing = 0;      // sent to a replica and not answered yet, plus held
  uint32_t queued = 0;       // held at the gateway: no replica yet (a cold start runs)
  /// Of the requests in flight, how many on each node (only nonzero counts): the manager drains a
  /// replica it scales down until none is left there.
  std::vector<node_count> in_flight;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, model_load& x) {
  return f(caf::meta::type_name("model_load"), x.model, x.arrivals, x.completions, x.busy_us, x.ongoing, x.queued,
           x.in_flight);
}

/// A gateway's report to the manager every report_interval: the models it saw since the last one,
/// and those with requests still in flight (a model that went quiet is reported once with zeros).
/// The manager's autoscaler never sees individual requests.
struct load_report {
  std::string reporter;  // unique per gateway ("<host>:<pid>" or the test's name)
  std::vector<model_load> models;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, load_report& x) {
  return f(caf::meta::type_name("load_report"), x.reporter, x.models);
}

}  // namespace ember
