// ApiAccess (actors/gateway/api_access.hpp): a call's token, its scope, its concurrent calls and
// its rate, in that order, with time stepped by the test; what each refusal says and how it is
// counted; the slot a pass holds, given back once however the pass moves; and the concurrency
// limit under threads racing for it.
#include "actors/gateway/api_access.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "actors/gateway/gateway_instruments.hpp"
#include "metrics/metrics.hpp"

namespace ember {
namespace api_access_test {

using namespace std::chrono_literals;
using Clock = ApiAccess::Clock;

std::vector<ApiToken> tokens(std::initializer_list<std::string_view> lines) {
  std::vector<ApiToken> out;
  for (std::string_view line : lines) {
    auto t = parse_api_token(line, "line-" + std::to_string(out.size() + 1));
    EXPECT_TRUE(t.ok()) << line << ": " << t.error().message();
    if (t.ok()) out.push_back(*t);
  }
  return out;
}

std::string bearer(std::string_view token) { return "Bearer " + std::string(token); }

class ApiAccessTest : public ::testing::Test {
 protected:
  ApiAdmission admit(const ApiAccess& access, std::string_view token, ApiAction action = ApiAction::infer,
                     std::string_view model = "mlp") {
    const std::string header = bearer(token);
    return access.admit("http", header, action, model, now_);
  }
  std::string metrics_text() { return metrics::render(instruments_.registry().snapshot()); }
  bool has(const std::string& line) { return metrics_text().find(line) != std::string::npos; }

  GatewayInstruments instruments_;
  Clock::time_point now_ = Clock::time_point(100s);
};

TEST_F(ApiAccessTest, WithoutTokensEveryCallPasses) {
  ApiAccess access({}, &instruments_);
  EXPECT_TRUE(access.open());
  for (ApiAction a : {ApiAction::read, ApiAction::infer, ApiAction::repository, ApiAction::metrics}) {
    EXPECT_TRUE(access.admit("http", std::nullopt, a, "mlp", now_).status.ok());
  }
}

TEST_F(ApiAccessTest, ACallWithoutAKnownTokenIsRefusedAndCountedByProtocol) {
  ApiAccess access(tokens({"good"}), &instruments_);
  auto none = access.admit("grpc", std::nullopt, ApiAction::infer, "mlp", now_);
  EXPECT_EQ(none.status.error().code(), ErrorCode::unauthenticated);
  auto basic = access.admit("http", std::string_view("Basic dXNlcjpwYXNz"), ApiAction::infer, "mlp", now_);
  EXPECT_EQ(basic.status.error().code(), ErrorCode::unauthenticated);
  auto wrong = admit(access, "goo");
  EXPECT_EQ(wrong.status.error().code(), ErrorCode::permission_denied);
  EXPECT_NE(wrong.status.error().message().find("not one of this gateway's"), std::string::npos);
  EXPECT_TRUE(has(R"(ember_auth_refusals_total{protocol="grpc",reason="unauthenticated"} 1)")) << metrics_text();
  EXPECT_TRUE(has(R"(ember_auth_refusals_total{protocol="http",reason="permission_denied"} 1)")) << metrics_text();
  EXPECT_TRUE(admit(access, "good").status.ok());
  EXPECT_TRUE(has(R"(ember_api_calls_total{token="line-1",outcome="admitted"} 1)")) << metrics_text();
}

TEST_F(ApiAccessTest, EachScopeAdmitsWhatItNamesAndNothingElse) {
  ApiAccess access(tokens({"plain", "tenant infer=mlp,flow name=tenant-a", "ops repository", "scraper metrics", "root admin"}),
                   &instruments_);
  struct Case {
    std::string token;
    ApiAction action;
    std::string model;
    bool admitted;
  };
  for (const Case& c : std::vector<Case>{
           {"plain", ApiAction::infer, "anything", true},
           {"plain", ApiAction::read, "anything", true},
           {"plain", ApiAction::metrics, "", true},
           {"plain", ApiAction::repository, "", false},
           {"tenant", ApiAction::infer, "mlp", true},
           {"tenant", ApiAction::infer, "flow", true},  // a workflow counts as a model
           {"tenant", ApiAction::infer, "resnet", false},
           {"tenant", ApiAction::infer, "", true},  // no model named yet: asked again once one is
           {"tenant", ApiAction::read, "resnet", false},
           {"tenant", ApiAction::read, "", true},  // the server's metadata, the index
           {"tenant", ApiAction::metrics, "", false},
           {"tenant", ApiAction::repository, "", false},
           {"ops", ApiAction::repository, "", true},
           {"ops", ApiAction::read, "resnet", true},
           {"ops", ApiAction::infer, "mlp", false},
           {"ops", ApiAction::infer, "", false},
           {"ops", ApiAction::metrics, "", false},
           {"scraper", ApiAction::metrics, "", true},
           {"scraper", ApiAction::infer, "mlp", false},
           {"root", ApiAction::repository, "", true},
           {"root", ApiAction::infer, "resnet", true},
           {"root", ApiAction::metrics, "", true},
       }) {
    auto a = admit(access, c.token, c.action, c.model);
    EXPECT_EQ(a.status.ok(), c.admitted) << c.token << " " << static_cast<int>(c.action) << " " << c.model;
    if (!a.status.ok()) {
      EXPECT_EQ(a.status.error().code(), ErrorCode::permission_denied);
    }
  }
  auto refused = admit(access, "tenant", ApiAction::infer, "resnet");
  EXPECT_NE(refused.status.error().message().find("may not use model 'resnet'"), std::string::npos)
      << refused.status.error().message();
  EXPECT_NE(admit(access, "ops", ApiAction::infer, "").status.error().message().find("may not infer"),
            std::string::npos);
  EXPECT_NE(admit(access, "plain", ApiAction::repository, "").status.error().message().find("repository scope"),
            std::string::npos);
  // Scope refusals are the token's, by its name; none reaches ember_auth_refusals_total.
  EXPECT_TRUE(has(R"(ember_api_calls_total{token="tenant-a",outcome="permission_denied"} 5)")) << metrics_text();
  EXPECT_FALSE(has("ember_auth_refusals_total{")) << metrics_text();
}

TEST_F(ApiAccessTest, APassAsksForAModelNamedAfterTheCallWasAdmitted) {
  ApiAccess access(tokens({"tenant infer=mlp name=a"}), &instruments_);
  auto a = admit(access, "tenant", ApiAction::infer, "");
  ASSERT_TRUE(a.status.ok());
  EXPECT_TRUE(a.pass.may_infer("mlp").ok());
  const Status other = a.pass.may_infer("gpt2");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code(), ErrorCode::permission_denied);
  EXPECT_TRUE(has(R"(ember_api_calls_total{token="a",outcome="permission_denied"} 1)")) << metrics_text();
  EXPECT_TRUE(ApiPass().may_infer("anything").ok());  // the open API's pass
}

// rate=1 burst=2: two calls at once from rest, then one a second; a refused call is told when the
// bucket holds one again, and spends nothing.
TEST_F(ApiAccessTest, ARateAdmitsItsBurstFromRestThenOneCallPerPeriod) {
  ApiAccess access(tokens({"t rate=1 burst=2 name=t"}), &instruments_);
  EXPECT_TRUE(admit(access, "t").status.ok());
  EXPECT_TRUE(admit(access, "t").status.ok());
  auto third = admit(access, "t");
  ASSERT_EQ(third.status.error().code(), ErrorCode::resource_exhausted);
  EXPECT_NE(third.status.error().message().find("over its rate of 1 calls per second"), std::string::npos)
      << third.status.error().message();
  EXPECT_EQ(third.retry_after, 1000ms);
  EXPECT_EQ(third.retry_after_seconds(), 1);
  now_ += 400ms;
  auto early = admit(access, "t");
  ASSERT_FALSE(early.status.ok());
  EXPECT_EQ(early.retry_after, 600ms);
  EXPECT_EQ(early.retry_after_seconds(), 1);
  now_ += 600ms;
  EXPECT_TRUE(admit(access, "t").status.ok());
  EXPECT_FALSE(admit(access, "t").status.ok());
  now_ += 10s;  // rest refills the burst, no more
  EXPECT_TRUE(admit(access, "t").status.ok());
  EXPECT_TRUE(admit(access, "t").status.ok());
  EXPECT_FALSE(admit(access, "t").status.ok());
  EXPECT_TRUE(has(R"(ember_api_calls_total{token="t",outcome="admitted"} 5)")) << metrics_text();
  EXPECT_TRUE(has(R"(ember_api_calls_total{token="t",outcome="rate_limited"} 4)")) << metrics_text();
  EXPECT_TRUE(has(R"(ember_api_calls_in_flight{token="t"} 0)")) << metrics_text();  // every pass went
}

TEST_F(ApiAccessTest, RetryAfterOfASlowRateIsInWholeSecondsRoundedUp) {
  ApiAccess access(tokens({"slow rate=0.4"}), &instruments_);
  EXPECT_TRUE(admit(access, "slow").status.ok());
  auto next = admit(access, "slow");
  EXPECT_EQ(next.retry_after, 2500ms);
  EXPECT_EQ(next.retry_after_seconds(), 3);
}

TEST_F(ApiAccessTest, ConcurrentCallsAreLimitedWhileTheirPassesLiveAndARefusalSpendsNoRate) {
  ApiAccess access(tokens({"t concurrent=2 rate=1 burst=3 name=t", "other"}), &instruments_);
  auto first = admit(access, "t");
  auto second = admit(access, "t");
  ASSERT_TRUE(first.status.ok() && second.status.ok());
  EXPECT_TRUE(has(R"(ember_api_calls_in_flight{token="t"} 2)")) << metrics_text();
  auto third = admit(access, "t");
  ASSERT_EQ(third.status.error().code(), ErrorCode::resource_exhausted);
  EXPECT_NE(third.status.error().message().find("2 calls in flight, its concurrent= limit"), std::string::npos);
  EXPECT_EQ(third.retry_after_seconds(), 1);
  EXPECT_TRUE(admit(access, "other").status.ok());  // another token's calls are its own
  ApiPass moved = std::move(first.pass);
  first.pass = ApiPass();  // a moved-from pass gives nothing back
  EXPECT_FALSE(admit(access, "t").status.ok());
  moved = ApiPass();  // the slot is back
  EXPECT_TRUE(has(R"(ember_api_calls_in_flight{token="t"} 1)")) << metrics_text();
  // The third call (refused for concurrency) spent nothing: the bucket's third call is still there.
  auto fourth = admit(access, "t");
  ASSERT_TRUE(fourth.status.ok());
  second.pass = ApiPass();
  auto fifth = admit(access, "t");
  ASSERT_EQ(fifth.status.error().code(), ErrorCode::resource_exhausted);
  EXPECT_NE(fifth.status.error().message().find("rate"), std::string::npos);
  EXPECT_TRUE(has(R"(ember_api_calls_in_flight{token="t"} 1)")) << metrics_text();  // the rate refusal held none
  EXPECT_TRUE(has(R"(ember_api_calls_total{token="t",outcome="concurrency_limited"} 2)")) << metrics_text();
  EXPECT_TRUE(has(R"(ember_api_calls_total{token="t",outcome="rate_limited"} 1)")) << metrics_text();
}

// Threads racing for concurrent=3: never a fourth call in flight, and every slot comes back.
TEST_F(ApiAccessTest, ThreadsRacingForSlotsNeverHoldMoreThanTheLimit) {
  ApiAccess access(tokens({"t concurrent=3 name=t"}), &instruments_);
  std::atomic<int> held{0}, most{0};
  std::atomic<int> admitted{0}, refused{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 2000; ++k) {
        auto a = access.admit("http", std::string_view("Bearer t"), ApiAction::infer, "mlp", Clock::now());
        if (!a.status.ok()) {
          ++refused;
          continue;
        }
        ++admitted;
        const int now = ++held;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::yield();
        --held;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(most.load(), 3);
  EXPECT_EQ(admitted + refused, 8000);
  EXPECT_TRUE(has(R"(ember_api_calls_in_flight{token="t"} 0)")) << metrics_text();
  EXPECT_TRUE(admit(access, "t").status.ok());
}

}  // namespace api_access_test
}  // namespace ember
