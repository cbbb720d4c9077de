// The KServe v2 REST API over cpp-httplib (see http_frontend.hpp).
#include "actors/gateway/http/http_frontend.hpp"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "actors/errors.hpp"
#include "actors/gateway/gateway_instruments.hpp"
#include "actors/tensor_codec.hpp"
#include "gpu/host_tensor.hpp"
#include "base/json_text.hpp"

namespace ember {

namespace {

using nlohmann::json;

constexpr const char* kJson = "application/json";

void reply_error(httplib::Response& res, const Error& e) {
  res.status = http_status(e.code());
  if (res.status == 503) res.set_header("Retry-After", "1");
  res.set_content(json{{"error", e.message()}}.dump(), kJson);
}

/// The scoped actor of this HTTP thread (one per thread and actor system).
caf::scoped_actor& thread_actor(caf::actor_system& sys) {
  thread_local caf::actor_system* owner = nullptr;
  thread_local std::unique_ptr<caf::scoped_actor> self;
  if (!self || owner != &sys) {
    self = std::make_unique<caf::scoped_actor>(sys);
    owner = &sys;
  }
  return *self;
}

/// Sends `msg...` to the gateway and waits for the answer of type T.
template <class T, class... Ts>
Result<T> ask(caf::actor_system& sys, const gateway_actor& gateway, std::chrono::microseconds timeout, Ts&&... msg) {
  Result<T> out = internal_error("no answer from the gateway");
  thread_actor(sys)
      ->request(gateway, timeout, std::forward<Ts>(msg)...)
      .receive([&](T& x) { out = std::move(x); }, [&](caf::error& err) { out = from_caf(err); });
  return out;
}

model_key key_from(const httplib::Request& req) {
  model_key key;
  key.name = req.matches[1];
  if (req.matches.size() > 2 && req.matches[2].matched) {
    try {
      key.version = static_cast<uint32_t>(std::stoul(req.matches[2].str()));
    } catch (const std::exception&) {
      key.version = UINT32_MAX;  // matches nothing: 404
    }
  }
  return key;
}

/// Parses a KServe v2 inference request body into a request message.
Result<infer_request> parse_infer(const std::string& body, const model_key& key) {
  EMBER_ASSIGN_OR_RETURN(json j, parse_json_text(body));
  if (!j.is_object()) return invalid_argument("the request body must be a JSON object");
  infer_request req;
  req.model = key;
  if (auto id = j.find("id"); id != j.end()) {
    if (!id->is_string()) return invalid_argument("field 'id' must be a string");
    req.id = id->get<std::string>();
  }
  auto inputs = j.find("inputs");
  if (inputs == j.end() || !inputs->is_array() || inputs->empty()) {
    return invalid_argument("field 'inputs' must be a non-empty list of tensors");
  }
  for (size_t i = 0; i < inputs->size(); ++i) {
    EMBER_ASSIGN_OR_RETURN(gpu::HostTensor t,
                           gpu::tensor_from_kserve_json((*inputs)[i], "inputs[" + std::to_string(i) + "]"));
    req.inputs.push_back(encode_tensor(t));
  }
  if (auto outputs = j.find("outputs"); outputs != j.end()) {
    if (!outputs->is_array()) return invalid_argument("field 'outputs' must be a list");
    for (const auto& o : *outputs) {
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) {
        return invalid_argument("field 'outputs' must hold objects with a 'name'");
      }
      req.outputs.push_back(o["name"].get<std::string>());
    }
  }
  return req;
}

template <class T>
void append_values(json& data, const std::vector<uint8_t>& bytes) {
  const size_t n = bytes.size() / sizeof(T);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    data.push_back(v);
  }
}

std::string render_reply(const infer_reply& r) {
  json out{{"model_name", r.model.name}, {"model_version", std::to_string(r.model.version)}};
  if (!r.id.empty()) out["id"] = r.id;
  out["outputs"] = json::array();
  for (const auto& t : r.outputs) {
    json data = json::array();
    switch (static_cast<gpu::DType>(t.dtype)) {
      case gpu::DType::f32:
        append_values<float>(data, t.data);
        break;
      case gpu::DType::i64:
        append_values<int64_t>(data, t.data);
        break;
      case gpu::DType::i32:
        append_values<int32_t>(data, t.data);
        break;
      case gpu::DType::u8:
        append_values<uint8_t>(data, t.data);
        break;
      default:
        break;
    }
    out["outputs"].push_back({{"name", t.name},
                              {"datatype", gpu::dtype_kserve_name(static_cast<gpu::DType>(t.dtype))},
                              {"shape", t.shape},
                              {"data", std::move(data)}});
  }
  return out.dump();
}

/// The optional body of a repository load: {"parameters": {"replicas": N}} (1..1024); an empty
/// body means one replica.
Result<uint32_t> parse_load_parameters(const std::string& body) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return 0u;
  EMBER_ASSIGN_OR_RETURN(json j, parse_json_text(body));
  if (!j.is_object()) return invalid_argument("the request body must be a JSON object");
  auto params = j.find("parameters");
  if (params == j.end()) return 0u;
  if (!params->is_object()) return invalid_argument("field 'parameters' must be an object");
  auto replicas = params->find("replicas");
  if (replicas == params->end()) return 0u;
  if (!replicas->is_number_integer() || replicas->get<int64_t>() < 1 || replicas->get<int64_t>() > 1024) {
    return invalid_argument("parameter 'replicas' must be an integer in 1..1024");
  }
  return static_cast<uint32_t>(replicas->get<int64_t>());
}

/// {"nodes": ["a", "b"], "mode": "chain"|"unicast"|"auto", "version": "2"}; every field optional.
Result<distribute_request> parse_distribute(const std::string& body, const std::string& model) {
  distribute_request req;
  req.model = {model, 0};
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return req;
  EMBER_ASSIGN_OR_RETURN(json j, parse_json_text(body));
  if (!j.is_object()) return invalid_argument("the request body must be a JSON object");
  if (auto nodes = j.find("nodes"); nodes != j.end()) {
    if (!nodes->is_array()) return invalid_argument("field 'nodes' must be a list of node names");
    for (const auto& n : *nodes) {
      if (!n.is_string() || n.get<std::string>().empty()) return invalid_argument("field 'nodes' must hold node names");
      req.nodes.push_back(n.get<std::string>());
    }
  }
  if (auto mode = j.find("mode"); mode != j.end()) {
    if (!mode->is_string()) return invalid_argument("field 'mode' must be \"chain\", \"unicast\" or \"auto\"");
    EMBER_ASSIGN_OR_RETURN(req.mode, parse_distribute_mode(mode->get<std::string>()));
  }
  if (auto version = j.find("version"); version != j.end()) {
    if (!version->is_string()) return invalid_argument("field 'version' must be a string of digits");
    try {
      req.model.version = static_cast<uint32_t>(std::stoul(version->get<std::string>()));
    } catch (const std::exception&) {
      return invalid_argument("field 'version' must be a string of digits");
    }
  }
  return req;
}

std::string render_distribute(const distribute_result& r) {
  json nodes = json::array();
  for (const auto& n : r.nodes) {
    nodes.push_back({{"node", n.node},
                     {"source", r.evicted ? std::string("evicted") : describe_source(n.source, n.source_peer)},
                     {"bytes", n.bytes_fetched},
                     {"seconds", static_cast<double>(n.load_us) / 1e6}});
  }
  return json{{"model", r.model.name},     {"version", std::to_string(r.model.version)},
              {"mode", r.evicted ? std::string("evict") : std::string(to_string(r.mode))},            {"bytes", r.blob_bytes},
              {"seconds", r.seconds},      {"chains", r.chains},
              {"nodes", std::move(nodes)}, {"errors", r.errors}}
      .dump();
}

std::string repository_state(const model_state& s) {
  switch (s.state) {
    case ModelReadiness::ready:
      return "READY";
    case ModelReadiness::loading:
      return "LOADING";
    case ModelReadiness::unloaded:
    case ModelReadiness::failed:
      break;
  }
  return "UNAVAILABLE";
}

}  // namespace

struct HttpFrontend::Impl {
  caf::actor_system& sys;
  GatewayConfig config;
  gateway_actor gateway;
  std::shared_ptr<RoutingView> view;
  GatewayInstruments* instruments;
  httplib::Server server;
  std::thread thread;
  uint16_t port = 0;

  Impl(caf::actor_system& s, GatewayConfig c, gateway_actor g, std::shared_ptr<RoutingView> v, GatewayInstruments* i)
      : sys(s), config(std::move(c)), gateway(std::move(g)), view(std::move(v)), instruments(i) {}

  std::chrono::microseconds timeout() const {
    // The gateway enforces the request timeout itself; this only guards against a lost answer.
    return std::chrono::microseconds(config.request_timeout_us + config.cold_start_timeout_us + 5'000'000);
  }

  void routes() {
    server.Get("/v2", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(json{{"name", "ember"}, {"version", "0.1.0"}, {"extensions", {"model_repository"}}}.dump(),
                      kJson);
    });
    server.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
    server.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) {
      res.status = view->snapshot()->subscribed ? 200 : 503;
    });
    server.Get(R"(/v2/models/([^/]+)(?:/versions/([0-9]+))?)",
               [this](const httplib::Request& req, httplib::Response& res) {
                 const model_key key = key_from(req);
                 auto snap = view->snapshot();
                 const ModelView* m = snap->find(key.name, key.version);
                 if (!m) return reply_error(res, not_found("unknown model '" + key.name + "'"));
                 res.set_content(m->metadata_json, kJson);
               });
    server.Get(R"(/v2/models/([^/]+)(?:/versions/([0-9]+))?/ready)",
               [this](const httplib::Request& req, httplib::Response& res) {
                 const model_key key = key_from(req);
                 auto snap = view->snapshot();
                 const ModelView* m = snap->find(key.name, key.version);
                 if (!m) return reply_error(res, not_found("unknown model '" + key.name + "'"));
                 json body{{"name", key.name}, {"ready", m->ready}};
                 if (!m->ready) {
                   body["error"] = m->state.state == ModelReadiness::failed ? "model cannot load: " + m->state.reason
                                   : m->state.explicitly_unloaded
                                       ? std::string("model is unloaded")
                                       : "no warm replica (" + std::string(to_string(m->state.state)) +
                                             "); the first request loads one";
                 }
                 res.status = m->ready ? 200 : 400;
                 res.set_content(body.dump(), kJson);
               });
    server.Post(R"(/v2/models/([^/]+)(?:/versions/([0-9]+))?/infer)",
                [this](const httplib::Request& req, httplib::Response& res) {
                  const model_key key = key_from(req);
                  auto parsed = parse_infer(req.body, key);
                  if (!parsed.ok()) {
                    if (instruments) instruments->count_request(key, "invalid_argument", 0);
                    return reply_error(res, parsed.error());
                  }
                  auto reply = ask<infer_reply>(sys, gateway, timeout(), std::move(*parsed));
                  if (!reply.ok()) return reply_error(res, reply.error());
                  res.set_content(render_reply(*reply), kJson);
                });
    server.Post("/v2/repository/index", [this](const httplib::Request&, httplib::Response& res) {
      auto index = ask<std::vector<model_state>>(sys, gateway, timeout(), index_atom_v);
      if (!index.ok()) return reply_error(res, index.error());
      json out = json::array();
      for (const auto& s : *index) {
        json e{{"name", s.model.name}, {"version", std::to_string(s.model.version)}, {"state", repository_state(s)}};
        if (!s.reason.empty()) e["reason"] = s.reason;
        out.push_back(std::move(e));
      }
      res.set_content(out.dump(), kJson);
    });
    server.Post(R"(/v2/repository/models/([^/]+)/(load|unload))",
                [this](const httplib::Request& req, httplib::Response& res) {
                  model_command cmd{{req.matches[1], 0}};
                  auto replicas = parse_load_parameters(req.body);
                  if (!replicas.ok()) return reply_error(res, replicas.error());
                  cmd.replicas = *replicas;
                  auto state = req.matches[2] == "load" ? ask<model_state>(sys, gateway, timeout(), load_atom_v, cmd)
                                                        : ask<model_state>(sys, gateway, timeout(), unload_atom_v, cmd);
                  if (!state.ok()) return reply_error(res, state.error());
                  res.set_content("{}", kJson);
                });
    // Ember's own administration (not part of KServe v2): fill or drop node host caches.
    server.Post(R"(/ember/v1/models/([^/]+)/(distribute|evict))",
                [this](const httplib::Request& req, httplib::Response& res) {
                  auto parsed = parse_distribute(req.body, req.matches[1]);
                  if (!parsed.ok()) return reply_error(res, parsed.error());
                  const bool distributing = req.matches[2] == "distribute";
                  auto result = distributing
                                    ? ask<distribute_result>(sys, gateway, timeout(), distribute_atom_v, *parsed)
                                    : ask<distribute_result>(sys, gateway, timeout(), evict_atom_v, *parsed);
                  if (!result.ok()) return reply_error(res, result.error());
                  res.set_content(render_distribute(*result), kJson);
                });
    server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      auto text = ask<std::string>(sys, gateway, std::chrono::seconds(10), metrics_atom_v);
      if (!text.ok()) return reply_error(res, text.error());
      res.set_content(*text, "text/plain; version=0.0.4; charset=utf-8");
    });
    // Errors httplib produces itself (no route: 404; body over the limit: 413) get a JSON body too;
    // answers that already carry one keep it.
    server.set_error_handler(
        httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          std::string msg = res.status == 404   ? "no such endpoint: " + req.method + " " + req.path
                            : res.status == 413 ? "the request body exceeds the configured limit"
                                                : "HTTP " + std::to_string(res.status);
          res.set_content(json{{"error", msg}}.dump(), kJson);
          return httplib::Server::HandlerResponse::Handled;
        }));
    server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      res.status = 500;
      res.set_content(json{{"error", what}}.dump(), kJson);
    });
  }
};

HttpFrontend::HttpFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpFrontend::~HttpFrontend() { stop(); }

uint16_t HttpFrontend::port() const { return impl_->port; }

void HttpFrontend::stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->server.stop();
  impl_->thread.join();
}

Result<std::unique_ptr<HttpFrontend>> HttpFrontend::start(caf::actor_system& sys, const GatewayConfig& config,
                                                          gateway_actor gateway, std::shared_ptr<RoutingView> view,
                                                          GatewayInstruments* instruments) {
  auto impl = std::make_unique<Impl>(sys, config, std::move(gateway), std::move(view), instruments);
  const uint32_t threads = config.http_threads;
  impl->server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  impl->server.set_payload_max_length(config.max_body_bytes);
  impl->server.set_keep_alive_max_count(1'000'000);  // httplib's default (5) would close busy connections
  impl->server.set_tcp_nodelay(true);
  impl->routes();
  const int port = config.http.port == 0
                       ? impl->server.bind_to_any_port(config.http.host)
                       : (impl->server.bind_to_port(config.http.host, config.http.port) ? config.http.port : -1);
  if (port <= 0) {
    return io_error("cannot listen for HTTP on " + config.http.to_string() + ": " + std::strerror(errno));
  }
  impl->port = static_cast<uint16_t>(port);
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->server.listen_after_bind(); });
  spdlog::info("gateway: KServe v2 HTTP API on http://{}:{}", config.http.host, port);
  return std::unique_ptr<HttpFrontend>(new HttpFrontend(std::move(impl)));
}

}  // namespace ember
