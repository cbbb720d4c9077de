#include "gpu/shadow_split.hpp"

#include <algorithm>
#include <future>
#include <set>

namespace ember::gpu {

DeviceValue slice_rows(const DeviceValue& value, int64_t from, int64_t to) {
  DeviceValue out;
  out.desc = value.desc;
  out.desc.shape[0] = to - from;
  const uint64_t row = value.desc.bytes() / static_cast<uint64_t>(value.desc.shape[0]);
  const uint64_t bytes = std::max<uint64_t>(row * static_cast<uint64_t>(to - from), 1);
  out.buffer = DeviceBuffer::adopt(value.buffer->device(), value.buffer->ptr() + row * static_cast<uint64_t>(from),
                                   bytes, [keep = value.buffer](DevicePtr) {});
  return out;
}

namespace {

/// The batch every value of `ids` in `values` leads with; invalid_argument when they differ.
Result<int64_t> batch_of(const Activations& values, const std::vector<uint32_t>& ids, const Graph& g) {
  int64_t batch = -1;
  for (uint32_t id : ids) {
    auto it = values.find(id);
    if (it == values.end()) return invalid_argument("the split lacks value '" + g.value_names[id] + "'");
    const TensorDesc& d = it->second.desc;
    if (d.shape.rank == 0) return invalid_argument("value '" + g.value_names[id] + "' has no batch dimension");
    if (batch >= 0 && d.shape[0] != batch) {
      return invalid_argument("value '" + g.value_names[id] + "' has " + std::to_string(d.shape[0]) +
                              " rows, another value of the range " + std::to_string(batch));
    }
    batch = d.shape[0];
  }
  return batch;
}

/// The Shadow's part: its rows copied over, the range run there.
Result<Activations> shadow_part(LayerExecutor& shadow, const Activations& rows, uint64_t* sent) {
  Device& here = shadow.device();
  auto stream = here.create_stream();
  Activations in;
  for (const auto& [id, v] : rows) {
    EMBER_ASSIGN_OR_RETURN(auto b, DeviceBuffer::allocate(here, std::max<uint64_t>(v.desc.bytes(), 1)));
    stream->copy_from_peer(b->ptr(), v.buffer->device(), v.buffer->ptr(), v.desc.bytes());
    *sent += v.desc.bytes();
    in[id] = DeviceValue{v.desc, std::move(b)};
  }
  EMBER_RETURN_IF_ERROR(stream->synchronize());
  return shadow.run(in);
}

}  // namespace

Result<Activations> run_split(const ShadowSplit& split, const Activations& inputs, int64_t shadow_rows,
                              SplitStats* stats) {
  SplitStats local;
  SplitStats& st = stats ? *stats : local;
  if (!split.body || !split.shadow) return invalid_argument("a split needs a Body and a Shadow executor");
  LayerExecutor& body = *split.body;
  const Model& model = body.model();
  const Graph& g = model.graph();
  const LayerRange range = body.range();
  if (!(split.shadow->range() == range) || &split.shadow->model() != &model) {
    return invalid_argument("the Shadow's executor does not cover the Body's range");
  }
  if ((range.first == 0) != (split.before == nullptr) || (range.last == g.num_layers()) != (split.after == nullptr) ||
      (split.before && split.before->range().last != range.first) ||
      (split.after && split.after->range().first != range.last)) {
    return invalid_argument("the executors before and after do not meet the range [" + std::to_string(range.first) +
                            ", " + std::to_string(range.last) + ")");
  }
  Activations values = inputs;
  if (split.before) {
    EMBER_ASSIGN_OR_RETURN(auto out, split.before->run(values));
    for (auto& [id, v] : out) values[id] = std::move(v);
  }
  EMBER_ASSIGN_OR_RETURN(const int64_t batch, batch_of(values, body.input_values(), g));
  if (shadow_rows <= 0 || shadow_rows >= batch) {
    return invalid_argument("the Shadow's rows (" + std::to_string(shadow_rows) + ") must leave the Body some of " +
                            std::to_string(batch));
  }
  const int64_t body_rows = batch - shadow_rows;
  Activations mine, theirs;
  for (uint32_t id : body.input_values()) {
    mine[id] = slice_rows(values.at(id), 0, body_rows);
    theirs[id] = slice_rows(values.at(id), body_rows, batch);
  }
  // Both sides at once: the Shadow's on a thread of its own.
  uint64_t sent = 0;
  auto far = std::async(std::launch::async, [&] { return shadow_part(*split.shadow, theirs, &sent); });
  auto near = body.run(mine);
  auto away = far.get();
  if (!near.ok()) return near.error();
  if (!away.ok()) {
    // The Body takes the Shadow's rows back.
    st.shadow_failed = true;
    st.shadow_lost = true;
    st.shadow_error = away.error().message();
    away = body.run(theirs);
    if (!away.ok()) return away.error();
  } else {
    st.shadow_rows = shadow_rows;
  }
  // Merge along the batch: the Body's rows first.
  auto stream = body.device().create_stream();
  for (const auto& [id, part] : *near) {
    const DeviceValue& rest = away->at(id);
    TensorDesc whole = part.desc;
    whole.shape[0] = batch;
    EMBER_ASSIGN_OR_RETURN(auto b, DeviceBuffer::allocate(body.device(), std::max<uint64_t>(whole.bytes(), 1)));
    stream->copy_on_device(b->ptr(), part.buffer->ptr(), part.desc.bytes());
    if (&rest.buffer->device() == &body.device()) {
      stream->copy_on_device(b->ptr() + part.desc.bytes(), rest.buffer->ptr(), rest.desc.bytes());
    } else {
      stream->copy_from_peer(b->ptr() + part.desc.bytes(), rest.buffer->device(), rest.buffer->ptr(),
                             rest.desc.bytes());
      sent += rest.desc.bytes();
    }
    values[id] = DeviceValue{whole, std::move(b)};
  }
  EMBER_RETURN_IF_ERROR(stream->synchronize());
  st.sent_bytes = st.shadow_failed ? 0 : sent;
  if (split.after) {
    EMBER_ASSIGN_OR_RETURN(auto out, split.after->run(values));
    for (auto& [id, v] : out) values[id] = std::move(v);
  }
  Activations answer;
  for (uint32_t id : g.outputs) {
    auto it = values.find(id);
    if (it == values.end()) return internal_error("the split did not compute output '" + g.value_names[id] + "'");
    answer[id] = it->second;
  }
  return answer;
}

}  // namespace ember::gpu
