// The KServe v2 gRPC service over gRPC's synchronous server (see grpc_frontend.hpp).
#include "actors/gateway/grpc/grpc_frontend.hpp"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "actors/gateway/gateway_client.hpp"
#include "actors/gateway/generation_service.hpp"
#include "actors/gateway/grpc/grpc_generate.hpp"
#include "actors/gateway/grpc/grpc_service.grpc.pb.h"
#include "actors/gateway/grpc/health.grpc.pb.h"
#include "actors/gateway/grpc/kserve_grpc.hpp"
#include "actors/gateway/http/generation_call.hpp"
#include "actors/gateway/http/generation_endpoints.hpp"
#include "actors/gateway/http/repository_json.hpp"
#include "actors/gateway/http/tls_context.hpp"

namespace ember {

namespace {

grpc::StatusCode grpc_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument:
    case ErrorCode::corrupt:
    case ErrorCode::unsupported:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case ErrorCode::not_found:
      return grpc::StatusCode::NOT_FOUND;
    case ErrorCode::out_of_memory:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case ErrorCode::unavailable:
    case ErrorCode::device_fault:
    case ErrorCode::io_error:
      return grpc::StatusCode::UNAVAILABLE;
    case ErrorCode::deadline_exceeded:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case ErrorCode::permission_denied:
      return grpc::StatusCode::PERMISSION_DENIED;
    case ErrorCode::unauthenticated:
      return grpc::StatusCode::UNAUTHENTICATED;
    case ErrorCode::resource_exhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case ErrorCode::internal:
      return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

grpc::Status to_grpc(const Error& e) { return {grpc_code(e.code()), e.message()}; }

/// Whether the call's `authorization` metadata may do `action` on `model` (ApiAccess::admit): OK with
/// its pass in `pass`, or the refusal; one over its token's rates carries trailing metadata
/// retry-after (seconds), as HTTP's 429 carries the header.
grpc::Status admitted(const GatewayClient& client, grpc::ServerContext& ctx, ApiAction action, std::string_view model,
                      ApiPass& pass) {
  const ApiAccess& access = client.access();
  if (access.open()) return grpc::Status::OK;
  std::optional<std::string_view> header;
  const auto& md = ctx.client_metadata();
  if (auto it = md.find("authorization"); it != md.end())
    header = std::string_view(it->second.data(), it->second.size());
  ApiAdmission a = access.admit("grpc", header, action, model, ApiAccess::Clock::now());
  if (a.status.ok()) {
    pass = std::move(a.pass);
    return grpc::Status::OK;
  }
  if (a.status.error().code() == ErrorCode::resource_exhausted) {
    ctx.AddTrailingMetadata("retry-after", std::to_string(a.retry_after_seconds()));
  }
  return to_grpc(a.status.error());
}

/// The time left before the client's deadline, if it set one.
std::optional<std::chrono::microseconds> time_left(const grpc::ServerContext& ctx) {
  const auto deadline = ctx.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::system_clock::now());
}

}  // namespace

/// The service's handlers (named, not file-local: GrpcFrontend::Impl holds one).
class KserveGrpcService final : public inference::GRPCInferenceService::Service {
 public:
  KserveGrpcService(std::shared_ptr<GatewayClient> client, std::shared_ptr<GenerationService> generation,
                    size_t max_queued_chunks)
      : client_(std::move(client)), generation_(std::move(generation)), max_queued_(max_queued_chunks) {}

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* out) override {
    out->set_live(true);
    return grpc::Status::OK;
  }

  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* out) override {
    out->set_ready(client_->ready().ok());
    return grpc::Status::OK;
  }

  grpc::Status ModelReady(grpc::ServerContext* ctx, const inference::ModelReadyRequest* in,
                          inference::ModelReadyResponse* out) override {
    ApiPass pass;
    if (auto denied = admitted(*client_, *ctx, ApiAction::read, in->name(), pass); !denied.ok()) return denied;
    if (auto w = workflow(in->name())) {
      out->set_ready(client_->workflow_ready(**w).ok());
      return grpc::Status::OK;
    }
    auto m = find(in->name(), in->version());
    if (!m.ok()) return to_grpc(m.error());
    out->set_ready(m->ready);
    return grpc::Status::OK;
  }

  grpc::Status ServerMetadata(grpc::ServerContext* ctx, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* out) override {
    ApiPass pass;
    if (auto denied = admitted(*client_, *ctx, ApiAction::read, {}, pass); !denied.ok()) return denied;
    const ServerIdentity id = server_identity();
    out->set_name(id.name);
    out->set_version(id.version);
    for (const auto& e : id.extensions) out->add_extensions(e);
    return grpc::Status::OK;
  }

  grpc::Status ModelMetadata(grpc::ServerContext* ctx, const inference::ModelMetadataRequest* in,
                             inference::ModelMetadataResponse* out) override {
    ApiPass pass;
    if (auto denied = admitted(*client_, *ctx, ApiAction::read, in->name(), pass); !denied.ok()) return denied;
    auto version = parse_model_version(in->version(), "version");
    if (!version.ok()) return to_grpc(version.error());
    if (auto w = workflow(in->name())) {
      encode_model_metadata(in->name(), {1}, client_->workflow_signature(**w), *out, "ensemble");
      return grpc::Status::OK;
    }
    auto snap = client_->snapshot();
    auto m = client_->model({in->name(), *version});
    if (!m.ok()) return to_grpc(m.error());
    std::vector<uint32_t> versions;
    if (auto it = snap->models.find(in->name()); it != snap->models.end()) {
      for (const auto& [v, view] : it->second) versions.push_back(v);
    }
    encode_model_metadata(in->name(), versions, m->signature ? *m->signature : ModelSignature{}, *out);
    return grpc::Status::OK;
  }

  grpc::Status ModelInfer(grpc::ServerContext* ctx, const inference::ModelInferRequest* in,
                          inference::ModelInferResponse* out) override {
    ApiPass pass;
    if (auto denied = admitted(*client_, *ctx, ApiAction::infer, in->model_name(), pass); !denied.ok()) return denied;
    auto decoded = decode_infer_request(*in);
    const bool workflow_named = workflow(in->model_name()).has_value();
    if (!decoded.ok()) {
      workflow_named ? client_->count_invalid_workflow(in->model_name())
                     : client_->count_invalid({in->model_name(), 0});
      return to_grpc(decoded.error());
    }
    auto reply = workflow_named
                     ? client_->infer_workflow(in->model_name(), std::move(decoded->request), time_left(*ctx))
                     : client_->infer(std::move(decoded->request), time_left(*ctx));
    if (!reply.ok()) return to_grpc(reply.error());
    auto encoded = encode_infer_reply(*reply, *decoded, *out);
    if (!encoded.ok()) return to_grpc(encoded.error());
    return grpc::Status::OK;
  }

  grpc::Status ModelStreamInfer(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest>* stream) override {
    ApiPass pass;  // one call, however many requests it carries; each one's model is asked below
    if (auto denied = admitted(*client_, *ctx, ApiAction::infer, {}, pass); !denied.ok()) return denied;
    if (!generation_) {
      return {grpc::StatusCode::UNIMPLEMENTED,
              "ModelStreamInfer serves text generation, and this gateway has no generation service"};
    }
    inference::ModelInferRequest in;
    while (stream->Read(&in)) {
      if (Status may = pass.may_infer(in.model_name()); !may.ok()) {
        if (!stream->Write(generate_error_response(in, may.error()))) {
          return {grpc::StatusCode::CANCELLED, "the client cancelled the call"};
        }
        continue;
      }
      switch (generate(*ctx, *stream, in)) {
        case Served::done:
          break;
        case Served::client_gone:
          return {grpc::StatusCode::CANCELLED, "the client cancelled the call"};
        case Served::cut_off:
          return {grpc::StatusCode::RESOURCE_EXHAUSTED,
                  "the stream was cut off: the client read it slower than the model generated"};
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status RepositoryIndex(grpc::ServerContext* ctx, const inference::RepositoryIndexRequest* in,
                               inference::RepositoryIndexResponse* out) override {
    ApiPass pass;
    if (auto denied = admitted(*client_, *ctx, ApiAction::read, {}, pass); !denied.ok()) return denied;
    auto index = client_->index();
    if (!index.ok()) return to_grpc(index.error());
    for (const auto& s : *index) {
      const std::string_view state = repository_state(s);
      if (in->ready() && state != "READY") continue;
      auto* m = out->add_models();
      m->set_name(s.model.name);
      m->set_version(std::to_string(s.model.version));
      m->set_state(std::string(state));
      m->set_reason(s.reason);
    }
    return grpc::Status::OK;
  }

  grpc::Status RepositoryModelLoad(grpc::ServerContext* ctx, const inference::RepositoryModelLoadRequest* in,
                                   inference::RepositoryModelLoadResponse*) override {
    ApiPass pass;
    if (auto denied = admitted(*client_, *ctx, ApiAction::repository, {}, pass); !denied.ok()) return denied;
    if (in->model_name().empty()) return to_grpc(invalid_argument("model_name is empty"));
    auto replicas = decode_load_parameters(in->parameters());
    if (!replicas.ok()) return to_grpc(replicas.error());
    model_command cmd;
    cmd.model.name = in->model_name();
    cmd.replicas = *replicas;
    auto state = client_->load(std::move(cmd));
    return state.ok() ? grpc::Status::OK : to_grpc(state.error());
  }

  grpc::Status RepositoryModelUnload(grpc::ServerContext* ctx, const inference::RepositoryModelUnloadRequest* in,
                                     inference::RepositoryModelUnloadResponse*) override {
    ApiPass pass;
    if (auto denied = admitted(*client_, *ctx, ApiAction::repository, {}, pass); !denied.ok()) return denied;
    if (in->model_name().empty()) return to_grpc(invalid_argument("model_name is empty"));
    model_command cmd;
    cmd.model.name = in->model_name();
    auto state = client_->unload(std::move(cmd));
    return state.ok() ? grpc::Status::OK : to_grpc(state.error());
  }

 private:
  /// The workflow `name` when no model has that name (a workflow is served as a model named like
  /// it, as Triton serves ensembles; a model of the same name wins).
  std::optional<std::shared_ptr<const WorkflowView>> workflow(const std::string& name) const {
    auto snap = client_->snapshot();
    auto it = snap->workflows.find(name);
    if (it == snap->workflows.end() || snap->models.count(name)) return std::nullopt;
    return it->second;
  }

  Result<ModelView> find(const std::string& name, const std::string& version) const {
    auto v = parse_model_version(version, "version");
    if (!v.ok()) return v.error();
    return client_->model({name, *v});
  }

  using Stream = grpc::ServerReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest>;
  enum class Served { done, client_gone, cut_off };

  /// The call's context while its handler runs, for a sink that cuts a slow reader off (the sink
  /// may outlive the handler: the service drops it after its final call).
  struct CallContext {
    std::mutex mu;
    grpc::ServerContext* ctx = nullptr;  // guarded by mu; null once the handler let go
    void cut() {
      std::lock_guard lock(mu);
      if (ctx) ctx->TryCancel();
    }
    void release() {
      std::lock_guard lock(mu);
      ctx = nullptr;
    }
  };

  /// Serves one request of a ModelStreamInfer call (see grpc_frontend.hpp).
  Served generate(grpc::ServerContext& ctx, Stream& stream, const inference::ModelInferRequest& in) {
    auto decoded = decode_generate_request(in, make_generation_id("gen-"));
    if (!decoded.ok()) {
      return stream.Write(generate_error_response(in, decoded.error())) ? Served::done : Served::client_gone;
    }
    decoded->request.model = resolve(decoded->request.model);
    const uint32_t version = decoded->request.model.version;
    GrpcGenerateAnswer answer(*decoded, version == 0 ? std::string() : std::to_string(version));
    const std::string id = decoded->request.id;
    auto call = GenerationCall::make(max_queued_);
    auto context = std::make_shared<CallContext>();
    context->ctx = &ctx;
    struct Release {
      CallContext& c;
      ~Release() { c.release(); }
    } release{*context};
    generation_->generate(std::move(decoded->request),
                          [call, context, sink = call->sink()](Result<generate_chunk> item) {
                            sink(std::move(item));
                            if (call->overflowed()) context->cut();
                          });
    const auto timeout = std::chrono::microseconds(client_->config().request_timeout_us);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    generate_chunk chunk;
    std::optional<Error> refusal;
    for (;;) {
      std::optional<inference::ModelStreamInferResponse> out;
      switch (call->next(kWaitSlice, chunk, refusal)) {
        case GenerationCall::Next::chunk:
          out = answer.add(chunk);
          deadline = std::chrono::steady_clock::now() + timeout;
          break;
        case GenerationCall::Next::refused:
          out = answer.fail(*refusal);
          break;
        case GenerationCall::Next::overflowed:
          cancel(id, "slow_client");
          return Served::cut_off;
        case GenerationCall::Next::idle:
          if (ctx.IsCancelled()) {
            const bool cut = call->overflowed();
            cancel(id, cut ? "slow_client" : "client_gone");
            return cut ? Served::cut_off : Served::client_gone;
          }
          if (std::chrono::steady_clock::now() >= deadline) {
            cancel(id, "timeout");
            out = answer.fail(deadline_exceeded(
                "no answer from the model within gateway.request_timeout (" +
                std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()) + " ms)"));
          }
          break;
      }
      if (out && !stream.Write(*out)) {
        const bool cut = call->overflowed();
        if (!answer.ended()) cancel(id, cut ? "slow_client" : "client_gone");
        return cut ? Served::cut_off : Served::client_gone;
      }
      if (answer.ended()) return Served::done;
    }
  }

  /// Cancels generation `id`, counted by `reason` (first: a test that saw the cancel sees the count).
  void cancel(const std::string& id, std::string_view reason) {
    client_->count_generation_cancel(reason);
    generation_->cancel(id);
  }

  /// `key` with version 0 resolved to the highest the generation service lists (as HTTP's routes do).
  model_key resolve(model_key key) const {
    if (key.version != 0) return key;
    auto models = generation_->models();
    if (!models.ok()) return key;
    for (const auto& m : *models) {
      if (m.name == key.name) return {key.name, m.version};
    }
    return key;
  }

  static constexpr std::chrono::milliseconds kWaitSlice{50};

  std::shared_ptr<GatewayClient> client_;
  std::shared_ptr<GenerationService> generation_;
  const size_t max_queued_;
};

/// Readiness as the health service reports it, and who watches it.
struct HealthState {
  std::mutex mu;
  std::condition_variable changed;  // readiness changed, or stopping
  std::optional<bool> ready;        // guarded by mu: as last seen (every 100 ms)
  uint32_t watchers = 0;            // guarded by mu
  bool stopping = false;            // guarded by mu
};

/// grpc.health.v1.Health (health.proto): SERVING exactly when the gateway is ready, for the service
/// "" and the inference service; any other name is NOT_FOUND to Check and SERVICE_UNKNOWN to Watch,
/// as the specification says. Watch sends the status now and at every change until the client goes
/// or the server stops. Each watch holds one of the synchronous server's threads, so at most
/// kMaxWatchers run at once; one more is refused with RESOURCE_EXHAUSTED.
class HealthService final : public grpc::health::v1::Health::Service {
 public:
  static constexpr uint32_t kMaxWatchers = 8;
  using Response = grpc::health::v1::HealthCheckResponse;

  HealthService(std::shared_ptr<GatewayClient> client, HealthState& state)
      : client_(std::move(client)), state_(state) {}

  grpc::Status Check(grpc::ServerContext*, const grpc::health::v1::HealthCheckRequest* in, Response* out) override {
    if (!known(in->service())) {
      return {grpc::StatusCode::NOT_FOUND, "unknown service '" + in->service() + "' (this server reports '' and '" +
                                               std::string(inference::GRPCInferenceService::service_full_name()) +
                                               "')"};
    }
    out->set_status(client_->ready().ok() ? Response::SERVING : Response::NOT_SERVING);
    return grpc::Status::OK;
  }

  grpc::Status Watch(grpc::ServerContext* ctx, const grpc::health::v1::HealthCheckRequest* in,
                     grpc::ServerWriter<Response>* writer) override {
    std::unique_lock lock(state_.mu);
    if (state_.watchers >= kMaxWatchers) {
      return {grpc::StatusCode::RESOURCE_EXHAUSTED,
              "at most " + std::to_string(kMaxWatchers) + " health watches at once; use Check, or watch fewer"};
    }
    ++state_.watchers;
    const bool known_service = known(in->service());
    std::optional<Response::ServingStatus> sent;
    while (!state_.stopping && !ctx->IsCancelled()) {
      const auto status = !known_service                 ? Response::SERVICE_UNKNOWN
                          : state_.ready.value_or(false) ? Response::SERVING
                                                         : Response::NOT_SERVING;
      if (sent != status) {
        Response r;
        r.set_status(status);
        lock.unlock();
        const bool written = writer->Write(r);
        lock.lock();
        if (!written) break;
        sent = status;
      }
      state_.changed.wait_for(lock, std::chrono::milliseconds(100));
    }
    --state_.watchers;
    return grpc::Status::OK;
  }

 private:
  static bool known(const std::string& service) {
    return service.empty() || service == inference::GRPCInferenceService::service_full_name();
  }

  std::shared_ptr<GatewayClient> client_;
  HealthState& state_;
};

struct GrpcFrontend::Impl {
  std::shared_ptr<GatewayClient> client;
  KserveGrpcService service;
  HealthState health_state;
  HealthService health_service;
  std::unique_ptr<grpc::Server> server;
  uint16_t port = 0;
  /// Reads readiness every 100 ms for the health watches until stopped.
  std::thread health;

  Impl(std::shared_ptr<GatewayClient> c, std::shared_ptr<GenerationService> g, size_t max_queued)
      : client(c), service(c, std::move(g), max_queued), health_service(c, health_state) {}

  void watch_health() {
    std::unique_lock lock(health_state.mu);
    while (!health_state.stopping) {
      lock.unlock();
      const bool ready = client->ready().ok();
      lock.lock();
      if (health_state.ready != ready) {
        health_state.ready = ready;
        health_state.changed.notify_all();
      }
      health_state.changed.wait_for(lock, std::chrono::milliseconds(100));
    }
  }
};

GrpcFrontend::GrpcFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcFrontend::~GrpcFrontend() { stop(); }

uint16_t GrpcFrontend::port() const { return impl_->port; }

void GrpcFrontend::stop() {
  if (!impl_ || !impl_->server) return;
  {
    std::lock_guard lock(impl_->health_state.mu);
    impl_->health_state.stopping = true;
  }
  impl_->health_state.changed.notify_all();
  if (impl_->health.joinable()) impl_->health.join();
  // Calls in progress get until their answer or the gateway's timeout; new ones are refused.
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  impl_->server->Wait();
  impl_->server.reset();
}

namespace {
constexpr int kMaxPollers = 8;
}  // namespace

static_assert(GenerationCall::kMaxQueuedChunks == 4096, "grpc_frontend.hpp's default max_queued_chunks");

Result<std::unique_ptr<GrpcFrontend>> GrpcFrontend::start(std::shared_ptr<GatewayClient> client,
                                                          std::shared_ptr<const TlsContext> tls,
                                                          std::shared_ptr<GenerationService> generation,
                                                          size_t max_queued_chunks) {
  const GatewayConfig& config = client->config();
  if (!config.grpc) return invalid_argument("gateway.grpc is not set");
  if (max_queued_chunks == 0) return invalid_argument("max_queued_chunks must be at least 1");
  auto impl = std::make_unique<Impl>(client, std::move(generation), max_queued_chunks);
  grpc::EnableDefaultHealthCheckService(false);  // Ember's own (HealthService above)
  grpc::ServerBuilder builder;
  int port = 0;
  const std::string at = config.grpc->host + ":" + std::to_string(config.grpc->port);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (tls) {
    grpc::SslServerCredentialsOptions ssl(tls->mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                      : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    ssl.pem_key_cert_pairs.push_back({tls->key_pem, tls->certificate_pem});
    ssl.pem_root_certs = tls->client_ca_pem;
    credentials = grpc::SslServerCredentials(ssl);
  }
  builder.AddListeningPort(at, credentials, &port);
  builder.RegisterService(&impl->service);
  builder.RegisterService(&impl->health_service);
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<uint64_t>(config.max_body_bytes, INT32_MAX)));
  // One completion queue polled by 1..kMaxPollers threads. The quota counts pollers and a thread the
  // server keeps in reserve: 4 more than the calls it lets run (measured with --grpc-threads 4: 4
  // concurrent clients all served, 12 refused in part, as with 2 pollers). With at most 2 pollers a
  // burst of calls waited for new threads: 8 clients had p99 2.6 ms against 1.1-1.2 ms with 8.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, kMaxPollers);
  grpc::ResourceQuota quota("ember-grpc");
  quota.SetMaxThreads(static_cast<int>(config.grpc_threads) + 4);
  builder.SetResourceQuota(quota);
  impl->server = builder.BuildAndStart();
  if (!impl->server || port <= 0) {
    return io_error("cannot listen for gRPC on " + config.grpc->to_string() +
                    " (the address is in use or not this host's)");
  }
  impl->port = static_cast<uint16_t>(port);
  Impl* raw = impl.get();
  impl->health = std::thread([raw] { raw->watch_health(); });
  spdlog::info("gateway: KServe v2 gRPC API on {}:{}", config.grpc->host, port);
  return std::unique_ptr<GrpcFrontend>(new GrpcFrontend(std::move(impl)));
}

}  // namespace ember
