// FetchCall: what a fetch of either transport holds besides its mechanics: the call's arguments,
// its FrameReceiver (the protocol), the context every error of the call gets ("fetch of 'k' from
// host:port"), and the two ends every fetch shares: the verified result, timed, and a failure of a
// cancelled fetch reported as the cancellation. tcp_fetch.cpp and ucx_fetch.cpp each hold one.
//
// The fetch's thread only; never throws; no I/O; it reads the clock only to time a finished fetch.
#pragma once

#include <chrono>
#include <string>

#include "base/host_port.hpp"
#include "base/status.hpp"
#include "transport/fetch.hpp"
#include "transport/frame_receiver.hpp"

namespace ember::transport {

struct FetchCall {
  using Clock = std::chrono::steady_clock;

  FetchCall(const HostPort& from, const std::string& key, const FetchOptions& options, BlobSink& sink)
      : what("fetch of '" + key + "' from " + from.to_string()),
        key(key),
        from(from),
        options(options),
        frames(options, sink) {}

  /// `e` in the call's context.
  Error fail(Error e) const { return e.with_context(what); }
  bool cancelled() const { return options.cancel && options.cancel->cancelled(); }

  /// Once the receiver is complete: the verified result, its seconds counted from `start`.
  Result<FetchResult> finish(Clock::time_point start) {
    auto result = frames.finish();
    if (!result.ok()) return fail(result.error());
    result->seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
  }
  /// What the fetch returns, once the transport let go of the cancel: a failure of a cancelled
  /// fetch is the cancellation (whatever the interrupt made of the stream).
  Result<FetchResult> outcome(Result<FetchResult> result) const {
    if (!result.ok() && cancelled()) return fail(frames.cancelled());
    return result;
  }

  const std::string what;
  const std::string& key;
  const HostPort& from;
  const FetchOptions& options;
  FrameReceiver frames;
};

}  // namespace ember::transport
