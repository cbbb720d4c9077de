// CPU kernels that work element by element or row by row: activations, residual add, and the
// normalisations (batch norm, layer norm, softmax).
#include <algorithm>
#include <cmath>

#include "gpu/cpu_parallel.hpp"
#include "gpu/cpu_vector_math.hpp"
#include "gpu/kernels_cpu.hpp"

namespace ember::gpu {

namespace {

constexpr int64_t kParallelElements = 1 << 15;  // below this, threads cost more than they save

EMBER_SIMD_CLONES void relu_span(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

EMBER_SIMD_CLONES void gelu_erf_span(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.f + erff(x[i] * 0.70710678118654752f));
}

EMBER_SIMD_CLONES void gelu_tanh_span(const float* x, float* y, int64_t n) {
  constexpr float kAlpha = 0.79788456080286536f;  // sqrt(2 / pi)
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.f + tanhf(kAlpha * (v + 0.044715f * v * v * v)));
  }
}

EMBER_SIMD_CLONES void tanh_span(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = tanhf(x[i]);
}

EMBER_SIMD_CLONES void add_span(const float* a, const float* b, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

EMBER_SIMD_CLONES void exp_span(float* x, int64_t n, float shift, float& sum) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) {
    x[i] = expf(x[i] - shift);
    s += x[i];
  }
  sum = s;
}

// Runs fn(begin, end) over [0, n) in chunks on the device's threads.
template <class Fn>
void parallel_chunks(int64_t n, Fn&& fn) {
  constexpr int64_t kChunk = 1 << 14;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(chunks, n > kParallelElements, [&](int64_t c) { fn(c * kChunk, std::min(n, (c + 1) * kChunk)); });
}

// y = x - max - log(sum(exp(x - max))) over one contiguous row: log-softmax without the
// underflow of log(softmax(x)).
void log_softmax_row(const float* x, float* y, int64_t n) {
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = std::max(max, x[i]);
  std::copy(x, x + n, y);
  float sum = 0.f;
  exp_span(y, n, max, sum);
  const float shift = max + std::log(sum);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] - shift;
}

}  // namespace

void softmax_row(float* row, int64_t n, int64_t valid) {
  float max = row[0];
  for (int64_t i = 1; i < valid; ++i) max = std::max(max, row[i]);
  float sum = 0.f;
  exp_span(row, valid, max, sum);
  const float inv = 1.f / sum;
  for (int64_t i = 0; i < valid; ++i) row[i] *= inv;
  for (int64_t i = valid; i < n; ++i) row[i] = 0.f;
}

void cpu_relu(const CpuKernelArgs& k) {
  parallel_chunks(k.in_shape(0).numel(), [&](int64_t b, int64_t e) { relu_span(k.in_f32(0) + b, k.out_f32() + b, e - b); });
}

void cpu_gelu(const CpuKernelArgs& k) {
  const bool approx = k.attrs().tanh_approximation;
  parallel_chunks(k.in_shape(0).numel(), [&](int64_t b, int64_t e) {
    if (approx) gelu_tanh_span(k.in_f32(0) + b, k.out_f32() + b, e - b);
    else gelu_erf_span(k.in_f32(0) + b, k.out_f32() + b, e - b);
  });
}

void cpu_tanh(const CpuKernelArgs& k) {
  parallel_chunks(k.in_shape(0).numel(), [&](int64_t b, int64_t e) { tanh_span(k.in_f32(0) + b, k.out_f32() + b, e - b); });
}

void cpu_add(const CpuKernelArgs& k) {
  parallel_chunks(k.in_shape(0).numel(),
                  [&](int64_t b, int64_t e) { add_span(k.in_f32(0) + b, k.in_f32(1) + b, k.out_f32() + b, e - b); });
}

void cpu_batch_norm(const CpuKernelArgs& k) {
  const Shape& s = k.in_shape(0);
  const int64_t batch = s[0], channels = s[1], inner = s.prod(2, s.rank);
  const float eps = k.attrs().eps;
  const float *w = k.w_f32(0), *bias = k.w_f32(1), *mean = k.w_f32(2), *var = k.w_f32(3);
  parallel_for(batch * channels, s.numel() > kParallelElements, [&](int64_t nc) {
    const int64_t c = nc % channels;
    const float scale = w[c] / std::sqrt(var[c] + eps);
    const float shift = bias[c] - mean[c] * scale;
    const float* x = k.in_f32(0) + nc * inner;
    float* y = k.out_f32() + nc * inner;
#pragma omp simd
    for (int64_t i = 0; i < inner; ++i) y[i] = x[i] * scale + shift;
  });
}

void cpu_layer_norm(const CpuKernelArgs& k) {
  const int64_t n = k.attrs().num_features;
  const int64_t rows = k.in_shape(0).numel() / n;
  const float eps = k.attrs().eps;
  const float *w = k.w_f32(0), *bias = k.w_f32(1);
  parallel_for(rows, rows * n > kParallelElements, [&](int64_t r) {
    const float* x = k.in_f32(0) + r * n;
    float* y = k.out_f32() + r * n;
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) sum += x[i];
    const float mean = sum / static_cast<float>(n);
    float sq = 0.f;
#pragma omp simd reduction(+ : sq)
    for (int64_t i = 0; i < n; ++i) sq += (x[i] - mean) * (x[i] - mean);
    const float rstd = 1.f / std::sqrt(sq / static_cast<float>(n) + eps);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * rstd * w[i] + bias[i];
  });
}

void cpu_softmax(const CpuKernelArgs& k) {
  const Shape& s = k.in_shape(0);
  const int dim = k.attrs().dim < 0 ? k.attrs().dim + s.rank : k.attrs().dim;
  const int64_t outer = s.prod(0, dim), n = s[dim], inner = s.prod(dim + 1, s.rank);
  const float* x = k.in_f32(0);
  float* y = k.out_f32();
  const bool log = k.attrs().log;
  if (inner == 1) {
    parallel_for(outer, outer * n > kParallelElements, [&](int64_t r) {
      if (log) return log_softmax_row(x + r * n, y + r * n, n);
      std::copy(x + r * n, x + (r + 1) * n, y + r * n);
      softmax_row(y + r * n, n, n);
    });
    return;
  }
  // Strided: softmax along a middle dim, column by column.
  parallel_for(outer * inner, outer * n * inner > kParallelElements, [&](int64_t oi) {
    const int64_t o = oi / inner, in = oi % inner;
    const float* xc = x + o * n * inner + in;
    float* yc = y + o * n * inner + in;
    float max = xc[0];
    for (int64_t i = 1; i < n; ++i) max = std::max(max, xc[i * inner]);
    float sum = 0.f;
    for (int64_t i = 0; i < n; ++i) sum += (yc[i * inner] = std::exp(xc[i * inner] - max));
    if (log) {
      const float shift = max + std::log(sum);
      for (int64_t i = 0; i < n; ++i) yc[i * inner] = xc[i * inner] - shift;
      return;
    }
    for (int64_t i = 0; i < n; ++i) yc[i * inner] /= sum;
  });
}

}  // namespace ember::gpu
