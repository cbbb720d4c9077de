// DeviceMemoryPool's queries, statistics and invariant check (the allocation itself is in
// device_memory_pool.cpp). See device_memory_pool.hpp.
#include <algorithm>
#include <numeric>

#include "base/units.hpp"
#include "gpu/device_memory_pool.hpp"

namespace ember::gpu {

std::optional<uint64_t> DeviceMemoryPool::offset_of(BlockHandle handle) const {
  const auto it = blocks_.find(handle.id);
  return it == blocks_.end() ? std::nullopt : std::optional<uint64_t>(it->second.offset);
}

std::optional<BlockInfo> DeviceMemoryPool::block(BlockHandle handle) const {
  const auto it = blocks_.find(handle.id);
  if (it == blocks_.end()) return std::nullopt;
  const Block& b = it->second;
  return BlockInfo{models_.at(b.model).name, b.offset, b.bytes, b.footprint, b.partition, b.span, b.tier};
}

uint64_t DeviceMemoryPool::model_bytes(std::string_view model) const {
  const auto found = serials_.find(model);
  return found == serials_.end() ? 0 : models_.at(found->second).footprint;
}

std::vector<PartitionInfo> DeviceMemoryPool::partitions() const {
  std::vector<PartitionInfo> out;
  out.reserve(partitions_.size());
  for (const Partition& q : partitions_) {
    PartitionInfo info{q.kind, 0, q.used, 0, 0, 0, static_cast<uint32_t>(q.models.size())};
    for (const auto& [model, n] : q.models) info.blocks += n;
    if (q.kind == PartitionKind::free) {
      info.free_bytes = info.largest_free_bytes = config_.partition_bytes;
    } else if (q.kind == PartitionKind::regular) {
      info.class_bytes = config_.class_bytes[q.class_index];
      info.free_bytes = q.free_slots.size() * info.class_bytes;
      info.largest_free_bytes = q.free_slots.empty() ? 0 : info.class_bytes;
    } else if (q.kind == PartitionKind::irregular) {
      info.free_bytes = uint64_t{q.buddy->free_units()} * config_.min_block_bytes;
      info.largest_free_bytes = uint64_t{q.buddy->largest_free()} * config_.min_block_bytes;
    }
    out.push_back(info);
  }
  return out;
}

DeviceMemoryPoolStats DeviceMemoryPool::stats() const {
  DeviceMemoryPoolStats s;
  s.capacity_bytes = capacity();
  s.used_bytes = used_;
  s.requested_bytes = requested_;
  s.partitions = static_cast<uint32_t>(partitions_.size());
  for (const PartitionInfo& p : partitions()) {
    s.free_bytes += p.free_bytes;
    if (p.kind == PartitionKind::regular) s.largest_free_block = std::max(s.largest_free_block, p.largest_free_bytes);
    if (p.kind == PartitionKind::regular) s.stranded_bytes += config_.partition_bytes % p.class_bytes;
    s.free_partitions += p.kind == PartitionKind::free;
    s.regular_partitions += p.kind == PartitionKind::regular;
    s.irregular_partitions += p.kind == PartitionKind::irregular;
    s.large_partitions += p.kind == PartitionKind::large;
  }
  for (const Run& r : spanning_runs())
    s.largest_free_block = std::max(s.largest_free_block, r.units * config_.min_block_bytes);
  s.fragmentation = s.free_bytes ? 1.0 - double(s.largest_free_block) / double(s.free_bytes) : 0.0;
  s.models = static_cast<uint32_t>(models_.size());
  s.blocks = blocks_.size();
  return s;
}

Status DeviceMemoryPool::check() const {
  const auto fail = [](const std::string& what) { return Status(internal_error("device memory pool: " + what)); };
  const uint64_t part = config_.partition_bytes, unit = config_.min_block_bytes;
  const size_t n = partitions_.size();
  // Recount everything from the blocks, then compare with the incremental accounting.
  std::vector<std::map<uint64_t, uint32_t>> part_models(n);
  std::vector<uint64_t> part_used(n, 0);
  std::vector<std::vector<uint8_t>> cover(n);  // irregular partitions: how often each unit is covered
  std::map<uint64_t, std::map<uint32_t, uint32_t>> model_parts;
  std::map<uint64_t, uint64_t> model_footprint, model_blocks;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  uint64_t used = 0, requested = 0;
  for (const auto& entry : blocks_) {
    const Block& b = entry.second;  // not a structured binding: lambdas below capture it
    const std::string name = "block " + std::to_string(entry.first);
    if (b.offset % kAlignment != 0) return fail(name + " is not 256-byte aligned");
    if (b.span == 0 || b.partition + uint64_t{b.span} > n || b.offset / part != b.partition ||
        b.offset + b.footprint > capacity())
      return fail(name + " lies outside its partitions or the region");
    if (b.footprint < std::max<uint64_t>(b.bytes, 1) || !models_.count(b.model))
      return fail(name + " is smaller than its request or has no model");
    if (b.span != (b.offset + b.footprint - 1) / part - b.partition + 1 || (b.span > 1) != (b.tier == PartitionKind::large))
      return fail(name + " spans the wrong partitions for its tier");
    if (b.tier != PartitionKind::regular && b.footprint != units_for(b.bytes) * unit)
      return fail(name + " is not its request rounded up to whole units");
    std::string broken;
    for_each_piece(b, [&](uint32_t p, uint64_t begin, uint64_t length) {
      const Partition& q = partitions_[p];
      ++part_models[p][b.model];
      ++model_parts[b.model][p];
      part_used[p] += length;
      if (b.tier == PartitionKind::regular) {
        const uint64_t c = q.kind == PartitionKind::regular ? config_.class_bytes[q.class_index] : 0;
        if (c == 0 || length != c || begin % c != 0 || q.free_slots.count(static_cast<uint32_t>(begin / c)))
          broken = " is not a used slot of a regular partition";
      } else if (length == part) {
        if (q.kind != PartitionKind::large) broken = " covers a partition that is not large";
      } else if (q.kind != PartitionKind::irregular) {
        broken = " has units in a partition that is not irregular";
      } else {
        std::vector<uint8_t>& c = cover[p];
        c.resize(part / unit, 0);
        for (uint64_t u = begin / unit; u < (begin + length) / unit; ++u)
          if (++c[u] > 1) broken = " overlaps another block";
      }
    });
    if (!broken.empty()) return fail(name + broken);
    spans.emplace_back(b.offset, b.footprint);
    model_footprint[b.model] += b.footprint;
    ++model_blocks[b.model];
    used += b.footprint;
    requested += b.bytes;
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i - 1].first + spans[i - 1].second > spans[i].first) return fail("two blocks overlap");
  if (used != used_ || requested != requested_) return fail("used/requested totals do not add up");

  for (uint32_t p = 0; p < n; ++p) {
    const Partition& q = partitions_[p];
    const std::string name = "partition " + std::to_string(p) + " (" + std::string(to_string(q.kind)) + ")";
    if (q.models != part_models[p] || q.used != part_used[p]) return fail(name + ": accounting does not add up");
    if (q.models.empty() != (q.kind == PartitionKind::free)) return fail(name + ": empty but not free, or the reverse");
    if (q.buddy.has_value() != (q.kind == PartitionKind::irregular) ||
        (q.kind != PartitionKind::regular && !q.free_slots.empty()))
      return fail(name + ": holds state of another kind");
    if (q.kind == PartitionKind::regular) {
      const uint64_t slots = part / config_.class_bytes[q.class_index];
      uint64_t live = 0;
      for (const auto& [model, count] : q.models) live += count;
      if (live + q.free_slots.size() != slots || (!q.free_slots.empty() && *q.free_slots.rbegin() >= slots))
        return fail(name + ": slots do not add up");
    } else if (q.kind == PartitionKind::irregular) {
      if (std::string why = q.buddy->check(); !why.empty()) return fail(name + ": " + why);
      std::vector<uint8_t>& c = cover[p];
      c.resize(part / unit, 0);
      q.buddy->for_each_free([&](uint32_t start, uint32_t units) {
        for (uint32_t u = start; u < start + units; ++u) ++c[u];
      });
      if (std::any_of(c.begin(), c.end(), [](uint8_t k) { return k != 1; }))
        return fail(name + ": blocks and free blocks do not tile it");
    } else if (q.kind == PartitionKind::large && (q.used != part || q.models.size() != 1)) {
      return fail(name + ": not wholly one block");
    }
  }

  if (serials_.size() != models_.size()) return fail("model names and entries disagree");
  for (const auto& [name, serial] : serials_) {
    const auto it = models_.find(serial);
    if (it == models_.end() || it->second.name != name) return fail("model '" + name + "' has no entry");
    const Model& m = it->second;
    if (m.footprint != model_footprint[serial] || m.partitions != model_parts[serial] ||
        m.blocks.size() != model_blocks[serial])
      return fail("model '" + name + "': accounting does not add up");
    for (uint64_t id : m.blocks)
      if (!blocks_.count(id) || blocks_.at(id).model != serial) return fail("model '" + name + "' lists a foreign block");
  }
  const DeviceMemoryPoolStats s = stats();
  if (s.used_bytes + s.free_bytes + s.stranded_bytes != s.capacity_bytes)
    return fail("used + free + stranded != capacity");
  return Status::OK();
}

std::string DeviceMemoryPool::shortage(std::string_view model, const std::vector<uint64_t>& sizes) const {
  uint64_t total = 0, largest = 0, rounded = 0;
  for (uint64_t b : sizes) {
    total += b;
    largest = std::max(largest, b);
    rounded += footprint(b);
  }
  const DeviceMemoryPoolStats s = stats();
  return "device memory pool: model '" + std::string(model) + "' asked for " + std::to_string(sizes.size()) +
         " blocks, " + format_bytes(total) + " (largest " + format_bytes(largest) + ", " + format_bytes(rounded) +
         " with rounding); " + format_bytes(s.free_bytes) + " free of " + format_bytes(s.capacity_bytes) +
         ", largest free block " + format_bytes(s.largest_free_block) + ", " + std::to_string(s.free_partitions) +
         " free partitions";
}

}  // namespace ember::gpu
