// gpu/kernels_cpu_kv_attention.cpp through the layer executor on a SimDevice: a one-layer model
// (qkv, positions, kv_meta in; kv_attention with kv_layer 1 of blocks that hold two layers) is
// run step by step against a naive reference written here from the op's definition (ops.hpp):
// double-precision rotary and softmax over a per-sequence list of the k and v each position
// stored, rounded to the cache's type as the cache holds them. Blocks sit at shuffled,
// non-contiguous places of one pool, and the pool itself is read back: each position's K and V
// must be in its slot of its block, layer 0's half of every block untouched. KvAttentionTorch
// checks the same against PyTorch running Hugging Face's formulas (kv_attention_torch.py).
//
// Tolerances, relative to the largest output, against two references. One holds k and v rounded
// to the cache's type as the kernel stores them: 1e-5 for every type (measured: below 5e-7; its
// double rotation may round a k element to the neighbouring half-precision value where the kernel's
// float32 one does not, one ulp of one element of one score). The other holds them in float32,
// what a half-precision cache costs: float16 2e-3, bfloat16 1.6e-2 (measured: 1.7e-4 and 2.5e-3;
// 2^-11 and 2^-8 relative per stored element).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <sys/wait.h>

#include "gpu/executor.hpp"
#include "model/half.hpp"
#include "model/model_builder.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::gpu {
namespace kernels_cpu_kv_attention_test {

using testing::must;
using testing::TempDir;

struct Config {
  std::string name;
  int64_t heads, kv_heads, dim, rope_dim, block_size;
  DType cache;
};

void PrintTo(const Config& c, std::ostream* os) { *os << c.name; }

int64_t cache_code(DType d) { return d == DType::f16 ? 1 : d == DType::bf16 ? 2 : 0; }

float round_to(DType cache, float x) {
  if (cache == DType::f16) return f16_to_f32(f32_to_f16(x));
  if (cache == DType::bf16) return bf16_to_f32(f32_to_bf16(x));
  return x;
}

float load(DType cache, const uint8_t* p) {
  if (cache == DType::f32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return cache == DType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
}

struct Token {
  int64_t seq, pos;
};

// One model, one device, one pool of blocks, the sequences' block tables, and the reference's
// view of what each sequence's positions hold.
class Harness {
 public:
  static constexpr int64_t kLayers = 2;  // per block; the model's layer is kv_layer 1
  static constexpr uint8_t kUntouched = 0x5a;

  Harness(const Config& c, const std::string& dir, int64_t seqs, int64_t blocks_per_seq, uint64_t seed = 7)
      : c_(c), device_(testing::sim_device(256ull << 20)) {
    ModelBuilder b("kv", seed);
    const int64_t width = (c.heads + 2 * c.kv_heads) * c.dim;
    const std::string qkv = b.input("qkv", DType::f32, Shape{-1, width});
    const std::string pos = b.input("positions", DType::i64, Shape{-1});
    const std::string meta = b.input("kv_meta", DType::i64, Shape{-1});
    attrs_.num_heads = c.heads, attrs_.num_kv_heads = c.kv_heads, attrs_.head_dim = c.dim;
    attrs_.kv_layer = 1, attrs_.rope_dim = c.rope_dim;
    b.output(b.add("attn", OpKind::kv_attention, attrs_, {qkv, pos, meta}, "attn.rotary_emb"), DType::f32,
             Shape{-1, c.heads * c.dim});
    must(b.write(dir), "writing the model");
    model_ = must(Model::load(dir));
    ex_ = must(LayerExecutor::create(*device_, model_, {0, 1}));
    if (c.rope_dim > 0) {
      const TensorInfo* w = model_->layer_weights(0)[0];
      inv_freq_.assign(reinterpret_cast<const float*>(model_->data() + w->data.offset),
                       reinterpret_cast<const float*>(model_->data() + w->data.offset) + c.rope_dim / 2);
    }
    layer_bytes_ = kv_layer_bytes(attrs_, c.block_size, c.cache);
    block_bytes_ = kLayers * layer_bytes_;
    // Every sequence's blocks from one shuffled pool, with a spare block between any two neighbours
    // of the pool so no table is contiguous.
    const int64_t blocks = 2 * seqs * blocks_per_seq;
    pool_ = must(DeviceBuffer::allocate(*device_, static_cast<uint64_t>(blocks * block_bytes_)));
    std::vector<uint8_t> fill(pool_->bytes(), kUntouched);
    auto stream = device_->create_stream();
    stream->copy_to_device(pool_->ptr(), fill.data(), fill.size());
    must(stream->synchronize());
    std::vector<int64_t> order(static_cast<size_t>(blocks / 2));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<uint32_t>(seed)));
    tables_.resize(static_cast<size_t>(seqs));
    for (int64_t s = 0; s < seqs; ++s)
      for (int64_t b = 0; b < blocks_per_seq; ++b)
        tables_[static_cast<size_t>(s)].push_back(2 * order[static_cast<size_t>(s * blocks_per_seq + b)] + 1);
    for (Store* st : {&k_, &v_, &k_exact_, &v_exact_}) st->resize(static_cast<size_t>(seqs));
  }

  const LayerAttrs& attrs() const { return attrs_; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  SimDevice& device() { return *device_; }
  LayerExecutor& executor() { return *ex_; }
  int64_t width() const { return (c_.heads + 2 * c_.kv_heads) * c_.dim; }
  uint64_t block_address(int64_t seq, int64_t b) const {
    return pool_->ptr().addr + static_cast<uint64_t>(tables_[static_cast<size_t>(seq)][static_cast<size_t>(b)] * block_bytes_);
  }

  // The step's inputs: every sequence listed (B = all of them), tables as wide as the longest.
  std::vector<HostTensor> inputs(const std::vector<Token>& tokens, const HostTensor& qkv) const {
    const auto T = static_cast<int64_t>(tokens.size()), B = static_cast<int64_t>(tables_.size());
    const auto W = static_cast<int64_t>(tables_[0].size());
    HostTensor pos = must(HostTensor::allocate("positions", {DType::i64, Shape{T}}));
    HostTensor meta = must(HostTensor::allocate("kv_meta", {DType::i64, Shape{4 + T + B * W}}));
    int64_t* m = meta.as<int64_t>();
    m[0] = B, m[1] = c_.block_size, m[2] = W, m[3] = cache_code(c_.cache);
    for (int64_t t = 0; t < T; ++t) {
      pos.as<int64_t>()[t] = tokens[static_cast<size_t>(t)].pos;
      m[4 + t] = tokens[static_cast<size_t>(t)].seq;
    }
    for (int64_t s = 0; s < B; ++s)
      for (int64_t b = 0; b < W; ++b) m[4 + T + s * W + b] = static_cast<int64_t>(block_address(s, b));
    return {qkv, pos, meta};
  }

  HostTensor random_qkv(int64_t tokens, uint64_t seed) const {
    return testing::random_tensor("qkv", {DType::f32, Shape{tokens, width()}}, seed, -1.f, 1.f);
  }

  // Runs one step and returns the output.
  HostTensor run(const std::vector<Token>& tokens, const HostTensor& qkv) {
    auto out = must(ex_->run_host(inputs(tokens, qkv)), "running a step");
    return out.at(0);
  }

  // The reference's step: stores each token's k and v, then attends. The expected output, from
  // k and v as the cache holds them (rounded to its type) and, `.exact`, as float32 holds them.
  struct Expected {
    std::vector<float> cached, exact;
  };
  Expected reference(const std::vector<Token>& tokens, const HostTensor& qkv) {
    const int64_t H = c_.heads, Hkv = c_.kv_heads, D = c_.dim, half = c_.rope_dim / 2;
    std::vector<std::vector<double>> q(tokens.size());
    for (size_t t = 0; t < tokens.size(); ++t) {
      const auto [s, p] = tokens[t];
      const float* x = qkv.as<float>() + static_cast<int64_t>(t) * width();
      auto rotated = [&](const float* head) {
        std::vector<double> r(head, head + D);
        for (int64_t i = 0; i < half; ++i) {
          const double a = static_cast<double>(static_cast<float>(p) * inv_freq_[static_cast<size_t>(i)]);
          r[static_cast<size_t>(i)] = head[i] * std::cos(a) - head[i + half] * std::sin(a);
          r[static_cast<size_t>(i + half)] = head[i + half] * std::cos(a) + head[i] * std::sin(a);
        }
        return r;
      };
      for (int64_t h = 0; h < H; ++h) {
        auto r = rotated(x + h * D);
        q[t].insert(q[t].end(), r.begin(), r.end());
      }
      for (bool exact : {false, true}) {
        auto& ks = (exact ? k_exact_ : k_)[static_cast<size_t>(s)];
        auto& vs = (exact ? v_exact_ : v_)[static_cast<size_t>(s)];
        const DType held = exact ? DType::f32 : c_.cache;
        if (ks.size() <= static_cast<size_t>(p)) ks.resize(static_cast<size_t>(p) + 1), vs.resize(static_cast<size_t>(p) + 1);
        ks[static_cast<size_t>(p)].clear();
        vs[static_cast<size_t>(p)].clear();
        for (int64_t h = 0; h < Hkv; ++h) {
          for (double e : rotated(x + (H + h) * D)) ks[static_cast<size_t>(p)].push_back(round_to(held, static_cast<float>(e)));
        }
        for (int64_t i = 0; i < Hkv * D; ++i) vs[static_cast<size_t>(p)].push_back(round_to(held, x[(H + Hkv) * D + i]));
      }
    }
    return {attend(tokens, q, k_, v_), attend(tokens, q, k_exact_, v_exact_)};
  }

  using Store = std::vector<std::vector<std::vector<float>>>;  // per sequence, per position: Hkv * D

  std::vector<float> attend(const std::vector<Token>& tokens, const std::vector<std::vector<double>>& q,
                            const Store& k, const Store& v) const {
    const int64_t H = c_.heads, Hkv = c_.kv_heads, D = c_.dim;
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    std::vector<float> y;
    for (size_t t = 0; t < tokens.size(); ++t) {
      const auto [s, p] = tokens[t];
      const auto& ks = k[static_cast<size_t>(s)];
      const auto& vs = v[static_cast<size_t>(s)];
      for (int64_t h = 0; h < H; ++h) {
        const int64_t kvh = h / (H / Hkv);
        std::vector<double> w(static_cast<size_t>(p) + 1);
        for (int64_t j = 0; j <= p; ++j) {
          double d = 0;
          for (int64_t i = 0; i < D; ++i) d += q[t][static_cast<size_t>(h * D + i)] * ks[static_cast<size_t>(j)][static_cast<size_t>(kvh * D + i)];
          w[static_cast<size_t>(j)] = d * scale;
        }
        const double top = *std::max_element(w.begin(), w.end());
        double sum = 0;
        for (double& e : w) sum += (e = std::exp(e - top));
        for (int64_t i = 0; i < D; ++i) {
          double acc = 0;
          for (int64_t j = 0; j <= p; ++j) acc += w[static_cast<size_t>(j)] * vs[static_cast<size_t>(j)][static_cast<size_t>(kvh * D + i)];
          y.push_back(static_cast<float>(acc / sum));
        }
      }
    }
    return y;
  }

  std::vector<uint8_t> pool_bytes() {
    std::vector<uint8_t> bytes(pool_->bytes());
    auto stream = device_->create_stream();
    stream->copy_to_host(bytes.data(), pool_->ptr(), bytes.size());
    must(stream->synchronize());
    return bytes;
  }

  // Every position the reference stored is in its slot (K then V, [block_size, Hkv, D], layer 1's
  // half of the block); layer 0's half and the spare blocks are untouched.
  void expect_cache_holds_the_reference() {
    const std::vector<uint8_t> pool = pool_bytes();
    const int64_t elem = dtype_size(c_.cache), row = c_.kv_heads * c_.dim;
    // Inputs are in [-1, 1]: float32 rotations differ from double ones by about 1e-7, absolutely;
    // half precision may round that to the neighbouring value (one ulp, relative).
    const double rel = c_.cache == DType::f32 ? 0 : c_.cache == DType::f16 ? 1.0 / 1024 : 1.0 / 128;
    int bad = 0;
    for (size_t s = 0; s < k_.size(); ++s) {
      for (size_t p = 0; p < k_[s].size(); ++p) {
        const int64_t b = static_cast<int64_t>(p) / c_.block_size, slot = static_cast<int64_t>(p) % c_.block_size;
        const uint64_t at = block_address(static_cast<int64_t>(s), b) - pool_->ptr().addr + static_cast<uint64_t>(layer_bytes_);
        for (int64_t i = 0; i < row; ++i) {
          const float k = load(c_.cache, pool.data() + at + static_cast<uint64_t>((slot * row + i) * elem));
          const float v = load(c_.cache, pool.data() + at + static_cast<uint64_t>(layer_bytes_ / 2 + (slot * row + i) * elem));
          const float wk = k_[s][p][static_cast<size_t>(i)], wv = v_[s][p][static_cast<size_t>(i)];
          if (!(std::fabs(k - wk) <= rel * std::fabs(wk) + 1e-6) && bad++ < 5) {
            ADD_FAILURE() << "sequence " << s << " position " << p << " k[" << i << "] " << k << ", want " << wk;
          }
          if (v != wv && bad++ < 5) ADD_FAILURE() << "sequence " << s << " position " << p << " v[" << i << "] " << v << ", want " << wv;
        }
      }
    }
    EXPECT_EQ(bad, 0);
    for (size_t blk = 0; blk < pool.size() / static_cast<size_t>(block_bytes_); ++blk) {
      const uint8_t* begin = pool.data() + blk * static_cast<size_t>(block_bytes_);
      const size_t untouched = blk % 2 == 0 ? static_cast<size_t>(block_bytes_) : static_cast<size_t>(layer_bytes_);
      EXPECT_TRUE(std::all_of(begin, begin + untouched, [](uint8_t x) { return x == kUntouched; })) << "block " << blk;
    }
  }

  // Against k and v rounded as the cache rounds them, and against float32 ones (what a float16 or
  // bfloat16 cache costs).
  static constexpr double kTolerance = 1e-5;
  double exact_tolerance() const { return c_.cache == DType::f32 ? 1e-5 : c_.cache == DType::f16 ? 2e-3 : 1.6e-2; }

 private:
  Config c_;
  std::unique_ptr<SimDevice> device_;
  LayerAttrs attrs_;
  std::shared_ptr<const Model> model_;
  std::unique_ptr<LayerExecutor> ex_;
  std::vector<float> inv_freq_;
  int64_t layer_bytes_ = 0, block_bytes_ = 0;
  std::shared_ptr<DeviceBuffer> pool_;
  std::vector<std::vector<int64_t>> tables_;              // per sequence: its blocks' indices in the pool
  Store k_, v_;              // as the cache holds them
  Store k_exact_, v_exact_;  // as float32 holds them
};

double relative_error(const HostTensor& got, const std::vector<float>& want) {
  EXPECT_EQ(static_cast<size_t>(got.desc.shape.numel()), want.size());
  double diff = 0, scale = 1e-12;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(got.as<float>()[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
  }
  return diff / scale;
}

class KvAttention : public ::testing::TestWithParam<Config> {};

// Three sequences prefilled together (block_size + 1, 1 and 2 * block_size + 1 tokens: crossing
// block boundaries), then decode steps of one token per sequence, with the step's set of sequences
// changing (one alone: the tasks split a group of q heads across the threads).
TEST_P(KvAttention, PrefillThenDecodeMatchesTheReference) {
  const Config c = GetParam();
  TempDir dir;
  const int64_t bs = c.block_size;
  Harness h(c, dir / "m", 3, 4);
  std::vector<Token> prefill;
  const int64_t lengths[] = {bs + 1, 1, 2 * bs + 1};
  for (int64_t s = 0; s < 3; ++s)
    for (int64_t p = 0; p < lengths[s]; ++p) prefill.push_back({s, p});
  std::vector<std::vector<Token>> steps = {prefill};
  int64_t next[] = {lengths[0], lengths[1], lengths[2]};
  for (const std::vector<int64_t>& seqs : std::vector<std::vector<int64_t>>{{0, 1, 2}, {0, 1, 2}, {2}, {0, 1}, {1}}) {
    std::vector<Token> step;
    for (int64_t s : seqs) step.push_back({s, next[s]++});
    steps.push_back(step);
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    const HostTensor qkv = h.random_qkv(static_cast<int64_t>(steps[i].size()), 100 + i);
    const HostTensor y = h.run(steps[i], qkv);
    const Harness::Expected want = h.reference(steps[i], qkv);
    EXPECT_LE(relative_error(y, want.cached), Harness::kTolerance);
    EXPECT_LE(relative_error(y, want.exact), h.exact_tolerance());
  }
  h.expect_cache_holds_the_reference();
  EXPECT_TRUE(h.device().status().ok());
}

INSTANTIATE_TEST_SUITE_P(
    Configs, KvAttention,
    ::testing::Values(Config{"gqa_rope_half_f32", 4, 2, 8, 4, 4, DType::f32},
                      Config{"mqa_rope_full_f32", 4, 1, 8, 8, 4, DType::f32},
                      Config{"mha_no_rope_f32", 4, 4, 8, 0, 4, DType::f32},
                      Config{"wide_group_f32", 16, 1, 4, 2, 3, DType::f32},  // 16 q heads on one kv head: split tasks
                      Config{"long_blocks_f32", 2, 1, 16, 8, 40, DType::f32},  // chunks of 32 inside blocks of 40
                      Config{"gqa_f16", 4, 2, 16, 16, 4, DType::f16},
                      Config{"gqa_bf16", 4, 2, 8, 4, 5, DType::bf16},
                      Config{"odd_dims_bf16", 6, 3, 6, 2, 2, DType::bf16}),
    [](const ::testing::TestParamInfo<Config>& i) { return i.param.name; });

// The equivalence generation rests on: a prompt in one step and the same tokens one per step give
// the same outputs. Pass 2 reads every position back from the cache in the same order either
// way, so they are bitwise equal, and so is the cache.
TEST(KvAttentionSteps, AWholePromptInOneStepEqualsTokenByToken) {
  for (const Config& c : {Config{"f32", 4, 2, 8, 8, 16, DType::f32}, Config{"bf16", 4, 1, 8, 4, 16, DType::bf16}}) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    Harness whole(c, dir / "a", 2, 3), stepped(c, dir / "b", 2, 3);
    constexpr int64_t kLen = 37;  // crosses blocks of 16 and chunks of 32
    std::vector<Token> prompt;
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t p = 0; p < kLen; ++p) prompt.push_back({s, p});
    const HostTensor qkv = whole.random_qkv(2 * kLen, 5);
    const HostTensor y = whole.run(prompt, qkv);
    for (int64_t p = 0; p < kLen; ++p) {
      HostTensor one = stepped.random_qkv(2, 0);
      for (int64_t s = 0; s < 2; ++s) {
        std::memcpy(one.as<float>() + s * stepped.width(), qkv.as<float>() + (s * kLen + p) * stepped.width(),
                    static_cast<size_t>(stepped.width()) * 4);
      }
      const HostTensor y1 = stepped.run({{0, p}, {1, p}}, one);
      const int64_t row = c.heads * c.dim;
      for (int64_t s = 0; s < 2; ++s) {
        ASSERT_EQ(std::memcmp(y1.as<float>() + s * row, y.as<float>() + (s * kLen + p) * row, static_cast<size_t>(row) * 4), 0)
            << "sequence " << s << " position " << p;
      }
    }
    EXPECT_EQ(whole.pool_bytes(), stepped.pool_bytes());
  }
}

// Bad kv_meta never reaches the kernel through run_host or run_device: invalid_argument naming
// the layer and the entry, nothing written, the device healthy.
TEST(KvAttentionSteps, TheExecutorRefusesKvMetaThatDoesNotHoldTogether) {
  const Config c{"gqa", 4, 2, 8, 4, 4, DType::f32};
  TempDir dir;
  Harness h(c, dir / "m", 2, 2);
  const std::vector<Token> tokens = {{0, 0}, {0, 1}, {1, 0}};
  const HostTensor qkv = h.random_qkv(3, 1);
  const std::vector<uint8_t> before = h.pool_bytes();
  struct Bad {
    std::string why;
    int64_t entry, value;
  };
  // kv_meta: [0..4) header, [4, 7) sequence of each token, [7, 11) the 2 x 2 block table.
  const Bad cases[] = {{"[7] sequence 0's block 0 is 0", 7, 0},
                       {"token 2's sequence 2 is outside [0, 2)", 6, 2},
                       {"[1] block_size is 0", 1, 0},
                       {"[3] cache type 3", 3, 3}};
  for (const Bad& b : cases) {
    SCOPED_TRACE(b.why);
    std::vector<HostTensor> in = h.inputs(tokens, qkv);
    in[2].as<int64_t>()[b.entry] = b.value;
    auto host = h.executor().run_host(in);
    ASSERT_FALSE(host.ok());
    EXPECT_EQ(host.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(host.error().message().find(b.why), std::string::npos) << host.error().message();
    EXPECT_NE(host.error().message().find("layer 'attn'"), std::string::npos) << host.error().message();

    auto stream = h.device().create_stream();
    const Graph& g = h.executor().model().graph();
    Activations up = must(upload(h.device(), *stream, in, {*g.find("qkv"), *g.find("positions"), *g.find("kv_meta")}));
    must(stream->synchronize());
    std::vector<NamedValue> named;
    for (auto& [id, v] : up) named.push_back({g.value_names[id], v});
    auto dev = h.executor().run_device(named);
    ASSERT_FALSE(dev.ok());
    EXPECT_NE(dev.error().message().find(b.why), std::string::npos) << dev.error().message();
  }
  std::vector<HostTensor> in = h.inputs(tokens, qkv);
  in[1].as<int64_t>()[1] = 0;  // two tokens of sequence 0 at position 0
  auto twice = h.executor().run_host(in);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message().find("not after its earlier token's 0"), std::string::npos) << twice.error().message();
  EXPECT_EQ(h.pool_bytes(), before);
  EXPECT_TRUE(h.device().status().ok());
}

// What the executor's check cannot know: a block address outside device memory. The kernel
// resolves it through the device, which faults (illegal address, sticky) as for any pointer.
TEST(KvAttentionSteps, ABlockOutsideDeviceMemoryFaultsTheDevice) {
  TempDir dir;
  Harness h({"gqa", 4, 2, 8, 4, 4, DType::f32}, dir / "m", 1, 1);
  std::vector<HostTensor> in = h.inputs({{0, 0}}, h.random_qkv(1, 1));
  in[2].as<int64_t>()[5] = 0x100;
  auto out = h.executor().run_host(in);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().code(), ErrorCode::device_fault);
  EXPECT_NE(out.error().message().find("illegal address in kv_attention block"), std::string::npos)
      << out.error().message();
}

// run() takes device values unchecked: the kernel still keeps to the blocks. A token whose sequence
// is outside the table gets a zero row; an inconsistent header makes the whole output zero.
TEST(KvAttentionSteps, UncheckedBadKvMetaGivesZerosNotACrash) {
  TempDir dir;
  const Config c{"gqa", 4, 2, 8, 4, 4, DType::f32};
  Harness h(c, dir / "m", 2, 2);
  const std::vector<Token> tokens = {{0, 0}, {1, 0}, {1, 1}};
  const HostTensor qkv = h.random_qkv(3, 2);
  const Graph& g = h.executor().model().graph();
  const std::vector<uint32_t> ids = {*g.find("qkv"), *g.find("positions"), *g.find("kv_meta")};
  auto run_unchecked = [&](const std::vector<HostTensor>& in) {
    auto stream = h.device().create_stream();
    Activations up = must(upload(h.device(), *stream, in, ids));
    must(stream->synchronize());
    Activations out = must(h.executor().run(up));
    return must(download(*stream, out, g.value_names)).at(0);
  };
  const int64_t row = c.heads * c.dim;
  auto zero_row = [&](const HostTensor& y, int64_t t) {
    return std::all_of(y.as<float>() + t * row, y.as<float>() + (t + 1) * row, [](float v) { return v == 0.f; });
  };
  std::vector<HostTensor> in = h.inputs(tokens, qkv);
  in[2].as<int64_t>()[4] = 9;  // token 0's sequence
  in[1].as<int64_t>()[2] = 1000;  // token 2's position, past the table
  HostTensor y = run_unchecked(in);
  EXPECT_TRUE(zero_row(y, 0));
  EXPECT_FALSE(zero_row(y, 1));
  EXPECT_TRUE(zero_row(y, 2));
  for (int64_t entry : {0, 1, 2}) {
    in = h.inputs(tokens, qkv);
    in[2].as<int64_t>()[entry] = entry == 2 ? -1 : 0;
    y = run_unchecked(in);
    for (int64_t t = 0; t < 3; ++t) EXPECT_TRUE(zero_row(y, t)) << "entry " << entry << " token " << t;
  }
  EXPECT_TRUE(h.device().status().ok());
}

// Against PyTorch running Hugging Face's Llama attention (tests/gpu/kv_attention_torch.py, the
// formulas transcribed from transformers): two sequences fed as a packed prefill, then decodes of
// mixed sets, each output row compared with the same position of a whole-sequence causal attention
// in torch, at 1e-5 of the largest output. Skipped where /usr/bin/python3 has no torch.
TEST(KvAttentionTorch, MatchesHuggingFaceLlamaAttention) {
  for (const Config& c : {Config{"partial_rope", 4, 2, 16, 8, 4, DType::f32}, Config{"full_rope", 6, 2, 8, 8, 3, DType::f32}}) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    Harness h(c, dir / "m", 2, 4);
    const int64_t lengths[] = {9, 6};
    // qkv rows of every position, sequence 0's then sequence 1's.
    const HostTensor rows = h.random_qkv(lengths[0] + lengths[1], 11);
    auto row_of = [&](int64_t s, int64_t p) { return (s == 0 ? 0 : lengths[0]) + p; };
    std::vector<std::vector<Token>> steps = {{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {1, 0}, {1, 1}, {1, 2}}};
    for (int64_t p = 5; p < 9; ++p) {
      steps.push_back({{0, p}});
      if (p - 2 < lengths[1]) steps.back().push_back({1, p - 2});
    }
    const int64_t width = h.width(), out_row = c.heads * c.dim;
    std::vector<float> got(static_cast<size_t>((lengths[0] + lengths[1]) * out_row));
    for (const std::vector<Token>& step : steps) {
      HostTensor qkv = h.random_qkv(static_cast<int64_t>(step.size()), 0);
      for (size_t t = 0; t < step.size(); ++t) {
        std::memcpy(qkv.as<float>() + static_cast<int64_t>(t) * width, rows.as<float>() + row_of(step[t].seq, step[t].pos) * width,
                    static_cast<size_t>(width) * 4);
      }
      const HostTensor y = h.run(step, qkv);
      for (size_t t = 0; t < step.size(); ++t) {
        std::memcpy(got.data() + row_of(step[t].seq, step[t].pos) * out_row, y.as<float>() + static_cast<int64_t>(t) * out_row,
                    static_cast<size_t>(out_row) * 4);
      }
    }
    auto write = [&](const std::string& name, const void* data, size_t bytes) {
      testing::write_file(dir / name, std::string(static_cast<const char*>(data), bytes));
    };
    write("qkv.f32", rows.data(), static_cast<size_t>(rows.desc.bytes()));
    write("inv_freq.f32", h.inv_freq().data(), h.inv_freq().size() * 4);
    std::string seqs = "[[0, 1, 2, 3, 4, 5, 6, 7, 8], [9, 10, 11, 12, 13, 14]]";
    testing::write_file(dir / "spec.json", "{\"heads\": " + std::to_string(c.heads) + ", \"kv_heads\": " +
                                               std::to_string(c.kv_heads) + ", \"head_dim\": " + std::to_string(c.dim) +
                                               ", \"rope_dim\": " + std::to_string(c.rope_dim) +
                                               ", \"sequences\": " + seqs + "}");
    const std::string cmd = std::string(EMBER_TORCH_PYTHON) + " " + EMBER_SOURCE_DIR + "/tests/gpu/kv_attention_torch.py " +
                            dir.path() + " > " + dir.path() + "/torch.log 2>&1";
    const int rc = std::system(cmd.c_str());
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) GTEST_SKIP() << testing::read_file(dir / "torch.log");
    ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << cmd << ":\n" << testing::read_file(dir / "torch.log");
    const std::string expected = testing::read_file(dir / "expected.f32");
    ASSERT_EQ(expected.size(), got.size() * 4);
    HostTensor y = must(HostTensor::allocate("y", {DType::f32, Shape{static_cast<int64_t>(got.size())}}));
    std::memcpy(y.data(), got.data(), got.size() * 4);
    std::vector<float> want(got.size());
    std::memcpy(want.data(), expected.data(), expected.size());
    EXPECT_LE(relative_error(y, want), 1e-5);
  }
}

}  // namespace kernels_cpu_kv_attention_test
}  // namespace ember::gpu
