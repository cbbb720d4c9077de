// CPU kernels built on matrix products: linear, conv2d (im2col + GEMM; depthwise layers go to
// kernels_cpu_depthwise.cpp's direct loops), conv_transpose2d (GEMM + col2im), matmul of two
// activations, attention (with its key-padding mask), and embedding.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "gpu/cpu_parallel.hpp"
#include "gpu/cpu_vector_math.hpp"
#include "gpu/kernels_cpu.hpp"
#include "model/half.hpp"

namespace ember::gpu {

namespace {

// y[rows, n] (leading dim ldy) = bias broadcast over rows, so a following GEMM can accumulate.
void fill_rows(float* y, int64_t rows, int64_t n, int64_t ldy, const float* bias) {
  parallel_for(rows, rows * n > 65536,
               [&](int64_t r) { std::memcpy(y + r * ldy, bias, static_cast<size_t>(n) * sizeof(float)); });
}

// col[(c*kh + i)*kw + j][oh*wo + ow] = x[c][oh*s - p + i*d][ow*s - p + j*d], zero outside the image.
// Rows of col are `ldcol` floats apart (ho*wo for one image; B*ho*wo when images sit side by side).
void im2col(const float* x, int64_t channels, int64_t h, int64_t w, const LayerAttrs& a, int64_t ho, int64_t wo,
            float* col, int64_t ldcol) {
  const int64_t kh = a.kernel[0], kw = a.kernel[1];
  parallel_for(channels * kh, channels * kh * kw * ho * wo > 32768, [&](int64_t ci) {
    const int64_t c = ci / kh, i = ci % kh;
    for (int64_t j = 0; j < kw; ++j) {
      float* dst = col + ((c * kh + i) * kw + j) * ldcol;
      const float* src = x + c * h * w;
      for (int64_t oh = 0; oh < ho; ++oh) {
        const int64_t ih = oh * a.stride[0] - a.padding[0] + i * a.dilation[0];
        float* row = dst + oh * wo;
        if (ih < 0 || ih >= h) {
          std::memset(row, 0, static_cast<size_t>(wo) * sizeof(float));
          continue;
        }
        const float* in_row = src + ih * w;
        const int64_t off = j * a.dilation[1] - a.padding[1];
        if (a.stride[1] == 1) {
          // Contiguous run: zero the out-of-image ends, copy the middle.
          const int64_t lo = std::clamp<int64_t>(-off, 0, wo), hi = std::clamp<int64_t>(w - off, 0, wo);
          for (int64_t ow = 0; ow < lo; ++ow) row[ow] = 0.f;
          if (hi > lo) std::memcpy(row + lo, in_row + lo + off, static_cast<size_t>(hi - lo) * sizeof(float));
          for (int64_t ow = std::max(hi, lo); ow < wo; ++ow) row[ow] = 0.f;
        } else {
          for (int64_t ow = 0; ow < wo; ++ow) {
            const int64_t iw = ow * a.stride[1] + off;
            row[ow] = (iw >= 0 && iw < w) ? in_row[iw] : 0.f;
          }
        }
      }
    }
  });
}

// y[r, :] = value[r] for r < rows (row length n): per-channel biases before a GEMM accumulates.
void fill_rows_with(float* y, int64_t rows, int64_t n, const float* value) {
  parallel_for(rows, rows * n > 65536, [&](int64_t r) { std::fill(y + r * n, y + (r + 1) * n, value[r]); });
}

// attention's key-padding mask [batch, seq], any dtype: a key is kept where its element is nonzero.
struct KeyMask {
  const uint8_t* data = nullptr;
  DType dtype = DType::u8;
  bool keep(int64_t i) const {
    switch (dtype) {
      case DType::f32: return reinterpret_cast<const float*>(data)[i] != 0.f;
      case DType::f16:
      case DType::bf16: return (reinterpret_cast<const uint16_t*>(data)[i] & 0x7fff) != 0;  // +-0 pads
      case DType::i64: return reinterpret_cast<const int64_t*>(data)[i] != 0;
      case DType::i32: return reinterpret_cast<const int32_t*>(data)[i] != 0;
      default: return data[i] != 0;
    }
  }
};

// softmax_row over the first `valid` of n scores, with the keys the mask drops (key j is element
// first_key + j of the mask) at probability 0; a row with no key left is all zeros (ops.hpp).
void masked_softmax_row(float* row, int64_t n, int64_t valid, const KeyMask& mask, int64_t first_key) {
  float max = -std::numeric_limits<float>::infinity();
  bool any = false;
  for (int64_t j = 0; j < valid; ++j) {
    if (!mask.keep(first_key + j)) continue;
    max = std::max(max, row[j]);
    any = true;
  }
  float sum = 0.f;
  for (int64_t j = 0; j < n; ++j) {
    row[j] = any && j < valid && mask.keep(first_key + j) ? std::exp(row[j] - max) : 0.f;
    sum += row[j];
  }
  if (!any) return;
  const float inv = 1.f / sum;
  for (int64_t j = 0; j < valid; ++j) row[j] *= inv;
}

}  // namespace

void cpu_linear(const CpuKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const int64_t m = k.in_shape(0).numel() / a.in_features;
  const int64_t n = a.out_features, kk = a.in_features;
  const float* bias = k.w_f32(1);
  float* y = k.out_f32();
  if (bias) fill_rows(y, m, n, n, bias);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(kk),
              1.f, k.in_f32(0), static_cast<int>(kk), k.w_f32(0), static_cast<int>(kk), bias ? 1.f : 0.f, y,
              static_cast<int>(n));
}

void cpu_conv2d(const CpuKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const Shape& ys = k.args->output.desc.shape;
  const int64_t batch = xs[0], c = xs[1], h = xs[2], w = xs[3];
  const int64_t o = ys[1], ho = ys[2], wo = ys[3], hw = ho * wo;
  const int64_t g = a.groups, cg = c / g, og = o / g;
  const int64_t kdim = cg * a.kernel[0] * a.kernel[1];
  const float* bias = k.w_f32(1);
  auto gemm = [&](int64_t m, int64_t n, const float* wt, const float* cols, float* y, int64_t ld) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(kdim), 1.f, wt, static_cast<int>(kdim), cols, static_cast<int>(ld), bias ? 1.f : 0.f, y,
                static_cast<int>(ld));
  };

  const ConvPlan plan = conv_plan(a, xs);
  if (plan == ConvPlan::depthwise) return cpu_conv2d_depthwise(k);
  if (plan == ConvPlan::batched) {
    const int64_t cols = batch * hw;
    float* col = k.ws_f32();
    float* acc = col + kdim * cols;
    for (int64_t b = 0; b < batch; ++b) im2col(k.in_f32(0) + b * c * h * w, c, h, w, a, ho, wo, col + b * hw, cols);
    if (bias) fill_rows_with(acc, o, cols, bias);
    gemm(o, cols, k.w_f32(0), col, acc, cols);
    parallel_for(batch * o, o * cols > 65536, [&](int64_t bo) {
      const int64_t b = bo / o, oc = bo % o;
      std::memcpy(k.out_f32() + bo * hw, acc + oc * cols + b * hw, static_cast<size_t>(hw) * sizeof(float));
    });
    return;
  }
  for (int64_t b = 0; b < batch; ++b) {
    const float* x = k.in_f32(0) + b * c * h * w;
    float* y = k.out_f32() + b * o * hw;
    if (bias) fill_rows_with(y, o, hw, bias);
    for (int64_t gi = 0; gi < g; ++gi) {
      const float* xg = x + gi * cg * h * w;
      const float* cols = xg;  // pointwise: the image itself is the [cg, h*w] matrix
      if (plan == ConvPlan::per_image) {
        im2col(xg, cg, h, w, a, ho, wo, k.ws_f32(), hw);
        cols = k.ws_f32();
      }
      gemm(og, hw, k.w_f32(0) + gi * og * kdim, cols, y + gi * og * hw, hw);
    }
  }
}

// Multi-head self-attention as torch.nn.MultiheadAttention(batch_first=True) computes it:
//   qkv = x W_in^T + b_in;  per head h: P = softmax(Q_h K_h^T / sqrt(d) [+ causal mask]);  ctx_h = P V_h
// A key-padding mask (the optional second input, key_padding_mask's complement: nonzero = keep)
// drops keys from every query's softmax; a query with every key dropped gets a zero context.
//   y = ctx W_out^T + b_out
// Workspace: qkv [B*S, 3E] | ctx [B*S, E] | scores [slices, S, S]; slices of (batch, head) run in
// parallel, one score matrix per thread.
void cpu_attention(const CpuKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const int64_t batch = xs[0], seq = xs[1], e = a.embed_dim, heads = a.num_heads, d = e / heads;
  float* qkv = k.ws_f32();
  float* ctx = qkv + batch * seq * 3 * e;
  float* scores = ctx + batch * seq * e;
  const int64_t rows = batch * seq;
  KeyMask mask;
  if (k.args->num_inputs == 2) mask = KeyMask{k.inputs[1], k.args->inputs[1].desc.dtype};

  if (k.w_f32(1)) fill_rows(qkv, rows, 3 * e, 3 * e, k.w_f32(1));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(3 * e),
              static_cast<int>(e), 1.f, k.in_f32(0), static_cast<int>(e), k.w_f32(0), static_cast<int>(e),
              k.w_f32(1) ? 1.f : 0.f, qkv, static_cast<int>(3 * e));

  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  const int64_t slices = std::min<int64_t>(batch * heads, kAttentionParallelSlices);
  const int threads = static_cast<int>(std::min<int64_t>(slices, omp_get_max_threads()));
  // One (image, head) slice; `p` is the calling thread's seq x seq scores.
  auto slice = [&](int64_t bh, float* p) {
    const int64_t b = bh / heads, h = bh % heads;
    const float* q = qkv + b * seq * 3 * e + h * d;
    const float* kmat = q + e;
    const float* v = q + 2 * e;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(seq), static_cast<int>(seq),
                static_cast<int>(d), scale, q, static_cast<int>(3 * e), kmat, static_cast<int>(3 * e), 0.f, p,
                static_cast<int>(seq));
    for (int64_t i = 0; i < seq; ++i) {
      if (mask.data) masked_softmax_row(p + i * seq, seq, a.causal ? i + 1 : seq, mask, b * seq);
      else softmax_row(p + i * seq, seq, a.causal ? i + 1 : seq);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(seq), static_cast<int>(d),
                static_cast<int>(seq), 1.f, p, static_cast<int>(seq), v, static_cast<int>(3 * e), 0.f,
                ctx + b * seq * e + h * d, static_cast<int>(e));
  };
  if (threads < 2) {  // no parallel region at all (cpu_parallel.hpp says why)
    for (int64_t bh = 0; bh < batch * heads; ++bh) slice(bh, scores);
  } else {
#pragma omp parallel num_threads(threads)
    {
      float* p = scores + static_cast<int64_t>(omp_get_thread_num()) * seq * seq;
#pragma omp for schedule(dynamic)
      for (int64_t bh = 0; bh < batch * heads; ++bh) slice(bh, p);
    }
  }

  float* y = k.out_f32();
  if (k.w_f32(3)) fill_rows(y, rows, e, e, k.w_f32(3));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(e),
              static_cast<int>(e), 1.f, ctx, static_cast<int>(e), k.w_f32(2), static_cast<int>(e),
              k.w_f32(3) ? 1.f : 0.f, y, static_cast<int>(e));
}

void cpu_embedding(const CpuKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& ids_shape = k.in_shape(0);
  const int64_t n = ids_shape.numel(), dim = a.embedding_dim, seq = ids_shape.last();
  const bool wide = k.args->inputs[0].desc.dtype == DType::i64;
  const auto* ids64 = reinterpret_cast<const int64_t*>(k.inputs[0]);
  const auto* ids32 = reinterpret_cast<const int32_t*>(k.inputs[0]);
  const float* table = k.w_f32(0);
  const auto* half = reinterpret_cast<const uint16_t*>(k.weights[0]);  // a float16 / bfloat16 table
  const DType width = k.args->weights[0].desc.dtype;
  float* y = k.out_f32();
  parallel_for(n, n * dim > 65536, [&](int64_t i) {
    const int64_t id = a.positional ? i % seq : (wide ? ids64[i] : ids32[i]);
    float* row = y + i * dim;
    if (id < 0 || id >= a.num_embeddings) {
      std::memset(row, 0, static_cast<size_t>(dim) * sizeof(float));
    } else if (width == DType::f16) {
      for (int64_t j = 0; j < dim; ++j) row[j] = f16_to_f32(half[id * dim + j]);
    } else if (width == DType::bf16) {
      for (int64_t j = 0; j < dim; ++j) row[j] = bf16_to_f32(half[id * dim + j]);
    } else {
      std::memcpy(row, table + id * dim, static_cast<size_t>(dim) * sizeof(float));
    }
  });
}

// numpy matmul: per output batch index, C[m, n] = A[m, k] B[k, n] with A and B found through
// their broadcast batch strides. When B has one matrix for every batch and A's batches are
// contiguous, the batches stack into one GEMM of batch * m rows (x @ W).
void cpu_matmul(const CpuKernelArgs& k) {
  const Shape& as = k.in_shape(0);
  const Shape& bs = k.in_shape(1);
  const int64_t m = as.rank == 1 ? 1 : as[as.rank - 2], kk = as.last(), n = bs.rank == 1 ? 1 : bs.last();
  const int ra = std::max(as.rank - 2, 0), rb = std::max(bs.rank - 2, 0), rank = std::max(ra, rb);
  int64_t batch_dims[Shape::kMaxRank], sa[Shape::kMaxRank], sb[Shape::kMaxRank];
  int64_t batch = 1, stride_a = m * kk, stride_b = kk * n;
  for (int i = rank - 1; i >= 0; --i) {
    const int ia = ra - rank + i, ib = rb - rank + i;
    const int64_t da = ia >= 0 ? as[ia] : 1, db = ib >= 0 ? bs[ib] : 1;
    batch_dims[i] = std::max(da, db);
    sa[i] = da == 1 ? 0 : stride_a;
    sb[i] = db == 1 ? 0 : stride_b;
    stride_a *= da;
    stride_b *= db;
    batch *= batch_dims[i];
  }
  float* y = k.out_f32();
  if (m * n * batch == 0) return;
  if (kk == 0) {
    std::fill(y, y + batch * m * n, 0.f);
    return;
  }
  auto gemm = [&](int64_t rows, const float* a, const float* b, float* c) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(n),
                static_cast<int>(kk), 1.f, a, static_cast<int>(kk), b, static_cast<int>(n), 0.f, c, static_cast<int>(n));
  };
  bool b_shared = true, a_dense = true;
  for (int i = 0; i < rank; ++i) b_shared = b_shared && sb[i] == 0, a_dense = a_dense && (sa[i] != 0 || batch_dims[i] == 1);
  if (b_shared && a_dense) return gemm(batch * m, k.in_f32(0), k.in_f32(1), y);
  for (int64_t t = 0; t < batch; ++t) {
    int64_t oa = 0, ob = 0;
    int64_t rest = t;
    for (int i = rank - 1; i >= 0; --i) {
      const int64_t j = rest % batch_dims[i];
      rest /= batch_dims[i];
      oa += j * sa[i];
      ob += j * sb[i];
    }
    gemm(m, k.in_f32(0) + oa, k.in_f32(1) + ob, y + t * m * n);
  }
}

// Transposed convolution as torch's: per image and group, columns = W_g^T x_g ([out/g * kh * kw,
// h * w], one GEMM into the workspace), then col2im adds each column into the output positions
// oh = ih * stride - padding + i * dilation (likewise ow), skipping those outside.
void cpu_conv_transpose2d(const CpuKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const Shape& ys = k.args->output.desc.shape;
  const int64_t batch = xs[0], c = xs[1], h = xs[2], w = xs[3];
  const int64_t o = ys[1], ho = ys[2], wo = ys[3];
  const int64_t g = a.groups, cg = c / g, og = o / g, kh = a.kernel[0], kw = a.kernel[1];
  const int64_t rows = og * kh * kw, hw = h * w;
  const float* bias = k.w_f32(1);
  float* col = k.ws_f32();
  for (int64_t b = 0; b < batch; ++b) {
    float* y = k.out_f32() + b * o * ho * wo;
    if (bias) fill_rows_with(y, o, ho * wo, bias);
    else std::fill(y, y + o * ho * wo, 0.f);
    for (int64_t gi = 0; gi < g; ++gi) {
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(hw),
                  static_cast<int>(cg), 1.f, k.w_f32(0) + gi * cg * rows, static_cast<int>(rows),
                  k.in_f32(0) + (b * c + gi * cg) * hw, static_cast<int>(hw), 0.f, col, static_cast<int>(hw));
      parallel_for(og, og * kh * kw * hw > 32768, [&](int64_t oc) {  // one output plane per task
        float* plane = y + (gi * og + oc) * ho * wo;
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j) {
            const float* src = col + ((oc * kh + i) * kw + j) * hw;
            for (int64_t ih = 0; ih < h; ++ih) {
              const int64_t oh = ih * a.stride[0] - a.padding[0] + i * a.dilation[0];
              if (oh < 0 || oh >= ho) continue;
              for (int64_t iw = 0; iw < w; ++iw) {
                const int64_t ow = iw * a.stride[1] - a.padding[1] + j * a.dilation[1];
                if (ow >= 0 && ow < wo) plane[oh * wo + ow] += src[ih * w + iw];
              }
            }
          }
      });
    }
  }
}

}  // namespace ember::gpu
