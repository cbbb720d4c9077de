// UCX plumbing shared by the UCX data plane's server (ucx_blob_server.cpp) and receiver
// (ucx_fetch.cpp), as tcp_socket.hpp is for TCP: UCP contexts, a worker that one thread owns and
// that sleeps on its event fd instead of busy-polling, requests, and endpoint teardown that never
// leaves a request or a worker half-destroyed. Socket addresses come from resolve()
// (transport/address.hpp), the same as TCP's.
//
// Internal to transport/ (and tests and benchmarks that drive UCX directly); the public headers
// ucx_blob_server.hpp and ucx_fetch.hpp do not include it.
//
// Configuration chosen here, and why (measured on the 2-vCPU VM of dependencies.md §7):
//   - Error handling UCP_ERR_HANDLING_MODE_PEER on every endpoint. It is the only mode in which
//     UCX completes a transfer's outstanding requests (with UCS_ERR_CANCELED or the failure) when
//     the peer dies, hangs or is cut off, so that a cancelled fetch, a timed-out send and stop()
//     can close the endpoint and destroy the worker. With UCP_ERR_HANDLING_MODE_NONE (the only mode
//     in which UCX 1.13 picks shared memory: sysv + cma) a force-closed endpoint leaves rendezvous
//     requests in progress forever, and destroying the worker then trips an assertion
//     (arbiter.c:36, seen with a receiver stopped by SIGSTOP and a server cutting it off). The
//     price: UCX uses tcp lanes only, also between processes of one host.
//   - UCX_TLS=tcp unless the environment sets UCX_TLS: under PEER mode only tcp is ever chosen,
//     and not opening sysv/posix/cma interfaces makes each worker cheaper. The socket-address
//     connection flow needs tcp in UCX_TLS (dependencies.md §4) and /sys mounted.
//   - UCX_TCP_CM_REUSEADDR=y unless the environment sets it: listeners get SO_REUSEADDR, as
//     listen_tcp's do, so a server restarted (or rebuilt, below) on its port does not fail with
//     "Address already in use" while connections it closed first sit in TIME_WAIT. UCX 1.13 takes
//     this one from the environment only, so ucx_worker.cpp sets the variable (setenv without
//     overwrite) during static initialization, before main() starts any thread.
//   - Network devices: UCX's defaults. UCX opens tcp on every interface that is up (lo, eth0, and
//     whatever bridges or veths exist) and splits a rendezvous over two of them
//     (UCX_MAX_RNDV_RAILS=2), even towards 127.0.0.1; UCX_NET_DEVICES pins them (bench prints
//     the lanes chosen).
//   - Features AM and WAKEUP: frames are active messages; a waiting thread sleeps in poll(2) on
//     the worker's event fd (ucp_worker_arm), so an idle server or a receiver waiting for a slow
//     upstream uses no CPU.
//   - A context per fetch and per server, not one per process: a context lists the network
//     devices once, at ucp_init, and every worker opens all of them, so after an interface goes
//     away (a container's veth, a test's bridge) worker creation fails with "No such device" for
//     the context's whole life. ucp_init costs about 1.5 ms here (UCX_TLS=tcp), a worker 1.5 ms.
//     A server whose workers cannot be created any more rebuilds its context and listener.
//
// Threading: a Context is shared by its workers (mt_workers_shared), and kept alive by them; each
// Worker is created, used and destroyed by one thread at a time (UCS_THREAD_MODE_SINGLE). Nothing
// here throws; every wait is bounded by a timeout the caller gives.
#pragma once

#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "transport/address.hpp"

namespace ember::transport::ucx {

/// Active message ids of the data plane. One FetchRequest goes receiver -> server (AM header = the
/// encoded request, no data); every frame goes server -> receiver (AM header = the encoded frame
/// header of frame.hpp, AM data = the payload, rendezvous for data frames).
inline constexpr unsigned kRequestAm = 0x45;
inline constexpr unsigned kFrameAm = 0x46;

/// A UCP context (features AM and WAKEUP, the configuration above), destroyed with its last user.
class Context {
 public:
  /// io_error with UCX's reason when UCX cannot be initialized.
  static Result<std::shared_ptr<Context>> create();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ucp_context_h get() const { return context_; }

 private:
  explicit Context(ucp_context_h context) : context_(context) {}
  ucp_context_h context_;
};

/// One line on the UCX configuration in use: version, UCX_TLS and where it came from, error mode.
std::string describe_config();

/// "Connection reset by remote peer (-25)".
std::string status_text(ucs_status_t status);

/// A UCP worker owned by one thread, with its event fd for sleeping waits.
class Worker {
 public:
  /// A worker of `context` (which it keeps alive). io_error naming `what` when UCX cannot create
  /// it (a network device of the context is gone: make a new Context).
  static Result<std::unique_ptr<Worker>> create(std::shared_ptr<Context> context, const std::string& what);
  /// Destroys the worker, then lets go of its context. Every endpoint on it must have been closed
  /// (close_endpoint) first.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  ucp_worker_h get() const { return worker_; }

  /// Calls ucp_worker_progress until it reports nothing more; returns the events processed.
  unsigned progress();

  /// Sleeps until the worker may have an event, `wake_fd` (when >= 0) is readable, or `timeout`
  /// passes. Call it only right after progress() returned 0; returns at once when UCX says events
  /// are pending (then progress again).
  void wait(std::chrono::milliseconds timeout, int wake_fd = -1, int wake_fd2 = -1);

  /// Installs the receive callback of active message `id` (data kept by UCX past the callback when
  /// the callback returns UCS_INPROGRESS: UCP_AM_FLAG_PERSISTENT_DATA).
  Status set_am_handler(unsigned id, ucp_am_recv_callback_t callback, void* arg);

  /// The largest AM header this worker can send.
  size_t max_am_header() const { return max_am_header_; }

 private:
  Worker(std::shared_ptr<Context> context, ucp_worker_h worker, int efd, size_t max_am_header)
      : context_(std::move(context)), worker_(worker), efd_(efd), max_am_header_(max_am_header) {}
  std::shared_ptr<Context> context_;  // first: outlives the worker
  ucp_worker_h worker_;
  int efd_;
  size_t max_am_header_;
};

/// An operation in flight (ucp_*_nbx). Owns the UCX request: freed when it completes, or, if it is
/// still in flight when dropped, handed back to UCX to free on completion (the endpoint must be
/// force-closed first so that completion happens: close_endpoint).
class Request {
 public:
  Request() = default;
  /// Takes what a ucp_*_nbx call returned: NULL (done), an error pointer, or a request.
  explicit Request(ucs_status_ptr_t ptr);
  ~Request() { reset(); }
  Request(Request&& other) noexcept : ptr_(other.ptr_), status_(other.status_) { other.ptr_ = nullptr; }
  Request& operator=(Request&& other) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  /// UCS_INPROGRESS while in flight; then UCS_OK or the error. Polls UCX; call after progress.
  ucs_status_t status();
  bool done() { return status() != UCS_INPROGRESS; }
  void reset();

 private:
  void* ptr_ = nullptr;  // the UCX request while in flight
  ucs_status_t status_ = UCS_OK;
};

/// Force-closes `ep` (UCP_EP_CLOSE_FLAG_FORCE, safe because both sides use PEER mode) and
/// progresses `worker` until UCX is done with it; every request still in flight on the endpoint
/// completes with UCS_ERR_CANCELED. Nothing already queued is guaranteed to reach the peer, so the
/// protocol closes only when the peer has what it needs (ucx_blob_server.hpp). Afterwards the
/// endpoint is gone and the worker may be destroyed.
void close_endpoint(Worker& worker, ucp_ep_h ep);

/// ucp_ep_print_info of `ep` as text (the lanes UCX chose), for logs and benchmarks.
std::string endpoint_info(ucp_ep_h ep);

/// Operation parameters for a contiguous host buffer: no datatype or memory-type detection per
/// operation.
inline ucp_request_param_t host_param() {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  p.datatype = ucp_dt_make_contig(1);
  p.memory_type = UCS_MEMORY_TYPE_HOST;
  return p;
}

/// Milliseconds left until `deadline` (0 once it passed), for Worker::wait.
inline std::chrono::milliseconds until(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? left : std::chrono::milliseconds(0);
}

}  // namespace ember::transport::ucx
