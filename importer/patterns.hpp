// Subgraphs of ONNX nodes the importer converts into one Ember layer, found before the walk
// (converter.hpp) so that their inner nodes, which Ember could not run alone (Erf, Pow, a Mul of
// an activation by a constant), are never looked at one by one.
//
//   linear_bias  MatMul(x, W), W an initializer or Constant matrix and x not, whose only reader is
//                Add(., b) (either order) with b a constant that
//                varies only along the last dim: linear with bias (torch.onnx.export writes
//                nn.Linear on a rank-3 input so).
//   pad_avg_pool Pad(x, pads) with zeros (mode constant, value 0; pads and value attributes
//                before opset 11, inputs after) on the two spatial dims of an NCHW value, read
//                only by AveragePool: avg_pool2d with that padding, whose zeros the average
//                counts (torch.onnx.export writes nn.AvgPool2d(padding=p) so).
//   gelu         0.5 * x * (1 + Erf(x / sqrt(2))), the products in any order and grouping, the
//                division by sqrt(2) or a product with 1/sqrt(2) (torch.onnx.export of F.gelu).
//   gelu_tanh    0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), x^3 as Pow(x, 3) or
//                x * (x * x) (F.gelu(approximate="tanh")).
// Every inner value must have exactly one reader and not be a graph output, so fusing removes
// nothing anything else sees. Constants are recognised within a relative 1e-5 (float32 spellings).
//
// Pure; anyone, any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "importer/onnx_graph.hpp"
#include "importer/values.hpp"

namespace ember::importer {

struct Fusion {
  enum class Kind : uint8_t { linear_bias, pad_avg_pool, gelu, gelu_tanh };
  Kind kind = Kind::gelu;
  /// Every node of the pattern, the last (`anchor`, whose output is the result) included.
  std::vector<int> nodes;
  int anchor = -1;
  /// gelu, gelu_tanh, pad_avg_pool: the input value x. linear_bias: unused.
  std::string input;
  /// pad_avg_pool: the zeros Pad adds before and after each spatial dim (height, width).
  int64_t pad[2] = {0, 0};
  /// linear_bias: the MatMul node and the bias value.
  int matmul = -1;
  std::string bias;
};

/// A value known without converting anything: an initializer, or the output of a Constant node
/// (read from its attribute). nullptr otherwise, or when it is larger than `max_elements` or
/// cannot be read.
std::shared_ptr<const Constant> static_constant(const OnnxGraph& g, std::string_view value, int64_t max_elements);

/// The patterns above, none sharing a node.
std::vector<Fusion> find_fusions(const OnnxGraph& g);

}  // namespace ember::importer
