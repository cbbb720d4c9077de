// The service manager's readiness protocol (base/service_notify.hpp), against a socket of the test's
// own standing in for systemd: filesystem and abstract addresses, and no service manager at all.
#include "base/service_notify.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ember {
namespace service_notify_test {

/// A datagram socket bound at `path` ('@' first: abstract), as systemd's notify socket is.
class FakeManager {
 public:
  explicit FakeManager(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    if (path[0] == '@') addr.sun_path[0] = '\0';
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len), 0) << std::strerror(errno);
    ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  }
  ~FakeManager() {
    ::unsetenv("NOTIFY_SOCKET");
    ::close(fd_);
    if (path_[0] == '/') ::unlink(path_.c_str());
  }
  std::string receive() {
    char buf[512];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
  }

 private:
  std::string path_;
  int fd_ = -1;
};

TEST(ServiceNotify, ReadinessReachesAFilesystemOrAnAbstractSocket) {
  for (const std::string path :
       {"/tmp/ember-notify-" + std::to_string(::getpid()), "@ember-notify-" + std::to_string(::getpid())}) {
    FakeManager manager(path);
    ASSERT_TRUE(notify_service_manager("READY=1\nSTATUS=serving").ok()) << path;
    EXPECT_EQ(manager.receive(), "READY=1\nSTATUS=serving") << path;
    ASSERT_TRUE(notify_service_manager("STOPPING=1").ok());
    EXPECT_EQ(manager.receive(), "STOPPING=1");
  }
}

TEST(ServiceNotify, WithoutAServiceManagerNothingHappensAndABadSocketIsAnError) {
  ::unsetenv("NOTIFY_SOCKET");
  EXPECT_TRUE(notify_service_manager("READY=1").ok());
  ::setenv("NOTIFY_SOCKET", "relative/path", 1);
  auto bad = notify_service_manager("READY=1");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("neither an absolute path nor an abstract socket"), std::string::npos);
  ::setenv("NOTIFY_SOCKET", "/nonexistent/notify.sock", 1);
  auto gone = notify_service_manager("READY=1");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code(), ErrorCode::io_error);
  ::unsetenv("NOTIFY_SOCKET");
}

}  // namespace service_notify_test
}  // namespace ember
