// BlobServerOptions: the settings of a blob server, the same for both data-plane transports
// (BlobServer in tcp_blob_server.hpp, UcxBlobServer in ucx_blob_server.hpp, or either through
// start_data_server in data_plane.hpp); where a transport reads one differently, its header says so.
//
// Pure data and one check; anyone, any thread; never throws.
//
// Chunk size, measured with bench/blob_transfer_bench: a 1 GiB in-memory blob over loopback, TCP
// server and receiver in one process on the 2-vCPU VM of dependencies.md §7 (Xeon, 2.0 GHz, SHA-NI),
// every fetch fully verified; median of 5 fetches (the 16 MiB row from a second run: the first was
// disturbed by other builds on the VM). CPU = user + system seconds of the process per GiB.
//   chunk     fetch_blob GB/s    fresh-buffer GB/s   CPU s/GiB   raw TCP GB/s (CPU s/GiB)
//   256 KiB   1.04               0.82                1.68        3.23 (0.55)
//   1 MiB     1.05               0.83                1.71        3.04 (0.53)
//   4 MiB     1.02               0.79                1.67        2.58 (0.56)
//   16 MiB    1.02               0.83                1.79        2.49
// One core hashes SHA-256 at 1.07 GB/s here, and the receiver's SHA-256 is the ceiling: every
// chunk size from 256 KiB to 16 MiB gives the same rate and the same CPU per byte (per-chunk costs,
// a header and a few syscalls, are noise at these sizes). So the default is chosen on other
// grounds: a hop of a multicast chain forwards a chunk only once it holds all of it, so each hop
// adds one chunk's transfer time to the chain. bench/multicast.py, 1.5 GiB to 4 receivers over
// 1 Gbit/s links (netns, MTU 9000): 1 MiB chunks 1.031x the ideal time, 4 MiB chunks 1.062x
// (N = 3: 1.030x vs 1.048x). Hence 1 MiB: ~8 ms per hop at 1 Gbit/s, and a failed fetch loses at
// most one unverified MiB. "Fresh buffer": a receive buffer never touched before; its page faults
// cost about 20% (model buffers now ask for 2 MiB pages, model/host_buffer.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/host_port.hpp"
#include "base/status.hpp"
#include "transport/blob.hpp"
#include "transport/ticket.hpp"
#include "transport/tls_stream.hpp"

namespace ember::transport {

struct BlobServerOptions {
  /// Address to listen on. Loopback by default: the data plane has no authentication, so serving
  /// beyond the host is a decision the caller makes ("0.0.0.0" or an interface address). Port 0 =
  /// an ephemeral port, read back with DataServer::port().
  HostPort listen{"127.0.0.1", 0};
  /// Payload bytes per data frame, 4 KiB .. kMaxChunkBytes. Default 1 MiB, chosen by measurement
  /// (above). Smaller costs a syscall and a header per chunk; larger delays the first forwarded
  /// chunk of a multicast chain and the granularity of resume.
  uint32_t chunk_bytes = 1u << 20;
  /// Transfers in progress at once (one thread each), at least 1. Beyond it: abort "busy".
  uint32_t max_transfers = 8;
  /// SO_SNDBUF/SO_RCVBUF in bytes (0 = kernel autotuning). 4 MiB matches the measured figures.
  /// TCP only (UCX sizes its own sockets: UCX_TCP_SNDBUF / UCX_TCP_RCVBUF).
  int socket_buffer_bytes = 4 << 20;
  /// A connection must deliver its request within this; otherwise it is closed.
  std::chrono::milliseconds request_timeout{5000};
  /// A receiver that accepts no bytes for this long is cut off (TCP: SO_SNDTIMEO; UCX: no send
  /// completes for this long).
  std::chrono::milliseconds send_timeout{30000};
  /// A blob still arriving (Blob::readable() < size(): this node is a multicast hop) is forwarded
  /// as its bytes come; when none come for this long the transfer is aborted with `unavailable`
  /// and the receiver asks its controller for another upstream.
  std::chrono::milliseconds upstream_wait{30000};
  /// Fault seam (tests, drills): flip one bit in the payload of the Nth data frame this server
  /// sends (1-based, over its life) after its CRC-32C was computed. 0 = never.
  uint64_t corrupt_frame = 0;
  /// Fault injection at run time (a node's `fault NODE corrupt-chunk`): while it is positive, each
  /// data frame sent takes one off it and goes out corrupted as corrupt_frame's does. Shared with
  /// whoever arms it; null = never.
  std::shared_ptr<std::atomic<uint64_t>> corrupt_next;
  /// Set: every request must carry a ticket these keys verify (transport/ticket.hpp); one without
  /// is answered with an abort frame (permission_denied) before any byte. Null: no tickets asked.
  std::shared_ptr<const TicketKeys> tickets;
  /// Set: every connection is TLS (transport/tls_stream.hpp; TCP only), the receiver's certificate
  /// checked against the cluster CA. Null: plain TCP.
  std::shared_ptr<const DataTls> tls;
  /// With `tickets` and `tls`: a ticket opens its blob only to the receiver whose certificate's
  /// common name is the ticket's receiver (security.ticket_receiver: certificate), so a ticket
  /// another member obtained, or a listener replayed, opens nothing. Without TLS it has no effect.
  bool tickets_name_certificates = false;
};

/// A connection turned away ("busy": max_transfers in progress) gets an abort frame and is kept open
/// this long, or until its receiver hangs up, so that closing it does not reset the connection before
/// the receiver has read the abort. Beyond kMaxLingering such connections at once, more are closed
/// without a word. Both transports.
inline constexpr std::chrono::milliseconds kRejectLinger{1000};
inline constexpr size_t kMaxLingering = 64;

/// What both servers' start() check first: invalid_argument for a chunk size outside
/// 4096..kMaxChunkBytes, max_transfers 0, or no lookup.
Status check_server_options(const BlobServerOptions& options, const BlobLookup& lookup);

}  // namespace ember::transport
