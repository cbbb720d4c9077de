// CUDA kernels built on matrix products: linear, matmul, conv2d (im2col + cuBLAS, or direct for
// grouped convolutions), conv_transpose2d (cuBLAS + col2im, or direct for grouped ones), attention,
// and embedding. Mirrors kernels_cpu_dense.cpp.
#include <algorithm>
#include <cmath>

#include "gpu/cuda/cuda_kernels.hpp"

namespace ember::gpu::cuda {

namespace {

// One image's convolution geometry (per group: `channels` input channels).
struct ConvGeometry {
  int64_t channels, h, w;  // input plane
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t ho, wo;  // output plane
};

ConvGeometry geometry(const LayerAttrs& a, int64_t channels, const Shape& xs, const Shape& ys) {
  return {channels,      xs[2],         xs[3],         a.kernel[0],   a.kernel[1], a.stride[0], a.stride[1],
          a.padding[0],  a.padding[1],  a.dilation[0], a.dilation[1], ys[2],       ys[3]};
}

// col[(c*kh + i)*kw + j][oh*wo + ow] = x[c][oh*sh - ph + i*dh][ow*sw - pw + j*dw], zero outside the
// image: the CPU's im2col layout, so the GEMM that follows is the same.
__global__ void im2col_kernel(const float* x, ConvGeometry g, float* col) {
  const int64_t total = g.channels * g.kh * g.kw * g.ho * g.wo;
  EMBER_GRID_LOOP(idx, total) {
    int64_t t = idx;
    const int64_t ow = t % g.wo; t /= g.wo;
    const int64_t oh = t % g.ho; t /= g.ho;
    const int64_t j = t % g.kw; t /= g.kw;
    const int64_t i = t % g.kh;
    const int64_t c = t / g.kh;
    const int64_t ih = oh * g.sh - g.ph + i * g.dh, iw = ow * g.sw - g.pw + j * g.dw;
    col[idx] = (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w) ? x[(c * g.h + ih) * g.w + iw] : 0.f;
  }
}

// Grouped convolution computed directly, one thread per output element: with groups > 1 the
// per-group GEMMs are small (depthwise: 1 x kh*kw) and one launch beats batch * groups of them.
// y[b][oc][oh][ow] = bias[oc] + sum over c < cg, i, j of w[oc][c][i][j] * x[b][g*cg + c][ih][iw].
__global__ void grouped_conv_kernel(const float* x, const float* wt, const float* bias, float* y, int64_t batch,
                                    int64_t in_channels, int64_t out_channels, int64_t groups, ConvGeometry g) {
  const int64_t cg = in_channels / groups, og = out_channels / groups;
  const int64_t total = batch * out_channels * g.ho * g.wo;
  EMBER_GRID_LOOP(idx, total) {
    int64_t t = idx;
    const int64_t ow = t % g.wo; t /= g.wo;
    const int64_t oh = t % g.ho; t /= g.ho;
    const int64_t oc = t % out_channels;
    const int64_t b = t / out_channels;
    const int64_t gi = oc / og;
    float acc = 0.f;
    for (int64_t c = 0; c < cg; ++c) {
      const float* plane = x + ((b * in_channels) + gi * cg + c) * g.h * g.w;
      const float* kernel = wt + (oc * cg + c) * g.kh * g.kw;
      for (int64_t i = 0; i < g.kh; ++i) {
        const int64_t ih = oh * g.sh - g.ph + i * g.dh;
        if (ih < 0 || ih >= g.h) continue;
        for (int64_t j = 0; j < g.kw; ++j) {
          const int64_t iw = ow * g.sw - g.pw + j * g.dw;
          if (iw >= 0 && iw < g.w) acc += kernel[i * g.kw + j] * plane[ih * g.w + iw];
        }
      }
    }
    y[idx] = bias ? bias[oc] + acc : acc;
  }
}

// y[b][oc][:] = bias[oc] for an output of `total` elements with planes of `plane` elements.
__global__ void fill_channels_kernel(float* y, int64_t total, int64_t plane, int64_t channels, const float* bias) {
  EMBER_GRID_LOOP(i, total) y[i] = bias[(i / plane) % channels];
}

// Transposed convolution of one image from its columns col[(oc*kh + i)*kw + j][ih*w + iw] = sum over
// c of w[c][oc][i][j] x[c][ih][iw] (groups 1), gathered per output element so that no two threads
// write one address: output (oh, ow) receives tap (i, j) of input (ih, iw) when
// oh = ih*sh - ph + i*dh (and the same for w). g.channels is the output channels here.
__global__ void col2im_kernel(const float* col, const float* bias, float* y, ConvGeometry g) {
  EMBER_GRID_LOOP(idx, g.channels * g.ho * g.wo) {
    const int64_t ow = idx % g.wo, oh = (idx / g.wo) % g.ho, oc = idx / (g.wo * g.ho);
    float acc = bias ? bias[oc] : 0.f;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t th = oh + g.ph - i * g.dh;
      if (th < 0 || th % g.sh || th / g.sh >= g.h) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t tw = ow + g.pw - j * g.dw;
        if (tw < 0 || tw % g.sw || tw / g.sw >= g.w) continue;
        acc += col[((oc * g.kh + i) * g.kw + j) * g.h * g.w + (th / g.sh) * g.w + tw / g.sw];
      }
    }
    y[idx] = acc;
  }
}

// Grouped transposed convolution, one thread per output element (the per-group GEMMs of a
// depthwise layer would be 1 x kh*kw): w is [in_channels, out_channels / groups, kh, kw].
__global__ void grouped_conv_transpose_kernel(const float* x, const float* wt, const float* bias, float* y,
                                              int64_t batch, int64_t in_channels, int64_t out_channels, int64_t groups,
                                              ConvGeometry g) {
  const int64_t cg = in_channels / groups, og = out_channels / groups;
  EMBER_GRID_LOOP(idx, batch * out_channels * g.ho * g.wo) {
    int64_t t = idx;
    const int64_t ow = t % g.wo; t /= g.wo;
    const int64_t oh = t % g.ho; t /= g.ho;
    const int64_t oc = t % out_channels, b = t / out_channels;
    const int64_t gi = oc / og, ol = oc % og;
    float acc = bias ? bias[oc] : 0.f;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t th = oh + g.ph - i * g.dh;
      if (th < 0 || th % g.sh || th / g.sh >= g.h) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t tw = ow + g.pw - j * g.dw;
        if (tw < 0 || tw % g.sw || tw / g.sw >= g.w) continue;
        const int64_t pixel = (th / g.sh) * g.w + tw / g.sw;
        for (int64_t c = 0; c < cg; ++c) {
          const int64_t ic = gi * cg + c;
          acc += x[(b * in_channels + ic) * g.h * g.w + pixel] * wt[((ic * og + ol) * g.kh + i) * g.kw + j];
        }
      }
    }
    y[idx] = acc;
  }
}

template <class Id>
__global__ void embedding_kernel(const Id* ids, const float* table, float* y, int64_t n, int64_t dim, int64_t rows,
                                 int64_t seq, bool positional) {
  EMBER_GRID_LOOP(idx, n * dim) {
    const int64_t i = idx / dim, j = idx % dim;
    const int64_t id = positional ? i % seq : static_cast<int64_t>(ids[i]);
    y[idx] = (id >= 0 && id < rows) ? table[id * dim + j] : 0.f;
  }
}

}  // namespace

CudaKernelStatus cuda_linear(const CudaKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const int64_t m = k.in_shape(0).numel() / a.in_features;
  const int64_t n = a.out_features, kk = a.in_features;
  const float* bias = k.w_f32(1);
  float* y = k.out_f32();
  if (bias) EMBER_CUDA_TRY(fill_rows(y, m, n, bias, k.stream));
  return gemm_rm(k.blas, false, true, m, n, kk, 1.f, k.in_f32(0), kk, k.w_f32(0), kk, bias ? 1.f : 0.f, y, n);
}

CudaKernelStatus cuda_conv2d(const CudaKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const Shape& ys = k.out_shape();
  const int64_t batch = xs[0], c = xs[1], h = xs[2], w = xs[3];
  const int64_t o = ys[1], ho = ys[2], wo = ys[3];
  const float* bias = k.w_f32(1);
  float* y = k.out_f32();
  const int64_t total = batch * o * ho * wo;
  if (total == 0) return {};

  if (a.groups > 1) {
    grouped_conv_kernel<<<grid_for(total), kBlock, 0, k.stream>>>(k.in_f32(0), k.w_f32(0), bias, y, batch, c, o,
                                                                  a.groups, geometry(a, c / a.groups, xs, ys));
    return launched("grouped_conv_kernel");
  }

  // groups == 1: y_b[o, ho*wo] = W[o, kdim] cols_b[kdim, ho*wo] (+ bias), as the CPU does.
  if (bias) {
    fill_channels_kernel<<<grid_for(total), kBlock, 0, k.stream>>>(y, total, ho * wo, o, bias);
    EMBER_CUDA_TRY(launched("fill_channels_kernel"));
  }
  const float beta = bias ? 1.f : 0.f;
  // A 1x1, stride 1, unpadded convolution is a GEMM on the image (conv_plan() may have sized scratch
  // for the CPU's batched plan; it is simply not used here).
  const bool pointwise = a.kernel[0] == 1 && a.kernel[1] == 1 && a.stride[0] == 1 && a.stride[1] == 1 &&
                         a.padding[0] == 0 && a.padding[1] == 0;
  if (pointwise) {
    return gemm_rm(k.blas, false, false, o, h * w, c, 1.f, k.w_f32(0), c, k.in_f32(0), h * w, beta, y, h * w, batch,
                   /*stride_a=*/0, /*stride_b=*/c * h * w, /*stride_c=*/o * h * w);
  }
  const ConvGeometry g = geometry(a, c, xs, ys);
  const int64_t kdim = c * a.kernel[0] * a.kernel[1], cols = ho * wo;
  float* col = k.ws_f32();  // [kdim, ho*wo]: one image at a time; workspace_bytes() gives at least that
  for (int64_t b = 0; b < batch; ++b) {
    im2col_kernel<<<grid_for(kdim * cols), kBlock, 0, k.stream>>>(k.in_f32(0) + b * c * h * w, g, col);
    EMBER_CUDA_TRY(launched("im2col_kernel"));
    EMBER_CUDA_TRY(gemm_rm(k.blas, false, false, o, cols, kdim, 1.f, k.w_f32(0), kdim, col, cols, beta,
                           y + b * o * cols, cols));
  }
  return {};
}

// numpy matmul: the batch dims broadcast, a 1-d operand is promoted (infer_output dropped its dim
// from the output, which changes no offsets). When each operand's batch offset is linear in the
// output's batch index (equal batch dims, or broadcast across all of them) the batch is one strided
// cuBLAS call; otherwise (e.g. [2, 1] against [1, 3] batch dims) one GEMM per output matrix.
CudaKernelStatus cuda_matmul(const CudaKernelArgs& k) {
  Shape sa = k.in_shape(0), sb = k.in_shape(1);
  if (sa.rank == 1) sa = Shape{1, sa[0]};
  if (sb.rank == 1) sb = Shape{sb[0], 1};
  const int64_t m = sa[sa.rank - 2], kk = sa.last(), n = sb.last();
  Shape ba, bb, batch_shape;
  ba.rank = sa.rank - 2, bb.rank = sb.rank - 2;
  for (int i = 0; i < ba.rank; ++i) ba[i] = sa[i];
  for (int i = 0; i < bb.rank; ++i) bb[i] = sb[i];
  batch_shape.rank = std::max(ba.rank, bb.rank);
  int64_t strides[2][Shape::kMaxRank] = {};
  broadcast_strides(ba, batch_shape.rank, strides[0]);
  broadcast_strides(bb, batch_shape.rank, strides[1]);
  for (int i = 0; i < batch_shape.rank; ++i) {
    const int ia = ba.rank - batch_shape.rank + i, ib = bb.rank - batch_shape.rank + i;
    batch_shape[i] = std::max(ia >= 0 ? ba[ia] : 1, ib >= 0 ? bb[ib] : 1);
    strides[0][i] *= m * kk;
    strides[1][i] *= kk * n;
  }
  const int64_t batch = batch_shape.numel();
  float* y = k.out_f32();
  if (batch * m * n == 0) return {};
  if (kk == 0) {
    return cuda_call(cudaMemsetAsync(y, 0, k.args->output.desc.bytes(), k.stream), "cudaMemsetAsync");
  }
  const IndexMap<2> map = make_index_map(batch_shape, strides);
  if (map.rank <= 1) {
    return gemm_rm(k.blas, false, false, m, n, kk, 1.f, k.in_f32(0), kk, k.in_f32(1), n, 0.f, y, n, batch,
                   map.rank ? map.strides[0][0] : 0, map.rank ? map.strides[1][0] : 0, m * n);
  }
  for (int64_t b = 0; b < batch; ++b) {
    int64_t t = b, off_a = 0, off_b = 0;
    for (int d = map.rank - 1; d >= 0; --d) {
      const int64_t c = t % map.dims[d];
      t /= map.dims[d];
      off_a += c * map.strides[0][d], off_b += c * map.strides[1][d];
    }
    EMBER_CUDA_TRY(gemm_rm(k.blas, false, false, m, n, kk, 1.f, k.in_f32(0) + off_a, kk, k.in_f32(1) + off_b, n, 0.f,
                           y + b * m * n, n));
  }
  return {};
}

// Transposed convolution (see col2im_kernel). groups 1: per image, col[O*kh*kw, H*W] = W^T x_b
// (W viewed as [C, O*kh*kw]) in the workspace (exactly its size), then col2im adds the bias.
CudaKernelStatus cuda_conv_transpose2d(const CudaKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const Shape& ys = k.out_shape();
  const int64_t batch = xs[0], c = xs[1], h = xs[2], w = xs[3], o = ys[1];
  const float* bias = k.w_f32(1);
  float* y = k.out_f32();
  const int64_t total = batch * o * ys[2] * ys[3];
  if (total == 0) return {};
  if (a.groups > 1) {
    grouped_conv_transpose_kernel<<<grid_for(total), kBlock, 0, k.stream>>>(
        k.in_f32(0), k.w_f32(0), bias, y, batch, c, o, a.groups, geometry(a, c / a.groups, xs, ys));
    return launched("grouped_conv_transpose_kernel");
  }
  const ConvGeometry g = geometry(a, o, xs, ys);
  const int64_t rows = o * a.kernel[0] * a.kernel[1], plane = ys[2] * ys[3];
  float* col = k.ws_f32();
  for (int64_t b = 0; b < batch; ++b) {
    EMBER_CUDA_TRY(gemm_rm(k.blas, true, false, rows, h * w, c, 1.f, k.w_f32(0), rows, k.in_f32(0) + b * c * h * w,
                           h * w, 0.f, col, h * w));
    col2im_kernel<<<grid_for(o * plane), kBlock, 0, k.stream>>>(col, bias, y + b * o * plane, g);
    EMBER_CUDA_TRY(launched("col2im_kernel"));
  }
  return {};
}

// Multi-head self-attention as torch.nn.MultiheadAttention(batch_first=True) computes it (see
// cpu_attention):
//   qkv = x W_in^T + b_in;  per (batch, head): P = softmax(Q K^T / sqrt(d) [+ causal mask]);
//   ctx = P V;  y = ctx W_out^T + b_out.
// Workspace, as the CPU's: qkv [B*S, 3E] | ctx [B*S, E] | scores [slices, S, S]. The (batch, head)
// slices go to cuBLAS in strided batches of at most `slices`: a strided batch needs one stride, so
// it runs along heads for one batch entry (stride d) or along batch entries for one head (stride
// S*3E), whichever has more of them. The optional second input, a [B, S] key-padding mask of any
// dtype (0 = padding), reaches the softmax, which gives masked keys probability 0 (and a query
// whose keys are all masked an all-zero row, so its context is 0 and its output the out-bias).
CudaKernelStatus cuda_attention(const CudaKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const int64_t batch = xs[0], seq = xs[1], e = a.embed_dim, heads = a.num_heads, d = e / heads;
  const int64_t rows = batch * seq;
  if (rows == 0) return {};
  float* qkv = k.ws_f32();
  float* ctx = qkv + rows * 3 * e;
  float* scores = ctx + rows * e;

  const float* in_bias = k.w_f32(1);
  if (in_bias) EMBER_CUDA_TRY(fill_rows(qkv, rows, 3 * e, in_bias, k.stream));
  EMBER_CUDA_TRY(gemm_rm(k.blas, false, true, rows, 3 * e, e, 1.f, k.in_f32(0), e, k.w_f32(0), e,
                         in_bias ? 1.f : 0.f, qkv, 3 * e));

  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  const int64_t slices = std::min<int64_t>(batch * heads, kAttentionParallelSlices);
  const bool along_batch = batch >= heads;
  const int64_t outer = along_batch ? heads : batch, inner = along_batch ? batch : heads;
  const int64_t outer_qkv = along_batch ? d : seq * 3 * e, outer_ctx = along_batch ? d : seq * e;
  const int64_t inner_qkv = along_batch ? seq * 3 * e : d, inner_ctx = along_batch ? seq * e : d;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i0 = 0; i0 < inner; i0 += slices) {
      const int64_t count = std::min(slices, inner - i0);
      const float* q = qkv + o * outer_qkv + i0 * inner_qkv;
      const float* kmat = q + e;
      const float* v = q + 2 * e;
      // P[S, S] = scale * Q[S, d] K[S, d]^T (rows of Q, K, V are 3E apart in qkv).
      EMBER_CUDA_TRY(gemm_rm(k.blas, false, true, seq, seq, d, scale, q, 3 * e, kmat, 3 * e, 0.f, scores, seq, count,
                             inner_qkv, inner_qkv, seq * seq));
      KeyMask mask;
      if (k.args->num_inputs > 1) {
        const DType mt = k.args->inputs[1].desc.dtype;
        mask = {k.inputs[1], dtype_size(mt), mt == DType::f32 || mt == DType::f16 || mt == DType::bf16,
                along_batch ? i0 : o, along_batch ? 1 : 0, seq};
      }
      EMBER_CUDA_TRY(softmax_rows(scores, scores, count * seq, seq, a.causal ? seq : 0, k.stream, mask));
      // ctx[S, d] (row length E) = P[S, S] V[S, d].
      EMBER_CUDA_TRY(gemm_rm(k.blas, false, false, seq, d, seq, 1.f, scores, seq, v, 3 * e, 0.f,
                             ctx + o * outer_ctx + i0 * inner_ctx, e, count, seq * seq, inner_qkv, inner_ctx));
    }
  }

  const float* out_bias = k.w_f32(3);
  float* y = k.out_f32();
  if (out_bias) EMBER_CUDA_TRY(fill_rows(y, rows, e, out_bias, k.stream));
  return gemm_rm(k.blas, false, true, rows, e, e, 1.f, ctx, e, k.w_f32(2), e, out_bias ? 1.f : 0.f, y, e);
}

CudaKernelStatus cuda_embedding(const CudaKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& ids = k.in_shape(0);
  const int64_t n = ids.numel(), dim = a.embedding_dim, seq = ids.last();
  if (n * dim == 0) return {};
  const unsigned grid = grid_for(n * dim);
  if (k.args->inputs[0].desc.dtype == DType::i64) {
    embedding_kernel<<<grid, kBlock, 0, k.stream>>>(static_cast<const int64_t*>(k.inputs[0]), k.w_f32(0),
                                                    k.out_f32(), n, dim, a.num_embeddings, seq, a.positional);
  } else {
    embedding_kernel<<<grid, kBlock, 0, k.stream>>>(static_cast<const int32_t*>(k.inputs[0]), k.w_f32(0),
                                                    k.out_f32(), n, dim, a.num_embeddings, seq, a.positional);
  }
  return launched("embedding_kernel");
}

}  // namespace ember::gpu::cuda
