#include "importer/fold.hpp"

#include <algorithm>
#include <cmath>

namespace ember::importer {

namespace {

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

int64_t count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Folding may make constants larger than its operands (broadcasting, gathering): at most this many
// elements, or as many as the larger operand.
constexpr int64_t kMaxGrownElements = int64_t{1} << 24;

Status check_growth(const std::vector<int64_t>& dims, int64_t largest_operand) {
  const int64_t n = count(dims);
  if (n > std::max(kMaxGrownElements, largest_operand)) {
    return unsupported("folding would make a constant of " + std::to_string(n) + " elements " + dims_text(dims));
  }
  return Status::OK();
}

// An empty constant of `kind` with `dims`, storage allocated.
Constant make(Constant::Kind kind, std::vector<int64_t> dims) {
  Constant c;
  c.kind = kind;
  c.dims = std::move(dims);
  const auto n = static_cast<size_t>(c.numel());
  if (kind == Constant::Kind::f32) {
    c.f.resize(n);
  } else {
    c.a.resize(n);
    c.b.resize(n);
  }
  return c;
}

// Element `from` of src into element `to` of dst (same kind).
void copy_element(const Constant& src, size_t from, Constant& dst, size_t to) {
  if (src.kind == Constant::Kind::f32) {
    dst.f[to] = src.f[from];
  } else {
    dst.a[to] = src.a[from];
    dst.b[to] = src.b[from];
  }
}

// For each flat index of `out` dims, the flat index into an input of `in` dims broadcast to it.
std::vector<size_t> broadcast_index(const std::vector<int64_t>& out, const std::vector<int64_t>& in) {
  const size_t rank = out.size();
  std::vector<int64_t> stride(rank, 0);
  int64_t s = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    const size_t i = in.size() - 1 - k, o = rank - 1 - k;
    stride[o] = in[i] == 1 ? 0 : s;
    s *= in[i];
  }
  std::vector<size_t> map(static_cast<size_t>(count(out)));
  std::vector<int64_t> idx(rank, 0);
  for (size_t flat = 0; flat < map.size(); ++flat) {
    int64_t at = 0;
    for (size_t d = 0; d < rank; ++d) at += idx[d] * stride[d];
    map[flat] = static_cast<size_t>(at);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < out[d]) break;
      idx[d] = 0;
    }
  }
  return map;
}

Result<int64_t> apply(Arith op, int64_t x, int64_t y) {
  int64_t r = 0;
  bool overflow = false;
  switch (op) {
    case Arith::add: overflow = __builtin_add_overflow(x, y, &r); break;
    case Arith::sub: overflow = __builtin_sub_overflow(x, y, &r); break;
    case Arith::mul: overflow = __builtin_mul_overflow(x, y, &r); break;
    case Arith::div:
      if (y == 0) return invalid_argument("integer division by zero");
      if (x == INT64_MIN && y == -1) overflow = true;
      else r = x / y;
      break;
  }
  if (overflow) return invalid_argument("integer overflow in " + std::to_string(x) + " and " + std::to_string(y));
  return r;
}

float apply(Arith op, float x, float y) {
  switch (op) {
    case Arith::add: return x + y;
    case Arith::sub: return x - y;
    case Arith::mul: return x * y;
    case Arith::div: return x / y;
  }
  return 0.f;
}

float unary_value(gpu::UnaryFn fn, float x, float alpha, float beta) {
  using gpu::UnaryFn;
  switch (fn) {
    case UnaryFn::sigmoid: return 1.f / (1.f + std::exp(-x));
    case UnaryFn::silu: return x / (1.f + std::exp(-x));
    case UnaryFn::hard_sigmoid: return std::max(0.f, std::min(1.f, alpha * x + beta));
    case UnaryFn::hard_swish: return x * std::max(0.f, std::min(1.f, alpha * x + beta));
    case UnaryFn::clip: return std::min(std::max(x, alpha), beta);
    case UnaryFn::exp: return std::exp(x);
    case UnaryFn::log: return std::log(x);
    case UnaryFn::sqrt: return std::sqrt(x);
    case UnaryFn::reciprocal: return 1.f / x;
    case UnaryFn::erf: return std::erf(x);
    case UnaryFn::neg: return -x;
    case UnaryFn::abs: return std::abs(x);
    case UnaryFn::leaky_relu: return x < 0.f ? alpha * x : x;
    case UnaryFn::elu: return x < 0.f ? alpha * (std::exp(x) - 1.f) : x;
    case UnaryFn::celu: return std::max(0.f, x) + std::min(0.f, alpha * (std::exp(x / alpha) - 1.f));
    case UnaryFn::selu: return x <= 0.f ? beta * alpha * (std::exp(x) - 1.f) : beta * x;
    case UnaryFn::softplus: return std::log1p(std::exp(x));
    case UnaryFn::softsign: return x / (1.f + std::abs(x));
    case UnaryFn::sin: return std::sin(x);
    case UnaryFn::cos: return std::cos(x);
    case UnaryFn::floor: return std::floor(x);
    case UnaryFn::ceil: return std::ceil(x);
    case UnaryFn::round: return std::nearbyint(x);  // half to even, as ONNX Round
    case UnaryFn::sign: return static_cast<float>((x > 0.f) - (x < 0.f));
    case UnaryFn::not_:
    case UnaryFn::count: break;
  }
  return 0.f;
}

bool is_comparison(gpu::BinaryFn fn) { return fn >= gpu::BinaryFn::equal && fn <= gpu::BinaryFn::greater_equal; }
bool is_logical(gpu::BinaryFn fn) { return fn >= gpu::BinaryFn::and_; }

template <typename T>
bool compare(gpu::BinaryFn fn, T x, T y) {
  using gpu::BinaryFn;
  switch (fn) {
    case BinaryFn::equal: return x == y;
    case BinaryFn::less: return x < y;
    case BinaryFn::greater: return x > y;
    case BinaryFn::less_equal: return x <= y;
    case BinaryFn::greater_equal: return x >= y;
    case BinaryFn::and_: return x != 0 && y != 0;
    case BinaryFn::or_: return x != 0 || y != 0;
    case BinaryFn::xor_: return (x != 0) != (y != 0);
    default: return false;
  }
}

float float_binary(gpu::BinaryFn fn, float x, float y) {
  using gpu::BinaryFn;
  switch (fn) {
    case BinaryFn::add: return x + y;
    case BinaryFn::sub: return x - y;
    case BinaryFn::mul: return x * y;
    case BinaryFn::div: return x / y;
    case BinaryFn::pow: return std::pow(x, y);
    case BinaryFn::min: return std::min(x, y);
    case BinaryFn::max: return std::max(x, y);
    case BinaryFn::mod: return std::fmod(x, y);
    default: return 0.f;
  }
}

}  // namespace

Result<Constant> fold_unary(gpu::UnaryFn fn, float alpha, float beta, const Constant& x) {
  using gpu::UnaryFn;
  Constant out = x;
  if (x.kind == Constant::Kind::f32) {
    if (fn == UnaryFn::not_) return invalid_argument("Not of floats");
    for (float& v : out.f) v = unary_value(fn, v, alpha, beta);
    return out;
  }
  for (auto* lane : {&out.a, &out.b}) {
    for (int64_t& v : *lane) {
      switch (fn) {
        case UnaryFn::neg:
          if (v == INT64_MIN) return invalid_argument("integer overflow in Neg");
          v = -v;
          break;
        case UnaryFn::abs:
          if (v == INT64_MIN) return invalid_argument("integer overflow in Abs");
          v = v < 0 ? -v : v;
          break;
        case UnaryFn::sign: v = (v > 0) - (v < 0); break;
        case UnaryFn::not_: v = v == 0; break;
        default: return invalid_argument(std::string(gpu::unary_fn_name(fn)) + " of integers");
      }
    }
  }
  return out;
}

Result<Constant> fold_binary(gpu::BinaryFn fn, const Constant& x, const Constant& y) {
  using gpu::BinaryFn;
  if (x.kind != y.kind) return invalid_argument("operands " + x.describe() + " and " + y.describe() + " differ in type");
  const bool ints = x.kind == Constant::Kind::i64;
  if (is_logical(fn) && !ints) return invalid_argument(std::string(gpu::binary_fn_name(fn)) + " of floats");
  switch (fn) {
    case BinaryFn::add: return fold_arith(Arith::add, x, y);
    case BinaryFn::sub: return fold_arith(Arith::sub, x, y);
    case BinaryFn::mul: return fold_arith(Arith::mul, x, y);
    case BinaryFn::div: return fold_arith(Arith::div, x, y);
    default: break;
  }
  const bool to_ints = is_comparison(fn) || is_logical(fn);
  if (ints && !to_ints && fn != BinaryFn::min && fn != BinaryFn::max) {
    return invalid_argument(std::string(gpu::binary_fn_name(fn)) + " of integers");
  }
  EMBER_ASSIGN_OR_RETURN(auto dims, broadcast_dims(x.dims, y.dims));
  if (dims.size() > static_cast<size_t>(gpu::Shape::kMaxRank)) return unsupported("rank above 6");
  EMBER_RETURN_IF_ERROR(check_growth(dims, std::max(x.numel(), y.numel())));
  Constant out = make(to_ints || ints ? Constant::Kind::i64 : Constant::Kind::f32, dims);
  const auto xi = broadcast_index(dims, x.dims), yi = broadcast_index(dims, y.dims);
  for (size_t i = 0; i < xi.size(); ++i) {
    if (!ints) {
      if (to_ints) out.a[i] = out.b[i] = compare(fn, x.f[xi[i]], y.f[yi[i]]);
      else out.f[i] = float_binary(fn, x.f[xi[i]], y.f[yi[i]]);
      continue;
    }
    const int64_t xa = x.a[xi[i]], xb = x.b[xi[i]], ya = y.a[yi[i]], yb = y.b[yi[i]];
    if (to_ints) {
      out.a[i] = compare(fn, xa, ya);
      out.b[i] = compare(fn, xb, yb);
    } else {
      out.a[i] = fn == BinaryFn::min ? std::min(xa, ya) : std::max(xa, ya);
      out.b[i] = fn == BinaryFn::min ? std::min(xb, yb) : std::max(xb, yb);
    }
  }
  return out;
}

Result<Constant> fold_where(const Constant& cond, const Constant& x, const Constant& y) {
  if (cond.kind != Constant::Kind::i64) return invalid_argument("Where's condition must be bool, got " + cond.describe());
  if (x.kind != y.kind) return invalid_argument("Where of " + x.describe() + " and " + y.describe());
  EMBER_ASSIGN_OR_RETURN(auto dims, broadcast_dims(cond.dims, x.dims));
  EMBER_ASSIGN_OR_RETURN(dims, broadcast_dims(dims, y.dims));
  if (dims.size() > static_cast<size_t>(gpu::Shape::kMaxRank)) return unsupported("rank above 6");
  EMBER_RETURN_IF_ERROR(check_growth(dims, std::max({cond.numel(), x.numel(), y.numel()})));
  Constant out = make(x.kind, dims);
  const auto ci = broadcast_index(dims, cond.dims), xi = broadcast_index(dims, x.dims), yi = broadcast_index(dims, y.dims);
  for (size_t i = 0; i < ci.size(); ++i) {
    if (x.kind == Constant::Kind::f32) {
      if (!cond.fixed()) return unsupported("a Where on floats whose condition depends on a free dim of the model");
      out.f[i] = cond.a[ci[i]] ? x.f[xi[i]] : y.f[yi[i]];
      continue;
    }
    out.a[i] = cond.a[ci[i]] ? x.a[xi[i]] : y.a[yi[i]];
    out.b[i] = cond.b[ci[i]] ? x.b[xi[i]] : y.b[yi[i]];
  }
  return out;
}

Result<Constant> fold_expand(const Constant& x, const std::vector<int64_t>& shape) {
  for (int64_t d : shape)
    if (d < 0) return invalid_argument("Expand to a negative dim " + std::to_string(d));
  EMBER_ASSIGN_OR_RETURN(auto dims, broadcast_dims(x.dims, shape));
  if (dims.size() > static_cast<size_t>(gpu::Shape::kMaxRank)) return unsupported("rank above 6");
  EMBER_RETURN_IF_ERROR(check_growth(dims, x.numel()));
  Constant out = make(x.kind, dims);
  const auto xi = broadcast_index(dims, x.dims);
  for (size_t i = 0; i < xi.size(); ++i) copy_element(x, xi[i], out, i);
  return out;
}

Result<int> normalize_axis(int64_t axis, int rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max(rank, 1)) {
    return invalid_argument("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return static_cast<int>(a);
}

Result<std::vector<int64_t>> fixed_ints(const Constant& c, const char* what) {
  if (c.kind != Constant::Kind::i64) return invalid_argument(std::string(what) + " must be integers, got " + c.describe());
  if (c.dims.size() > 1) return invalid_argument(std::string(what) + " must be 1-d, got " + c.describe());
  if (!c.fixed()) {
    return unsupported(std::string(what) + " depend on a free dim of the model; the importer needs them fixed");
  }
  return c.a;
}

Result<std::vector<int64_t>> broadcast_dims(const std::vector<int64_t>& x, const std::vector<int64_t>& y) {
  std::vector<int64_t> out(std::max(x.size(), y.size()));
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t dx = k < x.size() ? x[x.size() - 1 - k] : 1, dy = k < y.size() ? y[y.size() - 1 - k] : 1;
    if (dx != dy && dx != 1 && dy != 1) {
      return invalid_argument("dims " + dims_text(x) + " and " + dims_text(y) + " do not broadcast");
    }
    out[out.size() - 1 - k] = dx == 1 ? dy : dx;
  }
  return out;
}

Result<Constant> fold_arith(Arith op, const Constant& x, const Constant& y) {
  if (x.kind != y.kind) return invalid_argument("operands " + x.describe() + " and " + y.describe() + " differ in type");
  EMBER_ASSIGN_OR_RETURN(auto dims, broadcast_dims(x.dims, y.dims));
  if (dims.size() > static_cast<size_t>(gpu::Shape::kMaxRank)) return unsupported("rank above 6");
  EMBER_RETURN_IF_ERROR(check_growth(dims, std::max(x.numel(), y.numel())));
  Constant out = make(x.kind, dims);
  const auto xi = broadcast_index(dims, x.dims), yi = broadcast_index(dims, y.dims);
  for (size_t i = 0; i < xi.size(); ++i) {
    if (x.kind == Constant::Kind::f32) {
      out.f[i] = apply(op, x.f[xi[i]], y.f[yi[i]]);
      continue;
    }
    EMBER_ASSIGN_OR_RETURN(out.a[i], apply(op, x.a[xi[i]], y.a[yi[i]]));
    EMBER_ASSIGN_OR_RETURN(out.b[i], apply(op, x.b[xi[i]], y.b[yi[i]]));
  }
  return out;
}

Result<Constant> fold_gather(const Constant& data, const Constant& indices, int64_t axis) {
  const int rank = static_cast<int>(data.dims.size());
  if (rank == 0) return invalid_argument("Gather of a scalar");
  EMBER_ASSIGN_OR_RETURN(const int ax, normalize_axis(axis, rank));
  if (indices.kind != Constant::Kind::i64) return invalid_argument("Gather indices must be integers");
  if (!indices.fixed()) return unsupported("Gather indices depend on a free dim of the model");
  std::vector<int64_t> dims(data.dims.begin(), data.dims.begin() + ax);
  dims.insert(dims.end(), indices.dims.begin(), indices.dims.end());
  dims.insert(dims.end(), data.dims.begin() + ax + 1, data.dims.end());
  if (dims.size() > static_cast<size_t>(gpu::Shape::kMaxRank)) return unsupported("rank above 6");
  EMBER_RETURN_IF_ERROR(check_growth(dims, data.numel()));
  const int64_t outer = count({data.dims.begin(), data.dims.begin() + ax}), n = data.dims[static_cast<size_t>(ax)];
  const int64_t inner = count({data.dims.begin() + ax + 1, data.dims.end()});
  Constant out = make(data.kind, dims);
  size_t to = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t raw : indices.a) {
      const int64_t k = raw < 0 ? raw + n : raw;
      if (k < 0 || k >= n) {
        return invalid_argument("Gather index " + std::to_string(raw) + " is out of range for dim " + std::to_string(n));
      }
      for (int64_t i = 0; i < inner; ++i) copy_element(data, static_cast<size_t>((o * n + k) * inner + i), out, to++);
    }
  }
  return out;
}

Result<Constant> fold_concat(const std::vector<const Constant*>& parts, int64_t axis) {
  if (parts.empty()) return invalid_argument("Concat of nothing");
  const Constant& first = *parts.front();
  const int rank = static_cast<int>(first.dims.size());
  EMBER_ASSIGN_OR_RETURN(const int ax, normalize_axis(axis, rank));
  std::vector<int64_t> dims = first.dims;
  dims[static_cast<size_t>(ax)] = 0;
  for (const Constant* p : parts) {
    bool same = p->kind == first.kind && p->dims.size() == first.dims.size();
    for (int d = 0; same && d < rank; ++d) same = d == ax || p->dims[static_cast<size_t>(d)] == first.dims[static_cast<size_t>(d)];
    if (!same) return invalid_argument("Concat of " + first.describe() + " and " + p->describe() + " along axis " + std::to_string(ax));
    dims[static_cast<size_t>(ax)] += p->dims[static_cast<size_t>(ax)];
  }
  const int64_t outer = count({dims.begin(), dims.begin() + ax});
  Constant out = make(first.kind, dims);
  size_t to = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const Constant* p : parts) {
      const int64_t block = count({p->dims.begin() + ax, p->dims.end()});
      for (int64_t i = 0; i < block; ++i) copy_element(*p, static_cast<size_t>(o * block + i), out, to++);
    }
  }
  return out;
}

Result<Constant> fold_slice(const Constant& data, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                            std::vector<int64_t> axes, std::vector<int64_t> steps) {
  const int rank = static_cast<int>(data.dims.size());
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return invalid_argument("Slice: starts, ends, axes and steps differ in length");
  }
  std::vector<int64_t> begin(static_cast<size_t>(rank), 0), step(static_cast<size_t>(rank), 1), dims = data.dims;
  for (size_t k = 0; k < starts.size(); ++k) {
    EMBER_ASSIGN_OR_RETURN(const int ax, normalize_axis(axes[k], rank));
    const int64_t n = data.dims[static_cast<size_t>(ax)], s = steps[k];
    if (s == 0) return invalid_argument("Slice: step 0");
    int64_t b = starts[k] < 0 ? std::max<int64_t>(starts[k], -n) + n : starts[k];
    int64_t e = ends[k] < 0 ? std::max<int64_t>(ends[k], -n - 1) + n : ends[k];
    if (s > 0) {
      b = std::clamp<int64_t>(b, 0, n);
      e = std::clamp<int64_t>(e, 0, n);
    } else {
      b = std::clamp<int64_t>(b, 0, n - 1);
      e = std::clamp<int64_t>(e, -1, n - 1);
    }
    const int64_t len = s > 0 ? (e - b + s - 1) / s : (b - e + (-s) - 1) / (-s);
    begin[static_cast<size_t>(ax)] = b;
    step[static_cast<size_t>(ax)] = s;
    dims[static_cast<size_t>(ax)] = std::max<int64_t>(len, 0);
  }
  Constant out = make(data.kind, dims);
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0), stride(static_cast<size_t>(rank), 1);
  for (int d = rank - 2; d >= 0; --d) stride[static_cast<size_t>(d)] = stride[static_cast<size_t>(d) + 1] * data.dims[static_cast<size_t>(d) + 1];
  for (size_t to = 0; to < static_cast<size_t>(out.numel()); ++to) {
    int64_t from = 0;
    for (size_t d = 0; d < idx.size(); ++d) from += (begin[d] + idx[d] * step[d]) * stride[d];
    copy_element(data, static_cast<size_t>(from), out, to);
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

Result<Constant> fold_transpose(const Constant& data, std::vector<int64_t> perm) {
  const size_t rank = data.dims.size();
  if (perm.empty())
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  std::vector<bool> seen(rank, false);
  if (perm.size() != rank) return invalid_argument("Transpose: perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(rank));
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)]) return invalid_argument("Transpose: perm " + dims_text(perm) + " is not a permutation");
    seen[static_cast<size_t>(p)] = true;
  }
  std::vector<int64_t> dims(rank), in_stride(rank, 1);
  for (size_t d = rank; d-- > 1;) in_stride[d - 1] = in_stride[d] * data.dims[d];
  for (size_t d = 0; d < rank; ++d) dims[d] = data.dims[static_cast<size_t>(perm[d])];
  Constant out = make(data.kind, dims);
  std::vector<int64_t> idx(rank, 0);
  for (size_t to = 0; to < static_cast<size_t>(out.numel()); ++to) {
    int64_t from = 0;
    for (size_t d = 0; d < rank; ++d) from += idx[d] * in_stride[static_cast<size_t>(perm[d])];
    copy_element(data, static_cast<size_t>(from), out, to);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

Constant with_dims(Constant c, std::vector<int64_t> dims) {
  c.dims = std::move(dims);
  return c;
}

Result<Constant> fold_cast(const Constant& c, bool to_float) {
  if ((c.kind == Constant::Kind::f32) == to_float) return c;
  Constant out = make(to_float ? Constant::Kind::f32 : Constant::Kind::i64, c.dims);
  if (to_float) {
    if (!c.fixed()) return unsupported("a cast to float of integers that depend on a free dim of the model");
    for (size_t i = 0; i < c.a.size(); ++i) out.f[i] = static_cast<float>(c.a[i]);
    return out;
  }
  for (size_t i = 0; i < c.f.size(); ++i) {
    if (!std::isfinite(c.f[i]) || std::abs(c.f[i]) > 9.2e18f) return invalid_argument("a cast to int64 of a value out of range");
    out.a[i] = out.b[i] = static_cast<int64_t>(c.f[i]);
  }
  return out;
}

}  // namespace ember::importer
