// fetch_blob: the receiving side of the TCP data plane, against a BlobServer (tcp_blob_server.hpp).
// The contract (BlobSink, FetchOptions, FetchResult, blocking, memory, hashing, error codes) is the
// data plane's, in fetch.hpp; the protocol checks are FrameReceiver's (frame_receiver.hpp). This
// file adds the TCP mechanics: one connection per fetch, the request written with sendmsg, each
// frame header read and accepted, its payload read straight into the sink's buffer at its offset
// and verified at once.
//
// Callers: the node's model cache and multicast chain hops (through data_plane.hpp), on a thread
// of their own. Options with TCP meanings:
//   connect_timeout      the TCP connect (all of the host's addresses together)
//   idle_timeout         each wait for bytes (poll(2)), and the request's send (SO_SNDTIMEO)
//   cancel               the interrupt is shutdown(2) of the fetch's socket
//   socket_buffer_bytes  SO_RCVBUF/SO_SNDBUF before connect
// A server that closes the connection early reads as "connection closed by the server ...:
// truncated stream".
#pragma once

#include <string>

#include "base/status.hpp"
#include "transport/address.hpp"
#include "transport/fetch.hpp"

namespace ember::transport {

/// Fetches blob `key` from the BlobServer at `from` into `sink`; errors as fetch.hpp lists them,
/// each message naming the key and `from`.
Result<FetchResult> fetch_blob(const HostPort& from, const std::string& key, const FetchOptions& options,
                               BlobSink& sink);

}  // namespace ember::transport
