// KeptValues and HostedValues: values kept on a device between the steps of a workflow (StreamBox's
// zero-copy hand-off), for one engine (the engine room: executor_engine.hpp).
//
// KeptValues. A hand-off run (SwapRun::device_inputs, keep, peer_inputs; run_handoff) reads values
// an earlier run kept here, in place (the consumer reads the producer's buffer), and keeps outputs
// asked for under new handles instead of copying them back. A kept value stays until released; a
// step on another device borrows it (lend: where it lives, for a copy over the link). Under memory
// pressure (a run that did not fit: spill) values move away, largest first, each to the node's
// other device with the most room in its workspace, else to host memory (StreamBox's rules 3 and 2:
// never lost); a value moved away comes back when a run here reads it (a copy for that run) or
// another device borrows it (it stays back then). A value moved to a device that restarted since is
// reported lost (unavailable), never read from freed memory.
//
// HostedValues. The other side of a spill to a peer: room in this device's workspace (never the
// model pool: a neighbour's value never takes the room this device's weights need) for a value
// another device of the node moves here, handed out as a view whose last holder gives it back. When
// this engine goes first (clear), it frees them; their holder finds this engine's gate closed and
// the value lost with this device.
//
// Who calls: the engine's jobs and its runs (worker, lanes, inline runs) call KeptValues; another
// engine's spill calls HostedValues::host through this engine's gate. Locks: KeptValues has two,
// the values' (held across a spill's copies and a run's reads) and the counts' (so kept() and
// spilled() never wait for a copy); order: values', then counts'. A spill to a peer takes that
// peer's HostedValues lock under this values' lock, never the other way round. HostedValues has
// one, shared with the views it handed out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "actors/engine_run.hpp"
#include "actors/node/engine/device_memory.hpp"
#include "base/status.hpp"
#include "gpu/device.hpp"
#include "gpu/executor.hpp"

namespace ember {
class EngineGate;
class NodeEngines;
}  // namespace ember

namespace ember::engine {

class KeptValues {
 public:
  /// Values kept on `device`, their buffers from `memory`'s activation pool; `node` (may be null)
  /// names the other devices a spill may move to, all but `self` (this engine's gate).
  KeptValues(gpu::Device& device, DeviceMemory& memory, std::shared_ptr<NodeEngines> node, const EngineGate* self)
      : device_(device), memory_(memory), node_(std::move(node)), self_(self) {}

  /// A run of `ex` with device hand-off: its kept inputs read here, its host and peer inputs copied
  /// in (on `stream`), the outputs in `run.keep` kept (appended to `kept`), those wanted copied
  /// back. unavailable for a kept input gone (released, restarted, or lost on the device it moved
  /// to); invalid_argument for a kept output the model lacks. The caller runs it guarded.
  Result<std::vector<gpu::HostTensor>> run_handoff(gpu::LayerExecutor& ex, const SwapRun& run,
                                                   std::vector<gpu::KeptValue>& kept, gpu::Stream& stream);
  /// Drops values (unknown handles are ignored: the value went with a restart).
  void release(const std::vector<uint64_t>& handles);
  /// Where the values live, for another device's copy (a value moved away comes back first, on
  /// `stream`); not_found for a handle not held.
  Result<std::vector<gpu::PeerValue>> lend(const std::vector<uint64_t>& handles, gpu::Stream& stream);
  /// Moves the values on the device but those in `keep` away (see the header); how many moved. A
  /// run reading one meanwhile holds its buffer until it ends.
  Result<size_t> spill(const std::vector<uint64_t>& keep, gpu::Stream& stream);

  /// Values kept now, and their bytes.
  std::pair<size_t, uint64_t> counts() const;
  /// Values moved so far to make room: to host memory, to another device.
  struct Spills {
    uint64_t to_host = 0, to_host_bytes = 0;
    uint64_t to_peer = 0, to_peer_bytes = 0;
  };
  Spills spilled() const;
  /// Bytes of the kept values on this device now (not those moved away).
  uint64_t bytes_here() const;
  /// Drops every value: those moved to other devices go back there (the engine's destructor).
  void clear();

 private:
  struct Kept {
    gpu::NamedValue value;  // value.buffer null while on the host
    std::optional<gpu::HostTensor> host;
    /// Set while the value lives on another device of the node (value.buffer is there): its gate,
    /// entered around every read.
    std::shared_ptr<EngineGate> at;
  };
  /// A kept value's device copy: its own, or a fresh one from host memory or from the device it
  /// moved to (`restore`: it stays here from then on). Requires mu_.
  Result<gpu::DeviceValue> on_device(Kept& k, bool restore, gpu::Stream& stream);
  /// Moves `k` to another device of the node; false when none has room (or there is none).
  bool spill_to_peer(Kept& k);
  void keep(gpu::NamedValue value, std::vector<gpu::KeptValue>& kept);

  gpu::Device& device_;
  DeviceMemory& memory_;
  const std::shared_ptr<NodeEngines> node_;
  const EngineGate* const self_;
  mutable std::mutex mu_;
  std::map<uint64_t, Kept> values_;  // guarded by mu_
  uint64_t next_handle_ = 1;         // guarded by mu_
  mutable std::mutex counts_mu_;
  size_t count_ = 0;    // guarded by counts_mu_
  uint64_t bytes_ = 0;  // guarded by counts_mu_
  Spills spills_;       // guarded by counts_mu_
};

class HostedValues {
 public:
  explicit HostedValues(gpu::Device& device) : device_(device) {}
  /// Room for `bytes` from `src` on `from` (see the header), filled; the view's last holder gives
  /// it back. out_of_memory when the workspace has no room.
  Result<std::shared_ptr<gpu::DeviceBuffer>> host(gpu::Device& from, gpu::DevicePtr src, uint64_t bytes);
  /// Bytes hosted now.
  uint64_t bytes() const;
  /// Frees every value hosted (their views' holders find them lost).
  void clear();

 private:
  struct State {
    std::mutex mu;
    std::map<uint64_t, std::shared_ptr<gpu::DeviceBuffer>> buffers;  // guarded by mu
    uint64_t next = 0, bytes = 0;                                    // guarded by mu
  };
  gpu::Device& device_;
  /// Shared with the views handed out, which may outlive this.
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace ember::engine
