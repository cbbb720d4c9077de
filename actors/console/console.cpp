#include "actors/console/console.hpp"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <chrono>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "actors/actor_system.hpp"
#include "actors/cluster_manager_interface.hpp"
#include "actors/errors.hpp"
#include "actors/fault_messages.hpp"
#include "base/units.hpp"
#include "metrics/metrics.hpp"

namespace ember {

namespace {

using json = nlohmann::json;

/// A read answers at once; a load may wait for a whole cold start (and a distribution for a chain).
constexpr auto kReadTimeout = std::chrono::seconds(30);
constexpr auto kChangeTimeout = std::chrono::minutes(10);

struct Usage {
  const char* name;
  const char* args;
  const char* what;
};

const Usage kUsage[] = {
    {"nodes", "", "every node: devices and memory, cache, replicas and cached models, data plane"},
    {"models", "", "every model version: state, replicas, why it is not ready"},
    {"replicas", "", "where each model's replicas are bound"},
    {"transfers", "", "the multicast chains in flight: each hop, its upstream and how far it got"},
    {"load", "MODEL[/VERSION] [REPLICAS]", "load a model (keep REPLICAS replicas; the autoscaler keeps at least that)"},
    {"unload", "MODEL[/VERSION]", "drop every replica and refuse requests until the next load"},
    {"distribute", "MODEL[/VERSION] [NODE...]", "fill the host caches of the nodes (default: every node lacking it)"},
    {"evict", "MODEL[/VERSION] [NODE...]", "drop the bytes from the host caches (replicas keep theirs)"},
    {"scale", "MODEL[/VERSION] MIN [MAX]", "the autoscaler keeps MIN..MAX replicas (MAX 0 or left out: its own)"},
    {"drain", "NODE", "place nothing more on NODE and move its replicas away; answers when it may be stopped"},
    {"slo", "MODEL[/VERSION] DEADLINE [p=PERCENTILE] | MODEL[/VERSION] off",
     "set the latency objective of every replica of a model, now and later (e.g. 250ms p=99); off: back to "
     "model.json's, else each node's"},
    {"fault", "NODE KIND [TARGET] [p=P] [for=DURATION] [delay=DURATION] [count=K] [seed=S] [rate=R]",
     "inject a fault into a node started with --allow-faults: kill (router, cache, executor:N, hop), drop, delay, "
     "duplicate (the router's messages, for a duration, seeded), heal, fail-alloc K, fault-kernel (executor:N), "
     "corrupt-chunk K (data), throttle rate=R, stall (hops; for=DURATION), stop-heartbeats for=DURATION"},
    {"log-level", "LEVEL", "the log level of the manager and every node: trace, debug, info, warn, error, off"},
    {"metrics", "[MODEL]", "the manager's metrics (the lines of MODEL only)"},
    {"watch", "[TIMES]", "the models and nodes tables, refreshed every second (TIMES times; Ctrl-C stops)"},
    {"help", "", "this list"},
    {"quit", "", "leave the console (also exit, Ctrl-D)"},
};

std::string usage_of(const std::string& name) {
  for (const Usage& u : kUsage)
    if (name == u.name) return std::string("usage: ") + u.name + (*u.args ? " " : "") + u.args;
  return "";
}

std::vector<std::string> words_of(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

Result<model_key> parse_model(const std::string& word) {
  const auto slash = word.find('/');
  model_key key{word.substr(0, slash), 0};
  if (key.name.empty()) return invalid_argument("no model name in '" + word + "'");
  if (slash != std::string::npos) {
    const std::string v = word.substr(slash + 1);
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n == 0 || n > UINT32_MAX) {
      return invalid_argument("'" + v + "' is not a version (1, 2, ...)");
    }
    key.version = static_cast<uint32_t>(n);
  }
  return key;
}

/// Columns padded to their widest cell.
std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string join(const std::vector<std::string>& xs, const char* sep = ", ") {
  std::string out;
  for (const auto& x : xs) out += (out.empty() ? "" : sep) + x;
  return out;
}

std::vector<std::string> keys_of(const std::vector<model_key>& keys) {
  std::vector<std::string> out;
  for (const auto& k : keys) out.push_back(k.to_string());
  return out;
}

json json_of(const node_report& n) {
  json devices = json::array();
  for (const auto& d : n.devices) devices.push_back({{"name", d.name}, {"memory_bytes", d.memory_bytes},
                                                     {"used_bytes", d.used_bytes}});
  return {{"name", n.name},
          {"rack", n.rack},
          {"draining", n.draining},
          {"data", n.data.to_string()},
          {"devices", devices},
          {"cache_capacity", n.cache_capacity},
          {"cache_used", n.cache_used},
          {"replicas", keys_of(n.replicas)},
          {"cached", keys_of(n.cached)}};
}

json json_of(const model_state& m) {
  return {{"name", m.model.name},
          {"version", m.model.version},
          {"state", std::string(to_string(m.state))},
          {"replicas", m.replicas},
          {"reason", m.reason},
          {"explicitly_unloaded", m.explicitly_unloaded},
          {"slo_deadline_us", m.slo.deadline_us},
          {"slo_percentile", m.slo.percentile},
          {"slo_set", m.slo_set}};
}

/// "250ms at p99 (set)", "10ms at p98" (model.json's), "-" (none: each node derives one).
std::string slo_text(const model_state& m) {
  if (m.slo.deadline_us == 0) return "-";
  char pct[16];
  std::snprintf(pct, sizeof(pct), "%g", m.slo.percentile * 100);
  return format_duration(m.slo.deadline_us) + " at p" + pct + (m.slo_set ? " (set)" : "");
}

json json_of(const distribute_result& r) {
  json nodes = json::array();
  for (const auto& n : r.nodes) nodes.push_back({{"node", n.node}, {"source", std::string(to_string(n.source))},
                                                 {"bytes", n.bytes_fetched}});
  return {{"model", r.model.to_string()}, {"mode", std::string(to_string(r.mode))}, {"evicted", r.evicted},
          {"seconds", r.seconds},         {"chains", r.chains},                      {"nodes", nodes},
          {"errors", r.errors}};
}

std::string nodes_table(const std::vector<node_report>& nodes) {
  std::vector<std::vector<std::string>> rows{
      {"NODE", "STATE", "DEVICES", "DEVICE MEMORY", "CACHE", "REPLICAS", "CACHED", "DATA"}};
  for (const auto& n : nodes) {
    uint64_t used = 0, total = 0;
    for (const auto& d : n.devices) {
      used += d.used_bytes;
      total += d.memory_bytes;
    }
    rows.push_back({n.name, n.draining ? "draining" : "serving", std::to_string(n.devices.size()),
                    format_bytes(used) + " / " + format_bytes(total),
                    format_bytes(n.cache_used) + " / " + format_bytes(n.cache_capacity),
                    n.replicas.empty() ? "-" : join(keys_of(n.replicas)), std::to_string(n.cached.size()),
                    n.data.to_string()});
  }
  return table(rows);
}

std::string models_table(const std::vector<model_state>& models) {
  std::vector<std::vector<std::string>> rows{{"MODEL", "VERSION", "STATE", "REPLICAS", "SLO", "REASON"}};
  for (const auto& m : models) {
    rows.push_back({m.model.name, std::to_string(m.model.version), std::string(to_string(m.state)),
                    std::to_string(m.replicas), slo_text(m), m.reason.empty() ? "-" : m.reason});
  }
  return table(rows);
}

std::string distribute_text(const distribute_result& r) {
  std::string out = r.model.to_string() + (r.evicted ? ": evicted from " : ": in the caches of ") +
                    std::to_string(r.nodes.size()) + " node(s)";
  if (!r.evicted) out += " in " + std::to_string(r.seconds).substr(0, 5) + " s";
  out += "\n";
  for (const auto& c : r.chains) out += "  chain " + c + "\n";
  for (const auto& e : r.errors) out += "  failed: " + e + "\n";
  return out;
}

}  // namespace

Result<fault_command> parse_fault(const std::vector<std::string>& words) {
  fault_command f;
  EMBER_ASSIGN_OR_RETURN(f.kind, parse_fault_kind(words.empty() ? std::string_view() : std::string_view(words[0])));
  switch (f.kind) {
    case FaultKind::fail_alloc:
    case FaultKind::fault_kernel:
      f.target = FaultTarget::executor;
      f.executor = 0;
      break;
    case FaultKind::corrupt_chunk:
      f.target = FaultTarget::data;
      break;
    case FaultKind::throttle:
    case FaultKind::stall:
      f.target = FaultTarget::hops;
      break;
    default:
      f.target = FaultTarget::router;
  }
  for (size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    const auto eq = w.find('=');
    if (eq == std::string::npos) {
      if (i != 1) return invalid_argument("'" + w + "': options are KEY=VALUE, after the target");
      EMBER_RETURN_IF_ERROR(parse_fault_target(f, w));
      continue;
    }
    const std::string key = w.substr(0, eq);
    const std::string value = w.substr(eq + 1);
    auto number = [&]() -> Result<uint64_t> {
      char* end = nullptr;
      const unsigned long long n = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || value[0] == '-' || *end != '\0') {
        return invalid_argument("'" + value + "' is not a number (" + key + ")");
      }
      return static_cast<uint64_t>(n);
    };
    if (key == "p") {
      char* end = nullptr;
      f.probability = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(f.probability > 0.0 && f.probability <= 1.0)) {
        return invalid_argument("p is a probability in (0, 1], not '" + value + "'");
      }
    } else if (key == "for" || key == "delay") {
      auto us = parse_duration_us(value);
      if (!us.ok()) return us.error().with_context(key);
      (key == "for" ? f.duration_ms : f.delay_ms) = std::max<uint64_t>(*us / 1000, 1);
    } else if (key == "rate") {
      auto rate = parse_bandwidth(value);
      if (!rate.ok()) return rate.error().with_context("rate");
      if (*rate < 1) return invalid_argument("rate is at least 1 byte/s, not '" + value + "'");
      f.rate = static_cast<uint64_t>(*rate);
    } else if (key == "count") {
      EMBER_ASSIGN_OR_RETURN(f.count, number());
    } else if (key == "seed") {
      EMBER_ASSIGN_OR_RETURN(f.seed, number());
    } else {
      return invalid_argument("no fault option '" + key + "' (p, for, delay, count, seed, rate)");
    }
  }
  return f;
}

std::string console_user() {
  const char* user = std::getenv("USER");
  if (!user || !*user) {
    const passwd* pw = ::getpwuid(::geteuid());
    user = pw ? pw->pw_name : nullptr;
  }
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return std::string(user && *user ? user : "unknown") + "@" + (host[0] ? host : "unknown");
}

Console::Console(caf::actor_system& sys, admin_actor admin, ConsoleOptions options)
    : sys_(sys), admin_(std::move(admin)), options_(std::move(options)) {}

Result<std::unique_ptr<Console>> Console::connect(caf::actor_system& sys, const HostPort& manager,
                                                  ConsoleOptions options) {
  auto m = connect_remote(sys, manager.host, manager.port);
  if (!m.ok()) return unavailable("cannot reach the manager at " + manager.to_string() + ": " + m.error().message());
  // The admin actor lives beside the manager; its handle travels over this connection.
  Result<admin_actor> admin = internal_error("no answer");
  caf::scoped_actor self{sys};
  self->request(caf::actor_cast<cluster_manager_actor>(std::move(*m)), kReadTimeout, admin_atom_v)
      .receive([&](admin_actor& a) { admin = std::move(a); }, [&](caf::error& e) { admin = from_caf(e); });
  if (!admin.ok()) {
    return unavailable("cannot reach the admin interface of the manager at " + manager.to_string() + ": " +
                       admin.error().message());
  }
  return std::unique_ptr<Console>(new Console(sys, std::move(*admin), std::move(options)));
}

const std::vector<std::string>& Console::commands() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Usage& u : kUsage) out.push_back(u.name);
    out.push_back("exit");
    return out;
  }();
  return names;
}

std::vector<std::string> Console::complete(const std::string& line, const std::string& word) const {
  std::vector<std::string> out;
  const auto words = words_of(line);
  const bool first = words.empty() || (words.size() == 1 && !word.empty() && line.back() != ' ');
  auto add = [&](const std::vector<std::string>& from) {
    for (const auto& c : from)
      if (c.compare(0, word.size(), word) == 0) out.push_back(c);
  };
  if (first) {
    add(commands());
  } else if (words[0] == "drain") {
    add(node_names_);
  } else if (words[0] == "fault") {
    const size_t at = words.size() - (line.back() == ' ' ? 0 : 1);  // the word being completed
    if (at <= 1) add(node_names_);
    if (at == 2) {
      add({"kill", "drop", "delay", "duplicate", "heal", "fail-alloc", "fault-kernel", "corrupt-chunk", "throttle",
           "stall", "stop-heartbeats"});
    }
    if (at == 3) add({"router", "cache", "executor:0", "hop", "data", "hops"});
  } else if (words[0] == "distribute" || words[0] == "evict") {
    add(words.size() <= 2 && line.back() != ' ' ? model_names_ : node_names_);
    if (words.size() == 1) add(model_names_);
  } else {
    add(model_names_);
  }
  return out;
}

Result<std::vector<node_report>> Console::nodes() {
  caf::scoped_actor self{sys_};
  Result<std::vector<node_report>> out = internal_error("no answer");
  self->request(admin_, kReadTimeout, options_.auth, nodes_atom_v)
      .receive([&](std::vector<node_report>& r) { out = std::move(r); }, [&](caf::error& e) { out = from_caf(e); });
  if (out.ok()) {
    node_names_.clear();
    for (const auto& n : *out) node_names_.push_back(n.name);
  }
  return out;
}

Result<std::vector<model_state>> Console::models() {
  caf::scoped_actor self{sys_};
  Result<std::vector<model_state>> out = internal_error("no answer");
  self->request(admin_, kReadTimeout, options_.auth, index_atom_v)
      .receive([&](std::vector<model_state>& r) { out = std::move(r); }, [&](caf::error& e) { out = from_caf(e); });
  if (out.ok()) {
    model_names_.clear();
    for (const auto& m : *out)
      if (std::find(model_names_.begin(), model_names_.end(), m.model.name) == model_names_.end())
        model_names_.push_back(m.model.name);
  }
  return out;
}

Result<std::string> Console::snapshot() {
  EMBER_ASSIGN_OR_RETURN(auto m, models());
  EMBER_ASSIGN_OR_RETURN(auto n, nodes());
  if (options_.json) {
    json models = json::array(), nodes = json::array();
    for (const auto& x : m) models.push_back(json_of(x));
    for (const auto& x : n) nodes.push_back(json_of(x));
    return json{{"models", models}, {"nodes", nodes}}.dump() + "\n";
  }
  return models_table(m) + "\n" + nodes_table(n);
}

Result<std::string> Console::run(const std::string& line) {
  const auto words = words_of(line);
  if (words.empty()) return std::string();
  const std::string& cmd = words[0];
  const size_t args = words.size() - 1;
  auto bad = [&](const std::string& why) { return invalid_argument(why + (why.empty() ? "" : "; ") + usage_of(cmd)); };
  caf::scoped_actor self{sys_};

  if (cmd == "help") {
    std::vector<std::vector<std::string>> rows;
    for (const Usage& u : kUsage) rows.push_back({std::string(u.name) + (*u.args ? " " : "") + u.args, u.what});
    return table(rows);
  }
  if (cmd == "nodes") {
    if (args) return bad("no arguments");
    EMBER_ASSIGN_OR_RETURN(auto n, nodes());
    if (options_.json) {
      json out = json::array();
      for (const auto& x : n) out.push_back(json_of(x));
      return out.dump() + "\n";
    }
    return nodes_table(n);
  }
  if (cmd == "models") {
    if (args) return bad("no arguments");
    EMBER_ASSIGN_OR_RETURN(auto m, models());
    if (options_.json) {
      json out = json::array();
      for (const auto& x : m) out.push_back(json_of(x));
      return out.dump() + "\n";
    }
    return models_table(m);
  }
  if (cmd == "replicas") {
    if (args) return bad("no arguments");
    EMBER_ASSIGN_OR_RETURN(auto n, nodes());
    std::map<std::string, std::vector<std::string>> where;
    for (const auto& node : n)
      for (const auto& k : node.replicas) where[k.to_string()].push_back(node.name);
    if (options_.json) return json(where).dump() + "\n";
    std::vector<std::vector<std::string>> rows{{"MODEL", "REPLICAS", "NODES"}};
    for (const auto& [k, nodes] : where) rows.push_back({k, std::to_string(nodes.size()), join(nodes)});
    return table(rows);
  }
  if (cmd == "load" || cmd == "unload") {
    if (args < 1 || args > (cmd == "load" ? 2u : 1u)) return bad("");
    model_command mc;
    EMBER_ASSIGN_OR_RETURN(mc.model, parse_model(words[1]));
    if (args == 2) {
      char* end = nullptr;
      const unsigned long long n = std::strtoull(words[2].c_str(), &end, 10);
      if (*end != '\0' || n > 100000) return bad("'" + words[2] + "' is not a replica count");
      mc.replicas = static_cast<uint32_t>(n);
    }
    Result<model_state> out = internal_error("no answer");
    auto answer = [&](model_state& s) { out = std::move(s); };
    auto failed = [&](caf::error& e) { out = from_caf(e); };
    if (cmd == "load") {
      self->request(admin_, kChangeTimeout, options_.auth, load_atom_v, mc).receive(answer, failed);
    } else {
      self->request(admin_, kChangeTimeout, options_.auth, unload_atom_v, mc).receive(answer, failed);
    }
    if (!out.ok()) return out.error();
    if (options_.json) return json_of(*out).dump() + "\n";
    return out->model.to_string() + ": " + std::string(to_string(out->state)) + ", " + std::to_string(out->replicas) +
           " replica(s)" + (out->reason.empty() ? "" : " (" + out->reason + ")") + "\n";
  }
  if (cmd == "distribute" || cmd == "evict") {
    if (args < 1) return bad("");
    distribute_request req;
    EMBER_ASSIGN_OR_RETURN(req.model, parse_model(words[1]));
    req.nodes.assign(words.begin() + 2, words.end());
    Result<distribute_result> out = internal_error("no answer");
    auto answer = [&](distribute_result& r) { out = std::move(r); };
    auto failed = [&](caf::error& e) { out = from_caf(e); };
    if (cmd == "distribute") {
      self->request(admin_, kChangeTimeout, options_.auth, distribute_atom_v, req).receive(answer, failed);
    } else {
      self->request(admin_, kChangeTimeout, options_.auth, evict_atom_v, req).receive(answer, failed);
    }
    if (!out.ok()) return out.error();
    if (options_.json) return json_of(*out).dump() + "\n";
    return distribute_text(*out);
  }
  if (cmd == "fault") {
    if (args < 2) return bad("");
    EMBER_ASSIGN_OR_RETURN(fault_command f, parse_fault({words.begin() + 2, words.end()}));
    Result<std::string> out = internal_error("no answer");
    self->request(admin_, kReadTimeout, options_.auth, fault_atom_v, words[1], f)
        .receive([&](std::string& what) { out = std::move(what); }, [&](caf::error& e) { out = from_caf(e); });
    if (!out.ok()) return out.error();
    if (options_.json) {
      return json{{"node", words[1]},
                  {"kind", std::string(to_string(f.kind))},
                  {"target", target_name(f)},
                  {"done", *out}}
                 .dump() +
             "\n";
    }
    return "node " + words[1] + ": " + *out + "\n";
  }
  if (cmd == "drain") {
    if (args != 1) return bad("");
    Result<std::vector<model_key>> out = internal_error("no answer");
    self->request(admin_, kChangeTimeout, options_.auth, drain_atom_v, words[1])
        .receive([&](std::vector<model_key>& moved) { out = std::move(moved); },
                 [&](caf::error& e) { out = from_caf(e); });
    if (!out.ok()) return out.error();
    if (options_.json) return json{{"node", words[1]}, {"moved", keys_of(*out)}}.dump() + "\n";
    return "node " + words[1] + " is drained" + (out->empty() ? "" : " (moved " + join(keys_of(*out)) + ")") +
           "; it may be stopped\n";
  }
  if (cmd == "transfers") {
    if (args) return bad("no arguments");
    Result<std::vector<hop_progress>> out = internal_error("no answer");
    self->request(admin_, kReadTimeout, options_.auth, transfers_atom_v)
        .receive([&](std::vector<hop_progress>& h) { out = std::move(h); }, [&](caf::error& e) { out = from_caf(e); });
    if (!out.ok()) return out.error();
    if (options_.json) {
      json hops = json::array();
      for (const auto& h : *out) {
        hops.push_back({{"transfer", h.transfer_id},
                        {"model", h.model},
                        {"hop", h.hop},
                        {"upstream", h.upstream},
                        {"offset", h.offset},
                        {"blob_bytes", h.blob_bytes},
                        {"state", h.state}});
      }
      return hops.dump() + "\n";
    }
    if (out->empty()) return std::string("no transfer in flight\n");
    std::vector<std::vector<std::string>> rows{{"TRANSFER", "MODEL", "HOP", "FROM", "PROGRESS", "STATE"}};
    for (const auto& h : *out) {
      const double pct = h.blob_bytes ? 100.0 * static_cast<double>(h.offset) / static_cast<double>(h.blob_bytes) : 0;
      rows.push_back({std::to_string(h.transfer_id), h.model, h.hop, h.upstream,
                      format_bytes(h.offset) + " / " + format_bytes(h.blob_bytes) + " (" +
                          std::to_string(static_cast<int>(pct)) + "%)",
                      h.state});
    }
    return table(rows);
  }
  if (cmd == "log-level") {
    if (args != 1) return bad("");
    Result<uint32_t> out = internal_error("no answer");
    self->request(admin_, kReadTimeout, options_.auth, log_level_atom_v, words[1])
        .receive([&](uint32_t n) { out = n; }, [&](caf::error& e) { out = from_caf(e); });
    if (!out.ok()) return out.error();
    if (options_.json) return json{{"level", words[1]}, {"processes", *out}}.dump() + "\n";
    return "log level " + words[1] + " in " + std::to_string(*out) + " process(es)\n";
  }
  if (cmd == "scale") {
    if (args < 2 || args > 3) return bad("");
    EMBER_ASSIGN_OR_RETURN(model_key key, parse_model(words[1]));
    uint32_t bounds[2] = {0, 0};
    for (size_t i = 2; i < words.size(); ++i) {
      char* end = nullptr;
      const unsigned long long n = std::strtoull(words[i].c_str(), &end, 10);
      if (*end != '\0' || n > 100000) return bad("'" + words[i] + "' is not a replica count");
      bounds[i - 2] = static_cast<uint32_t>(n);
    }
    Result<model_state> out = internal_error("no answer");
    self->request(admin_, kReadTimeout, options_.auth, scale_atom_v, key, bounds[0], bounds[1])
        .receive([&](model_state& st) { out = std::move(st); }, [&](caf::error& e) { out = from_caf(e); });
    if (!out.ok()) return out.error();
    if (options_.json) return json_of(*out).dump() + "\n";
    return out->model.to_string() + ": the autoscaler keeps " + words[2] + ".." + (args == 3 ? words[3] : "its max") +
           " replicas (" + std::to_string(out->replicas) + " now)\n";
  }
  if (cmd == "slo") {
    if (args < 2 || args > 3) return bad("");
    EMBER_ASSIGN_OR_RETURN(model_key key, parse_model(words[1]));
    slo_command c{key, {}};
    if (words[2] != "off") {
      auto deadline = parse_duration_us(words[2]);
      if (!deadline.ok() || *deadline == 0) {
        return bad("'" + words[2] + "' is not a deadline (e.g. 250ms, 1.5s) or off");
      }
      c.slo.deadline_us = *deadline;
      if (args == 3) {
        const std::string& p = words[3];
        char* end = nullptr;
        const double pct = p.rfind("p=", 0) == 0 ? std::strtod(p.c_str() + 2, &end) : -1;
        if (pct <= 0 || pct >= 100 || !end || *end != '\0') return bad("'" + p + "' is not p=PERCENTILE in (0, 100)");
        c.slo.percentile = pct / 100;
      }
    } else if (args == 3) {
      return bad("off takes nothing after it");
    }
    Result<std::vector<model_state>> out = internal_error("no answer");
    self->request(admin_, kReadTimeout, options_.auth, slo_atom_v, c)
        .receive([&](std::vector<model_state>& v) { out = std::move(v); }, [&](caf::error& e) { out = from_caf(e); });
    if (!out.ok()) return out.error();
    if (options_.json) {
      json j = json::array();
      for (const auto& x : *out) j.push_back(json_of(x));
      return j.dump() + "\n";
    }
    std::string text;
    for (const auto& m : *out) {
      text += m.model.to_string() + ": SLO " + (m.slo_set ? slo_text(m) : "cleared (" + slo_text(m) + ")") + ", on " +
              std::to_string(m.replicas) + " replica(s)\n";
    }
    return text;
  }
  if (cmd == "metrics") {
    if (args > 1) return bad("");
    Result<metrics_snapshot> snap = internal_error("no answer");
    self->request(admin_, kReadTimeout, options_.auth, metrics_atom_v)
        .receive([&](metrics_snapshot& s) { snap = std::move(s); }, [&](caf::error& e) { snap = from_caf(e); });
    if (!snap.ok()) return snap.error();
    const std::string text = metrics::render(*snap);
    const std::string label = args ? "model=\"" + words[1] + "\"" : "";
    std::string out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
      if (!label.empty() && (l.starts_with("#") || l.find(label) == std::string::npos)) continue;
      out += l + "\n";
    }
    if (options_.json) {
      json lines = json::array();
      std::istringstream again(out);
      for (std::string l; std::getline(again, l);)
        if (!l.starts_with("#")) lines.push_back(l);
      return lines.dump() + "\n";
    }
    return out;
  }
  if (cmd == "watch") return bad("watch runs from the console's prompt or -c, not here");
  return invalid_argument("unknown command '" + cmd + "' (help lists them)");
}

}  // namespace ember
