#include "importer/patterns.hpp"

#include <cmath>
#include <optional>

#include "importer/onnx_tensor.hpp"

namespace ember::importer {

std::shared_ptr<const Constant> static_constant(const OnnxGraph& g, std::string_view value, int64_t max_elements) {
  auto numel_fits = [&](const auto& dims) {
    int64_t n = 1;
    for (int64_t d : dims)
      if (d < 0 || __builtin_mul_overflow(n, d, &n)) return false;
    return n <= max_elements;
  };
  if (g.initializers.count(value)) {
    for (const auto& t : g.graph().initializer()) {
      if (t.name() != value) continue;
      if (!numel_fits(t.dims())) return nullptr;
      auto c = read_tensor(t, "", "initializer");
      return c.ok() ? std::make_shared<const Constant>(std::move(*c)) : nullptr;
    }
  }
  auto p = g.producer.find(value);
  if (p == g.producer.end()) return nullptr;
  const auto& node = g.node(p->second);
  if (node.op_type() != "Constant" || !(node.domain().empty() || node.domain() == "ai.onnx")) return nullptr;
  for (const auto& a : node.attribute())
    if (a.name() == "value" && a.has_t() && !numel_fits(a.t().dims())) return nullptr;
  auto c = read_constant_node(node, "", "Constant");
  if (!c.ok() || c->numel() > max_elements) return nullptr;
  return std::make_shared<const Constant>(std::move(*c));
}

namespace {

class Matcher {
 public:
  explicit Matcher(const OnnxGraph& g) : g_(g), claimed_(static_cast<size_t>(g.graph().node_size()), false) {}

  std::vector<Fusion> run() {
    std::vector<Fusion> out;
    for (int i = 0; i < g_.graph().node_size(); ++i) {
      const std::string& op = g_.node(i).op_type();
      if (!well_formed(i)) continue;
      std::optional<Fusion> f;
      if (op == "Erf") f = gelu_erf(i);
      else if (op == "Tanh") f = gelu_tanh(i);
      else if (op == "MatMul") f = linear_bias(i);
      else if (op == "Pad") f = pad_avg_pool(i);
      if (!f || !claim(*f)) continue;
      out.push_back(std::move(*f));
    }
    return out;
  }

 private:
  bool claim(const Fusion& f) {
    for (int n : f.nodes)
      if (claimed_[static_cast<size_t>(n)]) return false;
    for (int n : f.nodes) claimed_[static_cast<size_t>(n)] = true;
    return true;
  }

  // Whether node i is in the default domain, has one output and as many inputs as the patterns
  // read of its op (the file is not trusted: an Erf without an input is possible).
  bool well_formed(int i) const {
    const auto& n = g_.node(i);
    if (!(n.domain().empty() || n.domain() == "ai.onnx") || n.output_size() != 1 || n.output(0).empty()) return false;
    const std::string& op = n.op_type();
    if (op == "Erf" || op == "Tanh" || op == "AveragePool") return n.input_size() == 1;
    if (op == "Add" || op == "Mul" || op == "Div" || op == "Pow" || op == "MatMul") return n.input_size() == 2;
    if (op == "Pad") return g_.opset < 11 ? n.input_size() == 1 : n.input_size() >= 2 && n.input_size() <= 3;
    return false;
  }

  // The node producing `value` if it is a well-formed `op`; -1 otherwise.
  int producer(std::string_view value, std::string_view op) const {
    auto p = g_.producer.find(value);
    if (p == g_.producer.end()) return -1;
    return g_.node(p->second).op_type() == op && well_formed(p->second) ? p->second : -1;
  }

  // The sole reader of `value` if it is a well-formed `op`; -1 otherwise.
  int reader(std::string_view value, std::string_view op) const {
    const int r = g_.sole_consumer(value);
    if (r < 0) return -1;
    return g_.node(r).op_type() == op && well_formed(r) ? r : -1;
  }

  std::optional<double> scalar(std::string_view value) const {
    auto c = static_constant(g_, value, 1);
    if (!c || c->numel() != 1) return std::nullopt;
    return c->kind == Constant::Kind::f32 ? static_cast<double>(c->f[0]) : static_cast<double>(c->a[0]);
  }

  bool is_scalar(std::string_view value, double expected) const {
    auto v = scalar(value);
    return v && std::abs(*v - expected) <= 1e-5 * std::abs(expected);
  }

  // For a two-input node reading `value`: its other input ("" when it does not read `value`).
  std::string other(int node, std::string_view value) const {
    const auto& n = g_.node(node);
    if (n.input_size() != 2) return {};
    if (n.input(0) == value) return n.input(1);
    if (n.input(1) == value) return n.input(0);
    return {};
  }

  const std::string& out(int node) const { return g_.node(node).output(0); }

  // From the value 1 + erf/tanh(...) is added to, outwards: (1 + e) * x * 0.5 in any grouping.
  std::optional<Fusion> outer(int inner, const std::string& x, Fusion f) const {
    const int add = reader(out(inner), "Add");
    if (add < 0 || !is_scalar(other(add, out(inner)), 1.0)) return std::nullopt;
    f.nodes.push_back(add);
    const int m1 = reader(out(add), "Mul");
    if (m1 < 0) return std::nullopt;
    const std::string o = other(m1, out(add));
    f.nodes.push_back(m1);
    if (o == x) {  // (x * (1 + e)) * 0.5
      const int m2 = reader(out(m1), "Mul");
      if (m2 < 0 || !is_scalar(other(m2, out(m1)), 0.5)) return std::nullopt;
      f.nodes.push_back(m2);
      f.anchor = m2;
    } else if (is_scalar(o, 0.5)) {  // x * ((1 + e) * 0.5)
      const int m2 = reader(out(m1), "Mul");
      if (m2 < 0 || other(m2, out(m1)) != x) return std::nullopt;
      f.nodes.push_back(m2);
      f.anchor = m2;
    } else {  // (x * 0.5) * (1 + e)
      const int half = producer(o, "Mul");
      if (half < 0 || g_.sole_consumer(o) != m1 || other(half, x).empty() || !is_scalar(other(half, x), 0.5)) {
        return std::nullopt;
      }
      f.nodes.push_back(half);
      f.anchor = m1;
    }
    f.input = x;
    return f;
  }

  std::optional<Fusion> gelu_erf(int erf) const {
    const std::string& u = g_.node(erf).input(0);
    if (g_.sole_consumer(u) != erf) return std::nullopt;
    std::string x;
    int scale = producer(u, "Div");
    if (scale >= 0 && is_scalar(g_.node(scale).input(1), std::sqrt(2.0))) {
      x = g_.node(scale).input(0);
    } else if ((scale = producer(u, "Mul")) >= 0) {
      const auto& n = g_.node(scale);
      if (n.input_size() != 2) return std::nullopt;
      if (is_scalar(n.input(1), std::sqrt(0.5))) x = n.input(0);
      else if (is_scalar(n.input(0), std::sqrt(0.5))) x = n.input(1);
    }
    if (x.empty()) return std::nullopt;
    Fusion f;
    f.kind = Fusion::Kind::gelu;
    f.nodes = {scale, erf};
    return outer(erf, x, std::move(f));
  }

  // sqrt(2/pi) * (x + 0.044715 * x^3) -> Tanh.
  std::optional<Fusion> gelu_tanh(int tanh) const {
    const std::string& k = g_.node(tanh).input(0);
    const int scale = producer(k, "Mul");
    if (scale < 0 || g_.sole_consumer(k) != tanh) return std::nullopt;
    std::string s;
    for (int i = 0; i < 2 && s.empty(); ++i)
      if (is_scalar(g_.node(scale).input(i), std::sqrt(2.0 / M_PI))) s = g_.node(scale).input(1 - i);
    const int sum = s.empty() ? -1 : producer(s, "Add");
    if (sum < 0 || g_.sole_consumer(s) != scale) return std::nullopt;
    for (int i = 0; i < 2; ++i) {
      const std::string& t = g_.node(sum).input(i);
      const std::string& x = g_.node(sum).input(1 - i);
      const int cube_scale = producer(t, "Mul");
      if (cube_scale < 0 || g_.sole_consumer(t) != sum) continue;
      std::string cube;
      for (int j = 0; j < 2 && cube.empty(); ++j)
        if (is_scalar(g_.node(cube_scale).input(j), 0.044715)) cube = g_.node(cube_scale).input(1 - j);
      if (cube.empty() || g_.sole_consumer(cube) != cube_scale) continue;
      std::vector<int> nodes;
      if (const int pow = producer(cube, "Pow"); pow >= 0) {
        if (g_.node(pow).input(0) != x || !is_scalar(g_.node(pow).input(1), 3.0)) continue;
        nodes = {pow};
      } else if (const int m = producer(cube, "Mul"); m >= 0) {
        const std::string sq = other(m, x);
        const int square = sq.empty() ? -1 : producer(sq, "Mul");
        if (square < 0 || g_.sole_consumer(sq) != m || g_.node(square).input(0) != x || g_.node(square).input(1) != x) {
          continue;
        }
        nodes = {square, m};
      } else {
        continue;
      }
      Fusion f;
      f.kind = Fusion::Kind::gelu_tanh;
      f.nodes = nodes;
      f.nodes.insert(f.nodes.end(), {cube_scale, sum, scale, tanh});
      return outer(tanh, x, std::move(f));
    }
    return std::nullopt;
  }

  std::optional<Fusion> pad_avg_pool(int pad) const {
    const auto& p = g_.node(pad);
    // Pad-2 (before opset 11): pads and the fill value are attributes; Pad-11: inputs.
    const bool attributes = g_.opset < 11;
    if (p.output_size() != 1 || !(p.domain().empty() || p.domain() == "ai.onnx") || p.input_size() < (attributes ? 1 : 2)) {
      return std::nullopt;
    }
    std::vector<int64_t> v;  // [n, c, h, w] begins, then ends
    for (const auto& a : p.attribute()) {
      if (a.name() == "mode" && a.s() == "constant") continue;
      if (attributes && a.name() == "pads" && a.type() == onnx::AttributeProto::INTS) {
        v.assign(a.ints().begin(), a.ints().end());
      } else if (!(attributes && a.name() == "value" && a.type() == onnx::AttributeProto::FLOAT && a.f() == 0.f)) {
        return std::nullopt;
      }
    }
    // The fill must be 0 (is_scalar's tolerance relative to 0 is exact); axes (a fourth input, opset
    // 18) are past this importer's opsets and well_formed() refuses them.
    if (!attributes && p.input_size() > 2 && !p.input(2).empty() && !is_scalar(p.input(2), 0.0)) return std::nullopt;
    const int pool = reader(out(pad), "AveragePool");
    if (!attributes) {
      auto pads = static_constant(g_, p.input(1), 8);
      if (pads && pads->kind == Constant::Kind::i64) v = pads->a;
    }
    if (pool < 0 || v.size() != 8) return std::nullopt;
    if (v[0] || v[1] || v[4] || v[5] || v[2] != v[6] || v[3] != v[7] || v[2] < 0 || v[3] < 0) return std::nullopt;
    Fusion f;
    f.kind = Fusion::Kind::pad_avg_pool;
    f.nodes = {pad, pool};
    f.anchor = pool;
    f.input = p.input(0);
    f.pad[0] = v[2];
    f.pad[1] = v[3];
    return f;
  }

  std::optional<Fusion> linear_bias(int matmul) const {
    const auto& mm = g_.node(matmul);
    if (mm.output_size() != 1 || !(mm.domain().empty() || mm.domain() == "ai.onnx")) return std::nullopt;
    if (!constant_matrix(mm.input(1)) || constant_matrix(mm.input(0))) return std::nullopt;  // not x * W
    const int add = reader(out(matmul), "Add");
    if (add < 0) return std::nullopt;
    const std::string bias = other(add, out(matmul));
    auto b = static_constant(g_, bias, int64_t{1} << 26);
    if (!b || b->kind != Constant::Kind::f32) return std::nullopt;
    for (size_t i = 0; i + 1 < b->dims.size(); ++i)
      if (b->dims[i] != 1) return std::nullopt;  // varies along more than the last dim
    Fusion f;
    f.kind = Fusion::Kind::linear_bias;
    f.nodes = {matmul, add};
    f.anchor = add;
    f.matmul = matmul;
    f.bias = bias;
    return f;
  }

  // Whether `value` is an initializer or a Constant node's value of rank 2 (read without its data).
  bool constant_matrix(const std::string& value) const {
    if (g_.initializers.count(value)) {
      for (const auto& t : g_.graph().initializer())
        if (t.name() == value) return t.dims_size() == 2;
    }
    auto p = g_.producer.find(value);
    if (p == g_.producer.end()) return false;
    const auto& node = g_.node(p->second);
    if (node.op_type() != "Constant") return false;
    for (const auto& a : node.attribute())
      if (a.name() == "value" && a.has_t()) return a.t().dims_size() == 2;
    return false;
  }

  const OnnxGraph& g_;
  std::vector<bool> claimed_;
};

}  // namespace

std::vector<Fusion> find_fusions(const OnnxGraph& g) { return Matcher(g).run(); }

}  // namespace ember::importer
