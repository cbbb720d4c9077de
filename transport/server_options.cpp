#include "transport/server_options.hpp"

#include "transport/frame.hpp"

namespace ember::transport {

Status check_server_options(const BlobServerOptions& options, const BlobLookup& lookup) {
  if (options.chunk_bytes < 4096 || options.chunk_bytes > kMaxChunkBytes) {
    return invalid_argument("blob server chunk_bytes " + std::to_string(options.chunk_bytes) + " is not in 4096.." +
                            std::to_string(kMaxChunkBytes));
  }
  if (options.max_transfers == 0) return invalid_argument("blob server max_transfers must be at least 1");
  if (!lookup) return invalid_argument("blob server needs a lookup function");
  return Status::OK();
}

}  // namespace ember::transport
