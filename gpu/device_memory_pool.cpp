#include "gpu/device_memory_pool.hpp"

#include <algorithm>
#include <numeric>

#include "base/units.hpp"

namespace ember::gpu {
namespace {

constexpr uint64_t kMaxUnitsPerPartition = 1u << 20;  // bounds the buddy index (1 byte per unit)

bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace

std::string_view to_string(PartitionKind kind) {
  switch (kind) {
    case PartitionKind::free: return "free";
    case PartitionKind::regular: return "regular";
    case PartitionKind::irregular: return "irregular";
    case PartitionKind::large: return "large";
  }
  return "?";
}

Result<DeviceMemoryPool> DeviceMemoryPool::create(uint64_t capacity_bytes, DeviceMemoryPoolConfig config) {
  const uint64_t part = config.partition_bytes, unit = config.min_block_bytes;
  if (!is_pow2(unit) || unit < kAlignment)
    return invalid_argument("device memory pool: min_block_bytes " + std::to_string(unit) +
                            " is not a power of two of at least 256");
  if (!is_pow2(part) || part < unit || part / unit > kMaxUnitsPerPartition)
    return invalid_argument("device memory pool: partition_bytes " + std::to_string(part) +
                            " is not a power of two between min_block_bytes and 2^20 of them");
  std::sort(config.class_bytes.begin(), config.class_bytes.end());
  for (size_t i = 0; i < config.class_bytes.size(); ++i) {
    const uint64_t c = config.class_bytes[i];
    if (c == 0 || c % kAlignment != 0 || c > part / 2 || (i > 0 && config.class_bytes[i - 1] == c))
      return invalid_argument("device memory pool: class size " + std::to_string(c) +
                              " is not a distinct multiple of 256 of at most half a partition");
  }
  const uint64_t count = capacity_bytes / part;
  if (count == 0 || count > UINT32_MAX)
    return invalid_argument("device memory pool: capacity " + format_bytes(capacity_bytes) +
                            " holds no whole partition of " + format_bytes(part) + " (or too many)");
  return DeviceMemoryPool(static_cast<uint32_t>(count), std::move(config));
}

DeviceMemoryPool::DeviceMemoryPool(uint32_t partitions, DeviceMemoryPoolConfig config)
    : config_(std::move(config)), partitions_(partitions) {}

// -- placement ------------------------------------------------------------------------------

std::optional<int> DeviceMemoryPool::class_for(uint64_t bytes) const {
  for (size_t i = 0; i < config_.class_bytes.size(); ++i) {
    const uint64_t c = config_.class_bytes[i];
    if (bytes <= c) return bytes > c - c / 8 ? std::optional<int>(static_cast<int>(i)) : std::nullopt;
  }
  return std::nullopt;
}

uint64_t DeviceMemoryPool::units_for(uint64_t bytes) const {
  return (std::max<uint64_t>(bytes, 1) + config_.min_block_bytes - 1) / config_.min_block_bytes;
}

uint64_t DeviceMemoryPool::footprint(uint64_t bytes) const {
  const uint64_t b = std::max<uint64_t>(bytes, 1);
  if (auto c = class_for(b)) return config_.class_bytes[static_cast<size_t>(*c)];
  return units_for(b) * config_.min_block_bytes;
}

std::vector<DeviceMemoryPool::Run> DeviceMemoryPool::spanning_runs() const {
  const uint64_t per = config_.partition_bytes / config_.min_block_bytes;
  std::vector<Run> runs;
  auto add = [&](uint64_t start, uint64_t units) {
    if (!runs.empty() && runs.back().start + runs.back().units == start)
      runs.back().units += units;
    else
      runs.push_back({start, units});
  };
  for (uint32_t p = 0; p < partitions_.size(); ++p) {
    const Partition& q = partitions_[p];
    if (q.kind == PartitionKind::free) add(p * per, per);
    if (q.kind == PartitionKind::irregular)
      for (const BuddyPartition::Run& r : q.buddy->runs()) add(p * per + r.start, r.units);
  }
  return runs;
}

std::optional<uint32_t> DeviceMemoryPool::pick_free_partition() const {
  // The last partition of the shortest run of free partitions (ties: the highest run), so that
  // small blocks do not cut the long runs that blocks above a partition need.
  std::optional<uint32_t> best;
  uint32_t best_len = 0;
  for (uint32_t p = 0; p < partitions_.size();) {
    if (partitions_[p].kind != PartitionKind::free) { ++p; continue; }
    uint32_t end = p;
    while (end < partitions_.size() && partitions_[end].kind == PartitionKind::free) ++end;
    if (!best || end - p <= best_len) {
      best = end - 1;
      best_len = end - p;
    }
    p = end;
  }
  return best;
}

std::optional<uint64_t> DeviceMemoryPool::place(uint64_t model, uint64_t bytes, uint64_t remaining) {
  const uint64_t b = std::max<uint64_t>(bytes, 1);
  if (b > config_.partition_bytes) return place_span(model, bytes);
  // While a whole partition's worth of the model remains to be placed, it opens partitions of its
  // own; the rest, and models smaller than a partition, fill room in shared partitions first.
  const bool empty_first = remaining >= config_.partition_bytes;
  if (auto c = class_for(b))
    if (auto id = place_slot(model, bytes, static_cast<uint32_t>(*c), empty_first)) return id;
  if (auto id = place_buddy(model, bytes, empty_first)) return id;
  return place_span(model, bytes);
}

std::optional<uint64_t> DeviceMemoryPool::place_span(uint64_t model, uint64_t bytes) {
  // Best fit over runs of free units that may cross partition boundaries (ties: the lowest run),
  // carved from the run's start: the whole partitions it covers become `large`, the partial ones
  // at either end irregular.
  const uint64_t unit = config_.min_block_bytes, need = units_for(bytes);
  std::optional<Run> best;
  for (const Run& r : spanning_runs())
    if (r.units >= need && (!best || r.units < best->units)) best = r;
  if (!best) return std::nullopt;
  const uint64_t per = config_.partition_bytes / unit;
  const Block block{model, PartitionKind::large, static_cast<uint32_t>(best->start / per),
                    static_cast<uint32_t>((best->start + need - 1) / per - best->start / per + 1),
                    best->start * unit, bytes, need * unit};
  for_each_piece(block, [&](uint32_t p, uint64_t begin, uint64_t length) {
    Partition& q = partitions_[p];
    if (length == config_.partition_bytes) {
      q.kind = PartitionKind::large;
      return;
    }
    if (q.kind == PartitionKind::free) {
      q.kind = PartitionKind::irregular;
      q.buddy.emplace(static_cast<uint32_t>(per));
    }
    q.buddy->take(static_cast<uint32_t>(begin / unit), static_cast<uint32_t>(length / unit));
  });
  return commit(model, block);
}

std::optional<uint64_t> DeviceMemoryPool::place_slot(uint64_t model, uint64_t bytes, uint32_t class_index,
                                                     bool empty_first) {
  std::optional<uint32_t> best;
  auto consider = [&](uint32_t p) {
    const Partition& q = partitions_[p];
    if (q.kind != PartitionKind::regular || q.class_index != class_index || q.free_slots.empty()) return;
    if (!best || q.free_slots.size() < partitions_[*best].free_slots.size()) best = p;
  };
  auto open_free = [&] {
    if (!(best = pick_free_partition())) return;
    Partition& q = partitions_[*best];
    q.kind = PartitionKind::regular;
    q.class_index = class_index;
    const uint64_t slots = config_.partition_bytes / config_.class_bytes[class_index];
    for (uint32_t s = 0; s < slots; ++s) q.free_slots.insert(q.free_slots.end(), s);
  };
  for (const auto& [p, n] : models_.at(model).partitions) consider(p);
  if (!best && empty_first) open_free();
  if (!best)
    for (uint32_t p = 0; p < partitions_.size(); ++p) consider(p);
  if (!best && !empty_first) open_free();
  if (!best) return std::nullopt;
  Partition& q = partitions_[*best];
  const uint32_t slot = *q.free_slots.begin();
  q.free_slots.erase(q.free_slots.begin());
  const uint64_t c = config_.class_bytes[class_index];
  return commit(model, Block{model, PartitionKind::regular, *best, 1, *best * config_.partition_bytes + slot * c,
                             bytes, c});
}

std::optional<uint64_t> DeviceMemoryPool::place_buddy(uint64_t model, uint64_t bytes, bool empty_first) {
  const auto units = static_cast<uint32_t>(units_for(bytes));
  std::optional<uint32_t> best;
  uint32_t best_run = 0;
  auto consider = [&](uint32_t p) {
    const Partition& q = partitions_[p];
    if (q.kind != PartitionKind::irregular || q.buddy->free_units() < units) return;
    const auto run = q.buddy->best_run(units);
    if (run && (!best || run->units < best_run)) {
      best = p;
      best_run = run->units;
    }
  };
  auto open_free = [&] {
    if (!(best = pick_free_partition())) return;
    partitions_[*best].kind = PartitionKind::irregular;
    partitions_[*best].buddy.emplace(static_cast<uint32_t>(config_.partition_bytes / config_.min_block_bytes));
  };
  for (const auto& [p, n] : models_.at(model).partitions) consider(p);
  if (!best && empty_first) open_free();
  if (!best)
    for (uint32_t p = 0; p < partitions_.size(); ++p) consider(p);
  if (!best && !empty_first) open_free();
  if (!best) return std::nullopt;
  const uint32_t start = *partitions_[*best].buddy->allocate(units);
  const uint64_t unit = config_.min_block_bytes;
  return commit(model, Block{model, PartitionKind::irregular, *best, 1,
                             *best * config_.partition_bytes + start * unit, bytes, units * unit});
}

uint64_t DeviceMemoryPool::commit(uint64_t model, const Block& block) {
  const uint64_t id = next_block_++;
  Model& m = models_.at(model);
  for_each_piece(block, [&](uint32_t p, uint64_t, uint64_t length) {
    ++partitions_[p].models[model];
    ++m.partitions[p];
    partitions_[p].used += length;
  });
  m.footprint += block.footprint;
  m.requested += block.bytes;
  used_ += block.footprint;
  requested_ += block.bytes;
  blocks_.emplace(id, block);
  return id;
}

void DeviceMemoryPool::release(uint64_t id) {
  const auto it = blocks_.find(id);
  const Block b = it->second;
  blocks_.erase(it);
  Model& m = models_.at(b.model);
  m.footprint -= b.footprint;
  m.requested -= b.bytes;
  used_ -= b.footprint;
  requested_ -= b.bytes;
  for_each_piece(b, [&](uint32_t p, uint64_t begin, uint64_t length) {
    Partition& q = partitions_[p];
    q.used -= length;
    if (q.kind == PartitionKind::regular)
      q.free_slots.insert(static_cast<uint32_t>(begin / config_.class_bytes[q.class_index]));
    else if (q.kind == PartitionKind::irregular)
      q.buddy->free(static_cast<uint32_t>(begin / config_.min_block_bytes),
                    static_cast<uint32_t>(length / config_.min_block_bytes));
    if (--q.models[b.model] == 0) q.models.erase(b.model);
    if (--m.partitions[p] == 0) m.partitions.erase(p);
    reset_if_empty(p);  // a large partition always empties here
  });
}

void DeviceMemoryPool::reset_if_empty(uint32_t p) {
  Partition& q = partitions_[p];
  if (!q.models.empty()) return;
  assert(q.used == 0);
  q = Partition{};
}

// -- models ---------------------------------------------------------------------------------

bool DeviceMemoryPool::place_all(uint64_t model, const std::vector<uint64_t>& sizes, std::vector<uint64_t>& ids) {
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  ids.assign(sizes.size(), 0);
  uint64_t remaining = 0;
  for (uint64_t b : sizes) remaining += footprint(b);
  for (size_t k = 0; k < order.size(); ++k) {
    const auto id = place(model, sizes[order[k]], remaining);
    remaining -= footprint(sizes[order[k]]);
    if (id) {
      ids[order[k]] = *id;
      models_.at(model).blocks.push_back(*id);
      continue;
    }
    for (size_t j = k; j-- > 0;) {  // roll back: buddy and slot state depend only on what is in use
      release(ids[order[j]]);
      models_.at(model).blocks.pop_back();
    }
    next_block_ -= k;
    return false;
  }
  return true;
}

Result<std::vector<BlockHandle>> DeviceMemoryPool::allocate_model(std::string_view model,
                                                                  const std::vector<uint64_t>& sizes) {
  if (sizes.empty()) return std::vector<BlockHandle>{};
  const auto found = serials_.find(model);
  const bool is_new = found == serials_.end();
  const uint64_t serial = is_new ? next_model_++ : found->second;
  if (is_new) models_[serial].name = std::string(model);
  std::vector<uint64_t> ids;
  if (!place_all(serial, sizes, ids)) {
    if (is_new) {
      models_.erase(serial);
      --next_model_;
    }
    return out_of_memory(shortage(model, sizes));
  }
  if (is_new) serials_.emplace(std::string(model), serial);
  std::vector<BlockHandle> handles;
  handles.reserve(ids.size());
  for (uint64_t id : ids) handles.push_back(BlockHandle{id});
  return handles;
}

bool DeviceMemoryPool::can_fit(const std::vector<uint64_t>& sizes) {
  const uint64_t serial = next_model_++;
  models_[serial].name = "(can_fit)";
  std::vector<uint64_t> ids;
  const bool fits = place_all(serial, sizes, ids);
  if (fits) {
    for (uint64_t id : ids) release(id);
    next_block_ -= ids.size();
  }
  models_.erase(serial);
  --next_model_;
  return fits;
}

uint64_t DeviceMemoryPool::free_model(std::string_view model) {
  const auto found = serials_.find(model);
  if (found == serials_.end()) return 0;
  const uint64_t serial = found->second;
  const uint64_t freed = models_.at(serial).footprint;
  for (uint64_t id : std::vector<uint64_t>(std::move(models_.at(serial).blocks))) release(id);
  models_.erase(serial);
  serials_.erase(found);
  return freed;
}

}  // namespace ember::gpu
