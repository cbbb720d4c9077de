#include "transport/ucx_fetch.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <vector>

#include "transport/fetch_call.hpp"
#include "transport/frame.hpp"
#include "transport/ucx_worker.hpp"

namespace ember::transport {

namespace {

using Clock = std::chrono::steady_clock;

/// A frame as its active message arrived: the header copied, the payload still held by UCX.
struct Arrival {
  std::vector<uint8_t> header;
  bool header_too_long = false;
  void* data = nullptr;  // a rendezvous descriptor or persistent eager data, ours to consume or release
  bool rndv = false;
  size_t length = 0;          // payload bytes
  std::vector<uint8_t> copy;  // eager payload UCX would not keep (not expected with persistent data)
};

/// An accepted data frame whose payload is on its way into the sink's buffer (in the order the
/// FrameReceiver accepted them, so the front is the one it verifies next).
struct Pending {
  uint64_t offset = 0;
  ucx::Request receive;
};

/// One fetch in progress: the worker, the endpoint, and the arrivals around one FrameReceiver.
/// Everything runs on the caller's thread (UCX callbacks inside progress included).
class UcxFetch {
 public:
  UcxFetch(const HostPort& from, const std::string& key, const FetchOptions& options, BlobSink& sink)
      : call_(from, key, options, sink) {}
  ~UcxFetch() { teardown(); }
  UcxFetch(const UcxFetch&) = delete;
  UcxFetch& operator=(const UcxFetch&) = delete;

  Result<FetchResult> run();

  // -- UCX callbacks ---------------------------------------------------------------------------
  ucs_status_t on_frame(const void* header, size_t header_length, void* data, size_t length,
                        const ucp_am_recv_param_t* param);
  void on_error(ucs_status_t status) {
    ep_failed_ = true;
    ep_status_ = status;
  }

 private:
  Error fail(Error e) const { return call_.fail(std::move(e)); }
  Error lost() const {
    return fail(io_error("connection to the server lost" + frames_.position() + " (" + ucx::status_text(ep_status_) +
                         "): truncated stream"));
  }

  Result<FetchResult> receive();
  Status connect(const std::vector<uint8_t>& request);
  Status take(Arrival& a);
  Status finish_chunks();
  Result<FetchResult> complete(Clock::time_point t0);
  void close_endpoint();
  void teardown();

  FetchCall call_;
  FrameReceiver& frames_ = call_.frames;
  const FetchOptions& options_ = call_.options;

  std::unique_ptr<ucx::Worker> worker_;
  ucp_ep_h ep_ = nullptr;
  int cancel_fd_ = -1;    // eventfd the cancel interrupt signals
  bool closing_ = false;  // the callbacks drop what still arrives
  bool ep_failed_ = false;
  ucs_status_t ep_status_ = UCS_OK;
  std::deque<Arrival> arrivals_;
  std::deque<Pending> pending_;
  Clock::time_point deadline_ = Clock::time_point::max();
};

ucs_status_t frame_callback(void* arg, const void* header, size_t header_length, void* data, size_t length,
                            const ucp_am_recv_param_t* param) {
  return static_cast<UcxFetch*>(arg)->on_frame(header, header_length, data, length, param);
}

void error_callback(void* arg, ucp_ep_h, ucs_status_t status) { static_cast<UcxFetch*>(arg)->on_error(status); }

ucs_status_t UcxFetch::on_frame(const void* header, size_t header_length, void* data, size_t length,
                                const ucp_am_recv_param_t* param) {
  if (closing_) return UCS_OK;  // dropped; a rendezvous sender sees its send complete
  Arrival& a = arrivals_.emplace_back();
  if (header_length > kFramePrefixBytes + kMaxFrameHeaderBytes) {
    a.header_too_long = true;
    a.header.resize(header_length > 0 ? 1 : 0);
  } else {
    const auto* bytes = static_cast<const uint8_t*>(header);
    a.header.assign(bytes, bytes + header_length);
  }
  a.length = length;
  if (length == 0) return UCS_OK;
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
    a.data = data;
    a.rndv = true;
    return UCS_INPROGRESS;  // the descriptor is ours: ucp_am_recv_data_nbx or ucp_am_data_release
  }
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) {
    a.data = data;
    return UCS_INPROGRESS;  // ours until ucp_am_data_release
  }
  const auto* bytes = static_cast<const uint8_t*>(data);
  a.copy.assign(bytes, bytes + length);
  return UCS_OK;
}

Result<FetchResult> UcxFetch::run() {
  Result<FetchResult> result = receive();
  if (options_.cancel) options_.cancel->detach();  // before the eventfd closes
  teardown();                                      // nothing writes into the sink's buffer after this
  return call_.outcome(std::move(result));
}

void UcxFetch::close_endpoint() {
  if (ep_ == nullptr) return;
  closing_ = true;
  ucx::close_endpoint(*worker_, ep_);
  ep_ = nullptr;
}

void UcxFetch::teardown() {
  if (worker_) {
    closing_ = true;
    for (Arrival& a : arrivals_) {
      if (a.data != nullptr) ucp_am_data_release(worker_->get(), a.data);  // a rendezvous sender completes
    }
    arrivals_.clear();
    close_endpoint();  // receives in flight complete with UCS_ERR_CANCELED
    pending_.clear();
    worker_.reset();
  }
  if (cancel_fd_ >= 0) ::close(cancel_fd_);
  cancel_fd_ = -1;
}

Status UcxFetch::connect(const std::vector<uint8_t>& request) {
  EMBER_ASSIGN_OR_RETURN(std::vector<SockAddr> addrs, resolve(call_.from, /*passive=*/false));
  const auto budget = options_.connect_budget();
  const auto deadline = Clock::now() + budget;
  std::string last = "no address";
  bool unreachable = false;
  for (const SockAddr& a : addrs) {
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    params.sockaddr.addr = a.get();
    params.sockaddr.addrlen = a.length;
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = error_callback;
    params.err_handler.arg = this;
    ep_failed_ = false;
    closing_ = false;
    const ucs_status_t rc = ucp_ep_create(worker_->get(), &params, &ep_);
    if (rc != UCS_OK) {
      ep_ = nullptr;
      last = ucx::status_text(rc);
      continue;
    }
    // The request leaves once the connection is up: its completion is the end of the connect.
    const ucp_request_param_t param = ucx::host_param();
    ucx::Request send(ucp_am_send_nbx(ep_, ucx::kRequestAm, request.data(), request.size(), nullptr, 0, &param));
    while (!send.done() && !ep_failed_) {
      if (call_.cancelled()) return unavailable("cancelled while connecting");
      if (Clock::now() >= deadline) {
        close_endpoint();
        return io_error("cannot connect to " + call_.from.to_string() + ": timed out after " +
                        std::to_string(budget.count()) + " ms");
      }
      if (worker_->progress() == 0 && !send.done()) worker_->wait(ucx::until(deadline), cancel_fd_);
    }
    if (!ep_failed_ && send.status() == UCS_OK) return Status::OK();
    const ucs_status_t why = ep_failed_ ? ep_status_ : send.status();
    last = ucx::status_text(why);
    unreachable = why == UCS_ERR_UNREACHABLE;
    close_endpoint();
    arrivals_.clear();  // nothing arrives before the request went out
  }
  // What dependencies.md §4 saw when tcp was missing from UCX_TLS or /sys was not mounted.
  const std::string hint = unreachable ? " (UCX needs tcp in UCX_TLS and /sys mounted)" : "";
  return io_error("cannot connect to " + call_.from.to_string() + " with UCX: " + last + hint);
}

Status UcxFetch::take(Arrival& a) {
  // The active message's own framing: one whole header, the payload as its data.
  if (a.header_too_long)
    return fail(corrupt("frame header exceeds " + std::to_string(kMaxFrameHeaderBytes) + " bytes"));
  size_t consumed = 0;
  Result<FrameHeader> decoded = decode_frame_header(a.header.data(), a.header.size(), consumed);
  if (!decoded.ok()) {
    return fail(decoded.error().code() == ErrorCode::not_found ? corrupt("frame header is truncated")
                                                               : decoded.error());
  }
  if (consumed != a.header.size()) return fail(corrupt("frame header carries trailing bytes"));
  const FrameHeader& h = *decoded;
  if (a.length != h.length) {
    return fail(corrupt("frame at offset " + std::to_string(h.offset) + ": payload has " + std::to_string(a.length) +
                        " bytes, header says " + std::to_string(h.length)));
  }
  auto landing = frames_.accept(h);
  if (!landing.ok()) return fail(landing.error());
  if (landing->bytes == 0) return Status::OK();  // the end frame

  // A data frame: its payload lands in the sink's buffer at its offset and is verified there once
  // it is complete (finish_chunks).
  Pending p{h.offset, {}};
  if (a.rndv) {
    const ucp_request_param_t param = ucx::host_param();
    p.receive = ucx::Request(ucp_am_recv_data_nbx(worker_->get(), a.data, landing->at, landing->bytes, &param));
    a.data = nullptr;  // UCX owns the descriptor now, whatever the outcome
  } else if (a.data != nullptr) {
    std::memcpy(landing->at, a.data, landing->bytes);
    ucp_am_data_release(worker_->get(), a.data);
    a.data = nullptr;
  } else {
    std::memcpy(landing->at, a.copy.data(), landing->bytes);
  }
  pending_.push_back(std::move(p));
  return Status::OK();
}

Status UcxFetch::finish_chunks() {
  while (!pending_.empty() && pending_.front().receive.done()) {
    const ucs_status_t st = pending_.front().receive.status();
    if (st != UCS_OK) {
      if (ep_failed_) return lost();
      return fail(io_error("receiving the payload at offset " + std::to_string(pending_.front().offset) +
                           " failed: " + ucx::status_text(st)));
    }
    pending_.pop_front();
    if (Status v = frames_.verify(); !v.ok()) return fail(v.error());
  }
  return Status::OK();
}

Result<FetchResult> UcxFetch::complete(Clock::time_point t0) {
  // Every byte is here: hang up first (the server waits for that before it closes), then hash.
  close_endpoint();
  return call_.finish(t0);
}

Result<FetchResult> UcxFetch::receive() {
  const auto t0 = Clock::now();
  deadline_ = options_.deadline_from(t0);
  auto request_bytes = frames_.request(call_.key);
  if (!request_bytes.ok()) return fail(request_bytes.error());

  // A context of its own: it sees the network devices as they are now (ucx_worker.hpp).
  auto context = ucx::Context::create();
  if (!context.ok()) return fail(context.error());
  auto worker = ucx::Worker::create(std::move(*context), "fetch");
  if (!worker.ok()) return fail(worker.error());
  worker_ = std::move(*worker);
  // In place before the endpoint exists: no frame can arrive unseen.
  if (Status st = worker_->set_am_handler(ucx::kFrameAm, frame_callback, this); !st.ok()) return fail(st.error());
  if (options_.cancel) {
    cancel_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (cancel_fd_ < 0) return fail(io_error("cannot create the cancel eventfd"));
    const int fd = cancel_fd_;
    const bool attached = options_.cancel->attach([fd] {
      const uint64_t one = 1;
      (void)!::write(fd, &one, sizeof(one));
    });
    if (!attached) return fail(frames_.cancelled());
  }
  if (Status st = connect(*request_bytes); !st.ok()) return fail(st.error());

  const auto idle = options_.idle_timeout;
  auto idle_deadline = Clock::now() + idle;
  while (true) {
    const unsigned events = worker_->progress();
    bool moved = false;
    while (!arrivals_.empty()) {
      EMBER_RETURN_IF_ERROR(take(arrivals_.front()));
      arrivals_.pop_front();
      moved = true;
    }
    const uint64_t verified = frames_.verified();
    EMBER_RETURN_IF_ERROR(finish_chunks());
    if (frames_.verified() != verified) moved = true;
    if (frames_.complete()) return complete(t0);
    if (call_.cancelled()) return fail(frames_.cancelled());
    if (ep_failed_) return lost();

    const auto now = Clock::now();
    // Progress while a payload is in flight is the server sending it (a rendezvous moves many
    // packets per chunk before it completes).
    if (moved || (events > 0 && !pending_.empty())) idle_deadline = now + idle;
    if (now >= deadline_) return fail(frames_.total_timeout(options_.total_timeout));
    if (now >= idle_deadline) return fail(frames_.idle_timeout(idle));
    if (events == 0 && !moved) worker_->wait(ucx::until(std::min(idle_deadline, deadline_)), cancel_fd_);
  }
}

}  // namespace

Result<FetchResult> ucx_fetch_blob(const HostPort& from, const std::string& key, const FetchOptions& options,
                                   BlobSink& sink) {
  UcxFetch fetch(from, key, options, sink);
  return fetch.run();
}

}  // namespace ember::transport
