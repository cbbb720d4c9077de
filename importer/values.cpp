#include "importer/values.hpp"

namespace ember::importer {

gpu::Shape Dims::declared() const {
  gpu::Shape s = a;
  for (int i = 0; i < s.rank; ++i)
    if (!fixed(i)) s[i] = -1;
  return s;
}

std::string Dims::to_string() const {
  std::string s = "[";
  for (int i = 0; i < rank(); ++i) {
    if (i) s += ", ";
    s += fixed(i) ? std::to_string(a[i]) : "?";
  }
  return s + "]";
}

int64_t Constant::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string Constant::describe() const {
  std::string s = kind == Kind::f32 ? "float32[" : "int64[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

Constant Constant::floats(std::vector<int64_t> dims, std::vector<float> values) {
  Constant c;
  c.kind = Kind::f32;
  c.dims = std::move(dims);
  c.f = std::move(values);
  return c;
}

Constant Constant::ints(std::vector<int64_t> dims, std::vector<int64_t> values) {
  std::vector<int64_t> b = values;
  return ints(std::move(dims), std::move(values), std::move(b));
}

Constant Constant::ints(std::vector<int64_t> dims, std::vector<int64_t> lane_a, std::vector<int64_t> lane_b) {
  Constant c;
  c.kind = Kind::i64;
  c.dims = std::move(dims);
  c.a = std::move(lane_a);
  c.b = std::move(lane_b);
  return c;
}

Value Value::of_constant(Constant c) {
  Value v;
  v.kind = Kind::constant;
  v.dtype = c.kind == Constant::Kind::f32 ? gpu::DType::f32 : gpu::DType::i64;
  v.constant = std::make_shared<const Constant>(std::move(c));
  return v;
}

Value Value::of_activation(std::string ember, gpu::DType dtype, Dims dims) {
  Value v;
  v.kind = Kind::activation;
  v.ember = std::move(ember);
  v.dtype = dtype;
  v.dims = dims;
  return v;
}

}  // namespace ember::importer
