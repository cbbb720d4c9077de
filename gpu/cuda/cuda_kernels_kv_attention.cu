// The CUDA kernels of kv_attention (model/ops.hpp states the op; gpu/kernels_cpu_kv_attention.cpp
// is the model they follow). Two kernels on the stream, the second reading what the first wrote:
//   kv_write_kernel   a block per token: its rotary cos and sin into shared memory, its q heads
//                     rotated and scaled into the workspace (kv_attention_scratch's q), its k heads
//                     rotated and its v heads written, in the cache's type, into its slot.
//   kv_attend_kernel  a block per (token, q head): the q head into shared memory, then positions
//                     0 ..= p in chunks of one position per thread: each thread scores its position,
//                     a block max and sum advance the online softmax, and each thread accumulates
//                     its dims of the output over the chunk (the accumulator in shared memory).
// Simple rather than fast (a K row per thread reads uncoalesced): what the CPU kernel computes,
// in another summation order. The cache type comes from kv_meta, which only the device reads, so it
// is a uniform branch per element, not a template.
//
// kv_meta is read on the device as the CPU kernel reads it on the host: a header that does not
// hold together zeroes the output and writes nothing, a token outside the table gets a zero row, a
// block address of 0 is skipped, and so is one whose layer range lies outside the device's
// reservation (CudaKernelArgs::memory_base/memory_bytes; CUDA would fault the context, SimDevice
// faults the device instead).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/cuda/cuda_kernels.hpp"

namespace ember::gpu::cuda {

namespace {

constexpr int kKvThreads = 128;  // threads per block of both kernels (a multiple of 32)

struct KvParams {
  int64_t tokens, heads, kv_heads, dim, half, meta_entries, kv_layer;
  float scale;
  uint64_t memory_base, memory_bytes;  // the device's reservation
};

// kv_meta's header, read by every thread of a block.
struct KvHeader {
  bool ok;
  int64_t seqs, block_size, width, code, elem, layer_bytes, layer_offset;
};

__device__ KvHeader read_header(const int64_t* meta, const KvParams& p) {
  KvHeader h{};
  if (p.meta_entries < kKvMetaHeader + p.tokens) return h;
  h.seqs = meta[0], h.block_size = meta[1], h.width = meta[2], h.code = meta[3];
  const int64_t table = p.meta_entries - kKvMetaHeader - p.tokens;
  if (h.seqs < 1 || h.block_size < 1 || h.width < 1 || h.code < 0 || h.code > 2) return h;
  if (h.width > table / h.seqs || h.seqs * h.width != table) return h;
  h.elem = h.code == 0 ? 4 : 2;
  // The layer's end, (kv_layer + 1) * 2 * block_size * Hkv * D * elem, within int64 (chained floor
  // divisions: block_size * f1 * f2 ... <= MAX exactly when block_size <= MAX / f1 / f2 ...).
  const int64_t factors[] = {2 * h.elem, p.kv_heads, p.dim, p.kv_layer + 1};
  int64_t limit = INT64_MAX;
  for (int64_t f : factors) limit /= f;
  if (h.block_size > limit) return h;
  h.layer_bytes = 2 * h.block_size * p.kv_heads * p.dim * h.elem;
  h.layer_offset = p.kv_layer * h.layer_bytes;
  h.ok = true;
  return h;
}

// This layer's K in the block at `addr`, or nullptr for 0 or a range outside the reservation.
__device__ uint8_t* block_at(int64_t addr, const KvHeader& h, const KvParams& p) {
  const auto a = static_cast<uint64_t>(addr);
  if (a == 0 || a < p.memory_base || a - p.memory_base > p.memory_bytes) return nullptr;
  const uint64_t room = p.memory_bytes - (a - p.memory_base);
  if (static_cast<uint64_t>(h.layer_offset + h.layer_bytes) > room) return nullptr;
  return reinterpret_cast<uint8_t*>(a + static_cast<uint64_t>(h.layer_offset));
}

__device__ float load(const uint8_t* row, int64_t i, int64_t code) {
  if (code == 0) return reinterpret_cast<const float*>(row)[i];
  if (code == 1) return __half2float(reinterpret_cast<const __half*>(row)[i]);
  return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(row)[i]);
}

__device__ void store(uint8_t* row, int64_t i, int64_t code, float v) {
  if (code == 0) reinterpret_cast<float*>(row)[i] = v;
  else if (code == 1) reinterpret_cast<__half*>(row)[i] = __float2half_rn(v);
  else reinterpret_cast<__nv_bfloat16*>(row)[i] = __float2bfloat16_rn(v);
}

// Dim d of one head rotated (NeoX pairing over the first 2 * half dims).
__device__ float rotated(const float* head, int64_t d, int64_t half, const float* cos_a, const float* sin_a) {
  if (d < half) return head[d] * cos_a[d] - head[d + half] * sin_a[d];
  if (d < 2 * half) return head[d] * cos_a[d - half] + head[d - half] * sin_a[d - half];
  return head[d];
}

// The token's sequence's block-table row, or nullptr when the token is outside the table.
__device__ const int64_t* table_row(const int64_t* meta, const KvHeader& h, const KvParams& p, int64_t s, int64_t pos) {
  if (s < 0 || s >= h.seqs || pos < 0 || pos / h.block_size >= h.width) return nullptr;
  return meta + kKvMetaHeader + p.tokens + s * h.width;
}

__global__ void kv_write_kernel(const float* qkv, const int64_t* positions, const int64_t* meta, const float* inv_freq,
                                float* q_rot, KvParams p) {
  extern __shared__ float trig[];  // cos [half], then sin [half]
  const KvHeader h = read_header(meta, p);
  if (!h.ok) return;
  const int64_t t = blockIdx.x, pos = positions[t], s = meta[kKvMetaHeader + t];
  float* cos_a = trig;
  float* sin_a = trig + p.half;
  for (int64_t i = threadIdx.x; i < p.half; i += blockDim.x) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    cos_a[i] = cosf(angle);
    sin_a[i] = sinf(angle);
  }
  __syncthreads();
  const int64_t D = p.dim;
  const float* x = qkv + t * (p.heads + 2 * p.kv_heads) * D;
  for (int64_t e = threadIdx.x; e < p.heads * D; e += blockDim.x) {
    q_rot[t * p.heads * D + e] = rotated(x + e / D * D, e % D, p.half, cos_a, sin_a) * p.scale;
  }
  const int64_t* row = table_row(meta, h, p, s, pos);
  uint8_t* block = row ? block_at(row[pos / h.block_size], h, p) : nullptr;
  if (!block) return;
  const int64_t slot = (pos % h.block_size) * p.kv_heads * D;
  uint8_t* v_block = block + h.layer_bytes / 2;
  const float* kx = x + p.heads * D;
  const float* vx = kx + p.kv_heads * D;
  for (int64_t e = threadIdx.x; e < p.kv_heads * D; e += blockDim.x) {
    store(block, slot + e, h.code, rotated(kx + e / D * D, e % D, p.half, cos_a, sin_a));
    store(v_block, slot + e, h.code, vx[e]);
  }
}

__global__ void kv_attend_kernel(const int64_t* positions, const int64_t* meta, const float* q_rot, float* out,
                                 KvParams p) {
  extern __shared__ float shared[];  // q [D], acc [D], weights [blockDim], then V rows [blockDim]
  __shared__ float scratch[32];
  const int64_t D = p.dim, t = blockIdx.x / p.heads, head = blockIdx.x % p.heads;
  const int64_t kvh = head / (p.heads / p.kv_heads);
  float* y = out + (t * p.heads + head) * D;
  const KvHeader h = read_header(meta, p);
  const int64_t pos = positions[t];
  const int64_t* row = h.ok ? table_row(meta, h, p, meta[kKvMetaHeader + t], pos) : nullptr;
  if (!row) {
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) y[d] = 0.f;
    return;
  }
  float* q = shared;
  float* acc = q + D;
  float* w = acc + D;
  auto** v_rows = reinterpret_cast<const uint8_t**>(w + blockDim.x);
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    q[d] = q_rot[(t * p.heads + head) * D + d];
    acc[d] = 0.f;
  }
  __syncthreads();
  const int64_t row_elems = p.kv_heads * D;
  float m = -INFINITY, l = 0.f;  // the same in every thread: they come from block reductions
  for (int64_t j0 = 0; j0 <= pos; j0 += blockDim.x) {
    const int64_t j = j0 + threadIdx.x;
    float score = -INFINITY;
    const uint8_t* v_row = nullptr;
    if (j <= pos) {
      const uint8_t* block = block_at(row[j / h.block_size], h, p);
      if (block) {
        const int64_t at = ((j % h.block_size) * row_elems + kvh * D) * h.elem;
        const uint8_t* k_row = block + at;
        v_row = block + h.layer_bytes / 2 + at;
        float dot = 0.f;
        for (int64_t d = 0; d < D; ++d) dot += q[d] * load(k_row, d, h.code);
        score = dot;
      }
    }
    const float top = block_max(score, scratch);
    if (top == -INFINITY) continue;  // no block of this chunk is there (uniform across the block)
    const float m_new = fmaxf(m, top), corr = expf(m - m_new);
    const float e = v_row ? expf(score - m_new) : 0.f;
    w[threadIdx.x] = e;
    v_rows[threadIdx.x] = v_row;
    l = l * corr + block_sum(e, scratch);  // its barriers also publish w and v_rows
    const int64_t n = pos - j0 + 1 < blockDim.x ? pos - j0 + 1 : static_cast<int64_t>(blockDim.x);
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      float a = acc[d] * corr;
      for (int64_t i = 0; i < n; ++i)
        if (v_rows[i]) a += w[i] * load(v_rows[i], d, h.code);
      acc[d] = a;
    }
    m = m_new;
    __syncthreads();  // the next chunk overwrites w and v_rows
  }
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) y[d] = l > 0.f ? acc[d] / l : 0.f;
}

}  // namespace

CudaKernelStatus cuda_kv_attention(const CudaKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  KvParams p{};
  p.tokens = k.in_shape(0)[0];
  p.heads = a.num_heads, p.kv_heads = a.num_kv_heads, p.dim = a.head_dim, p.half = a.rope_dim / 2;
  p.meta_entries = k.in_shape(2)[0];
  p.kv_layer = a.kv_layer;
  p.scale = kv_attention_scale(a);
  p.memory_base = k.memory_base, p.memory_bytes = k.memory_bytes;
  auto* q_rot = reinterpret_cast<float*>(static_cast<uint8_t*>(k.workspace) +
                                         kv_attention_scratch(a, p.tokens, p.meta_entries).q);
  const auto* positions = static_cast<const int64_t*>(k.inputs[1]);
  const auto* meta = static_cast<const int64_t*>(k.inputs[2]);
  if (p.tokens == 0) return {};
  kv_write_kernel<<<static_cast<unsigned>(p.tokens), kKvThreads, 2 * p.half * sizeof(float), k.stream>>>(
      k.in_f32(0), positions, meta, k.w_f32(0), q_rot, p);
  EMBER_CUDA_TRY(launched("kv_write_kernel"));
  const size_t shared = (2 * p.dim + kKvThreads) * sizeof(float) + kKvThreads * sizeof(void*);
  kv_attend_kernel<<<static_cast<unsigned>(p.tokens * p.heads), kKvThreads, shared, k.stream>>>(positions, meta, q_rot,
                                                                                                 k.out_f32(), p);
  return launched("kv_attend_kernel");
}

}  // namespace ember::gpu::cuda
