// The values of an ONNX graph as the importer holds them while it converts: activations (an Ember
// model input or layer computes them at serve time) and constants (initializers, Constant nodes
// and whatever folding computes from them at import).
//
// Free dims, two probes. A model keeps some dims free (the batch, a sequence length: -1 in
// model.json). The importer does not do symbolic algebra; it evaluates every shape and every
// piece of shape arithmetic twice at once, in lane a with every free dim set to kProbeA (2, the
// size model.json's own validation uses) and in lane b with free dim k set to probe_b(k) (7, 11,
// 15, ...). A dim or integer equal in both lanes is fixed; one that differs depends on a free dim.
// Shape(x)[0] of an input with a free batch is the integer (2, 7): a Reshape target built from it
// keeps the batch free. A quantity that is equal at both probes but not constant (a polynomial
// with both probes as roots) would be taken as fixed; shape arithmetic in exported graphs does not
// build such things, and model.json's validation would catch the resulting shapes.
//
// Pure values; any thread. Nothing here reads files.
#pragma once

#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/tensor.hpp"

namespace ember::importer {

inline constexpr int64_t kProbeA = 2;
/// The largest dim the importer writes into model.json (an input's, an output's, a reshape's):
/// Ember's attributes are at most INT32_MAX (model/ops.cpp).
inline constexpr int64_t kMaxDim = INT32_MAX;
/// Lane b's size of free dim `symbol` (0, 1, ...): distinct per symbol and from lane a.
inline int64_t probe_b(int symbol) { return 7 + 4 * static_cast<int64_t>(symbol); }

/// An activation's shape in both lanes (same rank).
struct Dims {
  gpu::Shape a, b;

  int rank() const { return a.rank; }
  bool fixed(int i) const { return a[i] == b[i]; }
  bool operator==(const Dims& o) const { return a == o.a && b == o.b; }
  /// model.json's form: fixed dims as they are, free ones -1.
  gpu::Shape declared() const;
  /// "[?, 3, 224, 224]" (? for a free dim).
  std::string to_string() const;
  /// Both lanes equal to `s` (every dim fixed).
  static Dims fixed_shape(const gpu::Shape& s) { return {s, s}; }
};

/// A constant tensor. Floats (every ONNX floating type, read as float32) or integers (every ONNX
/// integer type and bool, widened to int64). Its own dims are always fixed; an integer element may
/// differ between the lanes (it came from a Shape of an activation with free dims).
struct Constant {
  enum class Kind : uint8_t { f32, i64 };
  Kind kind = Kind::f32;
  std::vector<int64_t> dims;
  std::vector<float> f;       // Kind::f32: numel() values, row-major
  std::vector<int64_t> a, b;  // Kind::i64: numel() values per lane

  int64_t numel() const;
  /// Every element the same in both lanes (always true of floats).
  bool fixed() const { return a == b; }
  /// "float32[64, 3, 7, 7]".
  std::string describe() const;

  static Constant floats(std::vector<int64_t> dims, std::vector<float> values);
  static Constant ints(std::vector<int64_t> dims, std::vector<int64_t> values);
  static Constant ints(std::vector<int64_t> dims, std::vector<int64_t> lane_a, std::vector<int64_t> lane_b);
};

/// One value of the ONNX graph.
struct Value {
  enum class Kind : uint8_t {
    activation,  // computed by the Ember model: `ember` names it, `dtype` and `dims` describe it
    constant,    // known at import: `constant`
    refused,     // produced by a node the importer refused; whatever reads it is not converted
  };
  Kind kind = Kind::refused;
  std::string ember;
  gpu::DType dtype = gpu::DType::f32;
  Dims dims;
  std::shared_ptr<const Constant> constant;

  bool is_constant() const { return kind == Kind::constant; }
  bool is_activation() const { return kind == Kind::activation; }
  static Value of_constant(Constant c);
  static Value of_activation(std::string ember, gpu::DType dtype, Dims dims);
};

}  // namespace ember::importer
