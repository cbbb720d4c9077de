// The data plane behind one interface: the runtime reads `transport: tcp|ucx` from its config and
// starts and fetches through these functions, never naming a transport's classes.
//
//   tcp  BlobServer + fetch_blob (tcp_blob_server.hpp, tcp_fetch.hpp): kernel sockets, one thread
//        per transfer on each side.
//   ucx  UcxBlobServer + ucx_fetch_blob (ucx_blob_server.hpp, ucx_fetch.hpp): UCX active messages
//        with rendezvous, one UCX worker and thread per transfer on the server, the caller's thread
//        on the receiver; configuration in ucx_worker.hpp.
// Both speak the same protocol (a FetchRequest, then the frames of frame.hpp), written once: a
// FrameReceiver (frame_receiver.hpp) in each fetch and a FrameSender (frame_sender.hpp) in each
// server transfer; they take the same options (BlobServerOptions in server_options.hpp,
// FetchOptions in fetch.hpp), give the same guarantees (every chunk's CRC-32C
// verified before BlobSink::on_chunk, the whole blob's SHA-256 before success, resume, timeouts,
// cancel, busy, growing blobs) and report the same error codes. Endpoints are host:port for both,
// so a manager hands either out the same way; a receiver must use the transport its server runs.
//
// Pure dispatch: anyone, any thread; blocking exactly as the transport's own functions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.hpp"
#include "config/choices.hpp"
#include "transport/address.hpp"
#include "transport/blob.hpp"
#include "transport/data_server.hpp"
#include "transport/fetch.hpp"
#include "transport/fetch_cancel.hpp"
#include "transport/server_options.hpp"

namespace ember::transport {

/// transfer.transport (config/choices.hpp: parse_transport_kind, to_string).
using ember::TransportKind;

/// Starts a blob server of `kind`; errors as that transport's start().
Result<std::unique_ptr<DataServer>> start_data_server(TransportKind kind, BlobServerOptions options, BlobLookup lookup);

/// Fetches blob `key` from the `kind` server at `from` into `sink`; errors as fetch_blob's.
Result<FetchResult> fetch_blob(TransportKind kind, const HostPort& from, const std::string& key,
                               const FetchOptions& options, BlobSink& sink);

}  // namespace ember::transport
