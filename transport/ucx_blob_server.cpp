#include "transport/ucx_blob_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "transport/fetch_request.hpp"
#include "transport/frame.hpp"
#include "transport/transfer_threads.hpp"
#include "transport/ucx_sender.hpp"
#include "transport/ucx_worker.hpp"

namespace ember::transport {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// How long the acceptor sleeps when nothing is due (a stop() or a finished transfer wakes it).
constexpr milliseconds kAcceptorNap{1000};


void signal_fd(int fd) {
  const uint64_t one = 1;
  (void)!::write(fd, &one, sizeof(one));
}

void drain_fd(int fd) {
  uint64_t value;
  (void)!::read(fd, &value, sizeof(value));
}


/// Requests on the acceptor's worker come from connections turned away: nobody reads them.
ucs_status_t drop_request(void*, const void*, size_t, void*, size_t, const ucp_am_recv_param_t*) { return UCS_OK; }

}  // namespace

// ---------------------------------------------------------------- state

struct UcxBlobServer::Impl {
  /// One transfer: its own worker and endpoint, driven by its own thread. The acceptor builds it
  /// (the connection request belongs to the acceptor's worker) and then hands it over.
  struct Transfer {
    ucx::Link link;  // its worker and endpoint (ucx_sender.hpp)
    std::thread thread;
    std::atomic<bool> done{false};
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

  Status open_acceptor(uint16_t port);
  void close_acceptor();
  void accept_loop();
  void admit(ucp_conn_request_h request);
  void reject(ucp_conn_request_h request);

  const BlobServerOptions options;
  const BlobLookup lookup;
  // The acceptor's: its context (transfers share it), worker and listener. Rebuilt, on the same
  // port, when a transfer's worker cannot be created (ucx_worker.hpp: devices come and go).
  std::shared_ptr<ucx::Context> context;
  std::unique_ptr<ucx::Worker> acceptor_worker;
  ucp_listener_h listener = nullptr;
  bool rebuild = false;  // acceptor thread only
  std::atomic<uint16_t> port{0};
  int stop_fd = -1;  // eventfd, signalled once by stop() and never drained: every waiter wakes
  int reap_fd = -1;  // eventfd: a transfer finished; the acceptor joins it
  std::thread acceptor;

  std::vector<ucp_conn_request_h> incoming;  // acceptor thread only (filled by the listener's callback)
  std::list<Rejected> rejected;              // acceptor thread only

  TransferThreads<Transfer> transfers;
  std::atomic<bool> stopping{false};
  std::mutex stop_mutex;  // serializes stop()
  bool stopped = false;   // under stop_mutex

  ServerCounters counters;
};

namespace {

using Impl = UcxBlobServer::Impl;

void on_connection(ucp_conn_request_h request, void* arg) { static_cast<Impl*>(arg)->incoming.push_back(request); }

void on_rejected_error(void* arg, ucp_ep_h, ucs_status_t) { static_cast<Impl::Rejected*>(arg)->peer_gone = true; }

}  // namespace

// ---------------------------------------------------------------- acceptor

Status Impl::open_acceptor(uint16_t listen_port) {
  const HostPort at{options.listen.host, listen_port};
  const std::string where = at.to_string();
  EMBER_ASSIGN_OR_RETURN(context, ucx::Context::create());
  EMBER_ASSIGN_OR_RETURN(acceptor_worker, ucx::Worker::create(context, "blob server on " + where));
  const size_t need = kFramePrefixBytes + kMaxFrameHeaderBytes;
  if (acceptor_worker->max_am_header() < need) {
    return unsupported("UCX allows active-message headers of " + std::to_string(acceptor_worker->max_am_header()) +
                       " bytes; a frame header needs " + std::to_string(need));
  }
  EMBER_RETURN_IF_ERROR(acceptor_worker->set_am_handler(ucx::kRequestAm, drop_request, nullptr));
  EMBER_ASSIGN_OR_RETURN(std::vector<SockAddr> addrs, resolve(at, /*passive=*/true));
  std::string last = "no address";
  for (const SockAddr& a : addrs) {
    ucp_listener_params_t params{};
    params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    params.sockaddr.addr = a.get();
    params.sockaddr.addrlen = a.length;
    params.conn_handler.cb = on_connection;
    params.conn_handler.arg = this;
    const ucs_status_t rc = ucp_listener_create(acceptor_worker->get(), &params, &listener);
    if (rc == UCS_OK) break;
    listener = nullptr;
    last = ucx::status_text(rc);
  }
  if (listener == nullptr) return io_error("cannot listen on " + where + " with UCX: " + last);
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  uint16_t bound = 0;
  if (ucp_listener_query(listener, &attr) == UCS_OK) {
    if (attr.sockaddr.ss_family == AF_INET) bound = ntohs(reinterpret_cast<sockaddr_in*>(&attr.sockaddr)->sin_port);
    if (attr.sockaddr.ss_family == AF_INET6) bound = ntohs(reinterpret_cast<sockaddr_in6*>(&attr.sockaddr)->sin6_port);
  }
  if (bound == 0) return io_error("cannot read back the port UCX listens on at " + where);
  port.store(bound);
  return Status::OK();
}

void Impl::close_acceptor() {
  for (auto& r : rejected) ucx::close_endpoint(*acceptor_worker, r.ep);
  rejected.clear();
  // After the last progress call (inside close_endpoint): no request can arrive unseen any more.
  if (listener != nullptr) {
    for (ucp_conn_request_h request : incoming) (void)ucp_listener_reject(listener, request);
  }
  incoming.clear();
  if (listener != nullptr) ucp_listener_destroy(listener);
  listener = nullptr;
  acceptor_worker.reset();
  context.reset();  // transfers in progress keep theirs alive
}

void Impl::accept_loop() {
  while (!stopping.load()) {
    if (rebuild) {
      close_acceptor();
      if (!open_acceptor(port.load()).ok()) {
        // Connections are refused meanwhile; receivers retry elsewhere. Try again in a while.
        close_acceptor();
        pollfd p{stop_fd, POLLIN, 0};
        (void)::poll(&p, 1, static_cast<int>(kAcceptorNap.count()));
        continue;
      }
      rebuild = false;
    }
    const unsigned events = acceptor_worker->progress();
    std::vector<ucp_conn_request_h> arrived;
    arrived.swap(incoming);
    for (ucp_conn_request_h request : arrived) {
      if (rebuild) {
        (void)ucp_listener_reject(listener, request);
      } else if (counters.active.load() >= options.max_transfers) {
        reject(request);
      } else {
        admit(request);
      }
    }
    drain_fd(reap_fd);
    transfers.reap(/*all=*/false);

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
    if (events == 0 && arrived.empty() && !rebuild) acceptor_worker->wait(ucx::until(wake_at), stop_fd, reap_fd);
  }
  // Stopping: nothing new is admitted, nothing turned away waits any longer.
  close_acceptor();
}

void Impl::admit(ucp_conn_request_h request) {
  counters.active.fetch_add(1);
  auto fail = [&] {
    counters.failed.fetch_add(1);
    counters.active.fetch_sub(1);
  };
  auto t = std::make_unique<Transfer>();
  ucx::Link& link = t->link;
  auto worker = ucx::Worker::create(context, "blob server transfer");
  if (!worker.ok()) {
    (void)ucp_listener_reject(listener, request);
    fail();
    rebuild = true;  // most likely a network device of the context is gone
    return;
  }
  link.worker = std::move(*worker);
  // The handler is in place before the endpoint exists, so the request cannot arrive unseen.
  if (!link.worker->set_am_handler(ucx::kRequestAm, ucx::on_link_request, &link).ok()) {
    (void)ucp_listener_reject(listener, request);
    fail();
    return;
  }
  // The connection request belongs to the acceptor's worker; the endpoint goes on the transfer's
  // (UCX's client-server flow allows accepting on another worker of the same context).
  ucp_ep_params_t params{};
  params.field_mask =
      UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.conn_request = request;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = ucx::on_link_error;
  params.err_handler.arg = &link;
  if (ucp_ep_create(link.worker->get(), &params, &link.ep) != UCS_OK) {  // the request is consumed either way
    fail();
    return;
  }
  Transfer& added = transfers.add(std::move(t));
  try {
    // From here on only the transfer's thread touches its worker.
    added.thread = std::thread([this, &added] {
      const ucx::ServerShared shared{options, lookup, stopping, stop_fd, counters};
      const bool ok = ucx::serve_transfer(shared, added.link);
      (ok ? counters.served : counters.failed).fetch_add(1);
      counters.active.fetch_sub(1);
      added.done.store(true);
      signal_fd(reap_fd);
    });
  } catch (const std::system_error&) {
    // No thread for it: the receiver sees the connection close; reap() drops the record.
    ucx::close_endpoint(*added.link.worker, added.link.ep);
    added.link.ep = nullptr;
    fail();
    added.done.store(true);
  }
}

void Impl::reject(ucp_conn_request_h request) {
  counters.rejected.fetch_add(1);
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
  const ucp_request_param_t param = ucx::host_param();
  r.send = ucx::Request(ucp_am_send_nbx(r.ep, ucx::kFrameAm, r.header.data(), r.header.size(), nullptr, 0, &param));
  r.deadline = Clock::now() + kRejectLinger;
}

// ---------------------------------------------------------------- lifecycle

Result<std::unique_ptr<UcxBlobServer>> UcxBlobServer::start(BlobServerOptions options, BlobLookup lookup) {
  EMBER_RETURN_IF_ERROR(check_server_options(options, lookup));
  auto impl = std::make_unique<Impl>(std::move(options), std::move(lookup));
  impl->stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  impl->reap_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  // From here on the UcxBlobServer owns impl: its destructor (stop()) releases whatever was made.
  std::unique_ptr<UcxBlobServer> server(new UcxBlobServer(std::move(impl)));
  Impl& s = *server->impl_;
  if (s.stop_fd < 0 || s.reap_fd < 0) {
    return io_error(std::string("blob server cannot create its event fds: ") + std::strerror(errno));
  }
  EMBER_RETURN_IF_ERROR(s.open_acceptor(s.options.listen.port));
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
    s.acceptor.join();  // it closes the listener on its way out
  } else {
    s.close_acceptor();  // start() failed part way
  }
  s.transfers.reap(/*all=*/true);  // every transfer sees the stop fd, cuts its receiver off and ends
  if (s.stop_fd >= 0) ::close(s.stop_fd);
  if (s.reap_fd >= 0) ::close(s.reap_fd);
  s.stop_fd = s.reap_fd = -1;
  s.stopped = true;
}

uint16_t UcxBlobServer::port() const { return impl_->port.load(); }
HostPort UcxBlobServer::endpoint() const { return {impl_->options.listen.host, impl_->port.load()}; }
const ServerCounters& UcxBlobServer::counters() const { return impl_->counters; }

}  // namespace ember::transport
