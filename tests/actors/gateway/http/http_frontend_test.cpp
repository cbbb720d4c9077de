// The HTTP front end over raw sockets, in front of a fake gateway actor: exactly the bytes curl
// sends for `curl -X POST URL` (no Content-Length, no body) reach every endpoint whose body is
// optional; framed bodies still arrive; errors cpp-httplib answers itself say what was wrong; and
// a connection past gateway.http_queue is answered 503 with Retry-After at once and counted.
#include "actors/gateway/http/http_frontend.hpp"
#include "actors/gateway/http/http_server.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/typed_event_based_actor.hpp>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "actors/gateway/gateway_client.hpp"
#include "actors/gateway/gateway_instruments.hpp"
#include "tests/actors/actor_test_util.hpp"

namespace ember {
namespace http_frontend_test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

/// What the fake gateway was asked, in order.
struct Calls {
  std::mutex mu;
  std::vector<std::string> seen;
  std::string metrics = "ember_fake 1\n";  // what /metrics answers
  void add(std::string s) {
    std::lock_guard lock(mu);
    seen.push_back(std::move(s));
  }
  std::vector<std::string> take() {
    std::lock_guard lock(mu);
    return std::exchange(seen, {});
  }
};

std::string describe(const distribute_request& r) {
  std::string s = r.model.to_string() + " " + std::string(to_string(r.mode));
  for (const auto& n : r.nodes) s += " " + n;
  return s;
}

gateway_actor::behavior_type fake_gateway(gateway_actor::pointer, std::shared_ptr<Calls> calls) {
  return {
      [calls](infer_request& req) -> caf::result<infer_reply> {
        calls->add("infer " + req.model.to_string());
        infer_reply r;
        r.model = {req.model.name, 1};
        r.id = req.id;
        r.outputs = req.inputs;
        return r;
      },
      [](routing_update&) {},
      [](workflow_request&) -> caf::result<infer_reply> { return to_caf(unavailable("no node")); },
      [calls](metrics_atom) -> caf::result<std::string> {
        std::lock_guard lock(calls->mu);
        return calls->metrics;
      },
      [calls](load_atom, model_command& c) -> caf::result<model_state> {
        calls->add("load " + c.model.name + " " + std::to_string(c.replicas));
        return model_state{c.model, ModelReadiness::ready, "", false, 1};
      },
      [calls](unload_atom, model_command& c) -> caf::result<model_state> {
        calls->add("unload " + c.model.name + " " + std::to_string(c.replicas));
        return model_state{c.model, ModelReadiness::unloaded, "", true, 0};
      },
      [calls](index_atom) -> caf::result<std::vector<model_state>> {
        calls->add("index");
        return std::vector<model_state>{{{"mlp", 1}, ModelReadiness::ready, "", false, 1}};
      },
      [calls](distribute_atom, distribute_request& r) -> caf::result<distribute_result> {
        calls->add("distribute " + describe(r));
        distribute_result out;
        out.model = r.model;
        out.mode = r.mode;
        return out;
      },
      [calls](evict_atom, distribute_request& r) -> caf::result<distribute_result> {
        calls->add("evict " + describe(r));
        distribute_result out;
        out.model = r.model;
        out.evicted = true;
        return out;
      },
      [](expire_atom, uint64_t) {},
      [](ensure_atom, const model_key&) {},
      [](scale_atom) {},
      [](manager_atom, caf::actor&) {},
      resume_offloaded(),
  };
}

struct Reply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  double seconds = 0;
  bool closed = false;  // the server closed the connection after the answer
};

/// A client connection that sends raw bytes and reads one answer at a time.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }
  ~RawConnection() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  void send(const std::string& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }

  /// The header block of an answer without a body (HEAD, 100 Continue); empty past `limit`.
  std::string read_head(std::chrono::milliseconds limit = 3000ms) {
    const auto start = Clock::now();
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill(start + limit)) return {};
    }
    std::string head = buffer_.substr(0, end + 4);
    buffer_.erase(0, end + 4);
    return head;
  }

  /// One answer, waiting at most `limit` in all (far below httplib's 5 s read timeout).
  Reply read_reply(std::chrono::milliseconds limit = 3000ms) {
    Reply r;
    const auto start = Clock::now();
    size_t header_end;
    while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill(start + limit)) return r;
    }
    const std::string head = buffer_.substr(0, header_end);
    size_t line_end = head.find("\r\n");
    r.status = std::stoi(head.substr(9, 3));
    while (line_end != std::string::npos) {
      const size_t next = head.find("\r\n", line_end + 2);
      const std::string line =
          head.substr(line_end + 2, next == std::string::npos ? std::string::npos : next - line_end - 2);
      const size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (auto& c : name) c = static_cast<char>(std::tolower(c));
      r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
      line_end = next;
    }
    const size_t length = r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
    while (buffer_.size() < header_end + 4 + length) {
      if (!fill(start + limit)) return r;
    }
    r.body = buffer_.substr(header_end + 4, length);
    buffer_.erase(0, header_end + 4 + length);
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (r.headers["connection"] == "close") r.closed = !fill(start + limit);
    return r;
  }

 private:
  /// Reads more; false at EOF, on an error or past `deadline`.
  bool fill(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd_, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string buffer_;
};

std::string error_of(const Reply& r) {
  auto j = json::parse(r.body, nullptr, false);
  EXPECT_TRUE(j.is_object() && j.contains("error")) << "HTTP " << r.status << " without a JSON error: " << r.body;
  return j.is_object() && j.contains("error") ? j["error"].get<std::string>() : std::string();
}

/// API tokens as lines of gateway.api_tokens_file (base/token_file.hpp), named line-1, line-2, ...
std::vector<ApiToken> tokens(std::initializer_list<std::string_view> lines) {
  std::vector<ApiToken> out;
  for (std::string_view line : lines) {
    auto t = parse_api_token(line, "line-" + std::to_string(out.size() + 1));
    EXPECT_TRUE(t.ok()) << line;
    if (t.ok()) out.push_back(*t);
  }
  return out;
}

class HttpFrontendTest : public ::testing::Test {
 protected:
  void start(uint32_t threads = 4, uint32_t queue = 16, std::vector<ApiToken> tokens = {}) {
    GatewayConfig config;
    config.http = {"127.0.0.1", 0};
    config.http_threads = threads;
    config.http_queue = queue;
    config.max_body_bytes = 1024;
    gateway_ = sys_->spawn(fake_gateway, calls_);
    auto f = HttpFrontend::start(std::make_shared<GatewayClient>(*sys_, config, gateway_, view_, &instruments_,
                                                                 std::vector<LocalNode>{}, std::move(tokens)),
                                 &instruments_);
    ASSERT_TRUE(f.ok()) << f.error().message();
    frontend_ = std::move(*f);
  }
  void TearDown() override {
    if (frontend_) frontend_->stop();
    caf::anon_send_exit(gateway_, caf::exit_reason::user_shutdown);
  }

  uint16_t port() const { return frontend_->port(); }
  std::string host() const { return "Host: 127.0.0.1:" + std::to_string(port()) + "\r\n"; }
  /// Exactly what `curl -X POST http://127.0.0.1:PORT<path>` sends: no Content-Length, no body.
  std::string curl_post(const std::string& path) const {
    return "POST " + path + " HTTP/1.1\r\n" + host() + "User-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n";
  }
  std::string post_with_body(const std::string& path, const std::string& body) const {
    return "POST " + path + " HTTP/1.1\r\n" + host() +
           "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  }
  std::string get(const std::string& path, const std::string& extra = "") const {
    return "GET " + path + " HTTP/1.1\r\n" + host() + extra + "\r\n";
  }
  Reply exchange(const std::string& request) {
    RawConnection c(port());
    c.send(request);
    return c.read_reply();
  }
  uint64_t rejected_in_metrics() {
    const std::string text = metrics::render(instruments_.registry().snapshot());
    const std::string name = "\nember_http_rejected_total ";
    const size_t at = text.find(name);
    EXPECT_NE(at, std::string::npos) << text;
    return at == std::string::npos ? 0 : std::stoull(text.substr(at + name.size()));
  }

  std::unique_ptr<caf::actor_system> sys_ = testing::make_system();
  std::shared_ptr<Calls> calls_ = std::make_shared<Calls>();
  std::shared_ptr<RoutingView> view_ = std::make_shared<RoutingView>();
  GatewayInstruments instruments_;
  gateway_actor gateway_;
  std::unique_ptr<HttpFrontend> frontend_;
};

TEST_F(HttpFrontendTest, ABodylessPostAsCurlSendsItSucceedsAtOnceOnEveryEndpointWhoseBodyIsOptional) {
  start();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/v2/repository/index", "index"},
      {"/v2/repository/models/mlp/load", "load mlp 0"},
      {"/v2/repository/models/mlp/unload", "unload mlp 0"},
      {"/ember/v1/models/mlp/distribute", "distribute mlp/0 chain"},
      {"/ember/v1/models/mlp/evict", "evict mlp/0 chain"},
  };
  for (const auto& [path, call] : cases) {
    const Reply r = exchange(curl_post(path));
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    EXPECT_LT(r.seconds, 1.0) << path << " waited for a body that never comes";
    EXPECT_TRUE(json::parse(r.body, nullptr, false).is_structured()) << path << ": " << r.body;
    EXPECT_EQ(calls_->take(), std::vector<std::string>{call}) << path;
  }
}

TEST_F(HttpFrontendTest, BodylessPostsLeaveAKeepAliveConnectionReadyForTheNextRequest) {
  start();
  RawConnection c(port());
  for (const char* path : {"/v2/repository/index", "/v2/repository/models/mlp/load", "/ember/v1/models/mlp/evict"}) {
    c.send(curl_post(path));
    const Reply r = c.read_reply();
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
  }
  c.send(post_with_body("/v2/repository/models/mlp/load", R"({"parameters": {"replicas": 2}})"));
  EXPECT_EQ(c.read_reply().status, 200);
  EXPECT_EQ(calls_->take(), (std::vector<std::string>{"index", "load mlp 0", "evict mlp/0 chain", "load mlp 2"}));
}

// gateway.api_tokens_file: the health checks stay open; everything else needs a bearer token: none or
// a malformed one is 401 with WWW-Authenticate, an unknown one 403, both JSON and counted; a refused
// POST's body is read and dropped, so its keep-alive connection serves the next request.
TEST_F(HttpFrontendTest, WithTokensEveryCallButTheHealthChecksNeedsOne) {
  start(4, 16, tokens({"s3cret-one", "s3cret-two admin"}));  // the second may also load
  const std::string good = "Authorization: Bearer s3cret-two\r\n";
  EXPECT_EQ(exchange(get("/v2/health/live")).status, 200);
  EXPECT_NE(exchange(get("/v2/health/ready")).status, 401);
  for (const std::string path : {"/v2", "/metrics", "/v2/models/mlp"}) {
    Reply none = exchange(get(path));
    EXPECT_EQ(none.status, 401) << path;
    EXPECT_EQ(none.headers["www-authenticate"], R"(Bearer realm="ember")") << path;
    EXPECT_NE(none.body.find("needs a bearer token"), std::string::npos) << none.body;
    EXPECT_EQ(exchange(get(path, "Authorization: Basic dXNlcjpwYXNz\r\n")).status, 401) << path;
    EXPECT_EQ(exchange(get(path, "Authorization: Bearer \r\n")).status, 401) << path;
    const Reply wrong = exchange(get(path, "Authorization: Bearer s3cret-on\r\n"));
    EXPECT_EQ(wrong.status, 403) << path;
    EXPECT_NE(wrong.body.find("not one of this gateway's"), std::string::npos) << wrong.body;
    EXPECT_NE(exchange(get(path, good)).status, 401) << path;
    EXPECT_NE(exchange(get(path, "authorization: bearer   s3cret-one  \r\n")).status, 403) << path;
  }
  RawConnection c(port());
  c.send(post_with_body("/v2/repository/models/mlp/load", R"({"parameters": {"replicas": 2}})"));
  const Reply refused = c.read_reply();
  EXPECT_EQ(refused.status, 401);
  EXPECT_FALSE(refused.closed);
  EXPECT_TRUE(calls_->take().empty());  // nothing reached the gateway
  c.send("POST /v2/repository/models/mlp/load HTTP/1.1\r\n" + host() + good +
         "Content-Type: application/json\r\nContent-Length: 31\r\n\r\n" + R"({"parameters": {"replicas": 2}})");
  EXPECT_EQ(c.read_reply().status, 200);
  EXPECT_EQ(calls_->take(), std::vector<std::string>{"load mlp 2"});
  const std::string text = metrics::render(instruments_.registry().snapshot());
  EXPECT_NE(text.find(R"(ember_auth_refusals_total{protocol="http",reason="unauthenticated"} 10)"), std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(ember_auth_refusals_total{protocol="http",reason="permission_denied"} 3)"), std::string::npos)
      << text;
}

// A token without the repository scope may infer and read (the index too) but not change what the
// cluster serves: load, unload, distribute and evict are 403 saying which scope they need, nothing
// reaches the gateway, and the refusals are counted as the token's; the admin token does each.
TEST_F(HttpFrontendTest, RepositoryChangesNeedATokenWithTheRepositoryScope) {
  start(4, 16, tokens({"reader-token", "writer-token admin"}));
  const std::string reader = "Authorization: Bearer reader-token\r\n";
  const std::string writer = "Authorization: Bearer writer-token\r\n";
  auto post_as = [&](const std::string& who, const std::string& path) {
    return exchange("POST " + path + " HTTP/1.1\r\n" + host() + who + "Content-Length: 0\r\n\r\n");
  };
  EXPECT_EQ(post_as(reader, "/v2/repository/index").status, 200);
  EXPECT_EQ(calls_->take(), std::vector<std::string>{"index"});
  const std::vector<std::pair<std::string, std::string>> changes = {
      {"/v2/repository/models/mlp/load", "load mlp 0"},
      {"/v2/repository/models/mlp/unload", "unload mlp 0"},
      {"/ember/v1/models/mlp/distribute", "distribute mlp/0 chain"},
      {"/ember/v1/models/mlp/evict", "evict mlp/0 chain"},
  };
  for (const auto& [path, call] : changes) {
    const Reply refused = post_as(reader, path);
    EXPECT_EQ(refused.status, 403) << path;
    EXPECT_NE(error_of(refused).find("needs the repository scope (a line 'TOKEN repository' or 'TOKEN admin' in "
                                     "gateway.api_tokens_file)"),
              std::string::npos)
        << refused.body;
    EXPECT_TRUE(calls_->take().empty()) << path << " reached the gateway";
    EXPECT_EQ(post_as("", path).status, 401) << path;
    EXPECT_EQ(post_as("Authorization: Bearer writer-tokenX\r\n", path).status, 403) << path;
    const Reply done = post_as(writer, path);
    EXPECT_EQ(done.status, 200) << path << ": " << done.body;
    EXPECT_EQ(calls_->take(), std::vector<std::string>{call}) << path;
  }
  const std::string text = metrics::render(instruments_.registry().snapshot());
  EXPECT_NE(text.find(R"(ember_api_calls_total{token="line-1",outcome="permission_denied"} 4)"), std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(ember_auth_refusals_total{protocol="http",reason="permission_denied"} 4)"), std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(ember_auth_refusals_total{protocol="http",reason="unauthenticated"} 4)"), std::string::npos)
      << text;
}

// infer=mlp: the token may infer on, and read, mlp alone; another model's inference, metadata and
// readiness are 403 naming the model, and so are /metrics and the repository's changes (scopes it
// did not name). Nothing refused reaches the gateway.
TEST_F(HttpFrontendTest, AScopedTokenMayUseOnlyTheModelsItNames) {
  start(4, 16, tokens({"tenant infer=mlp name=tenant-a"}));
  const std::string who = "Authorization: Bearer tenant\r\n";
  auto post_as = [&](const std::string& path) {
    return exchange("POST " + path + " HTTP/1.1\r\n" + host() + who + "Content-Length: 2\r\n\r\n{}");
  };
  EXPECT_NE(post_as("/v2/models/mlp/infer").status, 403);
  calls_->take();
  for (const std::string path : {"/v2/models/resnet/infer", "/v2/models/resnet/versions/2/infer"}) {
    const Reply r = post_as(path);
    EXPECT_EQ(r.status, 403) << path;
    EXPECT_NE(error_of(r).find("may not use model 'resnet'"), std::string::npos) << r.body;
  }
  EXPECT_NE(exchange(get("/v2/models/mlp", who)).status, 403);
  EXPECT_NE(exchange(get("/v2/models/mlp/ready", who)).status, 403);
  EXPECT_EQ(exchange(get("/v2/models/resnet", who)).status, 403);
  EXPECT_EQ(exchange(get("/v2/models/resnet/versions/1/ready", who)).status, 403);
  EXPECT_EQ(exchange(get("/v2/workflows/pipeline", who)).status, 403);
  EXPECT_EQ(exchange(get("/v2", who)).status, 200);  // the server's own metadata
  EXPECT_EQ(exchange(get("/metrics", who)).status, 403);
  EXPECT_EQ(post_as("/v2/repository/models/mlp/load").status, 403);
  EXPECT_TRUE(calls_->take().empty());
  const std::string text = metrics::render(instruments_.registry().snapshot());
  EXPECT_NE(text.find(R"(ember_api_calls_total{token="tenant-a",outcome="permission_denied"} 7)"), std::string::npos)
      << text;
}

// rate= over HTTP: past the burst the answer is 429 with Retry-After in whole seconds and a JSON
// error, held back until the token could call again (at most 1 s), before the body reaches the
// gateway; the keep-alive connection stays in step; another token is not touched; counted per token.
TEST_F(HttpFrontendTest, ATokenOverItsRateIsAnswered429WithRetryAfter) {
  start(4, 16, tokens({"slow rate=0.01 burst=2 name=slow", "fast"}));  // one call per 100 s after two
  const std::string slow = "Authorization: Bearer slow\r\n";
  RawConnection c(port());
  auto index_as = [&](const std::string& who) {
    c.send("POST /v2/repository/index HTTP/1.1\r\n" + host() + who + "Content-Length: 2\r\n\r\n{}");
    return c.read_reply();
  };
  EXPECT_EQ(index_as(slow).status, 200);
  EXPECT_EQ(index_as(slow).status, 200);
  Reply over = index_as(slow);
  EXPECT_EQ(over.status, 429);
  EXPECT_FALSE(over.closed);
  EXPECT_GE(over.seconds, 0.9);  // held back until the token could call again, at most 1 s
  const int64_t retry = std::stoll(over.headers["retry-after"]);
  EXPECT_GT(retry, 90);
  EXPECT_LE(retry, 100);
  EXPECT_NE(error_of(over).find("token slow is over its rate of 0.01 calls per second"), std::string::npos)
      << over.body;
  EXPECT_EQ(exchange(get("/v2", slow)).status, 429);  // every call counts, reads too
  EXPECT_EQ(index_as("Authorization: Bearer fast\r\n").status, 200);
  EXPECT_EQ(calls_->take(), (std::vector<std::string>{"index", "index", "index"}));
  const std::string text = metrics::render(instruments_.registry().snapshot());
  EXPECT_NE(text.find(R"(ember_api_calls_total{token="slow",outcome="rate_limited"} 2)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(ember_api_calls_total{token="slow",outcome="admitted"} 2)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(ember_api_calls_total{token="line-2",outcome="admitted"} 1)"), std::string::npos) << text;
}

TEST_F(HttpFrontendTest, BodiesFramedByContentLengthOrChunksArrive) {
  start();
  EXPECT_EQ(exchange(post_with_body("/v2/repository/models/mlp/load", R"({"parameters": {"replicas": 3}})")).status,
            200);
  const std::string body = R"({"mode": "unicast", "nodes": ["a", "b"]})";
  const std::string chunked = "POST /ember/v1/models/mlp/distribute HTTP/1.1\r\n" + host() +
                              "Transfer-Encoding: chunked\r\n\r\n" + "10\r\n" + body.substr(0, 16) + "\r\n" +
                              [&] {
                                char size[16];
                                std::snprintf(size, sizeof(size), "%zx", body.size() - 16);
                                return std::string(size);
                              }() +
                              "\r\n" + body.substr(16) + "\r\n0\r\n\r\n";
  EXPECT_EQ(exchange(chunked).status, 200);
  const Reply infer = exchange(
      post_with_body("/v2/models/mlp/versions/1/infer",
                     R"({"id": "r", "inputs": [{"name": "x", "datatype": "INT32", "shape": [2], "data": [4, 5]}]})"));
  ASSERT_EQ(infer.status, 200) << infer.body;
  EXPECT_EQ(json::parse(infer.body)["outputs"][0]["data"], json::parse("[4, 5]"));
  EXPECT_EQ(calls_->take(), (std::vector<std::string>{"load mlp 3", "distribute mlp/0 unicast a b", "infer mlp/1"}));
}

// The server's socket stream holds an answer's header block until its body follows and sends the two
// at once (http_server.cpp): answers without a body still go out at once (HEAD, the interim 100
// Continue, whose block has no Content-Length), and an answer larger than the socket's buffers
// reaches a client that reads it late, whole, on a connection that then serves the next request.
TEST_F(HttpFrontendTest, AnswersWithoutABodyGoOutAtOnceAndOneLargerThanTheSocketBuffersArrivesWhole) {
  start();
  RawConnection c(port());
  c.send("HEAD /v2/health/live HTTP/1.1\r\n" + host() + "\r\n");
  const std::string head = c.read_head(1000ms);
  EXPECT_EQ(head.substr(0, 15), "HTTP/1.1 200 OK") << head;

  const std::string body = R"({"parameters": {"replicas": 2}})";
  c.send("POST /v2/repository/models/mlp/load HTTP/1.1\r\n" + host() +
         "Expect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n");
  const std::string interim = c.read_head(1000ms);
  EXPECT_EQ(interim.substr(0, 21), "HTTP/1.1 100 Continue") << interim;
  c.send(body);
  EXPECT_EQ(c.read_reply().status, 200);
  EXPECT_EQ(calls_->take(), std::vector<std::string>{"load mlp 2"});

  std::string big;
  for (int i = 0; big.size() < (24u << 20); ++i) big += "ember_line_" + std::to_string(i) + " 1\n";
  {
    std::lock_guard lock(calls_->mu);
    calls_->metrics = big;
  }
  c.send(get("/metrics"));
  std::this_thread::sleep_for(300ms);  // 24 MiB is more than both sockets buffer: the server's sends meet a full one
  const Reply r = c.read_reply(20000ms);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body.size(), big.size());
  EXPECT_TRUE(r.body == big) << "the answer's bytes differ";
  c.send(get("/v2/health/ready"));
  EXPECT_NE(c.read_reply().status, 0) << "the connection did not serve the next request";
}

TEST_F(HttpFrontendTest, AnInferenceWithoutABodyOrWithABadModeIsAClearErrorAtTheEdge) {
  start();
  const Reply infer = exchange(curl_post("/v2/models/mlp/infer"));
  EXPECT_EQ(infer.status, 400);
  EXPECT_LT(infer.seconds, 1.0);
  EXPECT_EQ(error_of(infer), "the request body is empty; an inference request is a JSON object with 'inputs'");
  const Reply mode = exchange(post_with_body("/ember/v1/models/mlp/distribute", R"({"mode": "multicast"})"));
  EXPECT_EQ(mode.status, 400);
  EXPECT_EQ(error_of(mode), "mode must be chain, unicast or auto, not 'multicast'");
  EXPECT_TRUE(calls_->take().empty()) << "a bad body reached the gateway";
}

TEST_F(HttpFrontendTest, ErrorsHttplibAnswersItselfSayWhatWasWrong) {
  start();
  Reply r = exchange(get("/v2/no/such/thing"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(error_of(r), "no such endpoint: GET /v2/no/such/thing");
  r = exchange("GARBAGE\r\n\r\n");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_of(r),
            "the request is not valid HTTP/1.1: its request line, headers or body framing could not be read");
  r = exchange(get("/v2/" + std::string(9000, 'a')));
  EXPECT_EQ(r.status, 414);
  EXPECT_EQ(error_of(r), "the request line is longer than 8192 bytes");
  r = exchange(get("/v2", "Range: bytes=oops\r\n"));
  EXPECT_EQ(r.status, 416);
  EXPECT_EQ(error_of(r), "the Range header is malformed or cannot be satisfied");
  r = exchange(post_with_body("/v2/repository/models/mlp/load", std::string(2048, ' ')));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(error_of(r), "the request body exceeds the configured limit (gateway.max_body: 1.00 KiB)");
  const std::string big_chunk = "POST /v2/repository/models/mlp/load HTTP/1.1\r\n" + host() +
                                "Transfer-Encoding: chunked\r\n\r\n800\r\n" + std::string(2048, ' ') + "\r\n0\r\n\r\n";
  r = exchange(big_chunk);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(error_of(r), "the request body exceeds the configured limit (gateway.max_body: 1.00 KiB)");
  const std::string form = "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--b--\r\n";
  r = exchange("POST /v2/repository/models/mlp/load HTTP/1.1\r\n" + host() +
               "Content-Type: multipart/form-data; boundary=b\r\nContent-Length: " + std::to_string(form.size()) +
               "\r\n\r\n" + form);
  EXPECT_EQ(r.status, 415);
  EXPECT_EQ(error_of(r), "multipart/form-data bodies are not accepted; send the JSON document itself as the body");
  r = exchange(get("/v2/health/ready"));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers["retry-after"], "1");
  EXPECT_EQ(error_of(r), "the gateway has not received the routing table from the manager yet");
  EXPECT_TRUE(calls_->take().empty());
}

TEST_F(HttpFrontendTest, AConnectionPastTheQueueIsAnswered503WithRetryAfterAtOnceAndCounted) {
  start(/*threads=*/1, /*queue=*/1);
  ASSERT_EQ(rejected_in_metrics(), 0u);
  // A holds the only thread: after its answer the thread waits for A's next request (keep-alive).
  RawConnection a(port());
  a.send(get("/v2/health/live"));
  ASSERT_EQ(a.read_reply().status, 200);
  // B waits in the queue (its one place); C finds it full.
  RawConnection b(port());
  RawConnection c(port());
  c.send(get("/v2"));
  Reply refused = c.read_reply(1000ms);
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.headers["retry-after"], "1");
  EXPECT_EQ(refused.headers["content-type"], "application/json");
  EXPECT_EQ(error_of(refused),
            "the gateway is at its connection limit (1 HTTP threads busy, 1 connections waiting); retry later");
  EXPECT_TRUE(refused.closed);
  EXPECT_EQ(rejected_in_metrics(), 1u);
  // A leaves; B, which waited, is served.
  a.close();
  b.send(get("/v2"));
  const Reply served = b.read_reply();
  EXPECT_EQ(served.status, 200) << served.body;
  EXPECT_EQ(json::parse(served.body)["name"], "ember");
  EXPECT_EQ(rejected_in_metrics(), 1u);
}

TEST(HttpServer, AStopRightAfterTheAcceptLoopStartedEndsIt) {
  // httplib's stop() does nothing until the accept loop runs: a gateway stopped right after it
  // started (a test's cluster of 90 ms) once left its loop blocked in accept() and the process
  // waiting for it. Each round here would hang without HttpServer::stop_listening's wait.
  for (int round = 0; round < 200; ++round) {
    HttpServer server(HttpServerOptions{.threads = 1, .max_queued = 1});
    ASSERT_GT(server.bind_to_any_port("127.0.0.1"), 0);
    server.start_listening();
    server.stop_listening();
    EXPECT_FALSE(server.is_running());
  }
}

}  // namespace http_frontend_test
}  // namespace ember
