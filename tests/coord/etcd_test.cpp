// The etcd client and the leader lease (coord/) against a real etcd (Debian's etcd-server, started by
// each test on free loopback ports in a folder of its own). Skipped where /usr/bin/etcd is missing.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "coord/etcd_client.hpp"
#include "coord/leader_lease.hpp"

namespace ember::coord {
namespace etcd_test {

using namespace std::chrono_literals;
constexpr const char* kEtcd = "/usr/bin/etcd";

uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t n = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

/// One etcd member on loopback, stopped (SIGKILL) with the fixture.
class Etcd : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(kEtcd, X_OK) != 0) GTEST_SKIP() << kEtcd << " is not installed (Debian's etcd-server)";
    dir_ = std::filesystem::temp_directory_path() / ("ember-etcd-" + std::to_string(::getpid()) + "-" +
                                                      std::to_string(reinterpret_cast<uintptr_t>(this)));
    std::filesystem::create_directories(dir_);
    client_port_ = free_port();
    const uint16_t peer = free_port();
    const std::string client = "http://127.0.0.1:" + std::to_string(client_port_);
    const std::string peers = "http://127.0.0.1:" + std::to_string(peer);
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string log = (dir_ / "etcd.log").string();
      FILE* out = std::freopen(log.c_str(), "w", stderr);
      (void)out;
      ::execl(kEtcd, kEtcd, "--data-dir", (dir_ / "data").c_str(), "--listen-client-urls", client.c_str(),
              "--advertise-client-urls", client.c_str(), "--listen-peer-urls", peers.c_str(),
              "--initial-advertise-peer-urls", peers.c_str(), "--initial-cluster", ("default=" + peers).c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    EtcdClient probe = client_for();
    for (int i = 0; i < 100; ++i) {
      if (probe.get("/ember/probe").ok()) return;
      std::this_thread::sleep_for(100ms);
    }
    FAIL() << "etcd did not answer within 10 s (log in " << dir_ << ")";
  }
  void TearDown() override {
    stop();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  EtcdClient client_for() const { return EtcdClient({HostPort{"127.0.0.1", client_port_}}, 1s); }

  std::filesystem::path dir_;
  uint16_t client_port_ = 0;
  pid_t pid_ = -1;
};

TEST(Base64, RoundTripsEveryLengthAndRefusesWhatIsNotBase64) {
  EXPECT_EQ(base64_encode("ember/leader"), "ZW1iZXIvbGVhZGVy");
  for (const std::string& s : std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)}) {
    auto back = base64_decode(base64_encode(s));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, s);
  }
  EXPECT_FALSE(base64_decode("abc").ok());
  EXPECT_FALSE(base64_decode("ab!d").ok());
  EXPECT_FALSE(base64_decode("a=bc").ok());
}

TEST(EtcdClientOffline, NoEndpointAnsweringIsUnavailableNamingEach) {
  EtcdClient etcd({HostPort{"127.0.0.1", free_port()}, HostPort{"127.0.0.1", free_port()}}, 500ms);
  auto r = etcd.grant(5);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::unavailable);
  EXPECT_NE(r.error().message().find("no etcd endpoint answered"), std::string::npos) << r.error().message();
}

TEST_F(Etcd, ACreateIfAbsentHasOneWinnerAndFencedWritesFollowTheFence) {
  EtcdClient etcd = client_for();
  auto first = etcd.create_if_absent("/ember/t/leader", "m1", 0);
  ASSERT_TRUE(first.ok()) << first.error().message();
  EXPECT_TRUE(first->created);
  auto second = etcd.create_if_absent("/ember/t/leader", "m2", 0);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->created);
  ASSERT_TRUE(second->existing.has_value());
  EXPECT_EQ(second->existing->value, "m1");
  EXPECT_EQ(second->create_revision, first->create_revision);
  auto wrote = etcd.put_fenced("/ember/t/state/a", "1", "/ember/t/leader", first->create_revision);
  ASSERT_TRUE(wrote.ok());
  EXPECT_TRUE(*wrote);
  auto stale = etcd.put_fenced("/ember/t/state/a", "2", "/ember/t/leader", first->create_revision + 100);
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(*stale) << "a writer holding another fence is refused";
  auto kept = etcd.list("/ember/t/state/");
  ASSERT_TRUE(kept.ok());
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_EQ((*kept)[0].value, "1");
  auto gone = etcd.delete_fenced("/ember/t/state/a", "/ember/t/leader", first->create_revision);
  ASSERT_TRUE(gone.ok());
  EXPECT_TRUE(*gone);
  auto none = etcd.get("/ember/t/state/a");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_F(Etcd, AKeyBoundToALeaseGoesWithItAndAnExpiredLeaseIsNotRenewed) {
  EtcdClient etcd = client_for();
  auto lease = etcd.grant(2);
  ASSERT_TRUE(lease.ok()) << lease.error().message();
  ASSERT_TRUE(etcd.create_if_absent("/ember/t/k", "v", *lease).ok());
  auto ttl = etcd.keep_alive(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.error().message();
  EXPECT_GT(*ttl, 0);
  ASSERT_TRUE(etcd.revoke(*lease).ok());
  auto after = etcd.get("/ember/t/k");
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->has_value()) << "the key went with its lease";
  auto renewed = etcd.keep_alive(*lease);
  ASSERT_FALSE(renewed.ok());
  EXPECT_EQ(renewed.error().code(), ErrorCode::not_found);
}

TEST_F(Etcd, OneManagerLeadsTheOtherStandsByAndTakesOverWhenTheLeaderResigns) {
  EtcdClient ea = client_for(), eb = client_for();
  LeaderLease a(ea, {"/ember/t/leader", "10.0.0.1:7070", 2});
  LeaderLease b(eb, {"/ember/t/leader", "10.0.0.2:7070", 2});
  const auto now = LeaderLease::Clock::now();
  EXPECT_EQ(a.step(now), LeaderLease::Role::leader) << a.why();
  EXPECT_EQ(b.step(now), LeaderLease::Role::standby);
  EXPECT_EQ(b.leader(), "10.0.0.1:7070");
  EXPECT_GT(a.fence(), 0);
  EXPECT_EQ(b.fence(), 0);
  const int64_t first_fence = a.fence();
  EXPECT_EQ(a.step(now + 500ms), LeaderLease::Role::leader) << "renewed";
  a.resign();
  EXPECT_EQ(a.role(), LeaderLease::Role::lost);
  EXPECT_EQ(b.step(now + 1s), LeaderLease::Role::leader) << b.why();
  EXPECT_GT(b.fence(), first_fence);
  EXPECT_EQ(a.step(now + 2s), LeaderLease::Role::lost) << "lost is final: a new process campaigns again";
}

// The pause test at the lease's level: the leader stops stepping past its ttl (as a paused process
// does); the standby wins once etcd expires the lease; the old leader, resumed, finds itself lost at
// its first step and its writes under the old fence are refused.
TEST_F(Etcd, ALeaderPausedPastItsTtlIsFollowedAndFencedOutWhenItResumes) {
  EtcdClient ea = client_for(), eb = client_for();
  LeaderLease a(ea, {"/ember/t/leader", "a", 2});
  LeaderLease b(eb, {"/ember/t/leader", "b", 2});
  const auto t0 = LeaderLease::Clock::now();
  ASSERT_EQ(a.step(t0), LeaderLease::Role::leader) << a.why();
  const int64_t old_fence = a.fence();
  ASSERT_TRUE(*ea.put_fenced("/ember/t/state/x", "from a", "/ember/t/leader", old_fence));
  LeaderLease::Role rb = LeaderLease::Role::standby;
  for (int i = 0; i < 40 && rb != LeaderLease::Role::leader; ++i) {  // a is "paused": it takes no step
    std::this_thread::sleep_for(250ms);
    rb = b.step(LeaderLease::Clock::now());
  }
  ASSERT_EQ(rb, LeaderLease::Role::leader) << "the standby took over once the lease expired: " << b.why();
  const auto resumed = LeaderLease::Clock::now();
  EXPECT_FALSE(a.holds(resumed)) << "past its ttl by its own clock, before it even asks etcd";
  EXPECT_FALSE(*ea.put_fenced("/ember/t/state/x", "from a, late", "/ember/t/leader", old_fence))
      << "the old leader's write is fenced out";
  EXPECT_EQ(a.step(resumed), LeaderLease::Role::lost);
  EXPECT_NE(a.why().find("expired"), std::string::npos) << a.why();
  EXPECT_TRUE(*eb.put_fenced("/ember/t/state/x", "from b", "/ember/t/leader", b.fence()));
  EXPECT_EQ((*eb.get("/ember/t/state/x"))->value, "from b");
}

// A leader that cannot reach etcd stops leading ttl after its last renewal, by its own clock.
TEST_F(Etcd, ALeaderCutOffFromEtcdStopsLeadingAfterItsTtl) {
  EtcdClient ea = client_for();
  LeaderLease a(ea, {"/ember/t/leader", "a", 2});
  const auto t0 = LeaderLease::Clock::now();
  ASSERT_EQ(a.step(t0), LeaderLease::Role::leader) << a.why();
  stop();
  EXPECT_EQ(a.step(t0 + 1s), LeaderLease::Role::leader) << "within its ttl: still leading";
  EXPECT_TRUE(a.holds(t0 + 1s));
  EXPECT_EQ(a.step(t0 + 2s), LeaderLease::Role::lost);
  EXPECT_NE(a.why().find("no renewal"), std::string::npos) << a.why();
}

}  // namespace etcd_test
}  // namespace ember::coord
