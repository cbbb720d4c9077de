# The header of one data-plane frame (transport/frame.hpp documents the whole frame layout).
@0xd6f1c3a2b4e58f71;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("ember::transport::wire");

enum FrameKind {
  data @0;    # `length` payload bytes of the blob at `offset`
  end @1;     # the blob is complete: `digest` is its SHA-256; no payload
  abort @2;   # the sender gives up on the transfer; no payload
}

struct Frame {
  transferId @0 :UInt64;   # chosen by whoever starts the transfer; unique per blob per cluster
  kind @1 :FrameKind;
  offset @2 :UInt64;       # byte offset of the payload in the blob
  length @3 :UInt32;       # payload bytes that follow the header
  crc32c @4 :UInt32;       # CRC-32C (Castagnoli) of the payload
  blobBytes @5 :UInt64;    # size of the whole blob, repeated in every frame
  digest @6 :Data;         # end frames: SHA-256 of the whole blob (32 bytes)
}
