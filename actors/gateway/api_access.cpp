#include "actors/gateway/api_access.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

#include "actors/gateway/gateway_instruments.hpp"

namespace ember {

struct ApiAccess::Meter {
  std::mutex mu;
  double bucket = 0;  // calls the token may make now, at most burst
  Clock::time_point last{};
  bool started = false;
  std::atomic<uint32_t> in_flight{0};
  GatewayInstruments::TokenSeries series{};
};

namespace {

/// The token of "Bearer TOKEN" (the scheme in any case), or nullopt for anything else.
std::optional<std::string_view> bearer_token(std::string_view v) {
  constexpr std::string_view kScheme = "bearer ";
  if (v.size() <= kScheme.size()) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(v[i])) != kScheme[i]) return std::nullopt;
  }
  v.remove_prefix(kScheme.size());
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  if (v.empty()) return std::nullopt;
  return v;
}

/// The index of the configured token `authorization` carries (nullopt: none matched; every token
/// is compared, in constant time, with no early exit), or the refusal of a missing or malformed one.
Result<std::optional<size_t>> match_token(const std::vector<ApiToken>& tokens,
                                          std::optional<std::string_view> authorization) {
  if (!authorization) return unauthenticated("this API needs a bearer token (Authorization: Bearer TOKEN)");
  auto token = bearer_token(*authorization);
  if (!token) {
    return unauthenticated("the Authorization credential is not a bearer token (Authorization: Bearer TOKEN)");
  }
  std::optional<size_t> found;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (constant_time_equal(*token, tokens[i].token)) found = i;
  }
  return found;
}

/// A rate as a person wrote it (2.5, not 2.500000).
std::string rate_text(double rate) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", rate);
  return buf;
}

void inc(metrics::Counter* c) {
  if (c) c->inc();
}

}  // namespace

ApiPass& ApiPass::operator=(ApiPass&& other) noexcept {
  if (this != &other) {
    release();
    access_ = std::exchange(other.access_, nullptr);
    token_ = other.token_;
    holds_slot_ = std::exchange(other.holds_slot_, false);
  }
  return *this;
}

void ApiPass::release() {
  if (holds_slot_) access_->release(token_);
  holds_slot_ = false;
}

Status ApiPass::may_infer(std::string_view model) const {
  if (!access_) return Status::OK();
  Status s = ApiAccess::scope(access_->tokens_[token_], ApiAction::infer, model);
  if (!s.ok()) access_->count_denied(token_);
  return s;
}

int64_t ApiAdmission::retry_after_seconds() const {
  return std::max<int64_t>(1, (retry_after.count() + 999) / 1000);
}

ApiAccess::ApiAccess(std::vector<ApiToken> tokens, GatewayInstruments* instruments)
    : tokens_(std::move(tokens)), instruments_(instruments) {
  for (const ApiToken& t : tokens_) {
    auto m = std::make_unique<Meter>();
    if (instruments_) m->series = instruments_->token_series(t.name);
    meters_.push_back(std::move(m));
  }
}

ApiAccess::~ApiAccess() = default;

Status ApiAccess::scope(const ApiToken& t, ApiAction action, std::string_view model) {
  switch (action) {
    case ApiAction::read:
      if (model.empty() || t.repository || t.may_infer(model)) return Status::OK();
      break;
    case ApiAction::infer:
      if (model.empty() ? (t.infer_all || !t.models.empty()) : t.may_infer(model)) return Status::OK();
      break;
    case ApiAction::repository:
      if (t.repository) return Status::OK();
      return permission_denied(
          "this token may not change what the cluster serves (load, unload, distribute, evict): that needs the "
          "repository scope (a line 'TOKEN repository' or 'TOKEN admin' in gateway.api_tokens_file)");
    case ApiAction::metrics:
      if (t.metrics) return Status::OK();
      return permission_denied("this token may not read the metrics: that needs the metrics scope (gateway.api_tokens_file)");
  }
  return permission_denied(model.empty() ? std::string("this token may not infer (gateway.api_tokens_file)")
                                         : "this token may not use model '" + std::string(model) +
                                               "' (its infer= scope in gateway.api_tokens_file)");
}

ApiAdmission ApiAccess::admit(std::string_view protocol, std::optional<std::string_view> authorization,
                              ApiAction action, std::string_view model, Clock::time_point now) const {
  ApiAdmission verdict;
  if (open()) return verdict;
  auto found = match_token(tokens_, authorization);
  if (!found.ok() || !*found) {
    verdict.status = found.ok() ? permission_denied("the bearer token is not one of this gateway's (gateway.api_tokens_file)")
                                : found.error();
    if (instruments_) instruments_->count_auth_refusal(protocol, to_string(verdict.status.error().code()));
    return verdict;
  }
  const size_t i = **found;
  const ApiToken& t = tokens_[i];
  Meter& m = *meters_[i];
  if (Status s = scope(t, action, model); !s.ok()) {
    inc(m.series.permission_denied);
    verdict.status = std::move(s);
    return verdict;
  }
  const uint32_t before = m.in_flight.fetch_add(1, std::memory_order_acq_rel);
  if (t.concurrent != 0 && before >= t.concurrent) {
    m.in_flight.fetch_sub(1, std::memory_order_acq_rel);
    inc(m.series.concurrency_limited);
    verdict.status = resource_exhausted("token " + t.name + " has " + std::to_string(t.concurrent) +
                                        " calls in flight, its concurrent= limit (gateway.api_tokens_file)");
    verdict.retry_after = std::chrono::seconds(1);
    return verdict;
  }
  if (t.rate > 0) {
    std::lock_guard lock(m.mu);
    if (!m.started) {
      m.bucket = t.burst;
      m.started = true;
    } else if (now > m.last) {
      const double elapsed = std::chrono::duration<double>(now - m.last).count();
      m.bucket = std::min<double>(t.burst, m.bucket + elapsed * t.rate);
    }
    m.last = std::max(m.last, now);
    if (m.bucket < 1.0) {
      m.in_flight.fetch_sub(1, std::memory_order_acq_rel);
      inc(m.series.rate_limited);
      verdict.status = resource_exhausted("token " + t.name + " is over its rate of " + rate_text(t.rate) +
                                          " calls per second (rate= in gateway.api_tokens_file)");
      verdict.retry_after = std::chrono::milliseconds(
          static_cast<int64_t>(std::ceil((1.0 - m.bucket) / t.rate * 1000.0)));
      return verdict;
    }
    m.bucket -= 1.0;
  }
  inc(m.series.admitted);
  if (m.series.in_flight) m.series.in_flight->inc();
  verdict.pass.access_ = this;
  verdict.pass.token_ = i;
  verdict.pass.holds_slot_ = true;
  return verdict;
}

void ApiAccess::release(size_t token) const {
  Meter& m = *meters_[token];
  m.in_flight.fetch_sub(1, std::memory_order_acq_rel);
  if (m.series.in_flight) m.series.in_flight->dec();
}

void ApiAccess::count_denied(size_t token) const { inc(meters_[token]->series.permission_denied); }

}  // namespace ember
