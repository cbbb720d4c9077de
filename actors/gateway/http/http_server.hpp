// HttpServer: cpp-httplib's server with a bounded connection queue. The HTTP front end
// (http_frontend.cpp) registers its routes on it.
//
// cpp-httplib's accept thread hands each connection to a TaskQueue, and a thread then serves that
// connection for as long as the client keeps it alive. Its own ThreadPool queues connections
// without bound. Here:
//
//   accept thread ──▶ [ at most max_queued connections wait ] ──▶ `threads` threads, one connection each
//        │ queue full
//        └──▶ refuse: "503", Retry-After: 1, {"error": ...}, close; on_refused() counts it
//
// Overflow policy: reject the newest connection. The refusal runs on the accept thread and never
// blocks there: one non-blocking send of a fixed answer into the new socket's empty send buffer,
// a bounded non-blocking drain of what the client has already sent (so that closing sends FIN
// rather than RST), close. A client whose request arrives only after the close may see a reset
// instead of the answer; either way it learns to come back later.
//
// How: TaskQueue::enqueue receives only a closure that serves the socket, but refusing needs the
// socket. So HttpServer overrides process_and_close_socket, as httplib's own SSLServer does, and
// serves a connection with its own stream (the same buffered reads and timeouts as httplib's
// SocketStream) around httplib's process_request; when the queue is full, the queue runs the
// closure on the accept thread in "refuse" mode (a thread-local flag), which answers 503 instead.
// One difference from httplib's loop: a connection waiting for its next keep-alive request notices
// stop() within 100 ms, instead of when the keep-alive timeout ends.
//
// Listening: start_listening() after binding runs the accept loop on a thread of its own, and
// stop_listening() (or the destructor) ends it. Not httplib's stop() alone: it does nothing until
// the accept loop has started (is_running()), so a stop that came right after the thread was
// started left the loop blocked in accept() for good, and whoever joined the thread with it.
//
// Thread-safety: as httplib::Server (configure, then listen on one thread, stop from any).
// refused() is safe from any thread. Invariant: every accepted socket is closed exactly once, by
// a worker (served) or by the accept thread (refused).
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace ember {

struct TlsContext;

struct HttpServerOptions {
  /// Threads serving connections (gateway.http_threads).
  size_t threads = 8;
  /// Connections that may wait for a thread (gateway.http_queue); at least 1.
  size_t max_queued = 256;
  /// The JSON body of a refusal.
  std::string refusal_body = R"({"error":"the server is at its connection limit; retry later"})";
  /// Called on the accept thread for each refused connection; must not block (a counter).
  std::function<void()> on_refused;
  /// Serve TLS only (tls_context.hpp): each connection's handshake runs on its serving thread,
  /// bounded by the read timeout; a failed one closes the connection. Null: plain HTTP.
  std::shared_ptr<const TlsContext> tls;
};

class HttpServer : public httplib::Server {
 public:
  explicit HttpServer(HttpServerOptions options);
  /// stop_listening().
  ~HttpServer() override;

  /// After binding: the accept loop (listen_after_bind) on a thread of its own. Once.
  void start_listening();
  /// Ends the accept loop started by start_listening() and joins its thread: waits for the loop to
  /// run (or to have ended) before stopping it. Nothing when not listening.
  void stop_listening();

  /// Connections refused so far.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  /// On a serving thread, inside a handler or a content provider: whether the client of the
  /// connection this thread serves has closed it or reset it (a FIN counts: an HTTP client waiting
  /// for its answer does not half-close). Never blocks (one poll with no wait). False on any other
  /// thread. A long answer (a generation) asks this while it waits, to stop work nobody will read.
  static bool client_gone();
  /// True before binding and once stop() was called: a handler that waits lets go (httplib's
  /// is_running() stays true until every serving thread has returned).
  bool stopped() const { return svr_sock_ == INVALID_SOCKET; }
  /// After binding: the kernel's queue of connections not accepted yet holds `backlog` (cpp-httplib
  /// listens with 5, so a burst of new connections lost SYNs and waited out TCP's 1 s retransmit).
  /// False when the socket is not bound or listen() refused.
  bool set_backlog(int backlog);

 private:
  class ConnectionQueue;
  class SocketStream;
  class TlsStream;

  bool process_and_close_socket(socket_t sock) override;
  /// httplib's keep-alive loop: requests on `sock` until the client, a limit or stop() ends it.
  bool serve(socket_t sock);
  template <class Stream>
  bool serve_on(Stream& strm, socket_t sock);
  /// The 503 answer on the accept thread (see the header); never blocks.
  void refuse(socket_t sock);

  const HttpServerOptions options_;
  const std::string refusal_;  // the whole HTTP answer, built once
  std::atomic<uint64_t> refused_{0};
  std::thread listener_;
  std::atomic<bool> listener_done_{false};
};

}  // namespace ember
