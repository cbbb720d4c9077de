#include "transport/ucx_sender.hpp"

#include <algorithm>
#include <deque>
#include <string>

#include "transport/fetch_request.hpp"
#include "transport/frame.hpp"
#include "transport/frame_sender.hpp"
#include "transport/ucx_blob_server.hpp"

namespace ember::transport::ucx {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// A transfer cut off by stop() still gets its abort frame this long to leave.
constexpr milliseconds kStopAbortGrace{50};

/// One transfer on its thread: the request, the frames a FrameSender hands out posted inside the
/// send window, the close.
class Sender {
 public:
  Sender(const ServerShared& server, Link& t)
      : server_(server),
        t_(t),
        worker_(*t.worker),
        frames_(server.options, server.counters.data_frames, UcxBlobServer::kSendWindow) {}

  /// True when the end frame went out.
  bool run();

 private:
  struct InFlight {
    Request request;
    FrameSender::Frame frame;  // header and any corrupted payload copy, alive until the send completes
  };

  bool stopping() const { return server_.stopping.load(); }
  Status await_request();
  Result<FetchRequest> decode_request() const;
  Status stream();
  Status wait_for_bytes();
  Status post(FrameSender::Frame frame);
  Status retire(size_t max_in_flight);
  Error broken(Error e) {
    link_broken_ = true;
    return e;
  }
  /// Posts the transfer's abort for `error` (one the transport found, such as a stop) unless
  /// nobody is there to read it; `error` either way.
  Error give_up(Error error);
  void linger(milliseconds limit);

  const ServerShared& server_;
  Link& t_;
  Worker& worker_;
  FrameSender frames_;
  std::deque<InFlight> in_flight_;
  bool link_broken_ = false;      // the receiver is gone or stuck: nobody to tell anything
  bool last_frame_sent_ = false;  // an end or abort frame went out: the receiver will hang up
};

bool Sender::run() {
  Status st = await_request();
  if (st.ok()) {
    frames_.open(check_ticket(decode_request(), server_.options.tickets.get()), server_.lookup);
    st = stream();
  }
  const bool served = st.ok();
  if (stopping() && !served && !link_broken_ && !last_frame_sent_) {
    // Best effort: the frame may still be behind a payload the receiver is not pulling.
    (void)post(frames_.abort(io_error("blob server stopping")));
    const auto grace = Clock::now() + kStopAbortGrace;
    while (!in_flight_.empty() && Clock::now() < grace && !t_.peer_gone) {
      if (worker_.progress() == 0) worker_.wait(ucx::until(grace));
      while (!in_flight_.empty() && in_flight_.front().request.done()) in_flight_.pop_front();
    }
  } else if (last_frame_sent_ && !link_broken_) {
    linger(server_.options.send_timeout);
  }
  close_endpoint(worker_, t_.ep);
  t_.ep = nullptr;
  // Cancelled by the close; freeing a request UCX still holds hands it back to UCX.
  in_flight_.clear();
  return served;
}

Status Sender::await_request() {
  const auto deadline = Clock::now() + server_.options.request_timeout;
  while (!t_.request_arrived) {
    const unsigned events = worker_.progress();
    if (t_.request_arrived) break;
    if (t_.peer_gone) return broken(io_error("receiver gone before its request: " + status_text(t_.peer_status)));
    if (stopping()) return io_error("blob server stopping");
    if (Clock::now() >= deadline) return broken(io_error("no request within the request timeout"));
    if (events == 0) worker_.wait(ucx::until(deadline), server_.stop_fd);
  }
  return Status::OK();
}

Result<FetchRequest> Sender::decode_request() const {
  // The active message's own framing: the header is the whole request, nothing more or less.
  size_t consumed = 0;
  Result<FetchRequest> decoded = decode_fetch_request(t_.request.data(), t_.request.size(), consumed);
  if (decoded.ok() && consumed != t_.request.size()) {
    return corrupt("fetch request of " + std::to_string(t_.request.size()) + " bytes carries " +
                   std::to_string(t_.request.size() - consumed) + " trailing bytes");
  }
  if (!decoded.ok() && decoded.error().code() == ErrorCode::not_found) return corrupt("fetch request is truncated");
  return decoded;
}

Status Sender::post(FrameSender::Frame frame) {
  InFlight f;
  f.frame = std::move(frame);  // moving the vectors keeps their buffers where UCX sees them
  const FrameSender::Frame& fr = f.frame;
  const ucp_request_param_t param = ucx::host_param();
  f.request = Request(ucp_am_send_nbx(t_.ep, kFrameAm, fr.header.data(), fr.header.size(),
                                      fr.payload_bytes > 0 ? fr.payload : nullptr, fr.payload_bytes, &param));
  if (f.request.done() && f.request.status() != UCS_OK) {
    return broken(io_error("send failed: " + status_text(f.request.status())));
  }
  if (fr.kind == FrameKind::end || fr.kind == FrameKind::abort) last_frame_sent_ = true;
  in_flight_.push_back(std::move(f));
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
      if (st != UCS_OK) return broken(io_error("send failed, receiver gone: " + status_text(st)));
      server_.counters.bytes_sent.fetch_add(in_flight_.front().frame.payload_bytes, std::memory_order_relaxed);
      in_flight_.pop_front();
      idle_deadline = Clock::now() + timeout;
    }
    if (in_flight_.size() <= max_in_flight) return Status::OK();
    if (t_.peer_gone) return broken(io_error("receiver gone: " + status_text(t_.peer_status)));
    if (stopping()) return io_error("blob server stopping");
    if (Clock::now() >= idle_deadline) {
      return broken(io_error("receiver took no data for " + std::to_string(timeout.count()) + " ms (send timeout)"));
    }
    if (events == 0) worker_.wait(ucx::until(idle_deadline), server_.stop_fd);
  }
}

Error Sender::give_up(Error error) {
  if (!link_broken_ && post(frames_.abort(error)).ok()) (void)retire(0);
  return error;
}

void Sender::linger(milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!t_.peer_gone && !stopping() && Clock::now() < deadline) {
    if (worker_.progress() == 0) worker_.wait(ucx::until(deadline), server_.stop_fd);
  }
}

Status Sender::wait_for_bytes() {
  // What is in flight goes out first: the receiver is waiting for those bytes too, and nothing
  // progresses the worker while this thread waits on the blob.
  if (Status st = retire(0); !st.ok()) return give_up(st.error());
  if (stopping()) return give_up(io_error("blob server stopping"));
  worker_.progress();
  if (t_.peer_gone) return broken(io_error("receiver gone: " + status_text(t_.peer_status)));
  (void)frames_.wait(UcxBlobServer::kUpstreamPoll);  // its outcome comes back through the next next()
  if (stopping()) return give_up(io_error("blob server stopping"));
  return Status::OK();
}

Status Sender::stream() {
  while (true) {
    if (stopping()) return io_error("blob server stopping");
    // A free slot before the next data frame; every data frame completed before the end frame.
    EMBER_RETURN_IF_ERROR(retire(frames_.data_done() ? 0 : UcxBlobServer::kSendWindow - 1));
    FrameSender::Frame frame;
    switch (frames_.next(Clock::now(), frame)) {
      case FrameSender::Step::done:
        return frames_.result();
      case FrameSender::Step::wait:
        EMBER_RETURN_IF_ERROR(wait_for_bytes());
        break;
      case FrameSender::Step::send: {
        const FrameKind kind = frame.kind;
        EMBER_RETURN_IF_ERROR(post(std::move(frame)));
        if (kind == FrameKind::end) EMBER_RETURN_IF_ERROR(retire(0));
        if (kind == FrameKind::abort) (void)retire(0);  // the abort's own error is what counts
        break;
      }
    }
  }
}

}  // namespace

ucs_status_t on_link_request(void* arg, const void* header, size_t header_length, void*, size_t,
                             const ucp_am_recv_param_t*) {
  auto* t = static_cast<Link*>(arg);
  if (t->request_arrived) return UCS_OK;  // one request per connection; later ones are ignored
  t->request_arrived = true;
  // A request longer than the bound is kept cut, so that decoding reports it as corrupt.
  const size_t n = std::min<size_t>(header_length, kFramePrefixBytes + kMaxFetchRequestBytes + 8);
  const auto* bytes = static_cast<const uint8_t*>(header);
  t->request.assign(bytes, bytes + n);
  return UCS_OK;
}

void on_link_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* t = static_cast<Link*>(arg);
  t->peer_gone = true;
  t->peer_status = status;
}

bool serve_transfer(const ServerShared& server, Link& link) {
  Sender sender(server, link);
  return sender.run();
}

}  // namespace ember::transport::ucx
