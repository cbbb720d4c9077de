#include "actors/node/engine/kept_values.hpp"

#include <algorithm>
#include <string>

#include "actors/node/engine/engine_gate.hpp"
#include "actors/node/engine/executor_engine.hpp"

namespace ember::engine {

Result<std::vector<gpu::HostTensor>> KeptValues::run_handoff(gpu::LayerExecutor& ex, const SwapRun& run,
                                                             std::vector<gpu::KeptValue>& kept, gpu::Stream& stream) {
  gpu::ActivationPool& activations = memory_.activations();
  gpu::PinnedStaging* staging = memory_.staging();
  std::vector<gpu::NamedValue> in;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, handle] : run.device_inputs) {
      auto it = values_.find(handle);
      if (it == values_.end()) {
        return unavailable("input '" + name + "': the value handed on " + device_.info().name +
                           " is gone (the device restarted)");
      }
      EMBER_ASSIGN_OR_RETURN(auto value, on_device(it->second, false, stream));
      in.push_back({name, std::move(value)});
    }
  }
  for (const auto& t : run.inputs) {
    EMBER_ASSIGN_OR_RETURN(auto b, activations.allocate(std::max<uint64_t>(t.desc.bytes(), 1)));
    gpu::copy_in(stream, staging, b->ptr(), t.data(), t.desc.bytes());
    in.push_back({t.name, gpu::DeviceValue{t.desc, std::move(b)}});
  }
  for (const auto& p : run.peer_inputs) {
    EMBER_ASSIGN_OR_RETURN(auto b, activations.allocate(std::max<uint64_t>(p.desc.bytes(), 1)));
    stream.copy_from_peer(b->ptr(), *p.device, p.ptr, p.desc.bytes());
    in.push_back({p.name, gpu::DeviceValue{p.desc, std::move(b)}});
  }
  EMBER_RETURN_IF_ERROR(stream.synchronize());
  EMBER_ASSIGN_OR_RETURN(auto out, ex.run_device(in));
  for (const auto& name : run.keep) {
    if (std::none_of(out.begin(), out.end(), [&](const gpu::NamedValue& v) { return v.name == name; })) {
      return invalid_argument("the model has no output '" + name + "'");
    }
  }
  std::vector<gpu::HostTensor> back;
  gpu::PinnedStaging::Downloads staged(staging);
  for (auto& v : out) {
    const bool keeps = std::count(run.keep.begin(), run.keep.end(), v.name) > 0;
    const bool wanted =
        std::count(run.wanted.begin(), run.wanted.end(), v.name) > 0 || (run.wanted.empty() && run.keep.empty());
    if (wanted) {
      EMBER_ASSIGN_OR_RETURN(auto t, gpu::HostTensor::allocate(v.name, v.value.desc));
      staged.copy_to_host(stream, t.data(), v.value.buffer->ptr(), v.value.desc.bytes());
      back.push_back(std::move(t));
    }
    if (keeps) keep(std::move(v), kept);
  }
  EMBER_RETURN_IF_ERROR(stream.synchronize());
  staged.finish();
  return back;
}

void KeptValues::keep(gpu::NamedValue value, std::vector<gpu::KeptValue>& kept) {
  std::lock_guard lock(mu_);
  const uint64_t handle = next_handle_++;
  kept.push_back({value.name, handle, value.value.desc});
  {
    std::lock_guard counts(counts_mu_);
    ++count_;
    bytes_ += value.value.desc.bytes();
  }
  values_.emplace(handle, Kept{std::move(value), std::nullopt, nullptr});
}

void KeptValues::release(const std::vector<uint64_t>& handles) {
  std::lock_guard lock(mu_);
  for (uint64_t h : handles) {
    auto it = values_.find(h);
    if (it == values_.end()) continue;
    {
      std::lock_guard counts(counts_mu_);
      --count_;
      bytes_ -= it->second.value.value.desc.bytes();
    }
    values_.erase(it);
  }
}

Result<std::vector<gpu::PeerValue>> KeptValues::lend(const std::vector<uint64_t>& handles, gpu::Stream& stream) {
  std::vector<gpu::PeerValue> out;
  std::lock_guard lock(mu_);
  for (uint64_t h : handles) {
    auto it = values_.find(h);
    if (it == values_.end()) return not_found("no value " + std::to_string(h) + " is kept on " + device_.info().name);
    // A value moved to the host comes back to be copied.
    EMBER_ASSIGN_OR_RETURN(auto value, on_device(it->second, true, stream));
    out.push_back({it->second.value.name, &device_, value.buffer->ptr(), value.desc});
  }
  return out;
}

Result<gpu::DeviceValue> KeptValues::on_device(Kept& k, bool restore, gpu::Stream& stream) {
  if (k.value.value.buffer && !k.at) return k.value.value;
  const gpu::TensorDesc& desc = k.value.value.desc;
  EMBER_ASSIGN_OR_RETURN(auto b, memory_.activations().allocate(std::max<uint64_t>(desc.bytes(), 1)));
  if (k.at) {
    // On another device of the node: copied back over the link while that device stays.
    EngineGate::Entry there(k.at.get());
    if (!there) {
      return unavailable("the value '" + k.value.name + "' kept for " + device_.info().name + " had moved to " +
                         k.at->device() + ", which restarted since");
    }
    stream.copy_from_peer(b->ptr(), there->device(), k.value.value.buffer->ptr(), desc.bytes());
    EMBER_RETURN_IF_ERROR(stream.synchronize());
  } else {
    gpu::copy_in(stream, memory_.staging(), b->ptr(), k.host->data(), desc.bytes());
    EMBER_RETURN_IF_ERROR(stream.synchronize());
  }
  gpu::DeviceValue value{desc, std::move(b)};
  if (restore) {
    k.value.value = value;
    k.host.reset();
    k.at.reset();
  }
  return value;
}

bool KeptValues::spill_to_peer(Kept& k) {
  if (!node_) return false;
  // The others, least pressed first (the most room in their workspace, where values they host go).
  std::vector<std::pair<uint64_t, std::shared_ptr<EngineGate>>> room;
  for (auto& gate : node_->others(self_)) {
    uint64_t free = 0;
    {
      EngineGate::Entry there(gate.get());
      if (!there) continue;
      free = there->device().memory().largest_free_block;
    }
    room.emplace_back(free, std::move(gate));
  }
  std::stable_sort(room.begin(), room.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  const uint64_t bytes = k.value.value.desc.bytes();
  for (auto& [free, gate] : room) {
    if (free < bytes) break;
    Result<std::shared_ptr<gpu::DeviceBuffer>> moved = unavailable("closed");
    {
      EngineGate::Entry there(gate.get());
      if (!there) continue;
      moved = there->host_for_peer(device_, k.value.value.buffer->ptr(), bytes);
    }
    if (!moved.ok()) continue;  // no room after all: the next, else host memory
    k.value.value.buffer = std::move(*moved);
    k.at = std::move(gate);
    return true;
  }
  return false;
}

Result<size_t> KeptValues::spill(const std::vector<uint64_t>& keep, gpu::Stream& stream) {
  std::lock_guard lock(mu_);
  std::vector<Kept*> here;
  for (auto& [handle, k] : values_) {
    if (k.value.value.buffer && !k.at && !std::count(keep.begin(), keep.end(), handle)) here.push_back(&k);
  }
  std::stable_sort(here.begin(), here.end(), [](const Kept* a, const Kept* b) {
    return a->value.value.desc.bytes() > b->value.value.desc.bytes();
  });
  Spills moved;
  for (Kept* k : here) {
    const uint64_t bytes = k->value.value.desc.bytes();
    if (spill_to_peer(*k)) {
      ++moved.to_peer;
      moved.to_peer_bytes += bytes;
      continue;
    }
    EMBER_ASSIGN_OR_RETURN(auto t, gpu::HostTensor::allocate(k->value.name, k->value.value.desc));
    stream.copy_to_host(t.data(), k->value.value.buffer->ptr(), bytes);
    EMBER_RETURN_IF_ERROR(stream.synchronize());
    k->host = std::move(t);
    k->value.value.buffer.reset();
    ++moved.to_host;
    moved.to_host_bytes += bytes;
  }
  std::lock_guard counts(counts_mu_);
  spills_.to_host += moved.to_host;
  spills_.to_host_bytes += moved.to_host_bytes;
  spills_.to_peer += moved.to_peer;
  spills_.to_peer_bytes += moved.to_peer_bytes;
  return here.size();
}

std::pair<size_t, uint64_t> KeptValues::counts() const {
  std::lock_guard lock(counts_mu_);  // not mu_, which a spill holds across its copies
  return {count_, bytes_};
}

KeptValues::Spills KeptValues::spilled() const {
  std::lock_guard lock(counts_mu_);
  return spills_;
}

uint64_t KeptValues::bytes_here() const {
  std::lock_guard lock(mu_);
  uint64_t bytes = 0;
  for (const auto& [handle, k] : values_) {
    if (k.value.value.buffer && !k.at) bytes += k.value.value.desc.bytes();
  }
  return bytes;
}

void KeptValues::clear() {
  std::lock_guard lock(mu_);
  values_.clear();
}

Result<std::shared_ptr<gpu::DeviceBuffer>> HostedValues::host(gpu::Device& from, gpu::DevicePtr src, uint64_t bytes) {
  // From the workspace only: a neighbour's value never takes the room this device's weights need.
  EMBER_ASSIGN_OR_RETURN(auto b, gpu::DeviceBuffer::allocate(device_, std::max<uint64_t>(bytes, 1)));
  auto stream = device_.create_stream();
  stream->copy_from_peer(b->ptr(), from, src, bytes);
  EMBER_RETURN_IF_ERROR(stream->synchronize());
  std::lock_guard lock(state_->mu);
  const uint64_t id = ++state_->next;
  const gpu::DevicePtr ptr = b->ptr();
  state_->buffers.emplace(id, std::move(b));
  state_->bytes += bytes;
  return gpu::DeviceBuffer::adopt(device_, ptr, bytes, [state = state_, id, bytes](gpu::DevicePtr) {
    std::lock_guard lock(state->mu);
    if (state->buffers.erase(id)) state->bytes -= bytes;
  });
}

uint64_t HostedValues::bytes() const {
  std::lock_guard lock(state_->mu);
  return state_->bytes;
}

void HostedValues::clear() {
  std::lock_guard lock(state_->mu);
  state_->buffers.clear();
  state_->bytes = 0;
}

}  // namespace ember::engine
