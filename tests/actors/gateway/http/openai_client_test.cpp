// OpenAI's official Node client (npm `openai`, pinned in deploy/setup.sh) against a real
// HttpFrontend on loopback in front of a scripted GenerationService: openai_client_check.js lists
// the models, asks for completions and chat completions, whole and streamed (usage, logprobs), and
// checks that the client parses every answer and chunk, raises the right error classes before the
// first token and an APIError for an error event after it. Skipped, saying why, without node or
// without the package.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "actors/gateway/gateway_client.hpp"
#include "actors/gateway/gateway_instruments.hpp"
#include "actors/gateway/http/http_frontend.hpp"
#include "tests/actors/actor_test_util.hpp"
#include "tests/actors/gateway/scripted_generation.hpp"

namespace ember {
namespace openai_client_test {

using testing::GenerationScript;
using testing::ScriptedGeneration;
using testing::script_of;

/// What openai_client_check.js expects the service to answer.
GenerationScript scripted(const generate_request& r) {
  if (r.model.name != "gpt2") {
    GenerationScript s;
    s.refuse = not_found("unknown model '" + r.model.name + "'");
    return s;
  }
  if (r.kind == PromptKind::chat && r.messages.back().content == "fail after one") {
    GenerationScript s = script_of({"Hello", " world"});
    s.chunks[1].finish = FinishReason::error;
    s.chunks[1].error = {ErrorCode::unavailable, "node lost"};
    return s;
  }
  GenerationScript s = script_of({"Hello", ",", " world"}, FinishReason::stop, 4);
  if (r.logprobs) {
    for (auto& c : s.chunks) {
      token_logprobs t{{c.tokens[0], c.text, -0.5f}, {}};
      for (uint32_t k = 0; k < r.top_logprobs; ++k) t.top.push_back({static_cast<int32_t>(k), "alt" + std::to_string(k), -1.0f});
      c.logprobs = {t};
    }
  }
  return s;
}

/// `command`'s exit status and output (stdout and stderr).
std::pair<int, std::string> run(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return {-1, "popen failed"};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(OpenAiClient, TheOfficialNodeClientParsesEveryAnswerAndChunk) {
  if (std::system("command -v node >/dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed (deploy/setup.sh)";
  auto sys = testing::make_system();
  GatewayInstruments instruments;
  GatewayConfig config;
  config.http = {"127.0.0.1", 0};
  config.http_threads = 4;
  auto service = std::make_shared<ScriptedGeneration>(scripted);
  auto frontend = HttpFrontend::start(std::make_shared<GatewayClient>(*sys, config, gateway_actor{},
                                                                      std::make_shared<RoutingView>(), &instruments),
                                      &instruments, nullptr, service);
  ASSERT_TRUE(frontend.ok()) << frontend.error().message();
  const std::string script = std::string(EMBER_SOURCE_DIR) + "/tests/actors/gateway/http/openai_client_check.js";
  const auto [status, output] = run("node " + script + " --port " + std::to_string((*frontend)->port()));
  (*frontend)->stop();
  if (status == 77) GTEST_SKIP() << output;
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find(R"("checked":["models","completion","completion stream","chat","chat stream",)"
                        R"("errors before the first token","error after the first token"])"),
            std::string::npos)
      << output;
  std::printf("%s", output.c_str());
}

}  // namespace openai_client_test
}  // namespace ember
