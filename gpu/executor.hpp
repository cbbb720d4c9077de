// LayerExecutor: runs the layers [first, last) of one model on one device.
//
// create() copies the range's weight bytes (one contiguous byte range of the weights file, see
// model.hpp) into one device allocation, so each weight's device address is the allocation plus
// its offset within the range. run() takes the values the range reads from outside (model inputs
// or the outputs of an earlier range) as device tensors and returns the values it hands on, so two
// executors over [0, k) and [k, n), on one device or on two (through the host), compute exactly
// what one executor over [0, n) does.
//
// Per distinct input shape, run() plans the activations once: every intermediate value and every
// kernel's scratch space gets an offset in one device block by liveness, so a run makes one
// allocation for intermediates plus one per returned value. A run that does not fit is an
// out_of_memory Error; nothing is left allocated.
//
// Threading: one run at a time per executor (calls are serialised by a mutex); run() blocks the
// calling thread until the device finished, so actors call it from a worker thread, never from a
// handler. Returned device tensors are owned by the caller.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/status.hpp"
#include "gpu/device.hpp"
#include "model/host_tensor.hpp"
#include "model/model.hpp"

namespace ember::gpu {

class ActivationPool;
class PinnedStaging;
class IoScheduler;
class IoTicket;

/// A value (model input or layer output) living in device memory.
struct DeviceValue {
  TensorDesc desc;
  std::shared_ptr<DeviceBuffer> buffer;
};

/// Values keyed by value id (see Graph).
using Activations = std::map<uint32_t, DeviceValue>;

/// A value on the device under a tensor name: what one workflow step hands the next without a copy
/// (the consumer reads the producer's buffer, which lives as long as someone holds it).
struct NamedValue {
  std::string name;
  DeviceValue value;
};

/// A value someone keeps on a device for a later run, as others refer to it: by handle (a serving
/// node's executor keeps a workflow's intermediates this way, actors/node/engine/kept_values.hpp).
struct KeptValue {
  std::string name;
  uint64_t handle = 0;
  TensorDesc desc;
};

/// A value kept on another device, to copy from over the devices' link (Stream::copy_from_peer):
/// whoever keeps it keeps it until the copy ended.
struct PeerValue {
  std::string name;
  Device* device = nullptr;
  DevicePtr ptr{};
  TensorDesc desc;
};

/// Where one piece of a range's weights lives: bytes [model_offset, model_offset + length) of the
/// model's weights (model.hpp's byte offsets) at device address `ptr`.
struct WeightSegment {
  uint64_t model_offset = 0;
  uint64_t length = 0;
  DevicePtr ptr{};
};

/// Places a swap's weights: given the byte size of each copy group, a device address for each (for
/// instance blocks of the gpu_executor's DeviceMemoryPool, so a model lands wherever its pool has
/// room), or an Error (out_of_memory). Whoever placed the blocks frees them, after the
/// LayerExecutor using them is gone.
using WeightPlacer = std::function<Result<std::vector<DevicePtr>>(const std::vector<uint64_t>& group_bytes)>;

/// A complete copy of a model's weights on another device, to swap from over a direct link
/// (device to device). The caller keeps it allocated and unchanged until the copy ended (see
/// LayerExecutor::wait_weights): the router locks the source replica against eviction.
struct PeerWeights {
  Device* device = nullptr;
  std::vector<WeightSegment> segments;
};

/// How LayerExecutor::swap_in moves the weights (Torpor's pipelined, grouped swap-in).
struct SwapInOptions {
  /// Copy the weights in groups of whole consecutive layers of about this many bytes (a layer
  /// larger than a group is a group of its own), each with an event the compute stream waits on
  /// before the group's first layer. 0 = one group: copy everything, then run. 1 = one group per
  /// layer. Torpor measured the PCIe throughput elbow at about 2 MB: smaller groups pay a per-copy
  /// cost, larger ones delay the first layer.
  uint64_t group_bytes = 2ull << 20;
  /// Where the groups go; empty = one DeviceBuffer for the whole range, from Device::allocate.
  WeightPlacer place;
  /// Copy from this device copy instead of host memory; nullptr = from the model's host bytes.
  const PeerWeights* peer = nullptr;
  /// Host copies go through the device's I/O scheduler (gpu/io_scheduler.hpp), interleaved with
  /// other swaps' in blocks, instead of all issued at once on a copy stream of this swap's own.
  IoScheduler* io = nullptr;
};

class LayerExecutor {
 public:
  /// Uploads the weights of `range` to `device` and waits for the copy. Fails with out_of_memory
  /// when they do not fit, or invalid_argument for a range outside the model.
  static Result<std::unique_ptr<LayerExecutor>> create(Device& device, std::shared_ptr<const Model> model,
                                                       LayerRange range, WeightPlacer place = {});
  /// Starts copying the range's weights to `device` on a copy stream of their own, in groups
  /// (SwapInOptions), and returns without waiting: the first run() launches each layer as soon as
  /// its group has arrived, so a cold model starts executing after its first group, not after the
  /// whole model. Errors as create(); a copy that faults makes the run fail (sticky device fault).
  static Result<std::unique_ptr<LayerExecutor>> swap_in(Device& device, std::shared_ptr<const Model> model,
                                                        LayerRange range, SwapInOptions options = {});
  /// An executor of `sub`, a range within `parent`'s, that reads the parent's weights where they
  /// are (no copy, no memory of its own but its activations and stream): what a Body runs around
  /// and inside the layers it shares with a Shadow (gpu/shadow_split.hpp). The parent's weights
  /// must be resident (unavailable while they are still arriving) and the parent must outlive the view.
  static Result<std::unique_ptr<LayerExecutor>> view(LayerExecutor& parent, LayerRange sub);
  ~LayerExecutor();
  /// True once every weight byte is on the device (always for create()).
  bool weights_resident();
  /// Blocks until the weights are on the device.
  Status wait_weights();
  /// Copy groups of a swap_in (0 for create()).
  size_t weight_groups() const { return group_events_.size(); }

  const Model& model() const { return *model_; }
  Device& device() const { return device_; }
  LayerRange range() const { return range_; }
  /// Values this range reads from outside it, ascending value ids.
  const std::vector<uint32_t>& input_values() const { return inputs_; }
  /// Values this range hands on (read later, or model outputs), ascending value ids.
  const std::vector<uint32_t>& output_values() const { return outputs_; }
  /// Device bytes held for weights.
  uint64_t weight_bytes() const { return weight_bytes_.length; }
  /// Where the weights live, one segment per copy group (one for create()), in model order: what a
  /// device-to-device swap copies from.
  const std::vector<WeightSegment>& weight_segments() const { return segments_; }

  /// Runs the range. `inputs` must hold every input_values() entry (extra entries are ignored).
  /// Values are not checked (they are on the device): embedding ids and kv_meta are the caller's
  /// to have checked; run_host and run_device check them.
  Result<Activations> run(const Activations& inputs);

  /// Host convenience: uploads tensors named after input_values(), runs, and downloads
  /// output_values() as tensors named after them. Checks integer ids fed to embedding layers, and
  /// the positions and kv_meta fed to kv_attention layers (check_kv_meta: a block table that does
  /// not hold together is invalid_argument before anything runs).
  /// Tensors named after other values of the model are ignored (so one range's outputs can feed
  /// the next even when some of them are final outputs); names the model lacks are errors.
  Result<std::vector<HostTensor>> run_host(const std::vector<HostTensor>& inputs);

  /// run_host's first half: the tensors this range reads (named after input_values(); others are
  /// skipped, unknown names are errors), checked and copied to new device buffers on `stream`, which
  /// this waits for. What a caller running the range in parts (gpu/shadow_split.hpp) starts from.
  Result<Activations> upload_inputs(const std::vector<HostTensor>& inputs, Stream& stream);

  /// Device hand-off (a workflow's steps on one device): as run_host, but the inputs are on this
  /// executor's device already (another device's are invalid_argument) and the outputs stay there,
  /// named after output_values(). Nothing is copied to the host but the few bytes of embedding ids
  /// and of kv_attention's positions and kv_meta, read back to be checked as run_host checks them. The caller owns the outputs, each in a buffer
  /// of its own that no later run touches.
  Result<std::vector<NamedValue>> run_device(const std::vector<NamedValue>& inputs);

  /// Device bytes the last run used for intermediates and scratch.
  uint64_t last_plan_bytes() const { return last_plan_bytes_; }
  /// Runs take their activations (the plan's block and the values they return) from `pool`, which
  /// must outlive them, instead of the device allocator (gpu/activation_pool.hpp). Before the first run.
  void set_activation_pool(ActivationPool* pool) { activations_ = pool; }
  /// Uploads and downloads of run_host go through `staging` (the device's pinned region, which
  /// must outlive the runs; gpu/pinned_staging.hpp) instead of copying pageable memory directly.
  void set_staging(PinnedStaging* staging) { staging_ = staging; }
  PinnedStaging* staging() const { return staging_; }

  /// When on, each run waits for every layer in turn and records its wall time (microseconds,
  /// indexed by layer - range().first) in last_layer_us(). Serialises the device: for profiling only.
  void set_profiling(bool on) { profiling_ = on; }
  const std::vector<double>& last_layer_us() const { return last_layer_us_; }

 private:
  struct Plan;
  LayerExecutor(Device& device, std::shared_ptr<const Model> model, LayerRange range);
  /// Validates the range and allocates (does not fill) the weight buffer: what create and swap_in share.
  static Result<std::unique_ptr<LayerExecutor>> prepare(Device& device, std::shared_ptr<const Model> model,
                                                        LayerRange range, uint64_t group_bytes,
                                                        const WeightPlacer& place);
  /// Enqueues the copy of group `g` on `stream`, from host memory or from `peer`.
  void copy_group(Stream& stream, size_t g, const PeerWeights* peer) const;
  Result<Activations> run_locked(const Activations& inputs);  // requires mu_
  Result<const Plan*> plan_for(const Activations& inputs);     // requires mu_
  Status check_ids(const std::vector<HostTensor>& inputs, const std::vector<uint32_t>& ids) const;
  /// check_kv_meta (model/ops.hpp) for each kv_attention layer of the range whose positions and
  /// kv_meta are among `inputs`.
  Status check_kv_meta_values(const std::vector<HostTensor>& inputs, const std::vector<uint32_t>& ids) const;
  /// The tensors of `tensors` this range reads and their value ids, resolved and checked.
  Result<std::pair<std::vector<HostTensor>, std::vector<uint32_t>>> checked_inputs(
      const std::vector<HostTensor>& tensors) const;
  /// Named inputs resolved to the value ids this range reads, as (index into `given`, id): unknown
  /// names and duplicates are errors, names of values the range does not read are skipped, and
  /// declared model inputs are checked against model.json (dtype, fixed dims).
  Result<std::vector<std::pair<size_t, uint32_t>>> resolve_inputs(
      const std::vector<std::pair<const std::string*, const TensorDesc*>>& given) const;

  Device& device_;
  std::shared_ptr<const Model> model_;
  LayerRange range_;
  ByteRange weight_bytes_;
  std::vector<uint32_t> inputs_;
  std::vector<uint32_t> outputs_;
  std::shared_ptr<DeviceBuffer> weights_;  // when no WeightPlacer was given
  std::vector<WeightSegment> segments_;    // one per copy group
  std::vector<uint32_t> layer_group_;      // each layer's group (the one holding its weights)
  std::unique_ptr<Stream> stream_;
  // swap_in: the copy stream and one event per group; pending until all arrived.
  std::unique_ptr<Stream> copy_stream_;
  std::vector<std::unique_ptr<Event>> group_events_;
  /// swap_in through an IoScheduler: the job whose pieces are the groups (events recorded as they
  /// are issued, so a run waits for a group's issue before its stream waits for the event).
  std::shared_ptr<IoTicket> io_ticket_;
  bool weights_pending_ = false;
  bool copied();  // requires mu_ or the caller's exclusive use

  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Plan>> plans_;  // guarded by mu_; key: input shapes
  uint64_t last_plan_bytes_ = 0;
  ActivationPool* activations_ = nullptr;
  PinnedStaging* staging_ = nullptr;
  bool profiling_ = false;
  std::vector<double> last_layer_us_;
};

/// Copies host tensors to new device buffers on `stream` (not waiting), keyed by `ids`; the buffers
/// from `pool` when given (else the device allocator); through `staging` when given.
Result<Activations> upload(Device& device, Stream& stream, const std::vector<HostTensor>& tensors,
                           const std::vector<uint32_t>& ids, ActivationPool* pool = nullptr,
                           PinnedStaging* staging = nullptr);
/// Copies device values to host tensors named by `names[id]` (through `staging` when given), and
/// waits for the copies.
Result<std::vector<HostTensor>> download(Stream& stream, const Activations& values,
                                         const std::vector<std::string>& names, PinnedStaging* staging = nullptr);

}  // namespace ember::gpu
