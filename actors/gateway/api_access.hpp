// ApiAccess: who may call the gateway's API, what each may do and how much (gateway.api_tokens_file,
// base/token_file.hpp's ApiToken). One call is admitted once, by both front ends alike: its bearer
// token matched in constant time, the token's scope checked against what the call does, then its
// rates: concurrent calls first (a slot taken), then calls per second (a token bucket). An
// admitted call holds an ApiPass until its answer ends (a stream's last event), which gives its
// slot back.
//
// Decided here, and why:
// - Refusals in a fixed order, each before the next costs anything: who (401), may it (403),
//   how many at once (429), how often (429). A call refused for its rate never held a slot; one
//   refused for concurrency never spent a token of its bucket.
// - A token bucket rather than a window: `rate` per second on average and `burst` at once from rest
//   (Envoy's and nginx's local rate limits do the same), so a tenant's steady traffic is never
//   refused for the phase of a window. Retry-After is when the bucket holds one call again
//   (concurrency: 1 s, no better guess exists).
// - Time is passed in (admit's `now`), so tests step it.
// - Every outcome is counted per token by its name (never the token itself):
//   ember_api_calls_total{token,outcome} and ember_api_calls_in_flight{token}. Refusals before a
//   token is known stay in ember_auth_refusals_total{protocol,reason}.
//
// Threads: any number of front-end threads admit at once; each token's bucket has its own lock,
// held for a few arithmetic operations, and its slots are an atomic count. Without tokens (the
// open API) every call passes and nothing is counted.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "base/token_file.hpp"

namespace ember {

class GatewayInstruments;
class ApiAccess;

/// What a call does, for its scope: read (metadata, readiness, the index, the model lists), infer
/// (inference and generation), repository (load, unload, distribute, evict), metrics.
enum class ApiAction : uint8_t { read, infer, repository, metrics };

/// An admitted call's hold on its token: its concurrent slot, released when the pass ends (moved
/// passes release once). A default pass (the open API, a refused call) holds nothing.
class ApiPass {
 public:
  ApiPass() = default;
  ApiPass(ApiPass&& other) noexcept { *this = std::move(other); }
  ApiPass& operator=(ApiPass&& other) noexcept;
  ApiPass(const ApiPass&) = delete;
  ApiPass& operator=(const ApiPass&) = delete;
  ~ApiPass() { release(); }

  /// Whether the call's token may infer on `model`, a model or workflow known only after the call
  /// was admitted (an OpenAI body's "model", each message of a gRPC stream): OK, or
  /// permission_denied (counted).
  Status may_infer(std::string_view model) const;

 private:
  friend class ApiAccess;
  void release();

  const ApiAccess* access_ = nullptr;
  size_t token_ = 0;
  bool holds_slot_ = false;
};

/// Admission's verdict: status OK (with the pass to hold), unauthenticated, permission_denied, or
/// resource_exhausted with when to try again.
struct ApiAdmission {
  Status status;
  std::chrono::milliseconds retry_after{0};
  ApiPass pass;

  /// Retry-After's whole seconds (at least 1).
  int64_t retry_after_seconds() const;
};

class ApiAccess {
 public:
  using Clock = std::chrono::steady_clock;

  /// `instruments` may be null (nothing counted).
  ApiAccess(std::vector<ApiToken> tokens, GatewayInstruments* instruments);
  ~ApiAccess();
  ApiAccess(const ApiAccess&) = delete;
  ApiAccess& operator=(const ApiAccess&) = delete;

  /// True without tokens: every call passes.
  bool open() const { return tokens_.empty(); }

  /// One call by `authorization` (the Authorization header or gRPC metadata: "Bearer TOKEN") doing
  /// `action` on `model` (empty: none named yet), over `protocol` (http, grpc) at `now`.
  ApiAdmission admit(std::string_view protocol, std::optional<std::string_view> authorization, ApiAction action,
                     std::string_view model, Clock::time_point now) const;

 private:
  friend class ApiPass;
  struct Meter;

  /// The refusal of `t` doing `action` on `model`, or OK.
  static Status scope(const ApiToken& t, ApiAction action, std::string_view model);
  void release(size_t token) const;
  void count_denied(size_t token) const;

  std::vector<ApiToken> tokens_;
  std::vector<std::unique_ptr<Meter>> meters_;
  GatewayInstruments* instruments_;
};

}  // namespace ember
