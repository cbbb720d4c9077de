// GenerationBatcher (actors/node/engine/generation_batcher.hpp) over a counting KV cache: chunked
// prefill within the token budget, decodes first, the sequence bound, a new block at a block
// boundary, preemption of the newest sequence by recompute or swap (as the costs say) with its
// tokens kept, cancellation, the bounded queue, failures that can never fit, a step fed again when
// it was not completed; and, over KvBlocks on a SimDevice, a run of mixed sequences through swaps
// and recomputes in which every step's cache holds exactly what earlier steps wrote.
#include "actors/node/engine/generation_batcher.hpp"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "actors/node/engine/kv_blocks.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::engine {
namespace generation_batcher_test {

// A cache that only counts: `capacity` blocks of `block_size` tokens, 1000 bytes each, fake
// addresses (sequence * 1000 + block + 1), host memory for `host_blocks` blocks.
class CountingKv final : public KvSpace {
 public:
  CountingKv(uint32_t block_size, uint64_t capacity, uint64_t host_blocks = 1000)
      : block_size_(block_size), capacity_(capacity), host_blocks_(host_blocks) {}
  uint32_t block_size() const override { return block_size_; }
  uint64_t block_bytes() const override { return 1000; }
  uint64_t capacity_blocks() const override { return capacity_; }
  uint64_t blocks_in_use() const override { return in_use_; }
  uint64_t blocks_of(uint64_t seq) const override {
    auto it = resident_.find(seq);
    return it == resident_.end() ? 0 : it->second;
  }
  bool host_room(uint64_t bytes) const override { return host_used_ * 1000 + bytes <= host_blocks_ * 1000; }
  Status grow(uint64_t seq, uint64_t tokens) override {
    if (swapped_.count(seq)) return internal_error("grow of a swapped sequence");
    const uint64_t want = (tokens + block_size_ - 1) / block_size_, have = blocks_of(seq);
    if (want > have && in_use_ + want - have > capacity_) return out_of_memory("no blocks");
    if (want > have) in_use_ += want - have;
    resident_[seq] = std::max(want, have);
    return Status::OK();
  }
  void release(uint64_t seq) override {
    in_use_ -= blocks_of(seq);
    resident_.erase(seq);
    if (auto it = swapped_.find(seq); it != swapped_.end()) {
      host_used_ -= it->second;
      swapped_.erase(it);
    }
  }
  Status swap_out(uint64_t seq) override {
    const uint64_t n = blocks_of(seq);
    if (fail_copies) return device_fault("injected");
    if (!host_room(n * 1000)) return out_of_memory("host full");
    release(seq);
    swapped_[seq] = n;
    host_used_ += n;
    ++swap_outs;
    return Status::OK();
  }
  Status swap_in(uint64_t seq) override {
    const uint64_t n = swapped_.at(seq);
    if (in_use_ + n > capacity_) return out_of_memory("no blocks");
    if (fail_copies) return device_fault("injected");
    swapped_.erase(seq);
    host_used_ -= n;
    resident_[seq] = n;
    in_use_ += n;
    ++swap_ins;
    return Status::OK();
  }
  std::vector<gpu::DevicePtr> table(uint64_t seq) const override {
    std::vector<gpu::DevicePtr> t;
    for (uint64_t b = 0; b < blocks_of(seq); ++b) t.push_back({seq * 1000 + b + 1});
    return t;
  }
  bool swapped(uint64_t seq) const { return swapped_.count(seq) > 0; }

  bool fail_copies = false;
  int swap_outs = 0, swap_ins = 0;

 private:
  uint32_t block_size_;
  uint64_t capacity_, host_blocks_;
  uint64_t in_use_ = 0, host_used_ = 0;
  std::map<uint64_t, uint64_t> resident_, swapped_;
};

GenerationBatcher batcher(KvSpace& kv, uint32_t budget, uint32_t seqs, size_t waiting = 64) {
  auto b = GenerationBatcher::create(kv, {budget, seqs, waiting, 0.25});
  EXPECT_TRUE(b.ok()) << b.error().message();
  return std::move(*b);
}

std::vector<int64_t> prompt(size_t n, int64_t first = 100) {
  std::vector<int64_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = first + static_cast<int64_t>(i);
  return p;
}

// What each sequence of a step feeds: (id, start, tokens fed, samples).
struct Fed {
  uint64_t id, start, n;
  bool samples;
  bool operator==(const Fed&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Fed& f) {
  return os << "{" << f.id << " @" << f.start << " x" << f.n << (f.samples ? " samples" : "") << "}";
}
std::vector<Fed> fed(const GenerationStep& step) {
  std::vector<Fed> v;
  for (size_t i = 0; i < step.sequences.size(); ++i) {
    v.push_back({step.sequences[i].id, step.sequences[i].start, step.sequences[i].tokens.size(),
                 step.entries[i].samples});
  }
  return v;
}

// Completes `step` with token 7 for each sampling entry; `finish` lists those that stop.
void complete(GenerationBatcher& b, const GenerationStep& step, std::vector<uint64_t> finish = {}) {
  std::vector<GenerationBatcher::Sampled> s;
  for (size_t i = 0; i < step.entries.size(); ++i) {
    if (!step.entries[i].samples) continue;
    const uint64_t id = step.sequences[i].id;
    s.push_back({7, std::find(finish.begin(), finish.end(), id) != finish.end()});
  }
  ASSERT_TRUE(b.complete(step, s).ok());
}

TEST(GenerationBatcher, APromptLongerThanTheBudgetIsPrefilledInChunksThenDecoded) {
  CountingKv kv(4, 100);
  auto b = batcher(kv, 8, 4);
  ASSERT_TRUE(b.submit(1, prompt(20), 1000).ok());
  auto s1 = b.schedule(1500);
  EXPECT_EQ(fed(s1), (std::vector<Fed>{{1, 0, 8, false}}));
  EXPECT_TRUE(s1.entries[0].admitted);
  EXPECT_EQ(s1.entries[0].queued_us, 500u);
  EXPECT_EQ(kv.blocks_of(1), 5u) << "blocks for the whole prompt at admission";
  EXPECT_EQ(s1.sequences[0].tokens, prompt(8));
  EXPECT_EQ(s1.sequences[0].table.size(), 5u);
  complete(b, s1);
  auto s2 = b.schedule(2000);
  EXPECT_EQ(fed(s2), (std::vector<Fed>{{1, 8, 8, false}}));
  EXPECT_FALSE(s2.entries[0].admitted);
  complete(b, s2);
  auto s3 = b.schedule(2500);
  EXPECT_EQ(fed(s3), (std::vector<Fed>{{1, 16, 4, true}}));
  complete(b, s3);
  auto s4 = b.schedule(3000);
  EXPECT_EQ(fed(s4), (std::vector<Fed>{{1, 20, 1, true}}));
  EXPECT_EQ(s4.sequences[0].tokens, std::vector<int64_t>{7}) << "the token sampled last";
  EXPECT_EQ(kv.blocks_of(1), 6u) << "position 20 crosses into a sixth block";
  EXPECT_EQ(s4.sequences[0].table.size(), 6u);
  complete(b, s4, {1});
  EXPECT_EQ(b.running(), 0u);
  EXPECT_EQ(kv.blocks_in_use(), 0u) << "a finished sequence's blocks are freed between steps";
  EXPECT_TRUE(b.schedule(3500).empty());
  const auto c = b.counters();
  EXPECT_EQ(c.steps, 4u);
  EXPECT_EQ(c.tokens, 21u);
  EXPECT_EQ(c.max_step_tokens, 8u);
  EXPECT_EQ(c.last_step_tokens, 1u);
  EXPECT_EQ(c.finished, 1u);
  EXPECT_EQ(c.blocks_in_use, 0u);
}

// Running decodes take their token first; the budget's rest goes to prefills, then admissions;
// the running set is bounded by max_num_seqs.
TEST(GenerationBatcher, DecodesComeFirstAndAdmissionsTakeWhatTheBudgetAndSequenceBoundLeave) {
  CountingKv kv(4, 100);
  auto b = batcher(kv, 6, 3);
  ASSERT_TRUE(b.submit(1, prompt(2), 0).ok());
  ASSERT_TRUE(b.submit(2, prompt(3), 0).ok());
  ASSERT_TRUE(b.submit(3, prompt(9), 0).ok());
  ASSERT_TRUE(b.submit(4, prompt(1), 0).ok());
  auto s1 = b.schedule(10);
  EXPECT_EQ(fed(s1), (std::vector<Fed>{{1, 0, 2, true}, {2, 0, 3, true}, {3, 0, 1, false}}));
  EXPECT_EQ(b.running(), 3u);
  EXPECT_EQ(b.waiting(), 1u) << "max_num_seqs 3: sequence 4 waits";
  complete(b, s1);
  auto s2 = b.schedule(20);
  EXPECT_EQ(fed(s2), (std::vector<Fed>{{1, 2, 1, true}, {2, 3, 1, true}, {3, 1, 4, false}}));
  complete(b, s2, {2});
  auto s3 = b.schedule(30);
  EXPECT_EQ(fed(s3), (std::vector<Fed>{{1, 3, 1, true}, {3, 5, 4, true}, {4, 0, 1, true}}))
      << "2 finished: 4 admitted into the budget left";
  EXPECT_EQ(s3.entries[2].queued_us, 30u);
}

// The cache runs out at a decode's block boundary: the newest running sequence is preempted by
// recompute (no costs measured), goes to the front of the queue with its tokens, nothing is admitted
// in that step, and it comes back, prefilling prompt and output, once the blocks are free.
TEST(GenerationBatcher, WhenBlocksRunOutTheNewestIsPreemptedAndRecomputedFromItsTokens) {
  CountingKv kv(4, 4);
  auto b = batcher(kv, 16, 4);
  ASSERT_TRUE(b.submit(1, prompt(7, 100), 0).ok());
  ASSERT_TRUE(b.submit(2, prompt(7, 200), 0).ok());
  ASSERT_TRUE(b.submit(3, prompt(1, 300), 0).ok());
  auto s1 = b.schedule(0);
  EXPECT_EQ(fed(s1), (std::vector<Fed>{{1, 0, 7, true}, {2, 0, 7, true}})) << "3 does not fit: 4 blocks in use";
  complete(b, s1);
  auto s2 = b.schedule(0);  // positions 7: within the second blocks
  EXPECT_EQ(fed(s2), (std::vector<Fed>{{1, 7, 1, true}, {2, 7, 1, true}}));
  complete(b, s2);
  auto s3 = b.schedule(0);  // position 8 needs a third block each
  EXPECT_EQ(fed(s3), (std::vector<Fed>{{1, 8, 1, true}}));
  EXPECT_EQ(s3.recomputed, std::vector<uint64_t>{2});
  EXPECT_TRUE(s3.swapped.empty());
  EXPECT_EQ(b.waiting(), 2u);
  EXPECT_EQ(kv.blocks_of(2), 0u);
  std::vector<int64_t> two = prompt(7, 200);
  two.insert(two.end(), {7, 7});
  EXPECT_EQ(*b.tokens(2), two) << "its tokens kept";
  complete(b, s3, {1});
  auto s4 = b.schedule(0);
  EXPECT_EQ(fed(s4), (std::vector<Fed>{{2, 0, 9, true}, {3, 0, 1, true}}))
      << "back first, prompt and output prefilled; then 3 in the last block";
  EXPECT_EQ(s4.sequences[0].tokens, two);
  EXPECT_TRUE(s4.entries[0].admitted);
  EXPECT_FALSE(s4.entries[0].queued_us) << "admitted before: no second time-to-first-step";
  EXPECT_EQ(s4.entries[1].queued_us, 0u);
  EXPECT_EQ(b.waiting(), 0u);
  const auto c = b.counters();
  EXPECT_EQ(c.preempted_recompute, 1u);
  EXPECT_EQ(c.preempted_swap, 0u);
}

// With a fast host link and a slow prefill the preemption swaps: the sequence resumes where it
// stopped, its blocks swapped back in and grown for its next token.
TEST(GenerationBatcher, WhenTheCostsSaySwapThePreemptedSequenceResumesWhereItStopped) {
  CountingKv kv(4, 4);
  auto b = batcher(kv, 16, 4);
  b.set_costs({10e9, 1, 1000});  // 2 blocks of 1000 bytes: microseconds; 8 tokens: 8 ms
  ASSERT_TRUE(b.submit(1, prompt(7), 0).ok());
  ASSERT_TRUE(b.submit(2, prompt(7), 0).ok());
  complete(b, b.schedule(0));
  complete(b, b.schedule(0));
  auto s3 = b.schedule(0);
  EXPECT_EQ(s3.swapped, std::vector<uint64_t>{2});
  EXPECT_TRUE(kv.swapped(2));
  complete(b, s3, {1});
  auto s4 = b.schedule(0);
  EXPECT_EQ(fed(s4), (std::vector<Fed>{{2, 8, 1, true}})) << "resumed at position 8, its last token";
  EXPECT_EQ(kv.swap_ins, 1);
  EXPECT_EQ(kv.blocks_of(2), 3u) << "two swapped in, one grown";
  EXPECT_EQ(b.counters().preempted_swap, 1u);
}

// A swap the cache refuses (host memory full, or a failed copy) recomputes instead, counted.
TEST(GenerationBatcher, ASwapTheCacheRefusesRecomputesInstead) {
  for (bool host_full : {true, false}) {
    CountingKv kv(4, 4, host_full ? 1 : 1000);
    kv.fail_copies = !host_full;
    auto b = batcher(kv, 16, 4);
    b.set_costs({10e9, 1, 1000});
    ASSERT_TRUE(b.submit(1, prompt(7), 0).ok());
    ASSERT_TRUE(b.submit(2, prompt(7), 0).ok());
    complete(b, b.schedule(0));
    complete(b, b.schedule(0));
    auto s3 = b.schedule(0);
    EXPECT_EQ(s3.recomputed, std::vector<uint64_t>{2}) << host_full;
    EXPECT_FALSE(kv.swapped(2));
    const auto c = b.counters();
    EXPECT_EQ(c.preempted_recompute, 1u);
    // Host memory full: the policy saw no room and chose recompute; a failed copy: a fallback.
    EXPECT_EQ(c.swap_fallbacks, host_full ? 0u : 1u);
  }
}

// The oldest running sequence alone crossing a boundary with no blocks left preempts itself.
TEST(GenerationBatcher, ASequenceThatOutgrowsTheWholeCacheFailsOutOfMemoryInsteadOfLooping) {
  CountingKv kv(4, 2);
  auto b = batcher(kv, 16, 4);
  ASSERT_TRUE(b.submit(1, prompt(8), 0).ok());
  auto s1 = b.schedule(0);
  complete(b, s1);
  auto s2 = b.schedule(0);  // position 8: a third block, more than the cache holds
  EXPECT_TRUE(s2.empty());
  EXPECT_EQ(s2.recomputed, std::vector<uint64_t>{1});
  auto s3 = b.schedule(0);
  ASSERT_EQ(s3.failed.size(), 1u);
  EXPECT_EQ(s3.failed[0].first, 1u);
  EXPECT_EQ(s3.failed[0].second.code(), ErrorCode::out_of_memory);
  EXPECT_EQ(b.waiting() + b.running(), 0u);
  EXPECT_EQ(b.counters().failed, 1u);
  EXPECT_EQ(b.tokens(1), nullptr);
}

// A cancelled sequence leaves at the next step with its blocks; a step in flight ignores its token.
TEST(GenerationBatcher, ACancelledSequenceLeavesAtTheNextStepAndFreesItsBlocks) {
  CountingKv kv(4, 100);
  auto b = batcher(kv, 16, 4);
  ASSERT_TRUE(b.submit(1, prompt(5), 0).ok());
  ASSERT_TRUE(b.submit(2, prompt(5), 0).ok());
  ASSERT_TRUE(b.submit(3, prompt(5), 0).ok());
  auto s1 = b.schedule(0);
  EXPECT_EQ(kv.blocks_in_use(), 6u);
  EXPECT_TRUE(b.cancel(2));  // while the step runs
  EXPECT_FALSE(b.cancel(42));
  complete(b, s1);
  EXPECT_EQ(b.tokens(2)->size(), 5u) << "the token of a cancelled sequence is not appended";
  EXPECT_EQ(kv.blocks_in_use(), 6u) << "its blocks stay until the next step";
  auto s2 = b.schedule(0);
  EXPECT_EQ(s2.cancelled, std::vector<uint64_t>{2});
  EXPECT_EQ(fed(s2), (std::vector<Fed>{{1, 5, 1, true}, {3, 5, 1, true}}));
  EXPECT_EQ(kv.blocks_in_use(), 4u);
  // A waiting one goes the same way.
  ASSERT_TRUE(b.submit(4, prompt(50), 0).ok());
  ASSERT_TRUE(b.submit(5, prompt(3), 0).ok());
  EXPECT_TRUE(b.cancel(5));
  complete(b, s2);
  auto s3 = b.schedule(0);
  EXPECT_EQ(s3.cancelled, std::vector<uint64_t>{5});
  EXPECT_EQ(b.counters().cancelled, 2u);
}

// The waiting queue is bounded: the newest is refused, counted; preempted sequences return past it.
TEST(GenerationBatcher, AFullQueueRefusesTheNewestAndCountsIt) {
  CountingKv kv(4, 4);
  auto b = batcher(kv, 16, 4, 1);
  ASSERT_TRUE(b.submit(1, prompt(7), 0).ok());
  complete(b, b.schedule(0));  // 1 runs
  ASSERT_TRUE(b.submit(2, prompt(7), 0).ok());
  Status st = b.submit(3, prompt(2), 0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::unavailable);
  EXPECT_NE(st.error().message().find("queue is full"), std::string::npos) << st.error().message();
  EXPECT_EQ(b.counters().rejected, 1u);
  EXPECT_EQ(b.tokens(3), nullptr);
  complete(b, b.schedule(0));  // 1 decodes (position 7), 2 admitted: 4 blocks in use
  ASSERT_EQ(b.running(), 2u);
  ASSERT_TRUE(b.submit(3, prompt(2), 0).ok()) << "2 left the queue: room again";
  complete(b, b.schedule(0));  // position 8 for 1: 2 is preempted back to the front
  EXPECT_EQ(b.waiting(), 2u) << "the preempted one returns though the queue holds 1 submitted";
  EXPECT_EQ(b.counters().preempted_recompute, 1u);
}

TEST(GenerationBatcher, BadInputIsRefusedClearly) {
  CountingKv kv(4, 3);
  auto b = batcher(kv, 16, 4);
  ASSERT_TRUE(b.submit(1, prompt(3), 0).ok());
  EXPECT_EQ(b.submit(1, prompt(3), 0).error().code(), ErrorCode::invalid_argument) << "an id in use";
  EXPECT_EQ(b.submit(2, {}, 0).error().code(), ErrorCode::invalid_argument);
  Status big = b.submit(3, prompt(13), 0);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(big.error().message().find("needs 4 KV blocks; the cache holds at most 3"), std::string::npos)
      << big.error().message();
  auto step = b.schedule(0);
  EXPECT_EQ(b.complete(step, {}).error().code(), ErrorCode::invalid_argument) << "one sampled token missing";
  EXPECT_EQ(b.complete(step, {{1, false}, {2, false}}).error().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(b.tokens(1)->size(), 3u) << "a refused completion changes nothing";

  EXPECT_FALSE(GenerationBatcher::create(kv, {4, 8, 10, 0.25}).ok()) << "budget below max_num_seqs";
  EXPECT_FALSE(GenerationBatcher::create(kv, {4, 0, 10, 0.25}).ok());
  EXPECT_FALSE(GenerationBatcher::create(kv, {4, 4, 0, 0.25}).ok());
  EXPECT_FALSE(GenerationBatcher::create(kv, {4, 4, 10, -1}).ok());
}

// A step that was not completed (its run failed) is fed again as it was.
TEST(GenerationBatcher, AStepNotCompletedIsFedAgain) {
  CountingKv kv(4, 100);
  auto b = batcher(kv, 4, 4);
  ASSERT_TRUE(b.submit(1, prompt(6), 0).ok());
  ASSERT_TRUE(b.submit(2, prompt(2), 0).ok());
  const auto first = b.schedule(0);
  EXPECT_EQ(fed(first), (std::vector<Fed>{{1, 0, 4, false}}));
  const auto again = b.schedule(0);
  EXPECT_EQ(fed(again), (std::vector<Fed>{{1, 0, 4, false}}));
  EXPECT_EQ(again.sequences[0].tokens, first.sequences[0].tokens);
  complete(b, again);
  complete(b, first);  // stale: already fed; ignored
  EXPECT_EQ(fed(b.schedule(0)), (std::vector<Fed>{{1, 4, 2, true}, {2, 0, 2, true}}));
}

// The model must leave the device: every running sequence is preempted, newest first, and they
// come back oldest first.
TEST(GenerationBatcher, PreemptAllEmptiesTheRunningSetNewestFirst) {
  CountingKv kv(4, 100);
  auto b = batcher(kv, 64, 4);
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(b.submit(id, prompt(5), 0).ok());
  complete(b, b.schedule(0));
  EXPECT_EQ(b.preempt_all(), 3u);
  EXPECT_EQ(b.running(), 0u);
  EXPECT_EQ(kv.blocks_in_use(), 0u);
  EXPECT_EQ(b.counters().preempted_recompute, 3u);
  const auto back = b.schedule(0);
  ASSERT_EQ(back.sequences.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.sequences[i].id, i + 1);
    EXPECT_EQ(back.sequences[i].tokens.size(), 6u) << "prompt and the token sampled";
  }
}

// A model leaving the device: its waiting sequences are taken out (in queue order, tokens and what
// the cache held kept) and restored into another batcher, which feeds only what it must: a
// recomputed one all its tokens, none twice.
TEST(GenerationBatcher, TakenSequencesRestoreElsewhereWithTheirTokens) {
  CountingKv kv(4, 100);
  auto b = batcher(kv, 64, 2);
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(b.submit(id, prompt(5), 0).ok());
  complete(b, b.schedule(0));  // 1 and 2 run; 3 waits, never admitted
  EXPECT_FALSE(b.take(1).has_value()) << "running: preempt first";
  b.preempt_all();
  EXPECT_EQ(b.waiting_ids(), (std::vector<uint64_t>{1, 2, 3}));
  std::vector<GenerationBatcher::Taken> taken;
  for (uint64_t id : b.waiting_ids()) {
    auto t = b.take(id);
    ASSERT_TRUE(t.has_value());
    taken.push_back(std::move(*t));
  }
  EXPECT_EQ(b.waiting(), 0u);
  EXPECT_FALSE(b.take(1).has_value()) << "taken already";
  ASSERT_EQ(taken[0].tokens.size(), 6u) << "prompt and the token sampled";
  EXPECT_TRUE(taken[0].ever_admitted);
  EXPECT_FALSE(taken[2].ever_admitted);
  EXPECT_EQ(taken[0].computed, 0u) << "recomputed (no costs): nothing held";
  for (uint64_t id = 1; id <= 3; ++id) kv.release(id);

  CountingKv other(4, 100);
  auto c = batcher(other, 64, 4, 1);
  EXPECT_EQ(c.restore(9, GenerationBatcher::Taken{}, 0).error().code(), ErrorCode::invalid_argument);
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(c.restore(10 + i, std::move(taken[i]), 5).ok());
  EXPECT_EQ(c.restore(10, GenerationBatcher::Taken{{1}, 0, false, true}, 5).error().code(),
            ErrorCode::invalid_argument);
  EXPECT_EQ(fed(c.schedule(5)), (std::vector<Fed>{{10, 0, 6, true}, {11, 0, 6, true}, {12, 0, 5, true}}));
}

// Over the real cache: sequences of mixed lengths, a cache too small for all of them at once, and
// both kinds of preemption (the costs switched after the first). Each step writes, for each token it feeds,
// a marker (sequence, position) into the K row of its position, and checks before each sampling
// that every earlier position of the sequence holds its marker: what swaps and recomputes move or
// rebuild is where the next step's table says. Every sequence ends with its tokens, nothing leaks.
TEST(GenerationBatcherOnKvBlocks, MixedSequencesThroughSwapsAndRecomputesKeepTheirCache) {
  auto device = gpu::testing::sim_device(16ull << 20);
  auto memory = DeviceMemory::reserve(*device, 8ull << 20, 256 << 10, 64 << 10);
  ASSERT_TRUE(memory.ok()) << memory.error().message();
  KvLayout layout;
  layout.num_kv_layers = 1;
  layout.num_kv_heads = 1;
  layout.head_dim = 64;
  layout.block_size = 4;  // rows of 256 bytes, blocks of 2 KiB
  KvBlocksConfig config;
  config.chunk_blocks = 4;
  config.budget_bytes = 12 * layout.block_bytes();
  auto kv = KvBlocks::create(*device, **memory, layout, config);
  ASSERT_TRUE(kv.ok()) << kv.error().message();
  auto b = batcher(**kv, 16, 4);
  auto stream = device->create_stream();
  const uint64_t bb = layout.block_bytes();

  const std::vector<size_t> prompts = {9, 3, 14, 5, 1, 7};
  const size_t generate = 10;
  for (uint64_t id = 0; id < prompts.size(); ++id) ASSERT_TRUE(b.submit(id, prompt(prompts[id]), 0).ok());
  auto slot = [&](const StepSequence& q, uint64_t p) {
    return q.table[p / layout.block_size] + layout.k_offset(0) + (p % layout.block_size) * layout.row_bytes();
  };
  auto marker = [](uint64_t id, uint64_t p) { return static_cast<int64_t>(id * 100000 + p + 1); };
  std::map<uint64_t, size_t> generated;
  int steps = 0;
  for (; b.running() + b.waiting() > 0; ++steps) {
    ASSERT_LT(steps, 500) << "the run never ended";
    if (b.counters().preempted_recompute > 0) b.set_costs({10e9, 1, 1000});  // from recompute to swap
    const auto step = b.schedule(static_cast<uint64_t>(steps));
    ASSERT_TRUE(step.failed.empty()) << step.failed[0].second.message();
    if (step.empty()) continue;
    auto inputs = build_step_inputs(step.sequences, layout.block_size, layout.dtype);
    ASSERT_TRUE(inputs.ok()) << inputs.error().message();
    // The "model": write each fed token's marker, then check the sampling sequences' whole history.
    std::vector<int64_t> markers;
    markers.reserve(step.tokens);
    for (const auto& q : step.sequences) {
      for (uint64_t i = 0; i < q.tokens.size(); ++i) markers.push_back(marker(q.id, q.start + i));
    }
    size_t m = 0;
    for (const auto& q : step.sequences) {
      for (uint64_t i = 0; i < q.tokens.size(); ++i, ++m) stream->copy_to_device(slot(q, q.start + i), &markers[m], 8);
    }
    ASSERT_TRUE(stream->synchronize().ok());
    std::vector<GenerationBatcher::Sampled> sampled;
    for (size_t i = 0; i < step.sequences.size(); ++i) {
      const auto& q = step.sequences[i];
      if (!step.entries[i].samples) continue;
      const uint64_t end = q.start + q.tokens.size();
      std::vector<int64_t> got(end);
      for (uint64_t p = 0; p < end; ++p) stream->copy_to_host(&got[p], slot(q, p), 8);
      ASSERT_TRUE(stream->synchronize().ok());
      for (uint64_t p = 0; p < end; ++p) ASSERT_EQ(got[p], marker(q.id, p)) << "sequence " << q.id << " position " << p;
      const size_t n = ++generated[q.id];
      sampled.push_back({marker(q.id, end), n == generate});
    }
    ASSERT_TRUE(b.complete(step, sampled).ok());
  }
  EXPECT_EQ(generated.size(), prompts.size());
  for (const auto& [id, n] : generated) EXPECT_EQ(n, generate) << "sequence " << id;
  const auto c = b.counters();
  EXPECT_EQ(c.finished, prompts.size());
  EXPECT_GT(c.preempted_recompute, 0u);
  EXPECT_GT(c.preempted_swap, 0u);
  EXPECT_EQ(c.blocks_in_use, 0u);
  const auto s = (*kv)->stats();
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.swapped_bytes, 0u);
  EXPECT_LE(s.high_water, 12u);
  EXPECT_EQ(s.swap_outs, s.swap_ins);
  EXPECT_GT(s.swap_in_bytes, 0u);
  EXPECT_EQ(s.swap_in_bytes % bb, 0u);
}

}  // namespace generation_batcher_test
}  // namespace ember::engine
