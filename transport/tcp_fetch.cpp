#include "transport/tcp_fetch.hpp"

#include <sys/socket.h>

#include <optional>

#include "transport/fetch_call.hpp"
#include "transport/frame.hpp"
#include "transport/tcp_socket.hpp"

namespace ember::transport {

namespace {

using Clock = std::chrono::steady_clock;

/// One fetch in progress: the socket and its deadlines around the call's FrameReceiver.
class TcpFetch {
 public:
  TcpFetch(const HostPort& from, const std::string& key, const FetchOptions& options, BlobSink& sink)
      : call_(from, key, options, sink) {}

  Result<FetchResult> run() {
    Result<FetchResult> result = receive();
    // Before the socket closes: no shutdown of a reused descriptor.
    if (call_.options.cancel) call_.options.cancel->detach();
    stream_.reset();  // its SSL, before the socket
    return call_.outcome(std::move(result));
  }

 private:
  Result<FetchResult> receive();
  Status read_exact(void* dst, size_t bytes);
  Result<FrameHeader> read_header();

  FetchCall call_;
  FrameReceiver& frames_ = call_.frames;
  const FetchOptions& options_ = call_.options;
  Socket socket_;
  std::optional<Stream> stream_;  // over socket_: plain or TLS
  Clock::time_point deadline_ = Clock::time_point::max();
};

Status TcpFetch::read_exact(void* dst, size_t bytes) {
  size_t got = 0;
  std::string error_text;
  const RecvEnd end = stream_->read_exact(dst, bytes, options_.idle_timeout, got, error_text, deadline_);
  if (end == RecvEnd::timed_out && Clock::now() >= deadline_) {
    return call_.fail(frames_.total_timeout(options_.total_timeout));
  }
  switch (end) {
    case RecvEnd::done:
      return Status::OK();
    case RecvEnd::closed: {
      std::string where = frames_.position();
      if (!error_text.empty()) where += " (" + error_text + ")";
      return call_.fail(io_error("connection closed by the server" + where + ": truncated stream"));
    }
    case RecvEnd::timed_out:
      return call_.fail(frames_.idle_timeout(options_.idle_timeout));
    case RecvEnd::failed:
      break;
  }
  return call_.fail(io_error("receive failed at offset " + std::to_string(frames_.verified()) + ": " + error_text));
}

Result<FrameHeader> TcpFetch::read_header() {
  uint8_t bytes[kFramePrefixBytes + kMaxFrameHeaderBytes];
  EMBER_RETURN_IF_ERROR(read_exact(bytes, kFramePrefixBytes));
  size_t need = 0;
  auto h = decode_frame_header(bytes, kFramePrefixBytes, need);
  if (!h.ok() && h.error().code() != ErrorCode::not_found) return call_.fail(h.error());
  EMBER_RETURN_IF_ERROR(read_exact(bytes + kFramePrefixBytes, need - kFramePrefixBytes));
  h = decode_frame_header(bytes, need, need);
  if (!h.ok()) return call_.fail(h.error());
  return h;
}

Result<FetchResult> TcpFetch::receive() {
  const auto t0 = Clock::now();
  deadline_ = options_.deadline_from(t0);
  auto request = frames_.request(call_.key);
  if (!request.ok()) return call_.fail(request.error());

  auto connected = connect_tcp(call_.from, options_.connect_budget(), options_.socket_buffer_bytes);
  if (!connected.ok()) return call_.fail(connected.error());
  socket_ = std::move(*connected);
  if (options_.cancel) {
    const int fd = socket_.fd();
    if (!options_.cancel->attach([fd] { ::shutdown(fd, SHUT_RDWR); })) return call_.fail(frames_.cancelled());
  }
  set_send_timeout(socket_.fd(), options_.idle_timeout);
  if (options_.tls) {
    auto tls = Stream::handshake(socket_.fd(), *options_.tls, false,
                                 std::min(deadline_, Clock::now() + options_.connect_budget()));
    if (!tls.ok()) return call_.fail(tls.error().with_context("the data plane's TLS with " + call_.from.to_string()));
    stream_.emplace(std::move(*tls));
  } else {
    stream_.emplace(socket_.fd());
  }
  iovec iov{request->data(), request->size()};
  if (Status st = stream_->write_all(&iov, 1, options_.idle_timeout); !st.ok()) {
    return call_.fail(st.error().with_context("sending the request"));
  }

  // Each header is accepted as it arrives; a data frame's payload is read straight to where the
  // receiver says (the sink's buffer at its offset) and verified there at once.
  while (!frames_.complete()) {
    // Also between frames: after the shutdown, what the kernel already buffered (megabytes with a
    // large socket buffer) would still be read, and a cancelled fetch would go on writing.
    if (options_.cancel && options_.cancel->cancelled()) return call_.fail(frames_.cancelled());
    EMBER_ASSIGN_OR_RETURN(FrameHeader h, read_header());
    auto landing = frames_.accept(h);
    if (!landing.ok()) return call_.fail(landing.error());
    if (landing->bytes == 0) continue;  // the end frame
    EMBER_RETURN_IF_ERROR(read_exact(landing->at, landing->bytes));
    if (Status st = frames_.verify(); !st.ok()) return call_.fail(st.error());
  }
  return call_.finish(t0);
}

}  // namespace

Result<FetchResult> fetch_blob(const HostPort& from, const std::string& key, const FetchOptions& options,
                               BlobSink& sink) {
  return TcpFetch(from, key, options, sink).run();
}

}  // namespace ember::transport
