// The HTTP front end's text generation routes (see generation_endpoints.hpp).
#include "actors/gateway/http/generation_endpoints.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <utility>

#include "actors/errors.hpp"
#include "actors/gateway/gateway_instruments.hpp"
#include "actors/gateway/http/generation_call.hpp"
#include "actors/gateway/http/http_request.hpp"
#include "actors/gateway/http/http_server.hpp"
#include "actors/gateway/http/kserve_generate_json.hpp"
#include "actors/gateway/http/kserve_json.hpp"
#include "actors/gateway/http/openai_json.hpp"

namespace ember {

namespace {

constexpr const char* kJsonType = "application/json";
constexpr const char* kEventStream = "text/event-stream";

uint64_t unix_now_s() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

}  // namespace

std::string make_generation_id(std::string_view prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char hex[25];
  std::snprintf(hex, sizeof(hex), "%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffull));
  return std::string(prefix) + hex;
}

/// What differs between OpenAI's answers and KServe's: the error body, the whole answer, the events.
class GenerationEndpoints::AnswerFormat {
 public:
  virtual ~AnswerFormat() = default;
  /// The body of an HTTP error (its status is http_status(e.code())).
  virtual std::string error(const Error& e, std::string_view param) const = 0;
  virtual void fold(const generate_chunk& chunk) = 0;
  virtual std::string whole() const = 0;
  virtual std::string start() = 0;
  virtual std::string event(const generate_chunk& chunk) = 0;
  virtual std::string fail(const Error& e) = 0;
  virtual bool ended() const = 0;
};

namespace {

class OpenAiFormat final : public GenerationEndpoints::AnswerFormat {
 public:
  explicit OpenAiFormat(const OpenAiAnswer& a) : whole_(a), stream_(a) {}
  std::string error(const Error& e, std::string_view param) const override { return render_openai_error(e, param); }
  void fold(const generate_chunk& chunk) override { whole_.add(chunk); }
  std::string whole() const override { return whole_.render(); }
  std::string start() override { return stream_.start(); }
  std::string event(const generate_chunk& chunk) override { return stream_.add(chunk); }
  std::string fail(const Error& e) override { return stream_.fail(e); }
  bool ended() const override { return stream_.ended(); }

 private:
  OpenAiCompletion whole_;
  OpenAiStream stream_;
};

class KServeFormat final : public GenerationEndpoints::AnswerFormat {
 public:
  explicit KServeFormat(const KServeGenerateAnswer& a) : whole_(a), stream_(a) {}
  std::string error(const Error& e, std::string_view) const override { return render_error(e.message()); }
  void fold(const generate_chunk& chunk) override { whole_.add(chunk); }
  std::string whole() const override { return whole_.render(); }
  std::string start() override { return {}; }
  std::string event(const generate_chunk& chunk) override { return stream_.add(chunk); }
  std::string fail(const Error& e) override { return stream_.fail(e); }
  bool ended() const override { return stream_.ended(); }

 private:
  KServeGenerateCompletion whole_;
  KServeGenerateStream stream_;
};

void reply_with(httplib::Response& res, const GenerationEndpoints::AnswerFormat& format, const Error& e,
                std::string_view param = {}) {
  res.status = http_status(e.code());
  if (res.status == 503) res.set_header("Retry-After", "1");
  res.set_content(format.error(e, param), kJsonType);
}

/// A chunk that fails before any text: answered as an HTTP error, as a refusal is.
bool failed_without_text(const generate_chunk& c) {
  return c.finish == FinishReason::error && c.text.empty() && c.tokens.empty();
}

}  // namespace

/// A stream being written: the call it reads, the format it writes in, what waits to be written.
struct GenerationEndpoints::StreamState {
  std::shared_ptr<GenerationCall> call;
  std::shared_ptr<AnswerFormat> format;
  std::string id;
  std::string pending;
  /// Why the releaser cancels a stream that did not end: the client went, or the server stops.
  std::string_view cancel_reason = "client_gone";
  /// The call's admission: its token's concurrent slot is held until the stream ends.
  ApiPass pass;
};

GenerationEndpoints::GenerationEndpoints(std::shared_ptr<GenerationService> service, std::chrono::microseconds timeout,
                                         GatewayInstruments* instruments, std::function<bool()> stopping)
    : service_(std::move(service)), timeout_(timeout), instruments_(instruments), stopping_(std::move(stopping)) {}

void GenerationEndpoints::models(const httplib::Request&, httplib::Response& res) {
  auto models = service_->models();
  if (!models.ok()) {
    res.status = http_status(models.error().code());
    if (res.status == 503) res.set_header("Retry-After", "1");
    return res.set_content(render_openai_error(models.error()), kJsonType);
  }
  res.set_content(render_openai_models(*models), kJsonType);
}

void GenerationEndpoints::openai(OpenAiApi api, const httplib::Request&, httplib::Response& res,
                                 const std::string& body, ApiPass& pass) {
  const bool chat = api == OpenAiApi::chat;
  const std::string id = make_generation_id(chat ? "chatcmpl-" : "cmpl-");
  std::string param;
  auto parsed = chat ? parse_openai_chat(body, id, &param) : parse_openai_completion(body, id, &param);
  OpenAiAnswer answer;
  answer.api = api;
  answer.id = id;
  answer.created = unix_now_s();
  if (!parsed.ok()) {
    reply_with(res, OpenAiFormat(answer), parsed.error(), param);
    return;
  }
  answer.model = parsed->model.name;
  if (Status may = pass.may_infer(parsed->model.name); !may.ok()) {
    reply_with(res, OpenAiFormat(answer), may.error(), "model");
    return;
  }
  answer.logprobs = parsed->logprobs;
  answer.top_logprobs = parsed->top_logprobs;
  answer.include_usage = parsed->include_usage;
  parsed->model = resolve(parsed->model);
  serve(std::move(*parsed), std::make_shared<OpenAiFormat>(answer), res, pass);
}

void GenerationEndpoints::kserve(bool stream, const httplib::Request& req, httplib::Response& res,
                                 const std::string& body, ApiPass& pass) {
  const model_key key = resolve(model_key_from_path(req));
  KServeGenerateAnswer answer;
  auto parsed = parse_kserve_generate(body, key, make_generation_id("gen-"), stream, &answer.client_id);
  answer.model_name = key.name;
  answer.model_version = key.version == 0 ? std::string() : std::to_string(key.version);
  if (!parsed.ok()) {
    reply_with(res, KServeFormat(answer), parsed.error());
    return;
  }
  serve(std::move(*parsed), std::make_shared<KServeFormat>(answer), res, pass);
}

model_key GenerationEndpoints::resolve(model_key key) const {
  if (key.version != 0) return key;
  auto models = service_->models();
  if (!models.ok()) return key;
  for (const auto& m : *models) {
    if (m.name == key.name) return {key.name, m.version};
  }
  return key;
}

void GenerationEndpoints::cancel(const std::string& id, std::string_view reason) const {
  if (instruments_) instruments_->count_generation_cancel(reason);  // first: a test that saw the cancel sees the count
  service_->cancel(id);
}

Error GenerationEndpoints::timed_out() const {
  return deadline_exceeded("no answer from the model within gateway.request_timeout (" +
                           std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(timeout_).count()) +
                           " ms)");
}

GenerationEndpoints::Wait GenerationEndpoints::await(GenerationCall& call, generate_chunk& chunk,
                                                     std::optional<Error>& refusal) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    switch (call.next(std::clamp(left, std::chrono::milliseconds(0), kWaitSlice), chunk, refusal)) {
      case GenerationCall::Next::chunk:
        return Wait::chunk;
      case GenerationCall::Next::refused:
        return Wait::refused;
      case GenerationCall::Next::overflowed:
        return Wait::overflowed;
      case GenerationCall::Next::idle:
        break;
    }
    if (HttpServer::client_gone()) return Wait::client_gone;
    if (stopping_ && stopping_()) return Wait::stopping;
    if (std::chrono::steady_clock::now() >= deadline) return Wait::timed_out;
  }
}

void GenerationEndpoints::serve(generate_request request, std::shared_ptr<AnswerFormat> format,
                                httplib::Response& res, ApiPass& pass) {
  auto call = GenerationCall::make();
  const std::string id = request.id;
  const bool stream = request.stream;
  service_->generate(std::move(request), call->sink());
  generate_chunk chunk;
  std::optional<Error> refusal;
  for (bool first = true;; first = false) {
    switch (await(*call, chunk, refusal)) {
      case Wait::chunk:
        break;
      case Wait::refused:
        return reply_with(res, *format, *refusal);
      case Wait::overflowed:  // the thread drains as chunks come: only a service far past its contract
        cancel(id, "slow_client");
        return reply_with(res, *format, internal_error("the answer outgrew the gateway's buffer"));
      case Wait::client_gone:
        cancel(id, "client_gone");
        return reply_with(res, *format, unavailable("the client closed its connection"));
      case Wait::stopping:
        cancel(id, "server_stopping");
        return reply_with(res, *format, unavailable("the gateway is stopping"));
      case Wait::timed_out:
        cancel(id, "timeout");
        return reply_with(res, *format, timed_out());
    }
    if (first && stream && !failed_without_text(chunk)) break;
    if (chunk.finish == FinishReason::error) {
      return reply_with(res, *format, Error(chunk.error.code, chunk.error.message));
    }
    format->fold(chunk);
    if (chunk.is_final()) return res.set_content(format->whole(), kJsonType);
  }
  // A stream: the first chunk came, so the answer is 200 and every later failure is an event.
  auto state = std::make_shared<StreamState>();
  state->call = std::move(call);
  state->format = std::move(format);
  state->id = id;
  state->pass = std::move(pass);
  state->pending = state->format->start() + state->format->event(chunk);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // a proxy in front passes each event on at once
  res.set_chunked_content_provider(
      kEventStream, [this, state](size_t, httplib::DataSink& sink) { return provide(*state, sink); },
      [this, state](bool) {
        if (!state->format->ended()) cancel(state->id, state->cancel_reason);
      });
}

bool GenerationEndpoints::provide(StreamState& state, httplib::DataSink& sink) {
  if (!state.pending.empty()) {
    const std::string out = std::exchange(state.pending, {});
    if (!sink.write(out.data(), out.size())) return false;
  }
  if (state.format->ended()) {
    sink.done();
    return true;
  }
  generate_chunk chunk;
  std::optional<Error> refusal;
  switch (await(*state.call, chunk, refusal)) {
    case Wait::chunk:
      state.pending = state.format->event(chunk);
      return true;
    case Wait::refused:  // not after a chunk (GenerationCall turns it into an error chunk); kept total
      state.pending = state.format->fail(*refusal);
      return true;
    case Wait::overflowed:
      cancel(state.id, "slow_client");
      state.pending = state.format->fail(
          unavailable("the stream was cut off: the client read it slower than the model generated"));
      return true;
    case Wait::timed_out:
      cancel(state.id, "timeout");
      state.pending = state.format->fail(timed_out());
      return true;
    case Wait::client_gone:
      return false;  // the releaser cancels
    case Wait::stopping:
      state.cancel_reason = "server_stopping";
      return false;
  }
  return false;
}

}  // namespace ember
