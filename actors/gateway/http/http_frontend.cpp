// The KServe v2 REST API over cpp-httplib (see http_frontend.hpp).
#include "actors/gateway/http/http_frontend.hpp"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>

#include "actors/errors.hpp"
#include "actors/gateway/gateway_client.hpp"
#include "actors/gateway/gateway_instruments.hpp"
#include "actors/gateway/generation_service.hpp"
#include "actors/gateway/http/generation_endpoints.hpp"
#include "actors/gateway/http/http_request.hpp"
#include "actors/gateway/http/http_server.hpp"
#include "actors/gateway/http/kserve_json.hpp"
#include "actors/gateway/http/openai_render.hpp"
#include "actors/gateway/http/repository_json.hpp"
#include "metrics/metrics.hpp"

namespace ember {

namespace {

constexpr const char* kJson = "application/json";

void reply_error(httplib::Response& res, const Error& e) {
  res.status = http_status(e.code());
  if (res.status == 503) res.set_header("Retry-After", "1");
  res.set_content(render_error(e.message()), kJson);
}

/// OpenAI's API lives under /v1/: its errors take OpenAI's shape.
bool openai_path(const std::string& path) { return path.rfind("/v1/", 0) == 0; }

/// reply_error, in OpenAI's shape under /v1/.
void reply_error_at(const std::string& path, httplib::Response& res, const Error& e) {
  if (!openai_path(path)) return reply_error(res, e);
  res.status = http_status(e.code());
  if (res.status == 503) res.set_header("Retry-After", "1");
  res.set_content(render_openai_error(e), kJson);
}

/// The body of an error with `status` and `message`, in the shape `path` answers in.
std::string error_body_at(const std::string& path, int status, const std::string& message) {
  return openai_path(path) ? render_openai_error(status, message) : render_error(message);
}

HttpServerOptions server_options(const GatewayConfig& config, GatewayInstruments* instruments,
                                 std::shared_ptr<const TlsContext> tls) {
  HttpServerOptions o;
  o.tls = std::move(tls);
  o.threads = config.http_threads;
  o.max_queued = config.http_queue;
  o.refusal_body =
      render_error("the gateway is at its connection limit (" + std::to_string(config.http_threads) +
                   " HTTP threads busy, " + std::to_string(config.http_queue) + " connections waiting); retry later");
  if (instruments) o.on_refused = [instruments] { instruments->count_http_rejected(); };
  return o;
}

}  // namespace

namespace {

/// The binary tensor data extension's header: the length of the JSON that starts the body.
constexpr const char* kBinaryHeader = "Inference-Header-Content-Length";

/// The request's Inference-Header-Content-Length, if any.
Result<std::optional<uint64_t>> binary_header_length(const httplib::Request& req) {
  if (!req.has_header(kBinaryHeader)) return std::optional<uint64_t>{};
  const std::string v = req.get_header_value(kBinaryHeader);
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || v[0] == '-' || *end != '\0') {
    return invalid_argument(std::string(kBinaryHeader) + ": '" + v + "' is not a length in bytes");
  }
  return std::optional<uint64_t>{n};
}

}  // namespace

/// An inference answer as JSON, or with the binary tensor data extension when the request asked.
void send_reply(httplib::Response& res, const infer_reply& reply, const HttpInferRequest& asked) {
  auto rendered = render_infer_http(reply, asked);
  if (!rendered.ok()) return reply_error(res, rendered.error());
  if (!rendered->json_bytes) return res.set_content(rendered->body, kJson);
  res.set_header(kBinaryHeader, std::to_string(*rendered->json_bytes));
  res.set_content(rendered->body, "application/octet-stream");
}

struct HttpFrontend::Impl {
  std::shared_ptr<GatewayClient> client;
  const GatewayConfig& config;
  GatewayInstruments* instruments;
  HttpServer server;
  /// The text generation routes, when a GenerationService was given.
  std::unique_ptr<GenerationEndpoints> generation;
  uint16_t port = 0;

  Impl(std::shared_ptr<GatewayClient> c, GatewayInstruments* i, std::shared_ptr<const TlsContext> tls,
       std::shared_ptr<GenerationService> g)
      : client(std::move(c)),
        config(client->config()),
        instruments(i),
        server(server_options(config, instruments, std::move(tls))) {
    if (g) {
      generation = std::make_unique<GenerationEndpoints>(std::move(g),
                                                         std::chrono::microseconds(config.request_timeout_us),
                                                         instruments, [this] { return server.stopped(); });
    }
  }

  using BodyHandler = std::function<void(const httplib::Request&, httplib::Response&, const std::string& body,
                                         ApiPass& pass)>;

  /// A POST route whose body is read by RFC 9112's framing (http_request.hpp): a request without
  /// Content-Length or Transfer-Encoding has an empty body, which is what `curl -X POST URL` sends.
  /// Admitted (api_access.hpp) after the body was read (and dropped when refused), so that a
  /// refused request leaves its keep-alive connection in step: `action` on the model or workflow
  /// the pattern's first group names (none: the handler asks the pass once the body names one).
  /// The handler holds the pass; the call's slot is free when it returns (or its stream ends).
  void post(const std::string& pattern, BodyHandler handler, ApiAction action = ApiAction::infer) {
    server.Post(pattern, [this, handler = std::move(handler), action](const httplib::Request& req,
                                                                      httplib::Response& res,
                                                                      const httplib::ContentReader& reader) {
      RequestBody body = read_body(req, reader, config.max_body_bytes);
      ApiPass pass;
      const std::string model = req.matches.size() > 1 ? req.matches[1].str() : std::string();
      if (refused(req, res, action, model, pass)) return;
      if (body.error_status != 0) {
        res.status = body.error_status;
        res.set_content(error_body_at(req.path, body.error_status, body.error), kJson);
        return;
      }
      handler(req, res, body.text, pass);
    });
  }

  /// A call gateway.api_tokens_file refuses (ApiAccess::admit): answered 401, 403 or 429 (with
  /// Retry-After) here (true), counted; otherwise its pass in `pass`. Health checks are always open.
  bool refused(const httplib::Request& req, httplib::Response& res, ApiAction action, std::string_view model,
               ApiPass& pass) {
    const ApiAccess& access = client->access();
    if (access.open() || req.path == "/v2/health/live" || req.path == "/v2/health/ready") return false;
    std::optional<std::string_view> header;
    if (auto it = req.headers.find("Authorization"); it != req.headers.end()) header = it->second;
    ApiAdmission admitted = access.admit("http", header, action, model, ApiAccess::Clock::now());
    if (admitted.status.ok()) {
      pass = std::move(admitted.pass);
      return false;
    }
    const Error& e = admitted.status.error();
    if (e.code() == ErrorCode::unauthenticated) res.set_header("WWW-Authenticate", R"(Bearer realm="ember")");
    if (e.code() == ErrorCode::resource_exhausted) {
      res.set_header("Retry-After", std::to_string(admitted.retry_after_seconds()));
      pace(std::min<std::chrono::milliseconds>(admitted.retry_after, kMostPace));
    }
    reply_error_at(req.path, res, e);
    return true;
  }

  /// The longest a 429 is held back.
  static constexpr std::chrono::milliseconds kMostPace{1000};

  /// Holds this thread's answer back for `wait` (less once the server stops). A call over its
  /// token's rates is answered 429 only once the token could make one more (at most kMostPace):
  /// a client that ignores Retry-After and sends again at once makes one call per wait on each
  /// connection, instead of costing the server a refusal as fast as it can send one. Only this
  /// connection waits: each connection has a serving thread of its own (http_server.hpp), held
  /// by the connection whether it waits here or not.
  void pace(std::chrono::milliseconds wait) const {
    const auto until = std::chrono::steady_clock::now() + wait;
    while (!server.stopped()) {
      const auto left = until - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) return;
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(50)));
    }
  }

  /// A GET's action and the model or workflow its path names, before routing.
  static std::pair<ApiAction, std::string> get_scope(const std::string& path) {
    if (path == "/metrics") return {ApiAction::metrics, {}};
    for (std::string_view prefix : {"/v2/models/", "/v2/workflows/"}) {
      if (path.rfind(prefix, 0) != 0) continue;
      const size_t end = path.find('/', prefix.size());
      return {ApiAction::read, path.substr(prefix.size(), end == std::string::npos ? end : end - prefix.size())};
    }
    return {ApiAction::read, {}};
  }

  /// Text generation (generation_endpoints.hpp), when a service was given.
  void generation_routes() {
    if (!generation) return;
    GenerationEndpoints* g = generation.get();
    server.Get("/v1/models", [g](const httplib::Request& req, httplib::Response& res) { g->models(req, res); });
    post("/v1/completions",
         [g](const httplib::Request& req, httplib::Response& res, const std::string& body, ApiPass& pass) {
           g->openai(OpenAiApi::completions, req, res, body, pass);
         });
    post("/v1/chat/completions",
         [g](const httplib::Request& req, httplib::Response& res, const std::string& body, ApiPass& pass) {
           g->openai(OpenAiApi::chat, req, res, body, pass);
         });
    post(R"(/v2/models/([^/]+)(?:/versions/([0-9]+))?/generate)",
         [g](const httplib::Request& req, httplib::Response& res, const std::string& body, ApiPass& pass) {
           g->kserve(/*stream=*/false, req, res, body, pass);
         });
    post(R"(/v2/models/([^/]+)(?:/versions/([0-9]+))?/generate_stream)",
         [g](const httplib::Request& req, httplib::Response& res, const std::string& body, ApiPass& pass) {
           g->kserve(/*stream=*/true, req, res, body, pass);
         });
  }

  /// load or unload: the repository command of `atom` on the model the path names.
  template <class Atom>
  void model_command_route(const std::string& pattern, Atom atom) {
    post(pattern, [this, atom](const httplib::Request& req, httplib::Response& res, const std::string& body, ApiPass&) {
      auto replicas = parse_load_parameters(body);
      if (!replicas.ok()) return reply_error(res, replicas.error());
      model_command cmd;
      cmd.model.name = req.matches[1].str();
      cmd.replicas = *replicas;
      auto state = command(atom, std::move(cmd));
      if (!state.ok()) return reply_error(res, state.error());
      res.set_content("{}", kJson);
    }, ApiAction::repository);
  }

  /// distribute or evict: the cache command of `atom` on the model the path names.
  template <class Atom>
  void cache_command_route(const std::string& pattern, Atom atom) {
    post(pattern, [this, atom](const httplib::Request& req, httplib::Response& res, const std::string& body, ApiPass&) {
      auto parsed = parse_distribute_request(body, req.matches[1]);
      if (!parsed.ok()) return reply_error(res, parsed.error());
      auto result = command(atom, std::move(*parsed));
      if (!result.ok()) return reply_error(res, result.error());
      res.set_content(render_distribute_result(*result), kJson);
    }, ApiAction::repository);
  }

  Result<model_state> command(load_atom, model_command cmd) { return client->load(std::move(cmd)); }
  Result<model_state> command(unload_atom, model_command cmd) { return client->unload(std::move(cmd)); }
  Result<distribute_result> command(distribute_atom, distribute_request req) {
    return client->distribute(std::move(req));
  }
  Result<distribute_result> command(evict_atom, distribute_request req) { return client->evict(std::move(req)); }

  void routes() {
    server.Get("/v2", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(render_server_metadata(), kJson);
    });
    server.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
    server.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) {
      auto ready = client->ready();
      if (!ready.ok()) return reply_error(res, ready.error());
      res.status = 200;
    });
    server.Get(R"(/v2/models/([^/]+)(?:/versions/([0-9]+))?)",
               [this](const httplib::Request& req, httplib::Response& res) {
                 auto m = client->model(model_key_from_path(req));
                 if (!m.ok()) return reply_error(res, m.error());
                 if (!m->metadata_json) return reply_error(res, internal_error("model metadata is missing"));
                 res.set_content(*m->metadata_json, kJson);
               });
    server.Get(R"(/v2/models/([^/]+)(?:/versions/([0-9]+))?/ready)",
               [this](const httplib::Request& req, httplib::Response& res) {
                 const model_key key = model_key_from_path(req);
                 auto m = client->model(key);
                 if (!m.ok()) return reply_error(res, m.error());
                 res.status = m->ready ? 200 : 400;
                 res.set_content(render_model_readiness(key.name, m->ready, m->state), kJson);
               });
    post(R"(/v2/models/([^/]+)(?:/versions/([0-9]+))?/infer)",
         [this](const httplib::Request& req, httplib::Response& res, const std::string& body, ApiPass&) {
           const model_key key = model_key_from_path(req);
           auto header = binary_header_length(req);
           auto parsed = header.ok() ? parse_infer_http(body, *header, key) : Result<HttpInferRequest>(header.error());
           if (!parsed.ok()) {
             client->count_invalid(key);
             return reply_error(res, parsed.error());
           }
           auto reply = client->infer(std::move(parsed->request));
           if (!reply.ok()) return reply_error(res, reply.error());
           send_reply(res, *reply, *parsed);
         });
    // Workflows (config/workflow_config.hpp): metadata with the platform "ensemble", as Triton
    // names a DAG of models; readiness (every step's model warm); inference, bodies as a model's.
    server.Get(R"(/v2/workflows/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
      auto w = client->workflow(req.matches[1].str());
      if (!w.ok()) return reply_error(res, w.error());
      res.set_content(render_model_metadata((*w)->entry.name, {1}, client->workflow_signature(**w), "ensemble"), kJson);
    });
    server.Get(R"(/v2/workflows/([^/]+)/ready)", [this](const httplib::Request& req, httplib::Response& res) {
      auto w = client->workflow(req.matches[1].str());
      if (!w.ok()) return reply_error(res, w.error());
      const Status ready = client->workflow_ready(**w);
      res.status = ready.ok() ? 200 : 400;
      res.set_content(render_readiness((*w)->entry.name, ready), kJson);
    });
    post(R"(/v2/workflows/([^/]+)/infer)", [this](const httplib::Request& req, httplib::Response& res,
                                                  const std::string& body, ApiPass&) {
      const std::string name = req.matches[1].str();
      auto header = binary_header_length(req);
      auto parsed = header.ok() ? parse_infer_http(body, *header, {name, 1}) : Result<HttpInferRequest>(header.error());
      if (!parsed.ok()) {
        client->count_invalid_workflow(name);
        return reply_error(res, parsed.error());
      }
      auto reply = client->infer_workflow(name, std::move(parsed->request));
      if (!reply.ok()) return reply_error(res, reply.error());
      send_reply(res, *reply, *parsed);
    });
    post("/v2/repository/index", [this](const httplib::Request&, httplib::Response& res, const std::string&, ApiPass&) {
      auto index = client->index();
      if (!index.ok()) return reply_error(res, index.error());
      res.set_content(render_repository_index(*index), kJson);
    }, ApiAction::read);
    model_command_route(R"(/v2/repository/models/([^/]+)/load)", load_atom_v);
    model_command_route(R"(/v2/repository/models/([^/]+)/unload)", unload_atom_v);
    // Ember's own administration (not part of KServe v2): fill or drop node host caches.
    cache_command_route(R"(/ember/v1/models/([^/]+)/distribute)", distribute_atom_v);
    cache_command_route(R"(/ember/v1/models/([^/]+)/evict)", evict_atom_v);
    server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      auto text = client->metrics();
      if (!text.ok()) return reply_error(res, text.error());
      res.set_content(*text, std::string(metrics::kContentType));
    });
    generation_routes();
    // Credentials: every call but a POST (its route checks them once the body is read) and the
    // health checks, before routing.
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (req.method == "POST") return httplib::Server::HandlerResponse::Unhandled;
      const auto [action, model] = get_scope(req.path);
      ApiPass pass;  // a read answers at once: its slot is free again before it is routed
      if (!refused(req, res, action, model, pass)) return httplib::Server::HandlerResponse::Unhandled;
      return httplib::Server::HandlerResponse::Handled;
    });
    // Errors httplib produces itself (no route, a malformed request, a body over the limit) get a
    // JSON body that says what was wrong too; answers that already carry one keep it.
    server.set_error_handler(
        httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          res.set_content(error_body_at(req.path, res.status,
                                        describe_library_error(res.status, req.method, req.path, config.max_body_bytes)),
                          kJson);
          return httplib::Server::HandlerResponse::Handled;
        }));
    server.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = std::string("internal error: ") + e.what();
      } catch (...) {
      }
      res.status = 500;
      res.set_content(error_body_at(req.path, 500, what), kJson);
    });
  }
};

HttpFrontend::HttpFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpFrontend::~HttpFrontend() { stop(); }

uint16_t HttpFrontend::port() const { return impl_->port; }

void HttpFrontend::stop() {
  if (impl_) impl_->server.stop_listening();
}

Result<std::unique_ptr<HttpFrontend>> HttpFrontend::start(std::shared_ptr<GatewayClient> client,
                                                          GatewayInstruments* instruments,
                                                          std::shared_ptr<const TlsContext> tls,
                                                          std::shared_ptr<GenerationService> generation) {
  const bool secure = tls != nullptr;
  auto impl = std::make_unique<Impl>(std::move(client), instruments, std::move(tls), std::move(generation));
  const GatewayConfig& config = impl->config;
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
  if (!impl->server.set_backlog(static_cast<int>(std::max<uint32_t>(config.http_queue, 128)))) {
    spdlog::warn("gateway: cannot raise the HTTP listen backlog: {}", std::strerror(errno));
  }
  impl->server.start_listening();
  spdlog::info("gateway: KServe v2 HTTP API on {}://{}:{}", secure ? "https" : "http", config.http.host, port);
  return std::unique_ptr<HttpFrontend>(new HttpFrontend(std::move(impl)));
}

struct MetricsEndpoint::Impl {
  std::shared_ptr<GatewayClient> client;
  HttpServer server{HttpServerOptions{.threads = 2, .max_queued = 16}};
  uint16_t port = 0;
};

MetricsEndpoint::MetricsEndpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsEndpoint::~MetricsEndpoint() { impl_->server.stop_listening(); }

uint16_t MetricsEndpoint::port() const { return impl_->port; }

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::start(std::shared_ptr<GatewayClient> client,
                                                                const HostPort& at) {
  auto impl = std::make_unique<Impl>();
  impl->client = std::move(client);
  impl->server.set_tcp_nodelay(true);
  Impl* raw = impl.get();
  impl->server.Get("/metrics", [raw](const httplib::Request&, httplib::Response& res) {
    auto text = raw->client->metrics();
    if (!text.ok()) return reply_error(res, text.error());
    res.set_content(*text, std::string(metrics::kContentType));
  });
  impl->server.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req,
                                                                         httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    res.set_content(render_error("this address serves GET /metrics only, not " + req.method + " " + req.path), kJson);
    return httplib::Server::HandlerResponse::Handled;
  }));
  const int port = at.port == 0 ? impl->server.bind_to_any_port(at.host)
                                : (impl->server.bind_to_port(at.host, at.port) ? at.port : -1);
  if (port <= 0) return io_error("cannot listen for metrics on " + at.to_string() + ": " + std::strerror(errno));
  impl->port = static_cast<uint16_t>(port);
  impl->server.start_listening();
  spdlog::info("gateway: /metrics (no token) on http://{}:{}", at.host, port);
  return std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint(std::move(impl)));
}

}  // namespace ember
