// CPU kernels that reduce along dims: reduce (every ReduceFn over any set of axes), argmax/argmin,
// topk, and the normalisations group_norm and rms_norm. float32 in; argmax and topk's indices are
// int64. Ties keep the lower index first (argmax's select_last_index: the last); argmax picks the
// first NaN (numpy's argmax and argmin), topk counts NaN as the largest (PyTorch's).
#include <algorithm>
#include <cmath>
#include <limits>

#include "gpu/cpu_parallel.hpp"
#include "gpu/cpu_vector_math.hpp"
#include "gpu/kernels_cpu.hpp"

namespace ember::gpu {

namespace {

constexpr int64_t kParallelElements = 1 << 15;

int axis_of(int64_t axis, int rank) { return static_cast<int>(axis < 0 ? axis + rank : axis); }

// fn over n values, value i read by get(i). Accumulates in double: reductions are short next to the
// ops around them, and the result then does not depend on how the axes were laid out.
template <class Get>
float reduce_values(ReduceFn fn, int64_t n, Get&& get) {
  switch (fn) {
    case ReduceFn::max:
    case ReduceFn::min: {
      float m = get(0);
      for (int64_t i = 1; i < n; ++i) {
        const float v = get(i);
        if (v != v || m != m) m = v != v ? v : m;
        else m = fn == ReduceFn::max ? std::max(m, v) : std::min(m, v);
      }
      return m;
    }
    case ReduceFn::prod: {
      double p = 1;
      for (int64_t i = 0; i < n; ++i) p *= get(i);
      return static_cast<float>(p);
    }
    case ReduceFn::log_sum_exp: {
      if (n == 0) return -std::numeric_limits<float>::infinity();
      float m = get(0);
      for (int64_t i = 1; i < n; ++i) m = std::max(m, get(i));
      if (std::isinf(m)) return m;
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(get(i)) - m);
      return static_cast<float>(m + std::log(s));
    }
    default: break;
  }
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = get(i);
    s += fn == ReduceFn::sum_square || fn == ReduceFn::l2 ? v * v : fn == ReduceFn::l1 ? std::fabs(v) : v;
  }
  if (fn == ReduceFn::mean) s /= static_cast<double>(n);  // an empty mean is NaN, as numpy's
  if (fn == ReduceFn::l2) s = std::sqrt(s);
  return static_cast<float>(s);
}

// The input viewed as [outer, n, inner] around one dim (argmax, topk).
struct AroundDim {
  int64_t outer, n, inner;
  AroundDim(const Shape& s, int d) : outer(s.prod(0, d)), n(s[d]), inner(s.prod(d + 1, s.rank)) {}
};

}  // namespace

// Merges neighbouring dims that are both reduced or both kept; then the common layouts (reduced
// dims last: rows; one reduced block between kept ones: strided columns) read directly, and any
// other set of axes walks the reduced dims of each output element by an odometer.
void cpu_reduce(const CpuKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const auto fn = static_cast<ReduceFn>(a.fn);
  const float* x = k.in_f32(0);
  float* y = k.out_f32();
  uint32_t mask = 0;
  for (int i = 0; i < a.num_axes; ++i) mask |= 1u << axis_of(a.axes[i], xs.rank);
  if (a.num_axes == 0 && !a.noop_with_empty_axes) mask = (1u << xs.rank) - 1;
  int64_t dims[Shape::kMaxRank];
  bool reduced[Shape::kMaxRank];
  int r = 0;
  for (int i = 0; i < xs.rank; ++i) {
    const bool red = mask & (1u << i);
    if (r > 0 && reduced[r - 1] == red) {
      dims[r - 1] *= xs[i];
    } else {
      dims[r] = xs[i];
      reduced[r++] = red;
    }
  }
  const int64_t out_n = k.args->output.desc.shape.numel();
  const bool parallel = xs.numel() > kParallelElements;
  if (r == 0 || (r == 1 && !reduced[0])) {  // nothing reduced
    std::copy(x, x + out_n, y);
    return;
  }
  // [outer?, n, inner?]: at most one reduced block.
  const int first = reduced[0] ? 0 : 1;
  if (r <= 2 || (r == 3 && !reduced[0])) {
    const int64_t n = dims[first], inner = first + 1 < r ? dims[first + 1] : 1;
    parallel_for(out_n, parallel, [&](int64_t o) {
      const float* base = x + (o / inner) * n * inner + o % inner;
      y[o] = reduce_values(fn, n, [&](int64_t i) { return base[i * inner]; });
    });
    return;
  }
  // General: kept and reduced blocks alternate. Strides of each merged dim, then an odometer.
  int64_t strides[Shape::kMaxRank];
  for (int64_t i = r - 1, s = 1; i >= 0; --i) strides[i] = s, s *= dims[i];
  int64_t red_n = 1;
  for (int i = 0; i < r; ++i)
    if (reduced[i]) red_n *= dims[i];
  parallel_for(out_n, parallel, [&](int64_t o) {
    int64_t base = 0, rest = o;
    for (int i = r - 1; i >= 0; --i) {
      if (reduced[i]) continue;
      base += (rest % dims[i]) * strides[i];
      rest /= dims[i];
    }
    y[o] = reduce_values(fn, red_n, [&](int64_t j) {
      int64_t off = base;
      for (int i = r - 1; i >= 0; --i) {
        if (!reduced[i]) continue;
        off += (j % dims[i]) * strides[i];
        j /= dims[i];
      }
      return x[off];
    });
  });
}

void cpu_argmax(const CpuKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const AroundDim v(xs, axis_of(a.dim, xs.rank));
  const bool largest = a.fn == 0, last = a.select_last_index;
  const float* x = k.in_f32(0);
  auto* y = reinterpret_cast<int64_t*>(k.output);
  parallel_for(v.outer * v.inner, xs.numel() > kParallelElements, [&](int64_t t) {
    const float* p = x + (t / v.inner) * v.n * v.inner + t % v.inner;
    int64_t best = 0;
    float bv = p[0];
    for (int64_t i = 1; i < v.n; ++i) {
      const float c = p[i * v.inner];
      if (bv != bv) break;  // a NaN wins and stays (the first one)
      const bool better = c != c || (largest ? (last ? c >= bv : c > bv) : (last ? c <= bv : c < bv));
      if (better) best = i, bv = c;
    }
    y[t] = best;
  });
}

// Each (outer, inner) position sorts the indices of its n values in its own slice of the
// workspace (ops.hpp sizes one int64 per input element) and writes the first k.
void cpu_topk(const CpuKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const AroundDim v(xs, axis_of(a.dim, xs.rank));
  const int64_t kk = a.k;
  const bool largest = a.largest;
  const float* x = k.in_f32(0);
  auto* idx_all = reinterpret_cast<int64_t*>(k.workspace);
  parallel_for(v.outer * v.inner, xs.numel() > kParallelElements, [&](int64_t t) {
    const int64_t o = t / v.inner, in = t % v.inner;
    const float* p = x + o * v.n * v.inner + in;
    int64_t* idx = idx_all + t * v.n;
    for (int64_t i = 0; i < v.n; ++i) idx[i] = i;
    // A strict weak order: NaN first when largest (last when smallest), then by value, then index.
    auto before = [&](int64_t i, int64_t j) {
      const float vi = p[i * v.inner], vj = p[j * v.inner];
      const bool ni = vi != vi, nj = vj != vj;
      if (ni != nj) return largest ? ni : nj;
      if (!ni && vi != vj) return largest ? vi > vj : vi < vj;
      return i < j;
    };
    std::partial_sort(idx, idx + kk, idx + v.n, before);
    for (int64_t i = 0; i < kk; ++i) {
      const int64_t out = (o * kk + i) * v.inner + in;
      if (a.values_output) k.out_f32()[out] = p[idx[i] * v.inner];
      else reinterpret_cast<int64_t*>(k.output)[out] = idx[i];
    }
  });
}

void cpu_group_norm(const CpuKernelArgs& k) {
  const LayerAttrs& a = k.attrs();
  const Shape& xs = k.in_shape(0);
  const int64_t channels = xs[1], groups = a.num_groups, cg = channels / groups, inner = xs.prod(2, xs.rank);
  const int64_t block = cg * inner;
  const float *w = k.w_f32(0), *bias = k.w_f32(1);
  parallel_for(xs[0] * groups, xs.numel() > kParallelElements, [&](int64_t ng) {
    const float* x = k.in_f32(0) + ng * block;
    float* y = k.out_f32() + ng * block;
    double sum = 0;
    for (int64_t i = 0; i < block; ++i) sum += x[i];
    const float mean = static_cast<float>(sum / static_cast<double>(block));
    double sq = 0;
    for (int64_t i = 0; i < block; ++i) sq += static_cast<double>(x[i] - mean) * (x[i] - mean);
    const float rstd = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(block) + a.eps));
    for (int64_t c = 0; c < cg; ++c) {
      const int64_t ch = (ng % groups) * cg + c;
      const float scale = rstd * w[ch], shift = bias[ch] - mean * scale;
      const float* xc = x + c * inner;
      float* yc = y + c * inner;
#pragma omp simd
      for (int64_t i = 0; i < inner; ++i) yc[i] = xc[i] * scale + shift;
    }
  });
}

void cpu_rms_norm(const CpuKernelArgs& k) {
  const int64_t n = k.attrs().num_features;
  const int64_t rows = k.in_shape(0).numel() / n;
  const float eps = k.attrs().eps;
  const float* w = k.w_f32(0);
  parallel_for(rows, rows * n > kParallelElements, [&](int64_t r) {
    const float* x = k.in_f32(0) + r * n;
    float* y = k.out_f32() + r * n;
    float sq = 0.f;
#pragma omp simd reduction(+ : sq)
    for (int64_t i = 0; i < n; ++i) sq += x[i] * x[i];
    const float rms = 1.f / std::sqrt(sq / static_cast<float>(n) + eps);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * rms * w[i];
  });
}

}  // namespace ember::gpu
