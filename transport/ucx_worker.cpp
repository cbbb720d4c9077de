#include "transport/ucx_worker.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ember::transport::ucx {

namespace {

using Clock = std::chrono::steady_clock;

/// SO_REUSEADDR on UCX listeners, as listen_tcp sets it on ours: a server restarted (or rebuilt) on
/// its port must not fail with "Address already in use" while connections it closed first sit in
/// TIME_WAIT (UCX's default is n). UCX 1.13 reads this from the environment only (ucp_config_modify
/// does not reach the connection manager's configuration), so it is set here, before main() while
/// the process has one thread, unless the environment already says otherwise.
const bool kReuseAddrSet = [] { return ::setenv("UCX_TCP_CM_REUSEADDR", "y", /*overwrite=*/0) == 0; }();

/// UCX_TLS in effect: the environment's, or Ember's default.
std::string tls(bool* from_env = nullptr) {
  const char* env = std::getenv("UCX_TLS");
  if (from_env != nullptr) *from_env = env != nullptr;
  return env != nullptr ? env : "tcp";
}

int poll_ms(std::chrono::milliseconds ms) { return static_cast<int>(std::clamp<int64_t>(ms.count(), 0, 1 << 30)); }

}  // namespace

Result<std::shared_ptr<Context>> Context::create() {
  bool from_env = false;
  const std::string transports = tls(&from_env);
  ucp_config_t* config = nullptr;
  ucs_status_t rc = ucp_config_read(nullptr, nullptr, &config);
  if (rc != UCS_OK) return io_error("cannot read the UCX configuration: " + status_text(rc));
  if (!from_env) rc = ucp_config_modify(config, "TLS", transports.c_str());
  if (rc != UCS_OK) {
    ucp_config_release(config);
    return io_error("cannot set UCX_TLS=" + transports + ": " + status_text(rc));
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1;  // a server's workers run on different threads
  params.name = "ember-data-plane";
  ucp_context_h context = nullptr;
  rc = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (rc != UCS_OK) return io_error("cannot initialize UCX (UCX_TLS=" + transports + "): " + status_text(rc));
  return std::shared_ptr<Context>(new Context(context));
}

Context::~Context() { ucp_cleanup(context_); }

std::string describe_config() {
  bool from_env = false;
  const std::string transports = tls(&from_env);
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  return "UCX " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release) +
         ", UCX_TLS=" + transports + (from_env ? " (from the environment)" : " (Ember's default)") +
         ", UCX_TCP_CM_REUSEADDR=" + (std::getenv("UCX_TCP_CM_REUSEADDR") ? std::getenv("UCX_TCP_CM_REUSEADDR") : "n") +
         ", error mode PEER, active messages with rendezvous, a context per fetch and per server";
}

std::string status_text(ucs_status_t status) {
  return std::string(ucs_status_string(status)) + " (" + std::to_string(static_cast<int>(status)) + ")";
}

// ---------------------------------------------------------------- Worker

Result<std::unique_ptr<Worker>> Worker::create(std::shared_ptr<Context> context, const std::string& what) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucp_worker_h worker = nullptr;
  ucs_status_t rc = ucp_worker_create(context->get(), &params, &worker);
  if (rc != UCS_OK) return io_error(what + ": cannot create a UCX worker: " + status_text(rc));
  int efd = -1;
  rc = ucp_worker_get_efd(worker, &efd);
  if (rc != UCS_OK) {
    ucp_worker_destroy(worker);
    return io_error(what + ": UCX worker has no event fd: " + status_text(rc));
  }
  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  size_t max_header = 0;
  if (ucp_worker_query(worker, &attr) == UCS_OK) max_header = attr.max_am_header;
  return std::unique_ptr<Worker>(new Worker(std::move(context), worker, efd, max_header));
}

Worker::~Worker() { ucp_worker_destroy(worker_); }

unsigned Worker::progress() {
  unsigned total = 0;
  while (unsigned n = ucp_worker_progress(worker_)) total += n;
  return total;
}

void Worker::wait(std::chrono::milliseconds timeout, int wake_fd, int wake_fd2) {
  const ucs_status_t rc = ucp_worker_arm(worker_);
  if (rc == UCS_ERR_BUSY) return;  // events arrived since the last progress
  pollfd fds[3] = {{efd_, POLLIN, 0}, {wake_fd, POLLIN, 0}, {wake_fd2, POLLIN, 0}};
  // A worker that cannot be armed is polled every millisecond instead (never observed).
  if (rc != UCS_OK) timeout = std::min(timeout, std::chrono::milliseconds(1));
  // poll(2) ignores entries with a negative fd.
  (void)::poll(fds, 3, poll_ms(timeout));
}

Status Worker::set_am_handler(unsigned id, ucp_am_recv_callback_t callback, void* arg) {
  ucp_am_handler_param_t param{};
  param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                     UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  param.id = id;
  param.cb = callback;
  param.arg = arg;
  param.flags = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA;
  const ucs_status_t rc = ucp_worker_set_am_recv_handler(worker_, &param);
  if (rc != UCS_OK) return io_error("cannot install the UCX active-message handler: " + status_text(rc));
  return Status::OK();
}

// ---------------------------------------------------------------- Request

Request::Request(ucs_status_ptr_t ptr) {
  if (ptr == nullptr) {
    status_ = UCS_OK;
  } else if (UCS_PTR_IS_ERR(ptr)) {
    status_ = UCS_PTR_STATUS(ptr);
  } else {
    ptr_ = ptr;
    status_ = UCS_INPROGRESS;
  }
}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    reset();
    ptr_ = other.ptr_;
    status_ = other.status_;
    other.ptr_ = nullptr;
  }
  return *this;
}

ucs_status_t Request::status() {
  if (ptr_ != nullptr) {
    status_ = ucp_request_check_status(ptr_);
    if (status_ != UCS_INPROGRESS) {
      ucp_request_free(ptr_);
      ptr_ = nullptr;
    }
  }
  return status_;
}

void Request::reset() {
  // Still in flight: UCX frees it when it completes, and calls nothing of ours.
  if (ptr_ != nullptr) ucp_request_free(ptr_);
  ptr_ = nullptr;
  status_ = UCS_OK;
}

// ---------------------------------------------------------------- teardown

void close_endpoint(Worker& worker, ucp_ep_h ep) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  Request close(ucp_ep_close_nbx(ep, &param));
  // A force close completes at once in UCX 1.13; the bound only guards against a surprise.
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (!close.done() && Clock::now() < deadline) {
    if (worker.progress() == 0) worker.wait(std::chrono::milliseconds(10));
  }
  // Let UCX run the completions it scheduled for the cancelled requests.
  worker.progress();
}

std::string endpoint_info(ucp_ep_h ep) {
  char* text = nullptr;
  size_t size = 0;
  FILE* f = ::open_memstream(&text, &size);
  if (f == nullptr) return "(no memory for the endpoint info)";
  ucp_ep_print_info(ep, f);
  std::fclose(f);
  std::string out(text, size);
  std::free(text);
  return out;
}

}  // namespace ember::transport::ucx
