// The CPU kernel of kv_attention (model/ops.hpp states the op, docs/design/generation.md the
// contract). Two passes over the step, each one parallel loop:
//   1. per token: its q heads rotated and scaled into the workspace, its k heads rotated and its v
//      heads written, converted to the cache's type, into its slot of its block;
//   2. per (token, kv head, group of the q heads that share it): attention over positions 0 ..= p
//      of the token's sequence, read back from the blocks, with the online softmax of Milakov and
//      Gimelshein (2018; FlashAttention's) over chunks of at most kKvChunk positions within a
//      block. No buffer grows with the context and nothing is allocated per token; each K and V
//      row is read once for every q head of its group (grouped-query attention's saving: decode
//      is a read of the cache). Tasks split a group when there are fewer tasks than threads.
// Pass 2 reads what pass 1 wrote (the step's own positions), so a prompt in one step and the same
// tokens one per step read the same cache values in the same order: their outputs are bitwise
// equal.
//
// Block addresses are device addresses: resolved once per launch through the device
// (CpuKernelArgs::resolve, which bounds-checks them as every argument pointer is checked and faults
// the device for one outside its memory) into the workspace's table. Values the executor's
// check_kv_meta would refuse never make the kernel touch memory outside the blocks (ops.hpp).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "gpu/cpu_parallel.hpp"
#include "gpu/cpu_vector_math.hpp"
#include "gpu/kernels_cpu.hpp"
#include "model/half.hpp"

namespace ember::gpu {

namespace kv_cpu {

constexpr int64_t kKvChunk = 32;        // positions scored at once (their scores live on the stack)
constexpr int64_t kKvMaxGroup = 8;      // q heads one task carries
constexpr int64_t kKvParallelWork = 1 << 15;  // multiply-adds below which threads cost more than they save

EMBER_SIMD_CLONES float dot(const float* a, const float* b, int64_t n) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

EMBER_SIMD_CLONES void axpy(float w, const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += w * x[i];
}

EMBER_SIMD_CLONES void scale(float* y, float f, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] *= f;
}

EMBER_SIMD_CLONES void exp_shifted(float* s, float shift, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) s[i] = expf(s[i] - shift);
}

EMBER_SIMD_CLONES void widen_f16(const uint16_t* in, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32_masked(in[i]);
}

EMBER_SIMD_CLONES void widen_bf16(const uint16_t* in, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(static_cast<uint32_t>(in[i]) << 16);
}

// The cache's element types: how a value is stored, and a row read back as float32 (the row itself
// for a float32 cache, else widened into `buf`).
struct F32 {
  using T = float;
  static T store(float x) { return x; }
  static const float* row(const T* r, int64_t, float*) { return r; }
};
struct F16 {
  using T = uint16_t;
  static T store(float x) { return f32_to_f16(x); }
  static const float* row(const T* r, int64_t n, float* buf) { return widen_f16(r, buf, n), buf; }
};
struct BF16 {
  using T = uint16_t;
  static T store(float x) { return f32_to_bf16(x); }
  static const float* row(const T* r, int64_t n, float* buf) { return widen_bf16(r, buf, n), buf; }
};

// One launch's view of kv_meta and the layer's geometry.
struct Step {
  int64_t tokens = 0, heads = 0, kv_heads = 0, dim = 0, rope_half = 0;
  int64_t seqs = 0, block_size = 0, width = 0;
  DType cache = DType::f32;
  int64_t layer_bytes = 0;     // K and V of this layer in one block
  const int64_t* seq_of = nullptr;  // [T]
  const int64_t* pos = nullptr;     // [T]
  const int64_t* table = nullptr;   // [B * W] device addresses
  uint8_t** blocks = nullptr;       // [B * W] this layer's K in each block, host pointers (nullptr: none)

  // The token's block-table row, or nullptr when its sequence or position is outside the table.
  uint8_t* const* row_of(int64_t t) const {
    const int64_t s = seq_of[t], p = pos[t];
    if (s < 0 || s >= seqs || p < 0 || p / block_size >= width) return nullptr;
    return blocks + s * width;
  }
};

// Reads kv_meta's header as check_kv_meta does (without the per-token checks, which the passes
// make as they go); false when it is inconsistent.
bool read_header(const CpuKernelArgs& k, Step& st) {
  const LayerAttrs& a = k.attrs();
  const int64_t entries = k.in_shape(2)[0];
  const auto* meta = reinterpret_cast<const int64_t*>(k.inputs[2]);
  st.tokens = k.in_shape(0)[0];
  st.heads = a.num_heads, st.kv_heads = a.num_kv_heads, st.dim = a.head_dim, st.rope_half = a.rope_dim / 2;
  if (entries < kKvMetaHeader + st.tokens) return false;
  st.seqs = meta[0], st.block_size = meta[1], st.width = meta[2];
  const auto cache = kv_cache_dtype(meta[3]);
  int64_t table = 0, end = 0;
  if (st.seqs < 1 || st.block_size < 1 || st.width < 1 || !cache ||
      __builtin_mul_overflow(st.seqs, st.width, &table) || table != entries - kKvMetaHeader - st.tokens) {
    return false;
  }
  st.cache = *cache;
  st.layer_bytes = kv_layer_bytes(a, st.block_size, st.cache);
  if (st.layer_bytes == 0 || __builtin_mul_overflow(a.kv_layer + 1, st.layer_bytes, &end)) return false;
  st.seq_of = meta + kKvMetaHeader;
  st.pos = reinterpret_cast<const int64_t*>(k.inputs[1]);
  st.table = meta + kKvMetaHeader + st.tokens;
  return true;
}

// Rotates one head (NeoX pairing over the first 2 * half dims) and scales it: dst = rot(src) * f.
void rotate(const float* src, float* dst, const float* cos_a, const float* sin_a, int64_t half, int64_t dim, float f) {
  for (int64_t i = 0; i < half; ++i) {
    const float x1 = src[i], x2 = src[i + half];
    dst[i] = (x1 * cos_a[i] - x2 * sin_a[i]) * f;
    dst[i + half] = (x2 * cos_a[i] + x1 * sin_a[i]) * f;
  }
  for (int64_t i = 2 * half; i < dim; ++i) dst[i] = src[i] * f;
}

// Pass 1 for token t: q heads into the workspace, k and v into the token's slot.
template <class C>
void write_token(const CpuKernelArgs& k, const Step& st, float* q_rot, int64_t t) {
  using T = typename C::T;
  const int64_t H = st.heads, Hkv = st.kv_heads, D = st.dim, half = st.rope_half;
  float cos_a[kKvMaxHeadDim / 2], sin_a[kKvMaxHeadDim / 2], buf[kKvMaxHeadDim];
  const float* inv_freq = k.w_f32(0);
  const float p = static_cast<float>(st.pos[t]);  // Hugging Face: float32 positions times float32 frequencies
  for (int64_t i = 0; i < half; ++i) {
    const float angle = p * inv_freq[i];
    cos_a[i] = std::cos(angle);
    sin_a[i] = std::sin(angle);
  }
  const float* x = k.in_f32(0) + t * (H + 2 * Hkv) * D;
  const float f = kv_attention_scale(k.attrs());
  for (int64_t h = 0; h < H; ++h) rotate(x + h * D, q_rot + (t * H + h) * D, cos_a, sin_a, half, D, f);

  uint8_t* const* row = st.row_of(t);
  uint8_t* block = row ? row[st.pos[t] / st.block_size] : nullptr;
  if (!block) return;
  const int64_t slot = st.pos[t] % st.block_size;
  T* kdst = reinterpret_cast<T*>(block) + slot * Hkv * D;
  T* vdst = reinterpret_cast<T*>(block + st.layer_bytes / 2) + slot * Hkv * D;
  const float* kx = x + H * D;
  const float* vx = kx + Hkv * D;
  for (int64_t h = 0; h < Hkv; ++h) {
    rotate(kx + h * D, buf, cos_a, sin_a, half, D, 1.f);
    for (int64_t i = 0; i < D; ++i) kdst[h * D + i] = C::store(buf[i]);
  }
  for (int64_t i = 0; i < Hkv * D; ++i) vdst[i] = C::store(vx[i]);
}

// Pass 2 for q heads [h0, h1) of token t, all reading kv head kvh: the output rows, zero for a
// token outside the table.
template <class C>
void attend(const CpuKernelArgs& k, const Step& st, const float* q_rot, int64_t t, int64_t kvh, int64_t h0,
            int64_t h1) {
  using T = typename C::T;
  const int64_t H = st.heads, Hkv = st.kv_heads, D = st.dim, n_heads = h1 - h0;
  float* y[kKvMaxGroup];
  const float* q[kKvMaxGroup];
  float m[kKvMaxGroup], l[kKvMaxGroup];
  for (int64_t i = 0; i < n_heads; ++i) {
    y[i] = k.out_f32() + (t * H + h0 + i) * D;
    q[i] = q_rot + (t * H + h0 + i) * D;
    std::memset(y[i], 0, static_cast<size_t>(D) * sizeof(float));
    m[i] = -std::numeric_limits<float>::infinity();
    l[i] = 0.f;
  }
  uint8_t* const* row = st.row_of(t);
  if (!row) return;
  float kbuf[kKvMaxHeadDim], vbuf[kKvMaxHeadDim], score[kKvMaxGroup][kKvChunk];
  const int64_t p = st.pos[t], bs = st.block_size;
  for (int64_t b = 0; b <= p / bs; ++b) {
    if (!row[b]) continue;
    const T* K = reinterpret_cast<const T*>(row[b]) + kvh * D;
    const T* V = reinterpret_cast<const T*>(row[b] + st.layer_bytes / 2) + kvh * D;
    const int64_t n = std::min(bs, p - b * bs + 1);  // this block's positions up to p
    for (int64_t j0 = 0; j0 < n; j0 += kKvChunk) {
      const int64_t c = std::min(kKvChunk, n - j0);
      for (int64_t j = 0; j < c; ++j) {
        const float* kr = C::row(K + (j0 + j) * Hkv * D, D, kbuf);
        for (int64_t i = 0; i < n_heads; ++i) score[i][j] = dot(q[i], kr, D);
      }
      for (int64_t i = 0; i < n_heads; ++i) {
        const float top = *std::max_element(score[i], score[i] + c);
        if (top > m[i]) {  // rescale what was accumulated against the old maximum
          const float corr = std::exp(m[i] - top);
          l[i] *= corr;
          scale(y[i], corr, D);
          m[i] = top;
        }
        exp_shifted(score[i], m[i], c);
        for (int64_t j = 0; j < c; ++j) l[i] += score[i][j];
      }
      for (int64_t j = 0; j < c; ++j) {
        const float* vr = C::row(V + (j0 + j) * Hkv * D, D, vbuf);
        for (int64_t i = 0; i < n_heads; ++i) axpy(score[i][j], vr, y[i], D);
      }
    }
  }
  for (int64_t i = 0; i < n_heads; ++i) scale(y[i], l[i] > 0.f ? 1.f / l[i] : 0.f, D);
}

template <class C>
void run(const CpuKernelArgs& k, const Step& st, float* q_rot) {
  const int64_t T = st.tokens, H = st.heads, Hkv = st.kv_heads, D = st.dim, G = H / Hkv;
  parallel_for(T, T * (H + 2 * Hkv) * D > kKvParallelWork, [&](int64_t t) { write_token<C>(k, st, q_rot, t); });

  // Tasks of at most kKvMaxGroup q heads of one kv head; more (smaller) ones while there are fewer
  // tasks than threads (a single sequence's decode with few kv heads).
  const int64_t threads = omp_get_max_threads();
  const int64_t min_parts = (G + kKvMaxGroup - 1) / kKvMaxGroup;
  const int64_t parts = std::max(min_parts, std::min(G, (threads + T * Hkv - 1) / (T * Hkv)));
  const int64_t per_part = (G + parts - 1) / parts;
  int64_t work = 0;  // multiply-adds, roughly: positions attended times heads times dims
  for (int64_t t = 0; t < T && work <= kKvParallelWork; ++t) {
    work += (std::clamp<int64_t>(st.pos[t], 0, kKvParallelWork) + 1) * H * D;  // unchecked positions may be anything
  }
  parallel_for(T * Hkv * parts, work > kKvParallelWork, [&](int64_t task) {
    const int64_t t = task / (Hkv * parts), kvh = task / parts % Hkv, part = task % parts;
    const int64_t h0 = kvh * G + part * per_part, h1 = std::min(kvh * G + G, h0 + per_part);
    if (h0 < h1) attend<C>(k, st, q_rot, t, kvh, h0, h1);
  });
}

}  // namespace kv_cpu

void cpu_kv_attention(const CpuKernelArgs& k) {
  using namespace kv_cpu;
  Step st;
  if (!read_header(k, st)) {
    std::memset(k.output, 0, k.args->output.desc.bytes());
    return;
  }
  const KvAttentionScratch ws = kv_attention_scratch(k.attrs(), st.tokens, k.in_shape(2)[0]);
  st.blocks = reinterpret_cast<uint8_t**>(k.workspace + ws.blocks);
  auto* q_rot = reinterpret_cast<float*>(k.workspace + ws.q);
  // This layer's K and V in every listed block, resolved once; a nonzero address outside device
  // memory faults the device and the kernel stops.
  const uint64_t offset = static_cast<uint64_t>(k.attrs().kv_layer * st.layer_bytes);
  for (int64_t e = 0; e < st.seqs * st.width; ++e) {
    const auto addr = static_cast<uint64_t>(st.table[e]);
    st.blocks[e] = nullptr;
    if (addr == 0) continue;
    uint64_t at = 0;
    if (__builtin_add_overflow(addr, offset, &at)) at = UINT64_MAX;  // past 2^64: the resolver refuses it
    st.blocks[e] = k.resolve(at, static_cast<uint64_t>(st.layer_bytes), "kv_attention block");
    if (!st.blocks[e]) return;
  }
  switch (st.cache) {
    case DType::f16: return run<F16>(k, st, q_rot);
    case DType::bf16: return run<BF16>(k, st, q_rot);
    default: return run<F32>(k, st, q_rot);
  }
}

}  // namespace ember::gpu
