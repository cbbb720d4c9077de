#include "transport/data_plane.hpp"

#include "transport/tcp_blob_server.hpp"
#include "transport/tcp_fetch.hpp"
#include "transport/ucx_blob_server.hpp"
#include "transport/ucx_fetch.hpp"

namespace ember::transport {

Result<std::unique_ptr<DataServer>> start_data_server(TransportKind kind, BlobServerOptions options,
                                                      BlobLookup lookup) {
  if (kind == TransportKind::ucx) {
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<UcxBlobServer> server,
                           UcxBlobServer::start(std::move(options), std::move(lookup)));
    return std::unique_ptr<DataServer>(std::move(server));
  }
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<BlobServer> server, BlobServer::start(std::move(options), std::move(lookup)));
  return std::unique_ptr<DataServer>(std::move(server));
}

Result<FetchResult> fetch_blob(TransportKind kind, const HostPort& from, const std::string& key,
                               const FetchOptions& options, BlobSink& sink) {
  if (kind == TransportKind::ucx) return ucx_fetch_blob(from, key, options, sink);
  return fetch_blob(from, key, options, sink);
}

}  // namespace ember::transport
