// The operator table: every op a model layer may use, its attributes, the weights it takes, how
// it derives its output from its inputs, and how much scratch memory it needs.
//
// Pure; anyone, any thread. This is where a model is validated (at load, with the declared
// shapes) and where a request's shapes are checked (at run, with the real ones): after `infer`
// succeeds, a kernel may assume its arguments are consistent. Kernels themselves live per device
// (gpu/kernels_cpu.cpp for SimDevice, gpu/cuda/cuda_kernels.cu for CudaDevice) in tables indexed by
// OpKind, and take their arguments as gpu/kernel_args.hpp's KernelArgs.
//
// Semantics follow PyTorch's functions of the same name (torch.nn.functional), so a model built
// from torch.nn modules imports without rewriting: see tools/ember_torch.py.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "model/tensor.hpp"

namespace ember::gpu {

enum class OpKind : uint8_t {
  linear,           // y = x W^T + b over the last dim (nn.Linear)
  conv2d,           // NCHW convolution with stride, padding, dilation, groups (nn.Conv2d)
  batch_norm,       // inference batch norm over dim 1 with running statistics (nn.BatchNorm2d.eval())
  relu,             // max(x, 0)
  gelu,             // exact (erf) or tanh-approximated GELU (F.gelu(approximate=...))
  tanh,             // tanh(x)
  layer_norm,       // normalisation over the last dim with affine weight and bias (nn.LayerNorm)
  softmax,          // softmax along `dim`
  attention,        // multi-head self-attention, packed QKV projection (nn.MultiheadAttention, batch_first)
  embedding,        // table lookup by integer ids, or by position when `positional` (nn.Embedding)
  add,              // elementwise sum of two tensors of one shape (residual connections)
  max_pool2d,       // NCHW max pooling (nn.MaxPool2d)
  avg_pool2d,       // NCHW average pooling, padding counted as zeros (nn.AvgPool2d)
  global_avg_pool,  // mean over H and W, keeping them as 1 (nn.AdaptiveAvgPool2d(1))
  flatten,          // merges dims [start_dim, end_dim] (torch.flatten)
  reshape,          // new shape; 0 copies the input dim, one -1 is inferred (torch.reshape)
  select,           // picks one index of `dim` and drops that dim (x.select(dim, index))
  count
};

/// "linear", "conv2d", ... (the spelling used in model.json).
std::string_view op_name(OpKind op);
Result<OpKind> parse_op(std::string_view name);

/// Attributes of one layer. One flat struct for every op (each op reads only its own fields), so
/// it crosses into device kernels by value with no allocation. Defaults are PyTorch's.
struct LayerAttrs {
  // linear
  int64_t in_features = 0, out_features = 0;
  bool bias = true;  // linear, conv2d, attention
  // conv2d and pooling: [height, width]
  int64_t in_channels = 0, out_channels = 0, groups = 1;
  int64_t kernel[2] = {1, 1}, stride[2] = {1, 1}, padding[2] = {0, 0}, dilation[2] = {1, 1};
  // batch_norm (num_features = channels), layer_norm (num_features = normalised size)
  int64_t num_features = 0;
  float eps = 1e-5f;
  // gelu
  bool tanh_approximation = false;
  // softmax, select, flatten
  int32_t dim = -1;
  int64_t index = 0;
  int32_t start_dim = 1, end_dim = -1;
  // attention
  int64_t embed_dim = 0, num_heads = 0;
  bool causal = false;
  // embedding
  int64_t num_embeddings = 0, embedding_dim = 0;
  bool positional = false;
  // reshape: target shape without wildcards resolved (0 = copy input dim, -1 = infer)
  Shape shape;
};

/// One weight an op takes, in the fixed order its kernels receive them.
struct WeightSpec {
  std::string_view role;  // "weight", "bias", "running_mean", "in_proj_weight", ...
  Shape shape;            // exact expected shape
  bool required = true;   // false: may be absent (e.g. bias when attrs.bias is false)
};

inline constexpr int kMaxLayerInputs = 2;
inline constexpr int kMaxLayerWeights = 4;
/// Attention kernels process at most this many (batch, head) slices at once; the score workspace
/// holds one [seq, seq] matrix per slice.
inline constexpr int64_t kAttentionParallelSlices = 16;

/// Parses `attrs` (a JSON object; unknown keys are errors) into `out`. `where` prefixes messages.
/// Integer attributes above INT32_MAX are errors, which keeps shape arithmetic far from overflow.
Status parse_attrs(OpKind op, const nlohmann::json& attrs, LayerAttrs& out, const std::string& where);

/// Serialises the attributes `op` reads back into JSON (for writing model.json).
void attrs_to_json(OpKind op, const LayerAttrs& attrs, nlohmann::json& out);

/// The weights an op with these attributes takes, in kernel order.
std::vector<WeightSpec> weight_specs(OpKind op, const LayerAttrs& attrs);

/// How many inputs an op takes: [min, max].
std::pair<int, int> input_count(OpKind op);

/// The output an op produces from `inputs`, or an invalid_argument Error that says which input
/// and dim are wrong. Input shapes must be concrete (no -1); an input whose dims multiply past
/// 2^56 elements is an error.
Result<TensorDesc> infer_output(OpKind op, const LayerAttrs& attrs, std::span<const TensorDesc> inputs);

/// Scratch bytes a kernel needs for these inputs (im2col columns, attention scores, ...).
uint64_t workspace_bytes(OpKind op, const LayerAttrs& attrs, std::span<const TensorDesc> inputs);

/// How the CPU conv2d kernel organises its matrix products; workspace_bytes() sizes the scratch
/// for the chosen plan, so kernel and planner always agree.
enum class ConvPlan : uint8_t {
  /// 1x1, stride 1, no padding, per image: the image itself is the [C, H*W] operand. No scratch.
  pointwise,
  /// im2col of one image at a time into [C/g*kh*kw, Ho*Wo], one GEMM per image and group.
  per_image,
  /// Batch > 1, groups 1, small outputs (Ho*Wo < kConvBatchedColumns): the columns of every image
  /// side by side, [C*kh*kw, B*Ho*Wo], one GEMM into [O, B*Ho*Wo], then scattered to NCHW.
  /// Measured with OpenBLAS on 2 cores: a 512x49x4608 GEMM runs at 58 GFLOP/s, 512x392x4608 at 102.
  batched,
};
inline constexpr int64_t kConvBatchedColumns = 256;
ConvPlan conv_plan(const LayerAttrs& attrs, const Shape& input);

/// Floating-point operations a layer performs (multiply-add = 2), for benchmarks and planning.
double flops(OpKind op, const LayerAttrs& attrs, std::span<const TensorDesc> inputs, const TensorDesc& output);

}  // namespace ember::gpu
