#include "transport/ucx_blob_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "transport/fetch_request.hpp"
#include "transport/frame.hpp"
#include "transport/ucx_worker.hpp"

namespace ember::transport {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// Beyond this many turned-away connections lingering at once, more are rejected without a word.
constexpr size_t kMaxLingering = 64;
/// How long the acceptor sleeps when nothing is due (a stop() or a finished transfer wakes it).
constexpr milliseconds kAcceptorNap{1000};
/// A transfer cut off by stop() still gets its abort frame this long to leave.
constexpr milliseconds kStopAbortGrace{50};

milliseconds until(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? left : milliseconds(0);
}

void signal_fd(int fd) {
  const uint64_t one = 1;
  (void)!::write(fd, &one, sizeof(one));
}

void drain_fd(int fd) {
  uint64_t value;
  (void)!::read(fd, &value, sizeof(value));
}

/// A contiguous host buffer: no datatype or memory-type detection per operation.
ucp_request_param_t host_param() {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  p.datatype = ucp_dt_make_contig(1);
  p.memory_type = UCS_MEMORY_TYPE_HOST;
  return p;
}

/// Requests on the acceptor's worker come from connections turned away: nobody reads them.
ucs_status_t drop_request(void*, const void*, size_t, void*, size_t, const ucp_am_recv_param_t*) { return UCS_OK; }

}  // namespace

// ---------------------------------------------------------------- state

struct UcxBlobServer::Impl {
  /// One transfer: its own worker and endpoint, driven by its own thread. The acceptor builds it
  /// (the connection request belongs to the acceptor's worker) and then hands it over.
  struct Transfer {
    Impl* server = nullptr;
    std::unique_ptr<ucx::Worker> worker;
    ucp_ep_h ep = nullptr;
    std::thread thread;
    std::atomic<bool> done{false};
    // Written by UCX callbacks, which run inside progress on the transfer's thread.
    bool request_arrived = false;
    std::vector<uint8_t> request;  // the request's AM header: the encoded FetchRequest
    bool peer_gone = false;
    ucs_status_t peer_status = UCS_OK;
  };

  /// A connection turned away: its "busy" abort is out, and it waits for the receiver to hang up.
  struct Rejected {
    ucp_ep_h ep = nullptr;
    std::vector<uint8_t> header;  // the abort frame, alive until its send completes
    ucx::Request send;
    Clock::time_point deadline;
    bool peer_gone = false;
  };

  Impl(BlobServerOptions o, BlobLookup l) : options(std::move(o)), lookup(std::move(l)) {}

  void accept_loop();
  void admit(ucp_conn_request_h request);
  void reject(ucp_conn_request_h request);
  void reap(bool all);
  bool serve(Transfer& t);

  const BlobServerOptions options;
  const BlobLookup lookup;
  std::unique_ptr<ucx::Worker> acceptor_worker;
  ucp_listener_h listener = nullptr;
  uint16_t port = 0;
  int stop_fd = -1;  // eventfd, signalled once by stop() and never drained: every waiter wakes
  int reap_fd = -1;  // eventfd: a transfer finished; the acceptor joins it
  std::thread acceptor;

  std::vector<ucp_conn_request_h> incoming;  // acceptor thread only (filled by the listener's callback)
  std::list<Rejected> rejected;              // acceptor thread only

  std::mutex mutex;  // guards transfers
  std::list<std::unique_ptr<Transfer>> transfers;
  std::atomic<bool> stopping{false};
  std::mutex stop_mutex;  // serializes stop()
  bool stopped = false;   // under stop_mutex

  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> served{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> active{0};
  std::atomic<uint64_t> rejections{0};
  std::atomic<uint64_t> frames_sent{0};  // data frames, for the corrupt_frame fault seam
};

namespace {

using Impl = UcxBlobServer::Impl;

void on_connection(ucp_conn_request_h request, void* arg) { static_cast<Impl*>(arg)->incoming.push_back(request); }

ucs_status_t on_request(void* arg, const void* header, size_t header_length, void*, size_t,
                        const ucp_am_recv_param_t*) {
  auto* t = static_cast<Impl::Transfer*>(arg);
  if (t->request_arrived) return UCS_OK;  // one request per connection; later ones are ignored
  t->request_arrived = true;
  // A request longer than the bound is kept cut, so that decoding reports it as corrupt.
  const size_t n = std::min<size_t>(header_length, kFramePrefixBytes + kMaxFetchRequestBytes + 8);
  const auto* bytes = static_cast<const uint8_t*>(header);
  t->request.assign(bytes, bytes + n);
  return UCS_OK;
}

void on_transfer_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* t = static_cast<Impl::Transfer*>(arg);
  t->peer_gone = true;
  t->peer_status = status;
}

void on_rejected_error(void* arg, ucp_ep_h, ucs_status_t) { static_cast<Impl::Rejected*>(arg)->peer_gone = true; }

/// One transfer on its thread: the request, the frames, the close. Every wait sleeps on the
/// worker's event fd and the server's stop fd, and is bounded by an option.
class Sender {
 public:
  Sender(Impl& server, Impl::Transfer& t) : server_(server), t_(t), worker_(*t.worker) {}

  /// True when the end frame went out.
  bool run();

 private:
  struct InFlight {
    ucx::Request request;
    std::vector<uint8_t> header;     // alive until the send completes
    std::vector<uint8_t> corrupted;  // the fault seam's copy of a payload
    uint32_t payload_bytes = 0;
  };

  bool stopping() const { return server_.stopping.load(); }
  Status await_request(FetchRequest& request);
  Status stream(uint64_t transfer_id, const std::string& key, const Blob& blob, uint64_t offset);
  Status wait_for_bytes(const Blob& blob, uint64_t end);
  Status post(const FrameHeader& h, const void* payload, uint32_t n, std::vector<uint8_t> corrupted = {});
  Status retire(size_t max_in_flight);
  Error broken(Error e) {
    link_broken_ = true;
    return e;
  }
  void send_abort(uint64_t transfer_id, const Error& error);
  void linger(milliseconds limit);

  Impl& server_;
  Impl::Transfer& t_;
  ucx::Worker& worker_;
  std::deque<InFlight> in_flight_;
  bool link_broken_ = false;  // the receiver is gone or stuck: nobody to tell anything
  bool last_frame_sent_ = false;  // an end or abort frame went out: the receiver will hang up
};

bool Sender::run() {
  FetchRequest request;
  Status st = await_request(request);
  if (st.ok()) {
    Result<std::shared_ptr<const Blob>> blob = server_.lookup(request.key);
    if (!blob.ok()) {
      send_abort(request.transfer_id, blob.error());
      st = blob.error();
    } else if (*blob == nullptr) {
      Error e = internal_error("lookup of '" + request.key + "' returned no blob");
      send_abort(request.transfer_id, e);
      st = e;
    } else {
      st = stream(request.transfer_id, request.key, **blob, request.offset);
    }
  }
  const bool served = st.ok();
  if (stopping() && !served && !link_broken_ && !last_frame_sent_) {
    // Best effort: the frame may still be behind a payload the receiver is not pulling.
    (void)post(abort_frame(request.transfer_id, io_error("blob server stopping")), nullptr, 0);
    const auto grace = Clock::now() + kStopAbortGrace;
    while (!in_flight_.empty() && Clock::now() < grace && !t_.peer_gone) {
      if (worker_.progress() == 0) worker_.wait(until(grace));
      while (!in_flight_.empty() && in_flight_.front().request.done()) in_flight_.pop_front();
    }
  } else if (last_frame_sent_ && !link_broken_) {
    linger(server_.options.send_timeout);
  }
  ucx::close_endpoint(worker_, t_.ep);
  t_.ep = nullptr;
  // Cancelled by the close; freeing a request UCX still holds hands it back to UCX.
  in_flight_.clear();
  return served;
}

Status Sender::await_request(FetchRequest& request) {
  const auto deadline = Clock::now() + server_.options.request_timeout;
  while (!t_.request_arrived) {
    const unsigned events = worker_.progress();
    if (t_.request_arrived) break;
    if (t_.peer_gone) return broken(io_error("receiver gone before its request: " + ucx::status_text(t_.peer_status)));
    if (stopping()) return io_error("blob server stopping");
    if (Clock::now() >= deadline) return broken(io_error("no request within the request timeout"));
    if (events == 0) worker_.wait(until(deadline), server_.stop_fd);
  }
  size_t consumed = 0;
  Result<FetchRequest> decoded = decode_fetch_request(t_.request.data(), t_.request.size(), consumed);
  if (decoded.ok() && consumed != t_.request.size()) {
    decoded = corrupt("fetch request of " + std::to_string(t_.request.size()) + " bytes carries " +
                      std::to_string(t_.request.size() - consumed) + " trailing bytes");
  }
  if (!decoded.ok()) {
    Error e = decoded.error().code() == ErrorCode::not_found ? corrupt("fetch request is truncated") : decoded.error();
    send_abort(0, e);
    return e;
  }
  request = std::move(*decoded);
  return Status::OK();
}

Status Sender::post(const FrameHeader& h, const void* payload, uint32_t n, std::vector<uint8_t> corrupted) {
  InFlight f;
  f.header = encode_frame_header(h);
  f.payload_bytes = n;
  f.corrupted = std::move(corrupted);
  if (!f.corrupted.empty()) payload = f.corrupted.data();
  const ucp_request_param_t param = host_param();
  f.request = ucx::Request(
      ucp_am_send_nbx(t_.ep, ucx::kFrameAm, f.header.data(), f.header.size(), n > 0 ? payload : nullptr, n, &param));
  if (f.request.done() && f.request.status() != UCS_OK) {
    return broken(io_error("send failed: " + ucx::status_text(f.request.status())));
  }
  in_flight_.push_back(std::move(f));  // moving the vectors keeps their buffers where UCX sees them
  if (h.kind == FrameKind::end || h.kind == FrameKind::abort) last_frame_sent_ = true;
  return Status::OK();
}

Status Sender::retire(size_t max_in_flight) {
  const auto timeout = server_.options.send_timeout;
  auto idle_deadline = Clock::now() + timeout;
  while (true) {
    const unsigned events = worker_.progress();
    if (events > 0) idle_deadline = Clock::now() + timeout;
    // In order: a staging chunk is reused only when every send before it completed.
    while (!in_flight_.empty() && in_flight_.front().request.done()) {
      const ucs_status_t st = in_flight_.front().request.status();
      if (st != UCS_OK) return broken(io_error("send failed, receiver gone: " + ucx::status_text(st)));
      server_.bytes_sent.fetch_add(in_flight_.front().payload_bytes, std::memory_order_relaxed);
      in_flight_.pop_front();
      idle_deadline = Clock::now() + timeout;
    }
    if (in_flight_.size() <= max_in_flight) return Status::OK();
    if (t_.peer_gone) return broken(io_error("receiver gone: " + ucx::status_text(t_.peer_status)));
    if (stopping()) return io_error("blob server stopping");
    if (Clock::now() >= idle_deadline) {
      return broken(io_error("receiver took no data for " + std::to_string(timeout.count()) + " ms (send timeout)"));
    }
    if (events == 0) worker_.wait(until(idle_deadline), server_.stop_fd);
  }
}

void Sender::send_abort(uint64_t transfer_id, const Error& error) {
  if (link_broken_) return;  // nobody to tell
  if (post(abort_frame(transfer_id, error), nullptr, 0).ok()) (void)retire(0);
}

void Sender::linger(milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!t_.peer_gone && !stopping() && Clock::now() < deadline) {
    if (worker_.progress() == 0) worker_.wait(until(deadline), server_.stop_fd);
  }
}

Status Sender::wait_for_bytes(const Blob& blob, uint64_t end) {
  // What is in flight goes out first: the receiver is waiting for those bytes too, and nothing
  // progresses the worker while this thread waits on the blob.
  EMBER_RETURN_IF_ERROR(retire(0));
  const auto deadline = Clock::now() + server_.options.upstream_wait;
  while (true) {
    if (stopping()) return io_error("blob server stopping");
    worker_.progress();
    if (t_.peer_gone) return broken(io_error("receiver gone: " + ucx::status_text(t_.peer_status)));
    const auto asked = Clock::now();
    Status st = blob.wait_readable(end, UcxBlobServer::kUpstreamPoll);
    if (st.ok() || st.error().code() != ErrorCode::unavailable) return st;
    // `unavailable` means "the slice ran out, ask again", unless it came back early: then it is
    // the writer's own error (a hop whose upstream gave up fails the blob with `unavailable`),
    // which must be passed on now, not after upstream_wait.
    if (Clock::now() - asked < UcxBlobServer::kUpstreamPoll / 2) return st;
    if (Clock::now() >= deadline) {
      return unavailable("upstream stalled: no bytes up to offset " + std::to_string(end) + " within " +
                         std::to_string(server_.options.upstream_wait.count()) + " ms");
    }
  }
}

Status Sender::stream(uint64_t transfer_id, const std::string& key, const Blob& blob, uint64_t offset) {
  const uint64_t size = blob.size();
  if (offset > size) {
    Error e = invalid_argument("offset " + std::to_string(offset) + " is beyond blob '" + key + "' of " +
                               std::to_string(size) + " bytes");
    send_abort(transfer_id, e);
    return e;
  }
  const BlobServerOptions& options = server_.options;
  const uint8_t* memory = blob.data();
  // Only for blobs that must be read(): one chunk per send in flight, reused in turn.
  std::vector<std::vector<uint8_t>> staging;
  if (memory == nullptr && offset < size) {
    staging.resize(UcxBlobServer::kSendWindow);
    for (auto& s : staging) s.resize(static_cast<size_t>(std::min<uint64_t>(options.chunk_bytes, size - offset)));
  }

  uint64_t index = 0;
  for (uint64_t at = offset; at < size; ++index) {
    if (stopping()) return io_error("blob server stopping");
    const auto n = static_cast<uint32_t>(std::min<uint64_t>(options.chunk_bytes, size - at));
    if (blob.readable() < at + n) {
      // A blob still arriving (a multicast hop forwarding cut-through): wait for the chunk.
      if (Status st = wait_for_bytes(blob, at + n); !st.ok()) {
        Error e = st.error().with_context("forwarding blob '" + key + "'");
        send_abort(transfer_id, e);
        return e;
      }
    }
    EMBER_RETURN_IF_ERROR(retire(UcxBlobServer::kSendWindow - 1));  // a free slot
    const uint8_t* payload = memory;
    if (memory != nullptr) {
      payload = memory + at;
    } else {
      std::vector<uint8_t>& chunk = staging[index % staging.size()];
      if (Status st = blob.read(at, chunk.data(), n); !st.ok()) {
        Error e = st.error().with_context("reading blob '" + key + "'");
        send_abort(transfer_id, e);
        return e;
      }
      payload = chunk.data();
    }
    FrameHeader h = data_frame(transfer_id, at, payload, n, size);
    std::vector<uint8_t> corrupted;
    if (options.corrupt_frame != 0 && server_.frames_sent.fetch_add(1) + 1 == options.corrupt_frame) {
      corrupted.assign(payload, payload + n);  // the fault seam: the checksum is of the good bytes
      corrupted[n / 2] ^= 0x10;
    }
    EMBER_RETURN_IF_ERROR(post(h, payload, n, std::move(corrupted)));
    at += n;
  }
  EMBER_RETURN_IF_ERROR(retire(0));

  // The digest of the whole blob, whatever the offset: memoized after the first transfer.
  Result<Digest> digest = blob.digest();
  if (!digest.ok()) {
    Error e = digest.error().with_context("hashing blob '" + key + "'");
    send_abort(transfer_id, e);
    return e;
  }
  FrameHeader end;
  end.transfer_id = transfer_id;
  end.kind = FrameKind::end;
  end.offset = size;
  end.blob_bytes = size;
  end.digest = *digest;
  EMBER_RETURN_IF_ERROR(post(end, nullptr, 0));
  return retire(0);
}

}  // namespace

// ---------------------------------------------------------------- acceptor

bool Impl::serve(Transfer& t) {
  Sender sender(*this, t);
  return sender.run();
}

void Impl::accept_loop() {
  while (!stopping.load()) {
    const unsigned events = acceptor_worker->progress();
    std::vector<ucp_conn_request_h> arrived;
    arrived.swap(incoming);
    for (ucp_conn_request_h request : arrived) {
      if (active.load() >= options.max_transfers) {
        reject(request);
      } else {
        admit(request);
      }
    }
    drain_fd(reap_fd);
    reap(/*all=*/false);

    // Turned-away connections: closed once the receiver hung up (it read the abort) or at the deadline.
    auto wake_at = Clock::now() + kAcceptorNap;
    for (auto it = rejected.begin(); it != rejected.end();) {
      (void)it->send.done();
      if (it->peer_gone || Clock::now() >= it->deadline) {
        ucx::close_endpoint(*acceptor_worker, it->ep);
        it = rejected.erase(it);
      } else {
        wake_at = std::min(wake_at, it->deadline);
        ++it;
      }
    }
    if (events == 0 && arrived.empty()) acceptor_worker->wait(until(wake_at), stop_fd, reap_fd);
  }
  // Stopping: nothing new is admitted, nothing turned away waits any longer.
  for (ucp_conn_request_h request : incoming) (void)ucp_listener_reject(listener, request);
  incoming.clear();
  for (auto& r : rejected) ucx::close_endpoint(*acceptor_worker, r.ep);
  rejected.clear();
  ucp_listener_destroy(listener);
  listener = nullptr;
}

void Impl::admit(ucp_conn_request_h request) {
  active.fetch_add(1);
  auto fail = [&] {
    failed.fetch_add(1);
    active.fetch_sub(1);
  };
  auto t = std::make_unique<Transfer>();
  t->server = this;
  auto worker = ucx::Worker::create("blob server transfer");
  if (!worker.ok()) {
    (void)ucp_listener_reject(listener, request);
    fail();
    return;
  }
  t->worker = std::move(*worker);
  // The handler is in place before the endpoint exists, so the request cannot arrive unseen.
  if (!t->worker->set_am_handler(ucx::kRequestAm, on_request, t.get()).ok()) {
    (void)ucp_listener_reject(listener, request);
    fail();
    return;
  }
  ucp_ep_params_t params{};
  params.field_mask =
      UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.conn_request = request;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = on_transfer_error;
  params.err_handler.arg = t.get();
  if (ucp_ep_create(t->worker->get(), &params, &t->ep) != UCS_OK) {  // the request is consumed either way
    fail();
    return;
  }
  Transfer* raw = t.get();
  {
    std::lock_guard lock(mutex);
    transfers.push_back(std::move(t));
  }
  try {
    raw->thread = std::thread([this, raw] {
      const bool ok = serve(*raw);
      (ok ? served : failed).fetch_add(1);
      active.fetch_sub(1);
      raw->done.store(true);
      signal_fd(reap_fd);
    });
  } catch (const std::system_error&) {
    // No thread for it: the receiver sees the connection close; reap() drops the record.
    ucx::close_endpoint(*raw->worker, raw->ep);
    raw->ep = nullptr;
    fail();
    raw->done.store(true);
  }
}

void Impl::reject(ucp_conn_request_h request) {
  rejections.fetch_add(1);
  if (rejected.size() >= kMaxLingering) {
    (void)ucp_listener_reject(listener, request);
    return;
  }
  Rejected& r = rejected.emplace_back();
  ucp_ep_params_t params{};
  params.field_mask =
      UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.conn_request = request;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = on_rejected_error;
  params.err_handler.arg = &r;
  if (ucp_ep_create(acceptor_worker->get(), &params, &r.ep) != UCS_OK) {
    rejected.pop_back();
    return;
  }
  const Error busy = io_error("blob server busy: " + std::to_string(options.max_transfers) +
                              " transfers in progress, the limit; retry later or from another source");
  // Transfer id 0: the request was never read.
  r.header = encode_frame_header(abort_frame(0, busy));
  const ucp_request_param_t param = host_param();
  r.send = ucx::Request(ucp_am_send_nbx(r.ep, ucx::kFrameAm, r.header.data(), r.header.size(), nullptr, 0, &param));
  r.deadline = Clock::now() + UcxBlobServer::kRejectLinger;
}

void Impl::reap(bool all) {
  std::list<std::unique_ptr<Transfer>> finished;
  {
    std::lock_guard lock(mutex);
    for (auto it = transfers.begin(); it != transfers.end();) {
      if (all || (*it)->done.load()) {
        finished.splice(finished.end(), transfers, it++);
      } else {
        ++it;
      }
    }
  }
  for (auto& t : finished) {
    if (t->thread.joinable()) t->thread.join();  // then the worker goes with the record
  }
}

// ---------------------------------------------------------------- lifecycle

Result<std::unique_ptr<UcxBlobServer>> UcxBlobServer::start(BlobServerOptions options, BlobLookup lookup) {
  if (options.chunk_bytes < 4096 || options.chunk_bytes > kMaxChunkBytes) {
    return invalid_argument("blob server chunk_bytes " + std::to_string(options.chunk_bytes) + " is not in 4096.." +
                            std::to_string(kMaxChunkBytes));
  }
  if (options.max_transfers == 0) return invalid_argument("blob server max_transfers must be at least 1");
  if (!lookup) return invalid_argument("blob server needs a lookup function");
  const std::string where = Endpoint{options.host, options.port}.to_string();

  auto impl = std::make_unique<Impl>(std::move(options), std::move(lookup));
  const BlobServerOptions& o = impl->options;
  impl->stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  impl->reap_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  // From here on the UcxBlobServer owns impl: its destructor (stop()) releases whatever was made.
  std::unique_ptr<UcxBlobServer> server(new UcxBlobServer(std::move(impl)));
  Impl& s = *server->impl_;
  if (s.stop_fd < 0 || s.reap_fd < 0) {
    return io_error(std::string("blob server cannot create its event fds: ") + std::strerror(errno));
  }
  EMBER_ASSIGN_OR_RETURN(s.acceptor_worker, ucx::Worker::create("blob server on " + where));
  const size_t need = kFramePrefixBytes + kMaxFrameHeaderBytes;
  if (s.acceptor_worker->max_am_header() < need) {
    return unsupported("UCX allows active-message headers of " + std::to_string(s.acceptor_worker->max_am_header()) +
                       " bytes; a frame header needs " + std::to_string(need));
  }
  EMBER_RETURN_IF_ERROR(s.acceptor_worker->set_am_handler(ucx::kRequestAm, drop_request, nullptr));

  EMBER_ASSIGN_OR_RETURN(std::vector<ucx::SockAddr> addrs, ucx::resolve(o.host, o.port, true));
  std::string last = "no address";
  for (const ucx::SockAddr& a : addrs) {
    ucp_listener_params_t params{};
    params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    params.sockaddr.addr = a.get();
    params.sockaddr.addrlen = a.length;
    params.conn_handler.cb = on_connection;
    params.conn_handler.arg = &s;
    const ucs_status_t rc = ucp_listener_create(s.acceptor_worker->get(), &params, &s.listener);
    if (rc == UCS_OK) break;
    s.listener = nullptr;
    last = ucx::status_text(rc);
  }
  if (s.listener == nullptr) return io_error("cannot listen on " + where + " with UCX: " + last);
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  if (ucp_listener_query(s.listener, &attr) == UCS_OK) {
    if (attr.sockaddr.ss_family == AF_INET) s.port = ntohs(reinterpret_cast<sockaddr_in*>(&attr.sockaddr)->sin_port);
    if (attr.sockaddr.ss_family == AF_INET6) {
      s.port = ntohs(reinterpret_cast<sockaddr_in6*>(&attr.sockaddr)->sin6_port);
    }
  }
  if (s.port == 0) return io_error("cannot read back the port UCX listens on at " + where);
  try {
    s.acceptor = std::thread([&s] { s.accept_loop(); });
  } catch (const std::system_error& e) {
    return io_error(std::string("blob server cannot start its acceptor thread: ") + e.what());
  }
  return server;
}

UcxBlobServer::UcxBlobServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

UcxBlobServer::~UcxBlobServer() { stop(); }

void UcxBlobServer::stop() {
  Impl& s = *impl_;
  std::lock_guard stop_lock(s.stop_mutex);
  if (s.stopped) return;
  s.stopping.store(true);
  if (s.stop_fd >= 0) signal_fd(s.stop_fd);
  if (s.acceptor.joinable()) {
    s.acceptor.join();  // it destroys the listener on its way out
  } else if (s.listener != nullptr) {
    ucp_listener_destroy(s.listener);  // start() failed after creating it
    s.listener = nullptr;
  }
  s.reap(/*all=*/true);  // every transfer sees the stop fd, cuts its receiver off and ends
  s.acceptor_worker.reset();
  if (s.stop_fd >= 0) ::close(s.stop_fd);
  if (s.reap_fd >= 0) ::close(s.reap_fd);
  s.stop_fd = s.reap_fd = -1;
  s.stopped = true;
}

uint16_t UcxBlobServer::port() const { return impl_->port; }
Endpoint UcxBlobServer::endpoint() const { return {impl_->options.host, impl_->port}; }
uint64_t UcxBlobServer::bytes_sent() const { return impl_->bytes_sent.load(std::memory_order_relaxed); }
uint64_t UcxBlobServer::transfers_served() const { return impl_->served.load(std::memory_order_relaxed); }
uint64_t UcxBlobServer::transfers_failed() const { return impl_->failed.load(std::memory_order_relaxed); }
uint64_t UcxBlobServer::transfers_active() const { return impl_->active.load(std::memory_order_relaxed); }
uint64_t UcxBlobServer::connections_rejected() const { return impl_->rejections.load(std::memory_order_relaxed); }

}  // namespace ember::transport
