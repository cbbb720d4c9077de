#include "gpu/executor.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/units.hpp"
#include "gpu/activation_pool.hpp"
#include "gpu/io_scheduler.hpp"
#include "gpu/pinned_staging.hpp"

namespace ember::gpu {

namespace {
constexpr uint64_t kAlign = 256;
constexpr size_t kMaxPlans = 32;  // distinct input shapes remembered per executor
uint64_t align_up(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }
}  // namespace

// Where everything of one run lives, for one set of input shapes.
struct LayerExecutor::Plan {
  struct Step {
    uint32_t layer = 0;
    TensorDesc out;
    bool out_returned = false;   // a range output: gets its own buffer, handed to the caller
    uint64_t out_offset = 0;     // otherwise: offset in the plan block
    uint64_t ws_offset = 0;
    uint64_t ws_bytes = 0;
  };
  std::vector<Step> steps;
  std::vector<std::optional<TensorDesc>> values;  // by value id
  std::map<uint32_t, uint64_t> offsets;           // intermediate value id -> offset in the block
  uint64_t block_bytes = 0;
};

LayerExecutor::LayerExecutor(Device& device, std::shared_ptr<const Model> model, LayerRange range)
    : device_(device), model_(std::move(model)), range_(range) {}

LayerExecutor::~LayerExecutor() {
  // The streams are drained before the weights go, so no kernel or copy touches freed memory.
  if (io_ticket_) (void)io_ticket_->wait();
  if (stream_) (void)stream_->synchronize();
  if (copy_stream_) (void)copy_stream_->synchronize();
}

Result<std::unique_ptr<LayerExecutor>> LayerExecutor::swap_in(Device& device, std::shared_ptr<const Model> model,
                                                              LayerRange range, SwapInOptions options) {
  EMBER_ASSIGN_OR_RETURN(auto ex, prepare(device, model, range, options.group_bytes, options.place));
  if (ex->segments_.empty()) return ex;
  if (options.io && !options.peer) {
    std::vector<CopyPiece> pieces;
    for (const WeightSegment& seg : ex->segments_) {
      ex->group_events_.push_back(device.create_event());
      pieces.push_back({seg.ptr, model->data() + seg.model_offset, seg.length, ex->group_events_.back().get()});
    }
    ex->io_ticket_ = options.io->submit(std::move(pieces));
    ex->weights_pending_ = true;
    return ex;
  }
  ex->copy_stream_ = device.create_stream();
  for (size_t g = 0; g < ex->segments_.size(); ++g) {
    ex->copy_group(*ex->copy_stream_, g, options.peer);
    ex->group_events_.push_back(device.create_event());
    ex->copy_stream_->record(*ex->group_events_.back());
  }
  ex->weights_pending_ = true;
  return ex;
}

void LayerExecutor::copy_group(Stream& stream, size_t g, const PeerWeights* peer) const {
  const WeightSegment& dst = segments_[g];
  if (!peer) return stream.copy_to_device(dst.ptr, model_->data() + dst.model_offset, dst.length);
  // The peer may have grouped the weights differently: copy each overlap with its segments.
  const uint64_t end = dst.model_offset + dst.length;
  for (const WeightSegment& src : peer->segments) {
    const uint64_t lo = std::max(dst.model_offset, src.model_offset);
    const uint64_t hi = std::min(end, src.model_offset + src.length);
    if (lo >= hi) continue;
    stream.copy_from_peer(dst.ptr + (lo - dst.model_offset), *peer->device, src.ptr + (lo - src.model_offset), hi - lo);
  }
}

bool LayerExecutor::copied() {
  // Through the scheduler: every group issued and the last one arrived (its ticket completes a
  // little later, when the scheduler sees its batch end).
  if (io_ticket_ && !io_ticket_->done() && io_ticket_->pieces_issued() < group_events_.size()) return false;
  return group_events_.back()->query();
}

bool LayerExecutor::weights_resident() {
  std::lock_guard lock(mu_);
  if (weights_pending_ && copied()) weights_pending_ = false;
  return !weights_pending_;
}

Status LayerExecutor::wait_weights() {
  std::lock_guard lock(mu_);
  if (!weights_pending_) return device_.status();
  EMBER_RETURN_IF_ERROR(io_ticket_ ? io_ticket_->wait() : group_events_.back()->synchronize());
  weights_pending_ = false;
  return Status::OK();
}

Result<std::unique_ptr<LayerExecutor>> LayerExecutor::prepare(Device& device, std::shared_ptr<const Model> model,
                                                              LayerRange range, uint64_t group_bytes,
                                                              const WeightPlacer& place) {
  if (range.empty() || range.last > model->num_layers()) {
    return invalid_argument("layer range [" + std::to_string(range.first) + ", " + std::to_string(range.last) +
                            ") is not within the " + std::to_string(model->num_layers()) + " layers of model '" +
                            model->manifest().name + "'");
  }
  std::unique_ptr<LayerExecutor> ex(new LayerExecutor(device, model, range));
  ex->weight_bytes_ = model->range_bytes(range);
  ex->inputs_ = model->graph().range_inputs(range);
  ex->outputs_ = model->graph().range_outputs(range);
  ex->stream_ = device.create_stream();
  ex->layer_group_.assign(range.size(), 0);
  if (ex->weight_bytes_.length == 0) return ex;

  // Groups of whole layers: a layer's bytes are contiguous and in layer order (model.hpp), so a
  // group is one byte range. Layers without weights join the group in progress.
  const uint64_t group = group_bytes == 0 ? UINT64_MAX : group_bytes;
  std::vector<uint64_t> sizes;
  uint64_t start = ex->weight_bytes_.offset;  // first byte of the group in progress
  auto close_group = [&](uint64_t end) {
    if (end <= start) return;
    ex->segments_.push_back({start, end - start, DevicePtr{}});
    sizes.push_back(end - start);
    start = end;
  };
  for (uint32_t l = range.first; l < range.last; ++l) {
    const ByteRange r = model->range_bytes({l, l + 1});
    // A layer with weights waits for the group that carries them (the one in progress); one
    // without waits only for what came before it.
    const size_t closed = ex->segments_.size();
    ex->layer_group_[l - range.first] = static_cast<uint32_t>(r.length > 0 || closed == 0 ? closed : closed - 1);
    if (r.length > 0 && r.offset + r.length - start >= group) close_group(r.offset + r.length);
  }
  close_group(ex->weight_bytes_.offset + ex->weight_bytes_.length);
  // Layers after the last byte (no weights of their own) wait for the last group.
  const uint32_t last_group = static_cast<uint32_t>(ex->segments_.size() - 1);
  for (auto& g : ex->layer_group_) g = std::min(g, last_group);

  const std::string what = "weights of model '" + model->manifest().name + "' layers [" + std::to_string(range.first) +
                           ", " + std::to_string(range.last) + ")";
  if (place) {
    auto ptrs = place(sizes);
    if (!ptrs.ok()) return ptrs.error().with_context(what);
    if (ptrs->size() != sizes.size()) return internal_error(what + ": the placer returned the wrong number of blocks");
    for (size_t g = 0; g < sizes.size(); ++g) ex->segments_[g].ptr = (*ptrs)[g];
    return ex;
  }
  auto buffer = DeviceBuffer::allocate(device, ex->weight_bytes_.length);
  if (!buffer.ok()) return buffer.error().with_context(what);
  ex->weights_ = std::move(*buffer);
  for (auto& seg : ex->segments_) seg.ptr = ex->weights_->ptr() + (seg.model_offset - ex->weight_bytes_.offset);
  return ex;
}

Result<std::unique_ptr<LayerExecutor>> LayerExecutor::view(LayerExecutor& parent, LayerRange sub) {
  if (sub.empty() || sub.first < parent.range_.first || sub.last > parent.range_.last) {
    return invalid_argument("layers [" + std::to_string(sub.first) + ", " + std::to_string(sub.last) +
                            ") are not within the executor's [" + std::to_string(parent.range_.first) + ", " +
                            std::to_string(parent.range_.last) + ")");
  }
  if (!parent.weights_resident()) {
    return unavailable("a view of model '" + parent.model_->manifest().name +
                       "' needs its weights on the device first");
  }
  std::unique_ptr<LayerExecutor> ex(new LayerExecutor(parent.device_, parent.model_, sub));
  const Model& model = *parent.model_;
  ex->weight_bytes_ = model.range_bytes(sub);
  ex->inputs_ = model.graph().range_inputs(sub);
  ex->outputs_ = model.graph().range_outputs(sub);
  ex->stream_ = parent.device_.create_stream();
  ex->activations_ = parent.activations_;
  ex->staging_ = parent.staging_;
  ex->layer_group_.assign(sub.size(), 0);
  if (ex->weight_bytes_.length == 0) return ex;
  // The parent's segments (whole layers each) that hold the sub-range's bytes, clipped to them.
  const uint64_t begin = ex->weight_bytes_.offset, end = begin + ex->weight_bytes_.length;
  std::vector<size_t> from_parent;  // the view's segment -> the parent's
  for (size_t g = 0; g < parent.segments_.size(); ++g) {
    const WeightSegment& s = parent.segments_[g];
    const uint64_t lo = std::max(begin, s.model_offset), hi = std::min(end, s.model_offset + s.length);
    if (lo >= hi) continue;
    ex->segments_.push_back({lo, hi - lo, s.ptr + (lo - s.model_offset)});
    from_parent.push_back(g);
  }
  for (uint32_t l = sub.first; l < sub.last; ++l) {
    const uint32_t parent_group = parent.layer_group_[l - parent.range_.first];
    auto it = std::lower_bound(from_parent.begin(), from_parent.end(), parent_group);
    ex->layer_group_[l - sub.first] =
        static_cast<uint32_t>(std::min<size_t>(it - from_parent.begin(), ex->segments_.size() - 1));
  }
  return ex;
}

Result<std::unique_ptr<LayerExecutor>> LayerExecutor::create(Device& device, std::shared_ptr<const Model> model,
                                                             LayerRange range, WeightPlacer place) {
  EMBER_ASSIGN_OR_RETURN(auto ex, prepare(device, model, range, 0, place));
  for (size_t g = 0; g < ex->segments_.size(); ++g) ex->copy_group(*ex->stream_, g, nullptr);
  if (!ex->segments_.empty()) EMBER_RETURN_IF_ERROR(ex->stream_->synchronize());
  return ex;
}

Result<const LayerExecutor::Plan*> LayerExecutor::plan_for(const Activations& inputs) {
  std::string key;
  for (uint32_t id : inputs_) {
    auto it = inputs.find(id);
    if (it == inputs.end()) {
      return invalid_argument("missing input '" + model_->graph().value_names[id] + "' for layers [" +
                              std::to_string(range_.first) + ", " + std::to_string(range_.last) + ")");
    }
    key += std::string(dtype_name(it->second.desc.dtype)) + it->second.desc.shape.to_string() + ";";
  }
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();

  const Graph& g = model_->graph();
  auto plan = std::make_unique<Plan>();
  plan->values.resize(g.value_names.size());
  for (uint32_t id : inputs_) plan->values[id] = inputs.at(id).desc;
  EMBER_RETURN_IF_ERROR(infer_range(model_->manifest(), g, range_, plan->values));

  // Every intermediate value and scratch area is an interval [first layer, last layer] with a
  // size; place each at the lowest offset that no overlapping-in-time item occupies, largest first.
  struct Item {
    uint64_t bytes, start, end;
    uint64_t* offset;
  };
  std::vector<Item> items;
  std::vector<TensorDesc> in;
  plan->steps.resize(range_.size());
  for (uint32_t l = range_.first; l < range_.last; ++l) {
    Plan::Step& s = plan->steps[l - range_.first];
    const LayerSpec& spec = model_->layer(l);
    const uint32_t v = g.layer_value(l);
    s.layer = l;
    s.out = *plan->values[v];
    s.out_returned = std::binary_search(outputs_.begin(), outputs_.end(), v);
    in.clear();
    for (uint32_t iv : g.layer_inputs[l]) in.push_back(*plan->values[iv]);
    s.ws_bytes = workspace_bytes(spec.op, spec.attrs, in);
    if (!s.out_returned) {
      const uint64_t end = static_cast<uint64_t>(std::max<int64_t>(g.last_use[v], l));
      items.push_back({align_up(s.out.bytes()), l, end, &s.out_offset});
    }
    if (s.ws_bytes) items.push_back({align_up(s.ws_bytes), l, l, &s.ws_offset});
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.bytes > b.bytes; });
  std::vector<const Item*> placed;
  for (Item& item : items) {
    std::vector<std::pair<uint64_t, uint64_t>> busy;  // [offset, end) of items alive at the same time
    for (const Item* p : placed) {
      if (p->start <= item.end && item.start <= p->end) busy.push_back({*p->offset, *p->offset + p->bytes});
    }
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + item.bytes <= b) break;
      offset = std::max(offset, e);
    }
    *item.offset = offset;
    plan->block_bytes = std::max(plan->block_bytes, offset + item.bytes);
    placed.push_back(&item);
  }
  for (const Plan::Step& s : plan->steps) {
    if (!s.out_returned) plan->offsets[g.layer_value(s.layer)] = s.out_offset;
  }
  if (plans_.size() >= kMaxPlans) plans_.clear();
  return plans_.emplace(key, std::move(plan)).first->second.get();
}

Result<Activations> LayerExecutor::run(const Activations& inputs) {
  std::lock_guard lock(mu_);
  return run_locked(inputs);
}

Result<Activations> LayerExecutor::run_locked(const Activations& inputs) {
  EMBER_RETURN_IF_ERROR(device_.status());
  for (uint32_t id : inputs_) {
    auto it = inputs.find(id);
    if (it != inputs.end() && &it->second.buffer->device() != &device_) {
      return invalid_argument("input '" + model_->graph().value_names[id] + "' lives on " +
                              it->second.buffer->device().info().name + ", not on " + device_.info().name);
    }
  }
  EMBER_ASSIGN_OR_RETURN(const Plan* plan, plan_for(inputs));
  const Graph& g = model_->graph();
  const std::string what = "model '" + model_->manifest().name + "' layers [" + std::to_string(range_.first) + ", " +
                           std::to_string(range_.last) + ")";

  std::shared_ptr<DeviceBuffer> block;
  if (plan->block_bytes || !plan->offsets.empty()) {
    // A range whose every planned value is empty (a slice to nothing) still needs an address for them.
    const uint64_t bytes = std::max<uint64_t>(plan->block_bytes, 1);
    auto b = activations_ ? activations_->allocate(bytes) : DeviceBuffer::allocate(device_, bytes);
    if (!b.ok()) return b.error().with_context(what + ": activations");
    block = std::move(*b);
  }
  last_plan_bytes_ = plan->block_bytes;
  Activations results;
  for (const Plan::Step& s : plan->steps) {
    if (!s.out_returned) continue;
    auto b = activations_ ? activations_->allocate(s.out.bytes()) : DeviceBuffer::allocate(device_, s.out.bytes());
    if (!b.ok()) return b.error().with_context(what + ": output '" + g.value_names[g.layer_value(s.layer)] + "'");
    results[g.layer_value(s.layer)] = DeviceValue{s.out, std::move(*b)};
  }

  auto value_ptr = [&](uint32_t id) -> DevicePtr {
    if (auto it = inputs.find(id); it != inputs.end() && g.producer(id) < static_cast<int64_t>(range_.first)) {
      return it->second.buffer->ptr();
    }
    if (auto it = results.find(id); it != results.end()) return it->second.buffer->ptr();
    return block->ptr() + plan->offsets.at(id);
  };

  if (profiling_) last_layer_us_.assign(range_.size(), 0.0);
  int64_t waited_group = -1;  // swap_in: the last copy group the compute stream waits for
  for (const Plan::Step& s : plan->steps) {
    const LayerSpec& spec = model_->layer(s.layer);
    if (weights_pending_) {
      const int64_t group = layer_group_[s.layer - range_.first];
      if (group > waited_group) {
        if (io_ticket_) io_ticket_->wait_issued(static_cast<size_t>(group) + 1);  // the event is recorded
        stream_->wait(*group_events_[static_cast<size_t>(group)]);  // this layer's weights have arrived
        waited_group = group;
      }
    }
    KernelArgs args;
    args.op = spec.op;
    args.attrs = spec.attrs;
    for (uint32_t iv : g.layer_inputs[s.layer]) {
      args.inputs[args.num_inputs++] = DeviceTensor{*plan->values[iv], value_ptr(iv)};
    }
    for (const TensorInfo* w : model_->layer_weights(s.layer)) {
      DeviceTensor t;
      if (w) {
        const WeightSegment& seg = segments_[layer_group_[s.layer - range_.first]];
        t = DeviceTensor{w->desc, seg.ptr + (w->data.offset - seg.model_offset)};
      }
      args.weights[args.num_weights++] = t;
    }
    args.output = DeviceTensor{s.out, value_ptr(g.layer_value(s.layer))};
    if (s.ws_bytes) {
      args.workspace = block->ptr() + s.ws_offset;
      args.workspace_bytes = s.ws_bytes;
    }
    if (!profiling_) {
      stream_->launch(args);
      continue;
    }
    const auto start = std::chrono::steady_clock::now();
    stream_->launch(args);
    (void)stream_->synchronize();
    last_layer_us_[s.layer - range_.first] =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  }
  Status done = stream_->synchronize();
  if (!done.ok()) return done.error().with_context(what);
  if (weights_pending_ && copied()) weights_pending_ = false;
  return results;
}

Status LayerExecutor::check_ids(const std::vector<HostTensor>& tensors, const std::vector<uint32_t>& ids) const {
  const Graph& g = model_->graph();
  for (uint32_t l = range_.first; l < range_.last; ++l) {
    const LayerSpec& spec = model_->layer(l);
    if (spec.op != OpKind::embedding || spec.attrs.positional) continue;
    const uint32_t v = g.layer_inputs[l][0];
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] != v) continue;
      const HostTensor& t = tensors[i];
      const int64_t n = t.desc.shape.numel();
      for (int64_t k = 0; k < n; ++k) {
        const int64_t id = t.desc.dtype == DType::i64 ? t.as<int64_t>()[k]
                           : t.desc.dtype == DType::i32 ? t.as<int32_t>()[k] : 0;
        if (id < 0 || id >= spec.attrs.num_embeddings) {
          return invalid_argument("input '" + t.name + "' element " + std::to_string(k) + " is id " + std::to_string(id) +
                                  ", outside the " + std::to_string(spec.attrs.num_embeddings) + " rows of layer '" +
                                  spec.name + "'");
        }
      }
    }
  }
  return Status::OK();
}

Status LayerExecutor::check_kv_meta_values(const std::vector<HostTensor>& tensors,
                                           const std::vector<uint32_t>& ids) const {
  const Graph& g = model_->graph();
  auto given = [&](uint32_t v) -> std::span<const int64_t> {
    for (size_t i = 0; i < ids.size(); ++i) {
      const HostTensor& t = tensors[i];
      if (ids[i] != v || t.desc.dtype != DType::i64 || t.desc.shape.rank != 1) continue;
      return {t.as<int64_t>(), static_cast<size_t>(t.desc.shape[0])};
    }
    return {};
  };
  for (uint32_t l = range_.first; l < range_.last; ++l) {
    const LayerSpec& spec = model_->layer(l);
    if (spec.op != OpKind::kv_attention) continue;
    // Positions and kv_meta computed inside the range are not on the host to check (a generative
    // model takes both as inputs); the kernels stay inside the blocks whatever they hold.
    const std::span<const int64_t> positions = given(g.layer_inputs[l][1]), meta = given(g.layer_inputs[l][2]);
    if (positions.empty() || meta.empty()) continue;
    Status st = check_kv_meta(spec.attrs, positions, meta);
    if (!st.ok()) {
      return invalid_argument("inputs '" + g.value_names[g.layer_inputs[l][1]] + "' and '" +
                              g.value_names[g.layer_inputs[l][2]] + "' of layer '" + spec.name +
                              "': " + st.error().message());
    }
  }
  return Status::OK();
}

Result<std::vector<std::pair<size_t, uint32_t>>> LayerExecutor::resolve_inputs(
    const std::vector<std::pair<const std::string*, const TensorDesc*>>& given) const {
  const Graph& g = model_->graph();
  // Names of values this range does not read (e.g. outputs of an earlier range that are not handed
  // on to this one) are ignored; names the model does not have are errors.
  std::vector<std::pair<size_t, uint32_t>> used;
  std::vector<uint32_t> seen;
  for (size_t i = 0; i < given.size(); ++i) {
    const std::string& name = *given[i].first;
    auto id = g.find(name);
    if (!id) {
      std::string expected;
      for (uint32_t v : inputs_) expected += (expected.empty() ? "" : ", ") + g.value_names[v];
      const bool whole = range_.first == 0 && range_.last == model_->num_layers();
      return invalid_argument("unexpected input '" + name + "' (" +
                              (whole ? "the model takes: " : "this layer range reads: ") + expected + ")");
    }
    if (std::find(seen.begin(), seen.end(), *id) != seen.end())
      return invalid_argument("input '" + name + "' given twice");
    seen.push_back(*id);
    if (!std::binary_search(inputs_.begin(), inputs_.end(), *id)) continue;
    // Declared model inputs are checked against model.json (dtype, fixed dims).
    const TensorDesc& desc = *given[i].second;
    if (*id < g.num_inputs) {
      const TensorSpec& d = model_->manifest().inputs[*id];
      if (desc.dtype != d.dtype || !desc.shape.matches(d.shape) || desc.shape.numel() <= 0) {
        return invalid_argument("input '" + d.name + "' is " + std::string(dtype_name(desc.dtype)) +
                                desc.shape.to_string() + ", expected " + std::string(dtype_name(d.dtype)) +
                                d.shape.to_string() + " (-1: any size)");
      }
    }
    used.emplace_back(i, *id);
  }
  return used;
}

Result<std::pair<std::vector<HostTensor>, std::vector<uint32_t>>> LayerExecutor::checked_inputs(
    const std::vector<HostTensor>& tensors) const {
  std::vector<std::pair<const std::string*, const TensorDesc*>> given;
  for (const HostTensor& t : tensors) given.emplace_back(&t.name, &t.desc);
  EMBER_ASSIGN_OR_RETURN(auto resolved, resolve_inputs(given));
  std::vector<uint32_t> ids;
  std::vector<HostTensor> used;
  for (const auto& [i, id] : resolved) {
    used.push_back(tensors[i]);
    ids.push_back(id);
  }
  EMBER_RETURN_IF_ERROR(check_ids(used, ids));
  EMBER_RETURN_IF_ERROR(check_kv_meta_values(used, ids));
  return std::pair{std::move(used), std::move(ids)};
}

Result<std::vector<HostTensor>> LayerExecutor::run_host(const std::vector<HostTensor>& tensors) {
  EMBER_ASSIGN_OR_RETURN(auto checked, checked_inputs(tensors));
  const auto& [used, ids] = checked;
  std::lock_guard lock(mu_);
  // A resident model's run copies in, computes and copies out on one stream, and this thread waits.
  struct CallerWaits {
    Stream& s;
    explicit CallerWaits(Stream& stream, bool on) : s(stream) { s.set_caller_waits(on); }
    ~CallerWaits() { s.set_caller_waits(false); }
  } caller_waits(*stream_, !weights_pending_);
  EMBER_ASSIGN_OR_RETURN(Activations in, upload(device_, *stream_, used, ids, activations_, staging_));
  auto out = run_locked(in);
  if (!out.ok()) {
    // The uploads may still be in flight; their buffers must outlive them.
    (void)stream_->synchronize();
    return out.error();
  }
  return download(*stream_, *out, model_->graph().value_names, staging_);
}

Result<Activations> LayerExecutor::upload_inputs(const std::vector<HostTensor>& tensors, Stream& stream) {
  EMBER_ASSIGN_OR_RETURN(auto checked, checked_inputs(tensors));
  const auto& [used, ids] = checked;
  EMBER_ASSIGN_OR_RETURN(Activations in, upload(device_, stream, used, ids, activations_, staging_));
  EMBER_RETURN_IF_ERROR(stream.synchronize());
  return in;
}

Result<std::vector<NamedValue>> LayerExecutor::run_device(const std::vector<NamedValue>& values) {
  std::vector<std::pair<const std::string*, const TensorDesc*>> given;
  for (const NamedValue& v : values) given.emplace_back(&v.name, &v.value.desc);
  EMBER_ASSIGN_OR_RETURN(auto resolved, resolve_inputs(given));
  Activations in;
  for (const auto& [i, id] : resolved) {
    if (!values[i].value.buffer || values[i].value.buffer->bytes() < values[i].value.desc.bytes()) {
      return invalid_argument("input '" + values[i].name + "' has no device buffer of its size");
    }
    in[id] = values[i].value;
  }
  std::lock_guard lock(mu_);
  // Embedding ids, and kv_attention's positions and kv_meta: read back (a few bytes) and checked as
  // run_host checks them, since an id outside the table would read outside the weights on the
  // device, and a block table that does not hold together would send the kernel astray.
  std::vector<HostTensor> ids_back;
  std::vector<uint32_t> ids;
  const Graph& g = model_->graph();
  auto read_back = [&](uint32_t v) -> Status {
    auto it = in.find(v);
    if (it == in.end() || std::count(ids.begin(), ids.end(), it->first)) return Status::OK();
    EMBER_ASSIGN_OR_RETURN(auto back, download(*stream_, {{it->first, it->second}}, g.value_names));
    ids_back.push_back(std::move(back.front()));
    ids.push_back(it->first);
    return Status::OK();
  };
  for (uint32_t l = range_.first; l < range_.last; ++l) {
    const LayerSpec& spec = model_->layer(l);
    if (spec.op == OpKind::embedding && !spec.attrs.positional) EMBER_RETURN_IF_ERROR(read_back(g.layer_inputs[l][0]));
    if (spec.op != OpKind::kv_attention) continue;
    EMBER_RETURN_IF_ERROR(read_back(g.layer_inputs[l][1]));
    EMBER_RETURN_IF_ERROR(read_back(g.layer_inputs[l][2]));
  }
  EMBER_RETURN_IF_ERROR(check_ids(ids_back, ids));
  EMBER_RETURN_IF_ERROR(check_kv_meta_values(ids_back, ids));
  EMBER_ASSIGN_OR_RETURN(Activations out, run_locked(in));
  std::vector<NamedValue> named;
  for (auto& [id, v] : out) named.push_back({g.value_names[id], std::move(v)});
  return named;
}

Result<Activations> upload(Device& device, Stream& stream, const std::vector<HostTensor>& tensors,
                           const std::vector<uint32_t>& ids, ActivationPool* pool, PinnedStaging* staging) {
  Activations values;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t bytes = std::max<uint64_t>(tensors[i].desc.bytes(), 1);
    auto b = pool ? pool->allocate(bytes) : DeviceBuffer::allocate(device, bytes);
    if (!b.ok()) return b.error().with_context("input '" + tensors[i].name + "'");
    copy_in(stream, staging, (*b)->ptr(), tensors[i].data(), tensors[i].desc.bytes());
    values[ids[i]] = DeviceValue{tensors[i].desc, std::move(*b)};
  }
  return values;
}

Result<std::vector<HostTensor>> download(Stream& stream, const Activations& values,
                                         const std::vector<std::string>& names, PinnedStaging* staging) {
  std::vector<HostTensor> out;
  PinnedStaging::Downloads staged(staging);
  for (const auto& [id, v] : values) {
    EMBER_ASSIGN_OR_RETURN(HostTensor t, HostTensor::allocate(names.at(id), v.desc));
    staged.copy_to_host(stream, t.data(), v.buffer->ptr(), v.desc.bytes());
    out.push_back(std::move(t));
  }
  EMBER_RETURN_IF_ERROR(stream.synchronize());
  staged.finish();
  return out;
}

}  // namespace ember::gpu
