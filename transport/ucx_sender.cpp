#include "transport/ucx_sender.hpp"

#include <algorithm>
#include <deque>
#include <string>

#include "transport/fetch_request.hpp"
#include "transport/frame.hpp"
#include "transport/ucx_blob_server.hpp"

namespace ember::transport::ucx {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// A transfer cut off by stop() still gets its abort frame this long to leave.
constexpr milliseconds kStopAbortGrace{50};



/// One transfer on its thread: the request, the frames, the close.
class Sender {
 public:
  Sender(const ServerShared& server, Link& t) : server_(server), t_(t), worker_(*t.worker) {}

  /// True when the end frame went out.
  bool run();

 private:
  struct InFlight {
    Request request;
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

  const ServerShared& server_;
  Link& t_;
  Worker& worker_;
  std::deque<InFlight> in_flight_;
  bool link_broken_ = false;      // the receiver is gone or stuck: nobody to tell anything
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

Status Sender::await_request(FetchRequest& request) {
  const auto deadline = Clock::now() + server_.options.request_timeout;
  while (!t_.request_arrived) {
    const unsigned events = worker_.progress();
    if (t_.request_arrived) break;
    if (t_.peer_gone) return broken(io_error("receiver gone before its request: " + status_text(t_.peer_status)));
    if (stopping()) return io_error("blob server stopping");
    if (Clock::now() >= deadline) return broken(io_error("no request within the request timeout"));
    if (events == 0) worker_.wait(ucx::until(deadline), server_.stop_fd);
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
  const ucp_request_param_t param = ucx::host_param();
  f.request =
      Request(ucp_am_send_nbx(t_.ep, kFrameAm, f.header.data(), f.header.size(), n > 0 ? payload : nullptr, n, &param));
  if (f.request.done() && f.request.status() != UCS_OK) {
    return broken(io_error("send failed: " + status_text(f.request.status())));
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
      if (st != UCS_OK) return broken(io_error("send failed, receiver gone: " + status_text(st)));
      server_.bytes_sent.fetch_add(in_flight_.front().payload_bytes, std::memory_order_relaxed);
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

void Sender::send_abort(uint64_t transfer_id, const Error& error) {
  if (link_broken_) return;  // nobody to tell
  if (post(abort_frame(transfer_id, error), nullptr, 0).ok()) (void)retire(0);
}

void Sender::linger(milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!t_.peer_gone && !stopping() && Clock::now() < deadline) {
    if (worker_.progress() == 0) worker_.wait(ucx::until(deadline), server_.stop_fd);
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
    if (t_.peer_gone) return broken(io_error("receiver gone: " + status_text(t_.peer_status)));
    Status st = blob.wait_readable(end, UcxBlobServer::kUpstreamPoll);
    // deadline_exceeded: the slice ran out, ask again; any other error is the writer's own.
    if (st.ok() || st.error().code() != ErrorCode::deadline_exceeded) return st;
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
