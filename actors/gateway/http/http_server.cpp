// cpp-httplib's server with a bounded connection queue (see http_server.hpp).
#include "actors/gateway/http/http_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "actors/gateway/http/tls_context.hpp"
#include "base/work_queue.hpp"

namespace ember {

namespace {

/// Set on the accept thread while it runs a connection's closure to refuse it.
thread_local bool t_refusing = false;

/// The socket a serving thread serves (client_gone()); INVALID_SOCKET elsewhere.
thread_local socket_t t_serving = INVALID_SOCKET;

/// Sets t_serving for a scope.
class ServingSocket {
 public:
  explicit ServingSocket(socket_t sock) { t_serving = sock; }
  ~ServingSocket() { t_serving = INVALID_SOCKET; }
  ServingSocket(const ServingSocket&) = delete;
  ServingSocket& operator=(const ServingSocket&) = delete;
};

template <class F>
ssize_t retry_on_eintr(F f) {
  for (;;) {
    const ssize_t r = f();
    if (r >= 0 || errno != EINTR) return r;
  }
}

int poll_one(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  return static_cast<int>(retry_on_eintr([&] { return static_cast<ssize_t>(::poll(&p, 1, timeout_ms)); }));
}

int millis(time_t sec, time_t usec) { return static_cast<int>(sec * 1000 + usec / 1000); }

void ip_and_port(int fd, bool remote, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  if ((remote ? ::getpeername(fd, sa, &len) : ::getsockname(fd, sa, &len)) != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    port = ntohs(in6->sin6_port);
  }
  ip = text;
}

std::string refusal_answer(const std::string& body) {
  return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
         "Connection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace

/// httplib's SocketStream with fewer system calls per request, each read and write still bounded
/// by its timeout: reads go through a 4 KiB buffer (the request line reader asks for one byte at a
/// time) and skip the wait for input when serve_on() has just seen it arrive; a write is tried at
/// once and waits for room only when the socket has none; a response's header block (one with a
/// Content-Length) is held and sent together with the body that follows it, as one segment
/// (flush() sends what is held when no body follows); the peer's and our own address are looked up
/// once per connection. What httplib does besides (a readability check before every write) it
/// leaves out: a write to a peer that closed fails by itself.
class HttpServer::SocketStream final : public httplib::Stream {
 public:
  SocketStream(socket_t sock, int read_timeout_ms, int write_timeout_ms)
      : sock_(sock), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms), buffer_(kBufferBytes) {}

  bool buffered() const { return offset_ < size_; }
  /// The socket has input (serve_on() polled it): the next read need not wait for it.
  void input_arrived() { arrived_ = true; }

  bool is_readable() const override { return buffered() || poll_one(sock_, POLLIN, read_timeout_ms_) > 0; }

  bool is_writable() const override { return poll_one(sock_, POLLOUT, write_timeout_ms_) > 0; }

  ssize_t read(char* ptr, size_t size) override {
    if (buffered()) {
      const size_t n = std::min(size, size_ - offset_);
      std::memcpy(ptr, buffer_.data() + offset_, n);
      offset_ += n;
      return static_cast<ssize_t>(n);
    }
    if (!std::exchange(arrived_, false) && !is_readable()) return -1;
    offset_ = size_ = 0;
    if (size >= kBufferBytes) return retry_on_eintr([&] { return ::recv(sock_, ptr, size, 0); });
    const ssize_t n = retry_on_eintr([&] { return ::recv(sock_, buffer_.data(), kBufferBytes, 0); });
    if (n <= 0) return n;
    const size_t got = static_cast<size_t>(n);
    const size_t give = std::min(size, got);
    std::memcpy(ptr, buffer_.data(), give);
    offset_ = give;
    size_ = got;
    return static_cast<ssize_t>(give);
  }

  ssize_t write(const char* ptr, size_t size) override {
    const std::string_view data(ptr, size);
    if (held_.empty() && data.size() <= kBufferBytes && data.substr(0, 5) == "HTTP/" && data.size() >= 4 &&
        data.substr(data.size() - 4) == "\r\n\r\n" && holds_length(data)) {
      held_.assign(data);
      return static_cast<ssize_t>(size);
    }
    if (held_.empty()) return send_some(ptr, size);
    // The held header block first, then as much of this as the socket takes in the same call.
    iovec parts[2] = {{held_.data(), held_.size()}, {const_cast<char*>(ptr), size}};
    const ssize_t n = send_parts(parts, 2);
    if (n < 0) return n;
    const size_t sent = static_cast<size_t>(n);
    if (sent >= held_.size()) {
      const size_t body = sent - held_.size();
      held_.clear();
      return static_cast<ssize_t>(body);
    }
    held_.erase(0, sent);
    if (!flush()) return -1;
    return send_some(ptr, size);
  }

  /// Sends a held header block; false when the socket fails or stays full past the timeout.
  bool flush() {
    while (!held_.empty()) {
      const ssize_t n = send_some(held_.data(), held_.size());
      if (n <= 0) return false;
      held_.erase(0, static_cast<size_t>(n));
    }
    return true;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    if (!remote_) remote_ = lookup(true);
    ip = remote_->first;
    port = remote_->second;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    if (!local_) local_ = lookup(false);
    ip = local_->first;
    port = local_->second;
  }
  socket_t socket() const override { return sock_; }

 private:
  static constexpr size_t kBufferBytes = 4096;

  static bool holds_length(std::string_view header) {
    constexpr std::string_view kName = "\r\ncontent-length:";
    auto it = std::search(header.begin(), header.end(), kName.begin(), kName.end(),
                          [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
    return it != header.end();
  }

  std::pair<std::string, int> lookup(bool remote) const {
    std::pair<std::string, int> out{std::string(), 0};
    ip_and_port(sock_, remote, out.first, out.second);
    return out;
  }

  ssize_t send_some(const char* ptr, size_t size) {
    iovec part{const_cast<char*>(ptr), size};
    return send_parts(&part, 1);
  }

  /// One sendmsg without waiting; when the socket has no room, waits for it (the write timeout).
  ssize_t send_parts(iovec* parts, size_t count) {
    msghdr msg{};
    msg.msg_iov = parts;
    msg.msg_iovlen = count;
    for (bool waited = false;; waited = true) {
      const ssize_t n = retry_on_eintr([&] { return ::sendmsg(sock_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT); });
      if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK) || waited) return n;
      if (!is_writable()) return -1;
    }
  }

  const socket_t sock_;
  const int read_timeout_ms_;
  const int write_timeout_ms_;
  std::vector<char> buffer_;
  size_t offset_ = 0;
  size_t size_ = 0;
  bool arrived_ = false;
  std::string held_;  // a response's header block waiting for its body
  mutable std::optional<std::pair<std::string, int>> remote_, local_;
};

/// A connection after its TLS handshake: the same timeouts, reads and writes through OpenSSL (which
/// keeps what it decrypted ahead: buffered()). The socket stays blocking with SO_RCVTIMEO and
/// SO_SNDTIMEO at the stream's timeouts, so that a record that never completes cannot hold a thread.
class HttpServer::TlsStream final : public httplib::Stream {
 public:
  TlsStream(socket_t sock, SSL* ssl, int read_timeout_ms, int write_timeout_ms)
      : sock_(sock), ssl_(ssl), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms) {}

  bool buffered() const { return SSL_pending(ssl_) > 0; }
  bool is_readable() const override { return buffered() || poll_one(sock_, POLLIN, read_timeout_ms_) > 0; }
  bool is_writable() const override { return poll_one(sock_, POLLOUT, write_timeout_ms_) > 0; }

  ssize_t read(char* ptr, size_t size) override {
    if (!is_readable()) return -1;
    const int n = SSL_read(ssl_, ptr, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
    if (n > 0) return n;
    return SSL_get_error(ssl_, n) == SSL_ERROR_ZERO_RETURN ? 0 : -1;
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    const int n = SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
    return n > 0 ? n : -1;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { ip_and_port(sock_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { ip_and_port(sock_, false, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  const socket_t sock_;
  SSL* const ssl_;
  const int read_timeout_ms_;
  const int write_timeout_ms_;
};

/// The bounded queue between the accept thread and the serving threads (see the header).
class HttpServer::ConnectionQueue final : public httplib::TaskQueue {
 public:
  explicit ConnectionQueue(HttpServer& server)
      : server_(server),
        work_(std::make_unique<WorkQueue>(
            WorkQueueOptions{.threads = server.options_.threads, .capacity = server.options_.max_queued})) {}

  void enqueue(std::function<void()> serve) override {
    if (work_ && work_->try_post(serve)) return;
    server_.refused_.fetch_add(1, std::memory_order_relaxed);
    if (server_.options_.on_refused) server_.options_.on_refused();
    t_refusing = true;
    serve();  // process_and_close_socket sees the flag and refuses
    t_refusing = false;
  }

  /// Serves what is queued (the serving loop closes those at once: the server socket is closed),
  /// then joins the threads.
  void shutdown() override { work_.reset(); }

 private:
  HttpServer& server_;
  std::unique_ptr<WorkQueue> work_;
};

HttpServer::HttpServer(HttpServerOptions options)
    : options_(std::move(options)), refusal_(refusal_answer(options_.refusal_body)) {
  new_task_queue = [this] { return new ConnectionQueue(*this); };
}

HttpServer::~HttpServer() { stop_listening(); }

void HttpServer::start_listening() {
  listener_ = std::thread([this] {
    listen_after_bind();
    listener_done_ = true;
  });
}

void HttpServer::stop_listening() {
  if (!listener_.joinable()) return;
  // httplib's stop() acts only while the accept loop runs (it set is_running()): earlier, it would
  // do nothing, and the loop would then block in accept() for good.
  while (!listener_done_ && !is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  stop();
  listener_.join();
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  if (t_refusing) {
    refuse(sock);
    return true;
  }
  return serve(sock);
}

bool HttpServer::client_gone() {
  if (t_serving == INVALID_SOCKET) return false;
  pollfd p{t_serving, POLLRDHUP, 0};
  if (retry_on_eintr([&] { return static_cast<ssize_t>(::poll(&p, 1, 0)); }) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

bool HttpServer::serve(socket_t sock) {
  const ServingSocket serving(sock);
  const int read_ms = millis(read_timeout_sec_, read_timeout_usec_);
  const int write_ms = millis(write_timeout_sec_, write_timeout_usec_);
  bool ok = false;
  if (options_.tls) {
    const timeval rt{read_ms / 1000, (read_ms % 1000) * 1000}, wt{write_ms / 1000, (write_ms % 1000) * 1000};
    ::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof(rt));
    ::setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &wt, sizeof(wt));
    SSL* ssl = SSL_new(options_.tls->ctx.get());
    if (ssl && SSL_set_fd(ssl, sock) == 1 && SSL_accept(ssl) == 1) {
      TlsStream strm(sock, ssl, read_ms, write_ms);
      ok = serve_on(strm, sock);
      SSL_shutdown(ssl);
    } else {
      ERR_clear_error();  // a client that is no TLS client, or one without an accepted certificate
    }
    if (ssl) SSL_free(ssl);
  } else {
    SocketStream strm(sock, read_ms, write_ms);
    ok = serve_on(strm, sock);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

template <class Stream>
bool HttpServer::serve_on(Stream& strm, socket_t sock) {
  const auto keep_alive = std::chrono::seconds(keep_alive_timeout_sec_);
  bool ok = false;
  for (size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
    // Wait for the next request as httplib's keep_alive() does, but notice stop() meanwhile.
    const auto since = std::chrono::steady_clock::now();
    bool arrived = strm.buffered();
    while (!arrived) {
      const int r = poll_one(sock, POLLIN, 100);
      if (r > 0) {
        arrived = true;
        if constexpr (std::is_same_v<Stream, SocketStream>) strm.input_arrived();
      } else if (r < 0 || svr_sock_ == INVALID_SOCKET || std::chrono::steady_clock::now() - since > keep_alive) {
        break;
      }
    }
    if (!arrived) break;
    bool closed = false;
    ok = process_request(strm, left == 1, closed, nullptr);
    if constexpr (std::is_same_v<Stream, SocketStream>) ok = strm.flush() && ok;
    if (!ok || closed) break;
  }
  return ok;
}

void HttpServer::refuse(socket_t sock) {
  if (options_.tls) {  // no handshake on the accept thread: the client sees the connection close
    ::close(sock);
    return;
  }
  // A new socket's send buffer is empty and far larger than the answer: this send takes it whole.
  (void)::send(sock, refusal_.data(), refusal_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  char sink[4096];
  for (int i = 0; i < 16 && ::recv(sock, sink, sizeof(sink), MSG_DONTWAIT) > 0; ++i) {
  }
  ::shutdown(sock, SHUT_WR);
  ::close(sock);
}

bool HttpServer::set_backlog(int backlog) { return svr_sock_ != INVALID_SOCKET && ::listen(svr_sock_, backlog) == 0; }

}  // namespace ember
