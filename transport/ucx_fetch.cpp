#include "transport/ucx_fetch.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>
#include <system_error>
#include <vector>

#include "transport/fetch_request.hpp"
#include "transport/frame.hpp"
#include "transport/receive_start.hpp"
#include "transport/trailing_hasher.hpp"
#include "transport/ucx_worker.hpp"

namespace ember::transport {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;



/// A frame as its active message arrived: the header copied, the payload still held by UCX.
struct Arrival {
  std::vector<uint8_t> header;
  bool header_too_long = false;
  void* data = nullptr;  // a rendezvous descriptor or persistent eager data, ours to consume or release
  bool rndv = false;
  size_t length = 0;          // payload bytes
  std::vector<uint8_t> copy;  // eager payload UCX would not keep (not expected with persistent data)
};

/// A data frame whose payload is on its way into the sink's buffer.
struct Pending {
  FrameHeader header;
  ucx::Request receive;
};

/// One fetch in progress: the worker, the endpoint, the stream position, and how to say what went
/// wrong. Everything runs on the caller's thread (UCX callbacks inside progress included).
class Receiver {
 public:
  Receiver(const Endpoint& from, const std::string& key, const FetchOptions& options, BlobSink& sink)
      : what_("fetch of '" + key + "' from " + from.to_string()),
        key_(key),
        from_(from),
        options_(options),
        sink_(sink) {}
  ~Receiver() { teardown(); }
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;

  Result<FetchResult> run();

  // -- UCX callbacks ---------------------------------------------------------------------------
  ucs_status_t on_frame(const void* header, size_t header_length, void* data, size_t length,
                        const ucp_am_recv_param_t* param);
  void on_error(ucs_status_t status) {
    ep_failed_ = true;
    ep_status_ = status;
  }

 private:
  Error fail(Error e) const { return e.with_context(what_); }
  Error cancelled() const {
    return fail(unavailable("cancelled at offset " + std::to_string(next_) + " (the hop was given another upstream)"));
  }
  Error lost() const {
    std::string where = sized_ ? " after " + std::to_string(next_) + " of " + std::to_string(blob_bytes_) + " bytes"
                               : " before the first frame";
    return fail(io_error("connection to the server lost" + where + " (" + ucx::status_text(ep_status_) +
                         "): truncated stream"));
  }
  bool is_cancelled() const { return options_.cancel && options_.cancel->cancelled(); }

  Result<FetchResult> receive();
  Status connect(const std::vector<uint8_t>& request);
  Status take(Arrival& a);
  Status on_first_frame(const FrameHeader& h);
  Status finish_chunks();
  Result<FetchResult> complete(Clock::time_point t0);
  void close_endpoint();
  void teardown();

  const std::string what_;
  const std::string& key_;
  const Endpoint& from_;
  const FetchOptions& options_;
  BlobSink& sink_;

  std::unique_ptr<ucx::Worker> worker_;
  ucp_ep_h ep_ = nullptr;
  int cancel_fd_ = -1;    // eventfd the cancel interrupt signals
  bool closing_ = false;  // the callbacks drop what still arrives
  bool ep_failed_ = false;
  ucs_status_t ep_status_ = UCS_OK;
  std::deque<Arrival> arrivals_;
  std::deque<Pending> pending_;

  bool sized_ = false;
  uint64_t blob_bytes_ = 0;
  uint64_t expect_ = 0;  // the offset the next frame must carry
  uint64_t next_ = 0;    // end of the verified prefix (what on_chunk has reported)
  uint8_t* buffer_ = nullptr;
  std::optional<FrameHeader> end_;
  std::unique_ptr<TrailingHasher> hasher_;
  Clock::time_point deadline_ = Clock::time_point::max();
};

ucs_status_t frame_callback(void* arg, const void* header, size_t header_length, void* data, size_t length,
                            const ucp_am_recv_param_t* param) {
  return static_cast<Receiver*>(arg)->on_frame(header, header_length, data, length, param);
}

void error_callback(void* arg, ucp_ep_h, ucs_status_t status) { static_cast<Receiver*>(arg)->on_error(status); }

ucs_status_t Receiver::on_frame(const void* header, size_t header_length, void* data, size_t length,
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

Result<FetchResult> Receiver::run() {
  Result<FetchResult> result = receive();
  if (options_.cancel) options_.cancel->detach();  // before the eventfd closes
  teardown();                                      // nothing writes into the sink's buffer after this
  if (!result.ok() && is_cancelled()) return cancelled();
  return result;
}

void Receiver::close_endpoint() {
  if (ep_ == nullptr) return;
  closing_ = true;
  ucx::close_endpoint(*worker_, ep_);
  ep_ = nullptr;
}

void Receiver::teardown() {
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

Status Receiver::connect(const std::vector<uint8_t>& request) {
  EMBER_ASSIGN_OR_RETURN(std::vector<ucx::SockAddr> addrs, ucx::resolve(from_.host, from_.port, false));
  auto budget = options_.connect_timeout;
  if (options_.total_timeout.count() > 0) budget = std::min(budget, options_.total_timeout);
  const auto deadline = Clock::now() + budget;
  std::string last = "no address";
  bool unreachable = false;
  for (const ucx::SockAddr& a : addrs) {
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
      if (is_cancelled()) return unavailable("cancelled while connecting");
      if (Clock::now() >= deadline) {
        close_endpoint();
        return io_error("cannot connect to " + from_.to_string() + ": timed out after " +
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
  return io_error("cannot connect to " + from_.to_string() + " with UCX: " + last + hint);
}

Status Receiver::on_first_frame(const FrameHeader& h) {
  blob_bytes_ = h.blob_bytes;
  auto start = start_receiving(blob_bytes_, options_, sink_);
  if (!start.ok()) return fail(start.error());
  buffer_ = start->buffer;
  hasher_ = std::move(start->hasher);
  sized_ = true;
  return Status::OK();
}

Status Receiver::take(Arrival& a) {
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
  if (Status owned = check_frame_owner(h, options_.transfer_id); !owned.ok()) return fail(owned.error());
  if (!sized_) {
    EMBER_RETURN_IF_ERROR(on_first_frame(h));
  } else if (h.blob_bytes != blob_bytes_) {
    return fail(corrupt("frame at offset " + std::to_string(h.offset) + " says the blob has " +
                        std::to_string(h.blob_bytes) + " bytes, earlier frames " + std::to_string(blob_bytes_)));
  }
  if (end_ || h.offset != expect_) {
    return fail(corrupt("frame at offset " + std::to_string(h.offset) + " where offset " + std::to_string(expect_) +
                        " was due"));
  }
  if (a.length != h.length) {
    return fail(corrupt("frame at offset " + std::to_string(h.offset) + ": payload has " + std::to_string(a.length) +
                        " bytes, header says " + std::to_string(h.length)));
  }
  if (h.kind == FrameKind::end) {
    if (expect_ != blob_bytes_) {
      return fail(
          corrupt("end frame after " + std::to_string(expect_) + " of " + std::to_string(blob_bytes_) + " bytes"));
    }
    end_ = h;
    return Status::OK();
  }

  // A data frame: its payload lands in the sink's buffer at its offset and is checked there.
  if (h.length == 0) return fail(corrupt("empty data frame at offset " + std::to_string(h.offset)));
  uint8_t* dst = buffer_ + h.offset;
  Pending p{h, {}};
  if (a.rndv) {
    const ucp_request_param_t param = ucx::host_param();
    p.receive = ucx::Request(ucp_am_recv_data_nbx(worker_->get(), a.data, dst, h.length, &param));
    a.data = nullptr;  // UCX owns the descriptor now, whatever the outcome
  } else if (a.data != nullptr) {
    std::memcpy(dst, a.data, h.length);
    ucp_am_data_release(worker_->get(), a.data);
    a.data = nullptr;
  } else {
    std::memcpy(dst, a.copy.data(), h.length);
  }
  expect_ += h.length;
  pending_.push_back(std::move(p));
  return Status::OK();
}

Status Receiver::finish_chunks() {
  while (!pending_.empty() && pending_.front().receive.done()) {
    const ucs_status_t st = pending_.front().receive.status();
    if (st != UCS_OK) {
      if (ep_failed_) return lost();
      return fail(io_error("receiving the payload at offset " + std::to_string(pending_.front().header.offset) +
                           " failed: " + ucx::status_text(st)));
    }
    const FrameHeader h = pending_.front().header;
    pending_.pop_front();
    if (Status v = verify_payload(h, buffer_ + h.offset, h.length); !v.ok()) return fail(v.error());
    next_ += h.length;
    if (hasher_) hasher_->advance(next_);
    sink_.on_chunk(h.offset, h.length);
  }
  return Status::OK();
}

Result<FetchResult> Receiver::complete(Clock::time_point t0) {
  // Every byte is here: hang up first (the server waits for that before it closes), then hash.
  close_endpoint();
  Digest got{};
  if (hasher_) {
    got = hasher_->finish();
    hasher_.reset();
  } else {
    Sha256 sha;
    if (blob_bytes_ > 0) sha.update(buffer_, blob_bytes_);
    got = sha.finish();
  }
  if (got != end_->digest) {
    return fail(corrupt("SHA-256 mismatch over " + std::to_string(blob_bytes_) + " bytes: received " + to_hex(got) +
                        ", the server says " + to_hex(end_->digest)));
  }
  FetchResult result;
  result.blob_bytes = blob_bytes_;
  result.bytes_received = blob_bytes_ - options_.resume_offset;
  result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  result.digest = got;
  return result;
}

Result<FetchResult> Receiver::receive() {
  next_ = expect_ = options_.resume_offset;
  const auto t0 = Clock::now();
  if (options_.total_timeout.count() > 0) deadline_ = t0 + options_.total_timeout;
  FetchRequest request{options_.transfer_id, key_, options_.resume_offset};
  auto request_bytes = encode_fetch_request(request);
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
    if (!attached) return cancelled();
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
    const uint64_t verified = next_;
    EMBER_RETURN_IF_ERROR(finish_chunks());
    if (next_ != verified) moved = true;
    if (end_ && pending_.empty()) return complete(t0);
    if (is_cancelled()) return cancelled();
    if (ep_failed_) return lost();

    const auto now = Clock::now();
    // Progress while a payload is in flight is the server sending it (a rendezvous moves many
    // packets per chunk before it completes).
    if (moved || (events > 0 && !pending_.empty())) idle_deadline = now + idle;
    if (now >= deadline_) {
      return fail(io_error("not complete within the total timeout of " +
                           std::to_string(options_.total_timeout.count()) + " ms, at offset " + std::to_string(next_)));
    }
    if (now >= idle_deadline) {
      return fail(io_error("server sent nothing for " + std::to_string(idle.count()) + " ms (idle timeout) at offset " +
                           std::to_string(next_)));
    }
    if (events == 0 && !moved) worker_->wait(ucx::until(std::min(idle_deadline, deadline_)), cancel_fd_);
  }
}

}  // namespace

Result<FetchResult> ucx_fetch_blob(const Endpoint& from, const std::string& key, const FetchOptions& options,
                                   BlobSink& sink) {
  Receiver receiver(from, key, options, sink);
  return receiver.run();
}

}  // namespace ember::transport
