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

namespace ember::transport {

namespace {

using Clock = std::chrono::steady_clock;

/// A rejected connection is kept this long after its abort frame, draining what the receiver sent,
/// so that closing it does not reset the connection before the receiver has read the abort.
constexpr auto kRejectLinger = std::chrono::milliseconds(1000);
constexpr size_t kMaxLingering = 64;  // beyond it a rejected socket is closed at once

/// Best effort: the receiver may already be gone, and there is nothing more to tell it then.
void send_abort(int fd, uint64_t transfer_id, const Error& error, int flags = 0) {
  auto header = encode_frame_header(abort_frame(transfer_id, error));
  iovec iov{header.data(), header.size()};
  if (flags == 0) {
    (void)send_all(fd, &iov, 1);
  } else {
    (void)::send(fd, header.data(), header.size(), flags | MSG_NOSIGNAL);
  }
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
  if (options.chunk_bytes < 4096 || options.chunk_bytes > kMaxChunkBytes) {
    return invalid_argument("blob server chunk_bytes " + std::to_string(options.chunk_bytes) + " is not in 4096.." +
                            std::to_string(kMaxChunkBytes));
  }
  if (options.max_transfers == 0) return invalid_argument("blob server max_transfers must be at least 1");
  if (!lookup) return invalid_argument("blob server needs a lookup function");
  EMBER_ASSIGN_OR_RETURN(Socket listener, listen_tcp(options.host, options.port, 128));
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
  {
    // shutdown, not close: it wakes a transfer blocked in sendmsg or poll at once, and the
    // descriptor stays valid (and not reusable by another open) until its thread is joined.
    std::lock_guard lock(mutex_);
    for (auto& c : connections_) ::shutdown(c->socket.fd(), SHUT_RDWR);
  }
  reap(/*all=*/true);
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

void BlobServer::reap(bool all) {
  std::list<std::unique_ptr<Connection>> finished;
  {
    std::lock_guard lock(mutex_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (all || (*it)->done.load()) {
        finished.splice(finished.end(), connections_, it++);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : finished) {
    if (c->thread.joinable()) c->thread.join();  // then the socket closes with the record
  }
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
    reap(/*all=*/false);

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
        if (active_.load() >= options_.max_transfers) {
          reject(std::move(s), lingering);
        } else {
          admit(std::move(s));
        }
      }
    }
  }
}

void BlobServer::admit(Socket socket) {
  active_.fetch_add(1);
  auto c = std::make_unique<Connection>();
  c->socket = std::move(socket);
  Connection* raw = c.get();
  {
    std::lock_guard lock(mutex_);
    connections_.push_back(std::move(c));
  }
  try {
    raw->thread = std::thread([this, raw] {
      const bool ok = serve(raw->socket.fd());
      (ok ? served_ : failed_).fetch_add(1);
      active_.fetch_sub(1);
      raw->done.store(true);
      wake();
    });
  } catch (const std::system_error& e) {
    // No thread for it: tell the receiver, and let reap() drop the record (nothing to join).
    send_abort(raw->socket.fd(), 0, io_error(std::string("blob server cannot start a transfer: ") + e.what()),
               MSG_DONTWAIT);
    failed_.fetch_add(1);
    active_.fetch_sub(1);
    raw->done.store(true);
  }
}

void BlobServer::reject(Socket socket, std::list<Lingering>& lingering) {
  rejected_.fetch_add(1);
  const Error busy = io_error("blob server busy: " + std::to_string(options_.max_transfers) +
                              " transfers in progress, the limit; retry later or from another source");
  // Transfer id 0: the request was never read. The frame is small enough for any socket buffer.
  send_abort(socket.fd(), 0, busy, MSG_DONTWAIT);
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
  Result<FetchRequest> request = not_found("need more bytes");
  while (true) {
    size_t got = 0;
    std::string error_text;
    const RecvEnd end =
        recv_exact(fd, buffer + have, want - have, options_.request_timeout, got, error_text, deadline);
    have += got;
    if (end != RecvEnd::done) return false;  // the receiver went away or never asked: nothing to say
    request = decode_fetch_request(buffer, have, want);
    if (request.ok()) break;
    if (request.error().code() != ErrorCode::not_found) {
      send_abort(fd, 0, request.error());
      return false;
    }
  }

  const uint64_t id = request->transfer_id;
  const std::string& key = request->key;
  Result<std::shared_ptr<const Blob>> blob = lookup_(key);
  if (!blob.ok()) {
    send_abort(fd, id, blob.error());
    return false;
  }
  if (*blob == nullptr) {
    send_abort(fd, id, internal_error("lookup of '" + key + "' returned no blob"));
    return false;
  }
  Status st = stream(fd, id, key, **blob, request->offset);
  return st.ok();
}

Status BlobServer::wait_for_bytes(const Blob& blob, uint64_t end) {
  const auto deadline = Clock::now() + options_.upstream_wait;
  while (true) {
    if (stopping_.load()) return io_error("blob server stopping");
    Status st = blob.wait_readable(end, kUpstreamPoll);
    if (st.ok() || st.error().code() != ErrorCode::deadline_exceeded) return st;  // done, or the writer failed
    if (Clock::now() >= deadline) {
      return unavailable("upstream stalled: no bytes up to offset " + std::to_string(end) + " within " +
                         std::to_string(options_.upstream_wait.count()) + " ms");
    }
  }
}

Status BlobServer::stream(int fd, uint64_t transfer_id, const std::string& key, const Blob& blob, uint64_t offset) {
  const uint64_t size = blob.size();
  if (offset > size) {
    Error e = invalid_argument("offset " + std::to_string(offset) + " is beyond blob '" + key + "' of " +
                               std::to_string(size) + " bytes");
    send_abort(fd, transfer_id, e);
    return e;
  }
  const uint8_t* memory = blob.data();
  std::vector<uint8_t> staging;  // only for blobs that must be read(): one chunk, reused
  if (memory == nullptr && offset < size) {
    staging.resize(static_cast<size_t>(std::min<uint64_t>(options_.chunk_bytes, size - offset)));
  }

  for (uint64_t at = offset; at < size;) {
    if (stopping_.load()) return io_error("blob server stopping");
    const auto n = static_cast<uint32_t>(std::min<uint64_t>(options_.chunk_bytes, size - at));
    if (blob.readable() < at + n) {
      // A blob still arriving (a multicast hop forwarding cut-through): wait for the chunk.
      if (Status st = wait_for_bytes(blob, at + n); !st.ok()) {
        Error e = st.error().with_context("forwarding blob '" + key + "'");
        send_abort(fd, transfer_id, e);
        return e;
      }
    }
    const uint8_t* payload = memory != nullptr ? memory + at : staging.data();
    if (memory == nullptr) {
      if (Status st = blob.read(at, staging.data(), n); !st.ok()) {
        Error e = st.error().with_context("reading blob '" + key + "'");
        send_abort(fd, transfer_id, e);
        return e;
      }
    }
    auto header = encode_frame_header(data_frame(transfer_id, at, payload, n, size));
    std::vector<uint8_t> corrupted;
    if (options_.corrupt_frame != 0 && frames_sent_.fetch_add(1) + 1 == options_.corrupt_frame) {
      corrupted.assign(payload, payload + n);  // the fault seam: the checksum is of the good bytes
      corrupted[n / 2] ^= 0x10;
      payload = corrupted.data();
    }
    iovec iov[2] = {{header.data(), header.size()}, {const_cast<uint8_t*>(payload), n}};
    EMBER_RETURN_IF_ERROR(send_all(fd, iov, 2));  // the receiver is gone: nobody to tell
    bytes_sent_.fetch_add(n, std::memory_order_relaxed);
    at += n;
  }

  // The digest of the whole blob, whatever the offset: memoized after the first transfer.
  Result<Digest> digest = blob.digest();
  if (!digest.ok()) {
    Error e = digest.error().with_context("hashing blob '" + key + "'");
    send_abort(fd, transfer_id, e);
    return e;
  }
  FrameHeader end;
  end.transfer_id = transfer_id;
  end.kind = FrameKind::end;
  end.offset = size;
  end.blob_bytes = size;
  end.digest = *digest;
  auto header = encode_frame_header(end);
  iovec iov{header.data(), header.size()};
  return send_all(fd, &iov, 1);
}

}  // namespace ember::transport
