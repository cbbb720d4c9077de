# The data plane's wire messages: the header of one frame (transport/frame.hpp documents the whole
# frame layout) and the request that opens a fetch (transport/fetch_request.hpp).
@0xd6f1c3a2b4e58f71;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("ember::transport::wire");

enum FrameKind {
  data @0;    # `length` payload bytes of the blob at `offset`
  end @1;     # the blob is complete: `digest` is its SHA-256; no payload
  abort @2;   # the sender gives up on the transfer: `errorCode` and `reason` say why; no payload
}

struct Frame {
  transferId @0 :UInt64;   # chosen by whoever starts the transfer; unique per blob per cluster
  kind @1 :FrameKind;
  offset @2 :UInt64;       # byte offset of the payload in the blob
  length @3 :UInt32;       # payload bytes that follow the header
  crc32c @4 :UInt32;       # CRC-32C (Castagnoli) of the payload
  blobBytes @5 :UInt64;    # size of the whole blob, repeated in every frame
  digest @6 :Data;         # end frames: SHA-256 of the whole blob (32 bytes)
  reason @7 :Text;         # abort frames: why, for a human (at most 1024 bytes)
  errorCode @8 :UInt8;     # abort frames: the ember::ErrorCode the receiver should report (0 = io_error)
}

# The first and only message a receiver sends on a fetch connection (client -> server). The server
# answers with frames of `transferId`: data frames from `offset` on (up to `offset + length` for a
# range), then one end frame, or an abort.
struct FetchRequest {
  transferId @0 :UInt64;   # echoed in every frame of the reply
  key @1 :Text;            # which blob: the server's lookup decides what keys mean (1..1024 bytes)
  offset @2 :UInt64;       # first byte wanted; 0 for a whole blob, more to resume a broken transfer
  length @3 :UInt64;       # bytes wanted from `offset` (a layer range); 0 = up to the end of the blob
  # The data-plane ticket (transport/ticket.hpp); empty where the cluster runs without tickets.
  ticketReceiver @4 :Text;   # the node it was issued to (at most 255 bytes)
  ticketNotAfter @5 :UInt64; # unix seconds
  ticketMac @6 :Data;        # HMAC-SHA256 (32 bytes)
}
