// ucx_fetch_blob: the receiving side of the UCX data plane, against a UcxBlobServer
// (ucx_blob_server.hpp documents how the protocol rides active messages). The contract (BlobSink,
// FetchOptions, FetchResult, memory, hashing, error codes) is the data plane's, in fetch.hpp; the
// protocol checks are FrameReceiver's (frame_receiver.hpp), as for TCP.
//
// Callers: the node's model cache and multicast chain hops, on a thread of their own: the call
// blocks until the blob is complete or the transfer fails. It creates a UCX context and worker for
// the fetch (about 3 ms; they see the network devices as they are now) and drives the worker on the
// calling thread (no progress thread), sleeping in poll(2) on the worker's event fd whenever
// nothing is arriving; the only other thread is the trailing SHA-256 hasher. It
// never blocks longer than the connect timeout plus, per silent gap, the idle timeout (and never
// beyond total_timeout); it never throws; it keeps no state between calls.
//
// Verification, as TCP (one FrameReceiver): every data frame's header is accepted as it arrives,
// and its payload lands in the sink's buffer at its offset (a UCX rendezvous pulls it there: no
// intermediate copy); several may be on their way at once, and each is verified (CRC-32C) in order
// as it completes, before BlobSink::on_chunk hears of it. Before the fetch returns, the worker is
// destroyed, so nothing writes into the sink's buffer afterwards.
//
// Options as for TCP, with these UCX meanings:
//   connect_timeout  until the connection is up and the request sent (per resolved address)
//   idle_timeout     the server sends nothing: no frame arrives and no payload in flight moves
//   cancel           the interrupt wakes the fetch's poll(2) through an eventfd; the fetch then
//                    returns `unavailable` ("cancelled at offset N ...")
//   socket_buffer_bytes  not used (UCX_TCP_SNDBUF / UCX_TCP_RCVBUF)
// A dead server is detected by UCX's peer-failure handling (connection reset) or, at the latest,
// by the idle timeout. Error messages name the key and the endpoint; a lost connection says
// "truncated stream" as TCP does.
#pragma once

#include <string>

#include "base/status.hpp"
#include "transport/address.hpp"
#include "transport/fetch.hpp"

namespace ember::transport {

/// Fetches blob `key` from the UcxBlobServer at `from` into `sink`; errors as fetch.hpp lists them.
Result<FetchResult> ucx_fetch_blob(const HostPort& from, const std::string& key, const FetchOptions& options,
                                   BlobSink& sink);

}  // namespace ember::transport
