#include "transport/tcp_blob_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include "transport/fetch_request.hpp"
#include "transport/frame.hpp"
#include "transport/frame_sender.hpp"

namespace ember::transport {

namespace {

using Clock = std::chrono::steady_clock;

/// An abort frame for a connection whose request was never read (transfer id 0), sent without
/// blocking. Best effort: the receiver may already be gone, and there is nothing more to tell it then.
void send_turn_away(int fd, const Error& error) {
  auto header = encode_frame_header(abort_frame(0, error));
  (void)::send(fd, header.data(), header.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

/// One frame: header and payload gathered into one sendmsg (through TLS when the stream is).
Status send_frame(Stream& stream, const FrameSender::Frame& f, std::chrono::milliseconds timeout) {
  iovec iov[2] = {{const_cast<uint8_t*>(f.header.data()), f.header.size()},
                  {const_cast<uint8_t*>(f.payload), f.payload_bytes}};
  return stream.write_all(iov, f.payload_bytes > 0 ? 2 : 1, timeout);
}

}  // namespace

struct BlobServer::Connection {
  Socket socket;
  std::thread thread;
  std::atomic<bool> done{false};
};

struct BlobServer::Lingering {
  Socket socket;
  Clock::time_point deadline;
};

// ---------------------------------------------------------------- lifecycle

Result<std::unique_ptr<BlobServer>> BlobServer::start(BlobServerOptions options, BlobLookup lookup) {
  EMBER_RETURN_IF_ERROR(check_server_options(options, lookup));
  EMBER_ASSIGN_OR_RETURN(Socket listener, listen_tcp(options.listen, 128));
  // Accepted sockets inherit the listener's buffer sizes, which must be set before the handshake.
  tune_socket(listener.fd(), options.socket_buffer_bytes);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC) != 0) {
    return io_error(std::string("blob server cannot create its wake pipe: ") + std::strerror(errno));
  }
  std::unique_ptr<BlobServer> server(
      new BlobServer(std::move(options), std::move(lookup), std::move(listener), pipe_fds[0], pipe_fds[1]));
  try {
    server->acceptor_ = std::thread([s = server.get()] { s->accept_loop(); });
  } catch (const std::system_error& e) {
    return io_error(std::string("blob server cannot start its acceptor thread: ") + e.what());
  }
  return server;
}

BlobServer::BlobServer(BlobServerOptions options, BlobLookup lookup, Socket listener, int wake_read, int wake_write)
    : options_(std::move(options)),
      lookup_(std::move(lookup)),
      listener_(std::move(listener)),
      port_(local_port(listener_.fd())),
      wake_read_(wake_read),
      wake_write_(wake_write) {}

BlobServer::~BlobServer() { stop(); }

void BlobServer::stop() {
  std::lock_guard stop_lock(stop_mutex_);
  if (stopped_) return;
  stopping_.store(true);
  wake();
  if (acceptor_.joinable()) acceptor_.join();
  // shutdown, not close: it wakes a transfer blocked in sendmsg or poll at once, and the
  // descriptor stays valid (and not reusable by another open) until its thread is joined.
  connections_.for_each([](Connection& c) { ::shutdown(c.socket.fd(), SHUT_RDWR); });
  connections_.reap(/*all=*/true);
  listener_.close();
  ::close(wake_read_);
  ::close(wake_write_);
  stopped_ = true;
}

void BlobServer::wake() {
  const char byte = 1;
  // A full pipe already guarantees a wake-up.
  (void)!::write(wake_write_, &byte, 1);
}

// ---------------------------------------------------------------- acceptor

void BlobServer::accept_loop() {
  std::list<Lingering> lingering;
  std::vector<pollfd> fds;
  while (!stopping_.load()) {
    fds.clear();
    fds.push_back({wake_read_, POLLIN, 0});
    fds.push_back({listener_.fd(), POLLIN, 0});
    int timeout_ms = -1;
    const auto now = Clock::now();
    for (auto& l : lingering) {
      fds.push_back({l.socket.fd(), POLLIN, 0});
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(l.deadline - now).count() + 1;
      timeout_ms = timeout_ms < 0 ? static_cast<int>(std::max<int64_t>(left, 0))
                                  : std::min(timeout_ms, static_cast<int>(std::max<int64_t>(left, 0)));
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0) {
      // EINTR, or the kernel short of memory: try again rather than stop serving silently.
      if (errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }

    if (fds[0].revents != 0) {
      char drain[64];
      while (::read(wake_read_, drain, sizeof(drain)) > 0) {
      }
    }
    if (stopping_.load()) break;
    connections_.reap(/*all=*/false);

    // Rejected connections: discard what the receiver sends; close on its EOF or the deadline.
    size_t i = 2;
    const auto later = Clock::now();
    for (auto it = lingering.begin(); it != lingering.end(); ++i) {
      bool close_it = later >= it->deadline;
      if (i < fds.size() && fds[i].revents != 0) {
        char sink[4096];
        ssize_t n;
        while ((n = ::recv(it->socket.fd(), sink, sizeof(sink), MSG_DONTWAIT)) > 0) {
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) close_it = true;
      }
      it = close_it ? lingering.erase(it) : std::next(it);
    }

    if (fds[1].revents != 0) {
      while (true) {
        Socket s(::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!s.valid()) {
          // Out of descriptors or memory: the pending connection stays queued and poll would
          // report it again at once, so back off instead of spinning.
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
          break;  // EAGAIN (drained) or a transient error: poll again
        }
        tune_socket(s.fd(), options_.socket_buffer_bytes);
        if (counters_.active.load() >= options_.max_transfers) {
          reject(std::move(s), lingering);
        } else {
          admit(std::move(s));
        }
      }
    }
  }
}

void BlobServer::admit(Socket socket) {
  counters_.active.fetch_add(1);
  auto record = std::make_unique<Connection>();
  record->socket = std::move(socket);
  Connection& c = connections_.add(std::move(record));
  try {
    c.thread = std::thread([this, &c] {
      const bool ok = serve(c.socket.fd());
      (ok ? counters_.served : counters_.failed).fetch_add(1);
      counters_.active.fetch_sub(1);
      c.done.store(true);
      wake();
    });
  } catch (const std::system_error& e) {
    // No thread for it: tell the receiver (in plain TCP; over TLS it sees the close), and let reap()
    // drop the record (nothing to join).
    if (!options_.tls) {
      send_turn_away(c.socket.fd(), io_error(std::string("blob server cannot start a transfer: ") + e.what()));
    }
    counters_.failed.fetch_add(1);
    counters_.active.fetch_sub(1);
    c.done.store(true);
  }
}

void BlobServer::reject(Socket socket, std::list<Lingering>& lingering) {
  counters_.rejected.fetch_add(1);
  const Error busy = io_error("blob server busy: " + std::to_string(options_.max_transfers) +
                              " transfers in progress, the limit; retry later or from another source");
  // Transfer id 0: the request was never read. The frame is small enough for any socket buffer.
  // Over TLS there is no session to say it in: the receiver sees the close, and retries.
  if (!options_.tls) send_turn_away(socket.fd(), busy);
  ::shutdown(socket.fd(), SHUT_WR);
  if (lingering.size() < kMaxLingering) lingering.push_back({std::move(socket), Clock::now() + kRejectLinger});
}

// ---------------------------------------------------------------- one transfer

bool BlobServer::serve(int fd) {
  set_send_timeout(fd, options_.send_timeout);

  // The request: a 4-byte length, then the message; all of it within request_timeout, so a
  // receiver trickling bytes cannot hold a transfer slot.
  uint8_t buffer[4 + kMaxFetchRequestBytes];
  size_t want = 4;
  size_t have = 0;
  const auto deadline = Clock::now() + options_.request_timeout;
  Result<Stream> opened =
      options_.tls ? Stream::handshake(fd, *options_.tls, true, deadline) : Result<Stream>(Stream(fd));
  if (!opened.ok()) return false;  // a plain client, or one without a certificate the CA signed
  Stream& stream = *opened;
  Result<FetchRequest> request = not_found("need more bytes");
  while (true) {
    size_t got = 0;
    std::string error_text;
    const RecvEnd end =
        stream.read_exact(buffer + have, want - have, options_.request_timeout, got, error_text, deadline);
    have += got;
    if (end != RecvEnd::done) return false;  // the receiver went away or never asked: nothing to say
    request = decode_fetch_request(buffer, have, want);
    if (request.ok() || request.error().code() != ErrorCode::not_found) break;
  }

  // The answer: the frames the protocol object hands out, each in one sendmsg (blocking under
  // SO_SNDTIMEO), with the waits for a growing blob's bytes in kUpstreamPoll slices.
  FrameSender sender(options_, counters_.data_frames, /*staging_chunks=*/1);
  const bool named = options_.tickets_name_certificates && stream.tls();
  const std::string peer = named ? stream.peer_name() : std::string();
  sender.open(check_ticket(std::move(request), options_.tickets.get(), named ? &peer : nullptr), lookup_);
  FrameSender::Frame frame;
  while (true) {
    if (stopping_.load()) return false;  // stop() shuts the socket down: the receiver sees that
    switch (sender.next(Clock::now(), frame)) {
      case FrameSender::Step::done:
        return sender.result().ok();
      case FrameSender::Step::wait:
        (void)sender.wait(kUpstreamPoll);  // its outcome comes back through the next next()
        if (stopping_.load()) {
          (void)send_frame(stream, sender.abort(io_error("blob server stopping")), options_.send_timeout);
          return false;
        }
        break;
      case FrameSender::Step::send:
        if (!send_frame(stream, frame, options_.send_timeout).ok()) return false;        // the receiver is gone
        counters_.bytes_sent.fetch_add(frame.payload_bytes, std::memory_order_relaxed);  // 0 for end and abort
        break;
    }
  }
}

}  // namespace ember::transport
