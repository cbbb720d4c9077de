#include "actors/node/engine/kv_blocks.hpp"

#include <algorithm>

#include "base/units.hpp"
#include "gpu/pinned_staging.hpp"

namespace ember::engine {

uint64_t KvLayout::row_bytes() const { return uint64_t{num_kv_heads} * head_dim * gpu::dtype_size(dtype); }

uint64_t KvLayout::block_bytes() const { return uint64_t{num_kv_layers} * 2 * block_size * row_bytes(); }

uint64_t KvLayout::k_offset(uint32_t layer) const { return uint64_t{layer} * 2 * block_size * row_bytes(); }

uint64_t KvLayout::v_offset(uint32_t layer) const { return k_offset(layer) + uint64_t{block_size} * row_bytes(); }

Status KvLayout::validate() const {
  if (num_kv_layers == 0 || num_kv_heads == 0 || head_dim == 0 || block_size == 0) {
    return invalid_argument("a KV layout needs num_kv_layers, num_kv_heads, head_dim and block_size above 0 (got " +
                            std::to_string(num_kv_layers) + ", " + std::to_string(num_kv_heads) + ", " +
                            std::to_string(head_dim) + ", " + std::to_string(block_size) + ")");
  }
  if (dtype != gpu::DType::f32 && dtype != gpu::DType::f16 && dtype != gpu::DType::bf16) {
    return invalid_argument("a KV cache holds float32, float16 or bfloat16, not " + std::string(gpu::dtype_name(dtype)));
  }
  // Each factor is below 2^32, so the product of the first three fits 64 bits before this check.
  if (block_bytes() > (1ull << 30)) {
    return invalid_argument("a KV block of " + format_bytes(block_bytes()) + " (over 1 GiB): lower block_size");
  }
  return Status::OK();
}

Result<std::unique_ptr<KvBlocks>> KvBlocks::create(gpu::Device& device, DeviceMemory& memory, KvLayout layout,
                                                   KvBlocksConfig config) {
  EMBER_RETURN_IF_ERROR(layout.validate());
  if (config.name.empty()) return invalid_argument("a KV cache needs a name (its chunks' in the pool)");
  if (config.budget_bytes == 0 && !(config.pool_fraction > 0 && config.pool_fraction <= 1)) {
    return invalid_argument("the KV cache's pool_fraction must be in (0, 1], not " +
                            std::to_string(config.pool_fraction));
  }
  std::unique_ptr<KvBlocks> kv(new KvBlocks(device, memory, layout, std::move(config)));
  if (kv->bound_blocks_ == 0) {
    return invalid_argument("the KV cache's bound (" + format_bytes(kv->config_.budget_bytes) + ", " +
                            std::to_string(kv->config_.pool_fraction) + " of a pool of " +
                            format_bytes(memory.totals().pool_capacity) + ") holds no block of " +
                            format_bytes(kv->block_bytes_));
  }
  return kv;
}

KvBlocks::KvBlocks(gpu::Device& device, DeviceMemory& memory, KvLayout layout, KvBlocksConfig config)
    : device_(device), memory_(memory), layout_(layout), config_(std::move(config)) {
  block_bytes_ = layout_.block_bytes();
  const uint64_t budget = config_.budget_bytes
                              ? config_.budget_bytes
                              : static_cast<uint64_t>(static_cast<double>(memory_.totals().pool_capacity) *
                                                      config_.pool_fraction);
  bound_blocks_ = budget / block_bytes_;
  chunk_blocks_ = config_.chunk_blocks ? config_.chunk_blocks : std::max<uint64_t>(1, memory_.partition_bytes() / block_bytes_);
  stream_ = device_.create_stream();
  counts_.block_bytes = block_bytes_;
  counts_.bound_blocks = bound_blocks_;
  publish();
}

KvBlocks::~KvBlocks() {
  (void)stream_->synchronize();  // every swap waited for its copies; nothing should be pending
  stream_.reset();
  while (!chunks_.empty()) free_chunk(chunks_.begin()->first);
}

uint64_t KvBlocks::blocks_of(uint64_t seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : it->second.blocks.size();
}

KvBlocks::State KvBlocks::state(uint64_t seq) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return State::unknown;
  return it->second.swapped ? State::swapped : State::resident;
}

std::vector<gpu::DevicePtr> KvBlocks::table(uint64_t seq) const {
  std::vector<gpu::DevicePtr> t;
  auto it = seqs_.find(seq);
  if (it == seqs_.end() || it->second.swapped) return t;
  t.reserve(it->second.blocks.size());
  for (const Block& b : it->second.blocks) t.push_back(address(b));
  return t;
}

gpu::DevicePtr KvBlocks::address(const Block& b) const { return chunks_.at(b.chunk).base + uint64_t{b.index} * block_bytes_; }

Error KvBlocks::illegal(uint64_t seq, const char* move, const char* state) {
  ++counts_.illegal;
  publish();
  return internal_error(std::string("illegal KV move: ") + move + " of sequence " + std::to_string(seq) + ", " +
                        state + ", in " + config_.name);
}

Status KvBlocks::grow(uint64_t seq, uint64_t tokens) {
  auto it = seqs_.find(seq);
  if (it != seqs_.end() && it->second.swapped) return illegal(seq, "grow", "swapped");
  const uint64_t have = it == seqs_.end() ? 0 : it->second.blocks.size();
  const uint64_t want = blocks_for(tokens);
  if (want > have) {
    auto blocks = take(want - have);
    if (!blocks.ok()) {
      ++counts_.refused;
      publish();
      return blocks.error().with_context("KV blocks for sequence " + std::to_string(seq) + " (" +
                                         std::to_string(tokens) + " tokens)");
    }
    auto& s = seqs_[seq];
    s.blocks.insert(s.blocks.end(), blocks->begin(), blocks->end());
  } else if (it == seqs_.end()) {
    seqs_[seq];
  }
  publish();
  return Status::OK();
}

void KvBlocks::release(uint64_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  if (it->second.swapped) {
    host_used_ -= it->second.host_blocks * block_bytes_;
    --swapped_seqs_;
  } else {
    give(it->second.blocks);
  }
  seqs_.erase(it);
  publish();
}

Status KvBlocks::swap_out(uint64_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return not_found("no KV sequence " + std::to_string(seq) + " in " + config_.name);
  Seq& s = it->second;
  if (s.swapped) return illegal(seq, "swap_out", "swapped");
  const uint64_t n = s.blocks.size(), bytes = n * block_bytes_;
  if (!host_room(bytes)) {
    return out_of_memory("swapping sequence " + std::to_string(seq) + "'s KV blocks (" + format_bytes(bytes) +
                         ") out of " + config_.name + ": host swap space holds " + format_bytes(host_used_) + " of " +
                         format_bytes(config_.host_bytes));
  }
  std::unique_ptr<uint8_t[]> host(new uint8_t[std::max<uint64_t>(bytes, 1)]);
  gpu::PinnedStaging* staging = memory_.staging();
  const uint64_t round = staging_round(n);
  for (uint64_t first = 0; first < n; first += round) {
    gpu::PinnedStaging::Downloads downloads(staging);
    for (uint64_t i = first; i < std::min(n, first + round); ++i) {
      downloads.copy_to_host(*stream_, host.get() + i * block_bytes_, address(s.blocks[i]), block_bytes_);
    }
    if (Status st = stream_->synchronize(); !st.ok()) {
      return st.error().with_context("swapping sequence " + std::to_string(seq) + "'s KV blocks out of " + config_.name);
    }
    downloads.finish();
  }
  give(s.blocks);
  s.blocks.clear();
  s.host = std::move(host);
  s.host_blocks = n;
  s.swapped = true;
  ++swapped_seqs_;
  host_used_ += bytes;
  ++counts_.swap_outs;
  counts_.swap_out_bytes += bytes;
  publish();
  return Status::OK();
}

Status KvBlocks::swap_in(uint64_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return not_found("no KV sequence " + std::to_string(seq) + " in " + config_.name);
  Seq& s = it->second;
  if (!s.swapped) return illegal(seq, "swap_in", "resident");
  const uint64_t n = s.host_blocks, bytes = n * block_bytes_;
  auto blocks = take(n);
  if (!blocks.ok()) {
    ++counts_.refused;
    publish();
    return blocks.error().with_context("swapping sequence " + std::to_string(seq) + "'s KV blocks into " +
                                       config_.name);
  }
  const uint64_t round = staging_round(n);
  for (uint64_t first = 0; first < n; first += round) {
    for (uint64_t i = first; i < std::min(n, first + round); ++i) {
      gpu::copy_in(*stream_, memory_.staging(), address((*blocks)[i]), s.host.get() + i * block_bytes_, block_bytes_);
    }
    if (Status st = stream_->synchronize(); !st.ok()) {
      give(*blocks);  // it stays swapped: the host copy is intact
      publish();
      return st.error().with_context("swapping sequence " + std::to_string(seq) + "'s KV blocks into " + config_.name);
    }
  }
  s.blocks = std::move(*blocks);
  s.host.reset();
  s.host_blocks = 0;
  s.swapped = false;
  --swapped_seqs_;
  host_used_ -= bytes;
  ++counts_.swap_ins;
  counts_.swap_in_bytes += bytes;
  publish();
  return Status::OK();
}

Result<KvHostCopy> KvBlocks::export_host(uint64_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return illegal(seq, "export_host", "unknown");
  if (!it->second.swapped) return illegal(seq, "export_host", "resident");
  KvHostCopy copy{layout_, std::move(it->second.host), it->second.host_blocks};
  host_used_ -= copy.blocks * block_bytes_;
  --swapped_seqs_;
  seqs_.erase(it);
  publish();
  return copy;
}

Status KvBlocks::import_host(uint64_t seq, KvHostCopy copy) {
  const KvLayout& l = copy.layout;
  if (l.num_kv_layers != layout_.num_kv_layers || l.num_kv_heads != layout_.num_kv_heads ||
      l.head_dim != layout_.head_dim || l.block_size != layout_.block_size || l.dtype != layout_.dtype) {
    return invalid_argument("a KV host copy of another layout cannot be imported into " + config_.name);
  }
  if (seqs_.count(seq)) return illegal(seq, "import_host", "known");
  const uint64_t bytes = copy.size_bytes();
  if (!host_room(bytes)) {
    return out_of_memory("importing sequence " + std::to_string(seq) + "'s KV host copy (" + format_bytes(bytes) +
                         ") into " + config_.name + ": host swap space holds " + format_bytes(host_used_) + " of " +
                         format_bytes(config_.host_bytes));
  }
  Seq& s = seqs_[seq];
  s.host = std::move(copy.bytes);
  s.host_blocks = copy.blocks;
  s.swapped = true;
  ++swapped_seqs_;
  host_used_ += bytes;
  publish();
  return Status::OK();
}

uint64_t KvBlocks::staging_round(uint64_t n) const {
  // In rounds the staging region can hold, so that every block goes through it when no other
  // stream holds its room; a block that finds none goes directly (PinnedStaging never waits).
  const gpu::PinnedStaging* staging = memory_.staging();
  if (staging == nullptr || staging->capacity() < block_bytes_) return std::max<uint64_t>(n, 1);
  return staging->capacity() / block_bytes_;
}

Result<std::vector<KvBlocks::Block>> KvBlocks::take(uint64_t n) {
  uint64_t free = 0;
  for (const auto& [serial, c] : chunks_) free += c.free.size();
  if (n > free + (bound_blocks_ - held_)) {
    return out_of_memory("the KV cache " + config_.name + " is at its bound: " + std::to_string(n) +
                         " blocks asked, " + std::to_string(in_use_) + " of " + std::to_string(bound_blocks_) +
                         " in use");
  }
  std::vector<uint64_t> carved;
  while (free < n) {
    auto serial = carve(std::min(chunk_blocks_, bound_blocks_ - held_));
    if (!serial.ok()) {
      for (uint64_t c : carved) free_chunk(c);
      return serial.error();
    }
    carved.push_back(*serial);
    free += chunks_.at(*serial).blocks;
  }
  // Pack: from the chunk with the fewest free blocks (the oldest among equals), lowest index
  // first, so that the blocks of ended sequences leave whole chunks free to go back to the pool.
  std::vector<Block> out;
  out.reserve(n);
  while (out.size() < n) {
    Chunk* best = nullptr;
    uint64_t best_serial = 0;
    for (auto& [serial, c] : chunks_) {
      if (!c.free.empty() && (best == nullptr || c.free.size() < best->free.size())) {
        best = &c;
        best_serial = serial;
      }
    }
    while (out.size() < n && !best->free.empty()) {
      out.push_back({best_serial, *best->free.begin()});
      best->free.erase(best->free.begin());
    }
  }
  in_use_ += n;
  counts_.high_water = std::max(counts_.high_water, in_use_);
  return out;
}

void KvBlocks::give(const std::vector<Block>& blocks) {
  for (const Block& b : blocks) chunks_.at(b.chunk).free.insert(b.index);
  in_use_ -= blocks.size();
  std::vector<uint64_t> empty;
  for (const auto& [serial, c] : chunks_) {
    if (c.free.size() == c.blocks) empty.push_back(serial);
  }
  // The oldest stay as spares; the newest go back.
  for (size_t i = config_.spare_chunks; i < empty.size(); ++i) free_chunk(empty[i]);
}

size_t KvBlocks::trim() {
  std::vector<uint64_t> empty;
  for (const auto& [serial, c] : chunks_) {
    if (c.free.size() == c.blocks) empty.push_back(serial);
  }
  for (uint64_t serial : empty) free_chunk(serial);
  publish();
  return empty.size();
}

Result<uint64_t> KvBlocks::carve(uint64_t blocks) {
  const uint64_t serial = next_chunk_++;
  const std::string name = "#kv/" + config_.name + "/" + std::to_string(serial);
  auto placer = memory_.placer(name);
  for (uint64_t b = blocks;; b = b / 2) {
    auto ptrs = placer({b * block_bytes_});
    if (ptrs.ok()) {
      memory_.commit();
      Chunk c{name, (*ptrs)[0], static_cast<uint32_t>(b), {}};
      for (uint32_t i = 0; i < c.blocks; ++i) c.free.insert(c.free.end(), i);
      chunks_.emplace(serial, std::move(c));
      held_ += b;
      return serial;
    }
    if (b == 1) {
      return ptrs.error().with_context("the model pool has no room for one more KV block of " + config_.name + " (" +
                                       format_bytes(block_bytes_) + "; " + std::to_string(in_use_) + " blocks in use)");
    }
  }
}

void KvBlocks::free_chunk(uint64_t serial) {
  auto it = chunks_.find(serial);
  held_ -= it->second.blocks;
  memory_.free(it->second.name);
  chunks_.erase(it);
}

void KvBlocks::publish() {
  KvBlocksStats s = counts_;
  s.in_use = in_use_;
  s.free = held_ - in_use_;
  s.chunks = chunks_.size();
  s.device_bytes = held_ * block_bytes_;
  s.swapped = swapped_seqs_;
  s.sequences = seqs_.size() - swapped_seqs_;
  s.swapped_bytes = host_used_;
  std::lock_guard lock(stats_mu_);
  stats_ = s;
}

KvBlocksStats KvBlocks::stats() const {
  std::lock_guard lock(stats_mu_);
  return stats_;
}

}  // namespace ember::engine
