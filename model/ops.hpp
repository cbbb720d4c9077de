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
#include <optional>
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
  softmax,          // softmax (or log-softmax when `log`) along `dim`
  attention,        // multi-head self-attention, packed QKV projection (nn.MultiheadAttention, batch_first);
                    // an optional second input [batch, seq] masks padded keys (0 = padding, any dtype; a
                    // float's -0.0 is 0 too): a masked key gets probability 0 (with causal, both apply),
                    // and a query whose keys are all masked gets an all-zero probability row, so a zero
                    // context (its output is the out-projection's bias), where PyTorch gives NaN
  embedding,        // table lookup by integer ids, or by position when `positional` (nn.Embedding)
  add,              // elementwise sum of two tensors of one shape (residual connections)
  max_pool2d,       // NCHW max pooling, with dilation and ceil_mode (nn.MaxPool2d)
  avg_pool2d,       // NCHW average pooling; padding counted in the divisor unless !count_include_pad (nn.AvgPool2d)
  global_avg_pool,  // mean over H and W, keeping them as 1 (nn.AdaptiveAvgPool2d(1))
  flatten,          // merges dims [start_dim, end_dim] (torch.flatten)
  reshape,          // new shape; 0 copies the input dim, one -1 is inferred (torch.reshape); with a second
                    // input, dim i is that input's dim like_dims[i] where like_dims[i] >= 0 (free dims
                    // moved to other places: an attention's [batch * heads, seq, d] back to [batch, ...])
  select,           // picks one index of `dim` and drops that dim (x.select(dim, index))
  // -- the general ops (ONNX's operator set, numpy broadcasting; model/ops_tensor.cpp) ----------
  unary,            // y = fn(x) elementwise, fn a UnaryFn (sigmoid, silu, clip, exp, erf, ...)
  binary,           // y = fn(a, b) with numpy broadcasting, fn a BinaryFn (arithmetic, comparisons, logic)
  where,            // y = cond ? a : b with numpy broadcasting over all three (cond uint8)
  constant,         // no inputs: its one weight `value`, as a value (any dtype)
  matmul,           // numpy matmul of two activations: batched, batch dims broadcast, 1-d promoted
  transpose,        // permutes dims: output dim i is input dim perm[i]
  concat,           // joins its inputs along `dim` (up to kMaxLayerInputs of one dtype)
  slice,            // per listed axis: elements start, start+step, ... before end (negative step allowed)
  gather,           // data[..., indices[...], ...] along `dim`; indices int64/int32, negative wraps
  expand,           // broadcasts to `shape` (numpy rules); dims may be taken from a second input
  pad,              // pads (or crops, when negative) every dim: constant, reflect or edge
  resize,           // nearest or linear resampling of the last one or two dims (ONNX Resize)
  conv_transpose2d, // NCHW transposed convolution (nn.ConvTranspose2d)
  group_norm,       // normalisation over groups of channels, affine per channel (nn.GroupNorm; instance norm)
  rms_norm,         // x / sqrt(mean(x^2) + eps) * weight over the last dim (RMSNorm)
  reduce,           // fn over the listed axes (sum, mean, max, min, prod, ...), keepdims or not
  cast,             // converts to another dtype (float32, float16, bfloat16, int64, int32, uint8)
  argmax,           // index of the largest (or smallest) element along `dim`, as int64
  topk,             // the k largest (or smallest) along `dim`, sorted: their values or their indices
  // -- generation (docs/design/generation.md; model/ops_kv_attention.cpp) ------------------------
  kv_attention,     // causal attention of a step's tokens over a paged KV cache it also writes: rotary
                    // positions, grouped-query heads (see "kv_attention" below)
  count
};

// The general ops in detail (inputs; dtypes; shapes). Broadcasting is numpy's: shapes align from
// the right, a dim of 1 stretches, missing leading dims count as 1.
//   unary      x: float32 (not: uint8)                    -> x's shape and dtype
//   binary     a, b: see BinaryFn                          -> the broadcast shape
//   where      cond: uint8, a, b: one dtype                -> the broadcast of all three, a's dtype
//   constant   (none); weight `value` of `to` and `shape`  -> that tensor
//   matmul     a [..., m, k], b [..., k, n]: float32       -> [broadcast(...), m, n]; a 1-d operand
//              is promoted ([k] -> [1, k] for a, [k, 1] for b) and its added dim dropped after
//   transpose  x (any dtype), axes = perm                  -> dims permuted
//   concat     1..kMaxLayerInputs inputs, one dtype and rank, equal except along `dim`
//   slice      x (any dtype); axes/starts/ends/steps       -> numpy x[start:end:step] on each axis;
//              negative starts/ends count from the end, then clamp to [0, dim] ([-1, dim-1] for a
//              negative step), so INT64_MAX means "to the end"
//   gather     data (any dtype), indices int64/int32 along `dim` -> data.shape[:dim] +
//              indices.shape + data.shape[dim+1:]; an index outside [-n, n) gives zeros (the
//              kernels never fail on data)
//   expand     x (any dtype)[, like]                       -> broadcast(x.shape, target), target
//              dim i = like.shape[like_dims[i]] when like_dims[i] >= 0, else shape[i]
//   pad        x (any dtype: elements are moved, not computed on; the constant fill is `value` for
//              float32 and 0 for every other dtype),
//              pads for every dim                          -> each dim + begin + end (>= 0);
//              reflect mirrors without repeating the edge (numpy 'reflect'), edge repeats it
//   resize     x float32, rank >= 1, only the last two dims may change -> dim i =
//              shape[i] if > 0 else floor(in_i * scales[i]); the mapping scale is out/in when
//              sizes are given, else scales[i] (ONNX Resize); linear is bilinear over two dims;
//              coordinates are float32 as in ONNX Runtime (x_in = (x_out + 0.5) / scale - 0.5 for
//              half_pixel), nearest clamps the rounded index to [0, in), linear clamps x_in to
//              [0, in - 1] (ONNX's edge padding); align_corners and pytorch_half_pixel take the
//              resized length as in * scale, as ONNX's reference does (2.4 for a 0.6 downsample
//              of 4; out when sizes are given)
//   conv_transpose2d  x [n, in_channels, h, w] float32, weight [in, out / groups, kh, kw], bias
//              -> h_out = (h - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1
//   group_norm x [n, num_features, ...] float32; weight and bias [num_features]; eps
//   rms_norm   x [..., num_features] float32; weight [num_features]; eps
//   reduce     x float32, axes (none = all)                -> reduced dims dropped unless keepdims;
//              with noop_with_empty_axes and no axes each element is reduced alone (sum_square
//              gives x^2, l1 and l2 |x|, the others x); over an empty dim: sum, sum_square, l1, l2
//              0, prod 1, mean NaN, log_sum_exp -inf
//   cast       x (any dtype) -> `to`; float to integer truncates toward zero and saturates at the
//              target's range (NaN becomes 0); float32 to float16/bfloat16 rounds to nearest even;
//              integer to integer keeps the low bits (two's complement, as C++ and numpy's astype);
//              integer to float16/bfloat16 goes through float32
//   argmax     x float32 along `dim`                       -> int64, `dim` kept as 1 if keepdims
//   topk       x float32, k <= dim size                    -> dim size k; values (x's dtype) or
//              int64 indices; ties keep the lower index first. NaN: argmax (either fn) picks the
//              first NaN (numpy's argmax and argmin); topk counts NaN as the largest (PyTorch's)
// Half-precision (float16/bfloat16) activations are not computed on: cast to float32 first.

// kv_attention in detail (docs/design/generation.md is the contract; this is its letter).
// One step runs the whole graph over T tokens of B sequences packed along one dim, each sequence's
// tokens contiguous and in position order. Attributes: num_heads H, num_kv_heads Hkv (H a multiple:
// grouped-query attention, q head h reads kv head h / (H / Hkv) as Hugging Face's repeat_kv),
// head_dim D (<= kKvMaxHeadDim), kv_layer (0-based among the model's kv_attention layers: where its
// K and V sit in a block), rope_dim (0: no rotary; else even and <= D), scale (0: 1/sqrt(D)).
//   inputs     0 qkv float32 [T, (H + 2 Hkv) D]: q heads, then k heads, then v heads, each D contiguous
//              1 positions int64 [T]: each token's position in its sequence, 0-based
//              2 kv_meta int64 [M], M = 4 + T + B W (layout below)
//   weight     inv_freq float32 [rope_dim / 2], when rope_dim > 0 (kept float32 whatever the model's
//              width: exact_weights)
//   output     float32 [T, H D]
// Rotary (NeoX / Hugging Face rotate_half pairing): with a = float32(p) * inv_freq[i] for i <
// rope_dim / 2, dims i and i + rope_dim / 2 of each q and k head become (x_i cos a - x_j sin a,
// x_j cos a + x_i sin a), j = i + rope_dim / 2; dims from rope_dim on are unchanged.
// The op first writes every token's rotated k and its v at its position (converted to the cache's
// type), then each token attends to positions 0 ..= p of its own sequence, read back from the cache
// (its own step's included), softmax(scale q.k) v per q head. Positions before the step's were
// written by earlier steps; the op cannot know whether they were, and reads what the blocks hold.
// The shapes are checked by infer_output; kv_meta's values by check_kv_meta, which the layer
// executor runs on the host before a launch (as it checks embedding ids). Kernels given values that
// fail it never write or read outside a block the table names: a token with a sequence index
// outside [0, B) or a position outside the table gets a zero output row and writes nothing, a
// block address of 0 is skipped, and a header that fails (B, block_size or W below 1, an unknown
// cache type, M != 4 + T + B W, or a block past int64) makes the whole output zero. A nonzero block
// address outside device memory faults a SimDevice (illegal address, as any other pointer); on a
// CUDA device the kernel skips it when it lies outside the device's reservation.

/// unary's functions. alpha and beta (LayerAttrs) are: clip's min and max; hard_sigmoid's slope
/// and offset (y = max(0, min(1, alpha x + beta))); leaky_relu's negative slope (alpha); elu's
/// alpha; celu's alpha; selu's alpha and gamma (beta). hard_swish is x * hard_sigmoid(x) with
/// alpha 1/6 and beta 1/2 (ONNX HardSwish); silu is x * sigmoid(x); not applies to uint8 (0/1).
enum class UnaryFn : uint8_t {
  sigmoid, silu, hard_sigmoid, hard_swish, clip, exp, log, sqrt, reciprocal, erf, neg, abs, leaky_relu,
  elu, celu, selu, softplus, softsign, sin, cos, floor, ceil, round, sign, not_, count
};
/// binary's functions. Arithmetic (add .. mod) takes and gives float32; mod is C's fmod (ONNX Mod
/// with fmod=1). Comparisons take two inputs of one dtype (float32, int64 or int32) and give uint8
/// 0/1. and/or/xor take and give uint8.
enum class BinaryFn : uint8_t {
  add, sub, mul, div, pow, min, max, mod, equal, less, greater, less_equal, greater_equal, and_, or_, xor_, count
};
/// reduce's functions (ONNX ReduceSum, ReduceMean, ... ReduceLogSumExp).
enum class ReduceFn : uint8_t { sum, mean, max, min, prod, sum_square, l1, l2, log_sum_exp, count };
/// pad's modes and resize's modes, coordinate mappings and rounding (ONNX's spellings in model.json).
enum class PadMode : uint8_t { constant, reflect, edge, count };
enum class ResizeMode : uint8_t { nearest, linear, count };
enum class ResizeCoords : uint8_t { half_pixel, pytorch_half_pixel, align_corners, asymmetric, count };
enum class NearestRound : uint8_t { round_prefer_floor, round_prefer_ceil, floor, ceil, count };

std::string_view unary_fn_name(UnaryFn fn);
std::string_view binary_fn_name(BinaryFn fn);
std::string_view reduce_fn_name(ReduceFn fn);

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
  // expand: the target shape; constant: the value's shape; resize: output sizes (0 = from scales)
  Shape shape;

  // -- the general ops ---------------------------------------------------------------------------
  // unary, binary, reduce: the function (a UnaryFn, BinaryFn or ReduceFn); argmax: 0 max, 1 min;
  // pad: a PadMode; resize: a ResizeMode
  uint8_t fn = 0;
  // unary's parameters (see UnaryFn); pad: the constant value
  float alpha = 0.f, beta = 0.f;
  // transpose: the permutation (num_axes = rank); slice: the sliced axes; reduce: the reduced axes
  // (num_axes 0 = every axis, unless noop_with_empty_axes). Negative axes count from the end.
  int32_t num_axes = 0;
  int64_t axes[Shape::kMaxRank] = {};
  // slice, per listed axis: start, end (clamped, as numpy and ONNX do), step (non-zero)
  int64_t starts[Shape::kMaxRank] = {}, ends[Shape::kMaxRank] = {}, steps[Shape::kMaxRank] = {};
  // reduce, argmax: keep the reduced dims as 1; reduce with no axes reduces nothing when set
  bool keepdims = true, noop_with_empty_axes = false;
  // argmax: the last index of equal extremes (ONNX select_last_index)
  bool select_last_index = false;
  // pad: the begin pads of dims 0..rank-1, then the end pads (ONNX's order); negative crops
  int32_t num_pads = 0;
  int64_t pads[2 * Shape::kMaxRank] = {};
  // resize: per dim scale (1 = unchanged; only the last two dims may change), how output
  // coordinates map to input ones, and how nearest rounds
  float scales[Shape::kMaxRank] = {1.f, 1.f, 1.f, 1.f, 1.f, 1.f};
  uint8_t coords = 0;        // a ResizeCoords
  uint8_t nearest_round = 0; // a NearestRound
  // cast: the target dtype; constant: the value's dtype
  DType to = DType::f32;
  // expand, reshape: per output dim, -1 = shape[i], j >= 0 = dim j of the second input (a free dim
  // that the shape takes from another value; shape[i] is then ignored)
  int8_t like_dims[Shape::kMaxRank] = {-1, -1, -1, -1, -1, -1};
  // topk: k, the largest (else smallest), and which output: the values (else int64 indices)
  int64_t k = 1;
  bool largest = true, values_output = true;
  // conv_transpose2d: extra size on one side of the output
  int64_t output_padding[2] = {0, 0};
  // max_pool2d, avg_pool2d: output size rounds up; avg_pool2d: padding counts in the divisor
  bool ceil_mode = false, count_include_pad = true;
  // group_norm: the groups num_features (channels) fall into (instance norm: one per channel)
  int64_t num_groups = 1;
  // softmax: log-softmax instead
  bool log = false;
  // kv_attention (num_heads above is H): kv heads, head size, the layer's index among the model's
  // kv_attention layers (its place in a KV block), rotary dims, score scale (0 = 1/sqrt(head_dim))
  int64_t num_kv_heads = 0, head_dim = 0, kv_layer = 0, rope_dim = 0;
  float scale = 0.f;
  // Every op: the width its float weights are held at (float32, float16 or bfloat16; one per
  // layer). Not in model.json: Model sets it from the weights file when it loads.
  DType weights = DType::f32;
};

/// One weight an op takes, in the fixed order its kernels receive them.
struct WeightSpec {
  std::string_view role;  // "weight", "bias", "running_mean", "in_proj_weight", ...
  Shape shape;            // exact expected shape
  bool required = true;   // false: may be absent (e.g. bias when attrs.bias is false)
  /// An exact_weights op's weight (constant's value, kv_attention's inv_freq) must be exactly this
  /// dtype. Every other weight is a float: float32, or float16 / bfloat16 held at that width (one
  /// width per layer: LayerAttrs::weights).
  DType dtype = DType::f32;
};

/// At most this many inputs per layer (concat of DenseNet's blocks reads up to 49).
inline constexpr int kMaxLayerInputs = 64;
inline constexpr int kMaxLayerWeights = 4;
/// Attention kernels process at most this many (batch, head) slices at once; the score workspace
/// holds one [seq, seq] matrix per slice.
inline constexpr int64_t kAttentionParallelSlices = 16;

/// kv_attention: the largest head_dim (the CPU kernel converts a row of a half-precision cache
/// into a stack buffer of this many floats; every model Ember serves has 64 to 256).
inline constexpr int64_t kKvMaxHeadDim = 512;

/// kv_attention's kv_meta, int64 [M] with M = kKvMetaHeader + T + B * W:
///   1. [0] B, the sequences in the step (>= 1)
///   2. [1] block_size, positions per KV block (>= 1)
///   3. [2] W, block-table width: blocks listed per sequence (>= 1)
///   4. [3] the cache's element type, a KvCacheType
///   5. [4, 4 + T): each token's sequence index in [0, B)
///   6. [4 + T, 4 + T + B * W): row s lists sequence s's block addresses (device addresses as int64)
///      in position order: position p of sequence s lives in block row[p / block_size], slot
///      p % block_size; entries no position uses are 0.
/// A KV block is one contiguous device range holding block_size positions of every kv_attention
/// layer: layer l's K then V, each [block_size, num_kv_heads, head_dim] of the cache type, at
/// block + l * kv_layer_bytes(...).
enum class KvCacheType : int64_t { f32 = 0, f16 = 1, bf16 = 2 };
inline constexpr int64_t kKvMetaHeader = 4;
static_assert(sizeof(int64_t) == 8, "kv_meta entries are 8-byte device addresses and counts");

/// The DType of a kv_meta cache type code (0, 1, 2), or nothing for another code.
std::optional<DType> kv_cache_dtype(int64_t code);
/// Bytes of one kv_attention layer's K and V in a block: 2 * block_size * num_kv_heads * head_dim
/// * element size; 0 when that overflows int64.
int64_t kv_layer_bytes(const LayerAttrs& attrs, int64_t block_size, DType cache);
/// The score scale a kv_attention layer uses: attrs.scale, or 1/sqrt(head_dim) when it is 0.
float kv_attention_scale(const LayerAttrs& attrs);
/// Where kv_attention's kernels keep their scratch (op_scratch_bytes): the block table resolved to
/// the kernel's own addresses (an 8-byte slot per kv_meta entry; the CPU kernel's, whose cache
/// pointers are host pointers), then each token's q heads rotated and scaled, [T, H * D] float32.
struct KvAttentionScratch {
  uint64_t blocks = 0, q = 0, bytes = 0;  // offsets and total, bytes
};
KvAttentionScratch kv_attention_scratch(const LayerAttrs& attrs, int64_t tokens, int64_t meta_entries);
/// Checks a step's kv_meta and positions (host copies) for a kv_attention layer, before a launch:
/// the header (B, block_size and W >= 1, a known cache type, M == 4 + T + B * W, every block's
/// layer range within int64), each token's sequence index in [0, B), each position >= 0 with its
/// block inside the table, each sequence's positions increasing in token order (no two tokens
/// write one slot), and a nonzero block address for every position 0 ..= p a token attends to.
/// invalid_argument naming the first offending entry.
Status check_kv_meta(const LayerAttrs& attrs, std::span<const int64_t> positions, std::span<const int64_t> kv_meta);

/// Ops whose weights keep their dtype when a model's weights are narrowed (model/convert.hpp)
/// and are never widened by the kernels: constant's value (data, not parameters) and
/// kv_attention's inv_freq (rotary angles of thousands of radians need float32's 24 bits).
inline bool exact_weights(OpKind op) { return op == OpKind::constant || op == OpKind::kv_attention; }

/// numpy broadcasting of two shapes; invalid_argument naming both when a pair of dims differs and
/// neither is 1.
Result<Shape> broadcast_shapes(const Shape& a, const Shape& b);

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
/// With half-precision weights (attrs.weights float16 or bfloat16) every op with float weights but
/// embedding gets more after its own scratch, at offset op_scratch_bytes(): room for its weights
/// widened to float32 (what the CPU kernels compute from) and for its first input narrowed to the
/// weights' width (what a GPU's half-precision GEMM reads): 4 bytes per weight element plus 2 per
/// input element. Embedding widens the rows it looks up as it copies them.
uint64_t workspace_bytes(OpKind op, const LayerAttrs& attrs, std::span<const TensorDesc> inputs);
/// The op's own scratch: workspace_bytes() without the half-precision room.
uint64_t op_scratch_bytes(OpKind op, const LayerAttrs& attrs, std::span<const TensorDesc> inputs);
/// Whether a layer of `op` with these attributes gets the half-precision room in its workspace.
bool widens_weights(OpKind op, const LayerAttrs& attrs);

/// How the CPU conv2d kernel organises its work; workspace_bytes() sizes the scratch
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
  /// One input channel per group (groups == C > 1: depthwise, any channel multiplier O/g): a
  /// direct loop per output plane (gpu/kernels_cpu_depthwise.cpp), no GEMM. No scratch (the CUDA
  /// kernels run grouped convolutions directly too). Chosen before the others: as `groups` GEMMs of
  /// O/g rows by kh*kw, BLAS's call overhead was most of the time. A one-channel input with groups 1
  /// stays a GEMM: one product of O rows, and CUDA's im2col needs the scratch.
  depthwise,
};
inline constexpr int64_t kConvBatchedColumns = 256;
ConvPlan conv_plan(const LayerAttrs& attrs, const Shape& input);

/// Floating-point operations a layer performs (multiply-add = 2), for benchmarks and planning.
double flops(OpKind op, const LayerAttrs& attrs, std::span<const TensorDesc> inputs, const TensorDesc& output);

}  // namespace ember::gpu
