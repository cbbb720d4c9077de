// One transfer of the UCX blob server (ucx_blob_server.hpp documents how the protocol rides
// active messages): wait for the receiver's request, then post the frames a FrameSender
// (frame_sender.hpp, the protocol shared with TCP) hands out, at most kSendWindow in flight, and
// close. Internal to the server: the acceptor builds a Link per accepted connection and runs
// serve_transfer() on a thread of the transfer's own.
//
// Runs on that one thread, which owns the Link's worker; UCX calls the callbacks below only inside
// its progress there. Every wait sleeps in poll(2) on the worker's event fd and the server's stop
// fd and is bounded by an option (request_timeout, send_timeout, upstream_wait). Never throws.
// Payloads are sent from the blob's memory, or from kSendWindow staging chunks for blobs that must
// be read(); nothing of the blob is retained after serve_transfer() returns.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "transport/blob.hpp"
#include "transport/data_server.hpp"
#include "transport/server_options.hpp"
#include "transport/ucx_worker.hpp"

namespace ember::transport::ucx {

/// What a transfer uses of its server; all of it outlives the transfer.
struct ServerShared {
  const BlobServerOptions& options;
  const BlobLookup& lookup;
  const std::atomic<bool>& stopping;
  int stop_fd;  // readable once the server stops
  ServerCounters& counters;  // bytes_sent and data_frames (the corrupt_frame seam) are the transfer's to count
};

/// One accepted connection: its worker and endpoint, and what UCX's callbacks (arg = the Link)
/// report about it.
struct Link {
  std::unique_ptr<Worker> worker;
  ucp_ep_h ep = nullptr;  // closed (and reset) by serve_transfer()
  bool request_arrived = false;
  std::vector<uint8_t> request;  // the request's AM header: the encoded FetchRequest
  bool peer_gone = false;
  ucs_status_t peer_status = UCS_OK;
};

/// The kRequestAm receive callback of a Link's worker.
ucs_status_t on_link_request(void* link, const void* header, size_t header_length, void* data, size_t length,
                             const ucp_am_recv_param_t* param);
/// The error callback of a Link's endpoint.
void on_link_error(void* link, ucp_ep_h ep, ucs_status_t status);

/// Serves the connection to its end and closes the endpoint; true when the end frame went out.
bool serve_transfer(const ServerShared& server, Link& link);

}  // namespace ember::transport::ucx
