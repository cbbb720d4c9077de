// kv_attention's part of the op table (ops.hpp documents the op and kv_meta): attributes, shapes,
// scratch, and the check of a step's kv_meta values that the layer executor runs before a launch.
#include <cmath>
#include <limits>
#include <vector>

#include "model/op_detail.hpp"

namespace ember::gpu {

using namespace op_detail;

namespace {

// The attribute rules parse_attrs enforces, checked again by infer_output for attributes built in
// C++ (an importer, a test) that never went through model.json.
Status check_attrs(const LayerAttrs& a) {
  if (a.num_heads < 1 || a.num_kv_heads < 1 || a.head_dim < 1) {
    return invalid_argument("num_heads, num_kv_heads and head_dim must be at least 1");
  }
  if (a.num_heads % a.num_kv_heads) {
    return invalid_argument("num_kv_heads " + std::to_string(a.num_kv_heads) + " must divide num_heads " +
                            std::to_string(a.num_heads));
  }
  if (a.head_dim > kKvMaxHeadDim) {
    return invalid_argument("head_dim " + std::to_string(a.head_dim) + " is above the " +
                            std::to_string(kKvMaxHeadDim) + " the kernels take");
  }
  if (a.rope_dim < 0 || a.rope_dim % 2 || a.rope_dim > a.head_dim) {
    return invalid_argument("rope_dim " + std::to_string(a.rope_dim) + " must be even and at most head_dim " +
                            std::to_string(a.head_dim));
  }
  if (a.kv_layer < 0) return invalid_argument("kv_layer must be at least 0");
  if (!(a.scale >= 0.f) || std::isinf(a.scale)) return invalid_argument("scale must be finite and positive (0: default)");
  return Status::OK();
}

Status need_int64_vector(const TensorDesc& d, int which, const char* what) {
  if (d.dtype != DType::i64 || d.shape.rank != 1) {
    return invalid_argument("input " + std::to_string(which) + " (" + what + ") is " + describe(d) +
                            ", expected int64 [n]");
  }
  return Status::OK();
}

}  // namespace

std::optional<DType> kv_cache_dtype(int64_t code) {
  switch (code) {
    case static_cast<int64_t>(KvCacheType::f32): return DType::f32;
    case static_cast<int64_t>(KvCacheType::f16): return DType::f16;
    case static_cast<int64_t>(KvCacheType::bf16): return DType::bf16;
    default: return std::nullopt;
  }
}

int64_t kv_layer_bytes(const LayerAttrs& a, int64_t block_size, DType cache) {
  int64_t n = 2 * static_cast<int64_t>(dtype_size(cache));
  for (int64_t f : {block_size, a.num_kv_heads, a.head_dim}) {
    if (f < 0 || __builtin_mul_overflow(n, f, &n)) return 0;
  }
  return n;
}

float kv_attention_scale(const LayerAttrs& a) {
  return a.scale > 0.f ? a.scale : 1.f / std::sqrt(static_cast<float>(a.head_dim));
}

KvAttentionScratch kv_attention_scratch(const LayerAttrs& a, int64_t tokens, int64_t meta_entries) {
  KvAttentionScratch s;
  s.blocks = 0;
  s.q = static_cast<uint64_t>(meta_entries) * 8;
  s.bytes = s.q + static_cast<uint64_t>(tokens * a.num_heads * a.head_dim) * 4;
  return s;
}

Status check_kv_meta(const LayerAttrs& a, std::span<const int64_t> positions, std::span<const int64_t> meta) {
  const auto tokens = static_cast<int64_t>(positions.size()), entries = static_cast<int64_t>(meta.size());
  auto bad = [](const std::string& why) { return invalid_argument("kv_meta: " + why); };
  auto str = [](int64_t v) { return std::to_string(v); };
  if (entries < kKvMetaHeader + tokens) {
    return bad("has " + str(entries) + " entries, fewer than its header's 4 plus one per token (" + str(tokens) + ")");
  }
  const int64_t seqs = meta[0], block_size = meta[1], width = meta[2];
  if (seqs < 1) return bad("[0] sequences is " + str(seqs) + ", must be at least 1");
  if (block_size < 1) return bad("[1] block_size is " + str(block_size) + ", must be at least 1");
  if (width < 1) return bad("[2] block-table width is " + str(width) + ", must be at least 1");
  const std::optional<DType> cache = kv_cache_dtype(meta[3]);
  if (!cache) return bad("[3] cache type " + str(meta[3]) + " is not 0 (float32), 1 (float16) or 2 (bfloat16)");
  int64_t table = 0;
  if (__builtin_mul_overflow(seqs, width, &table) || table != entries - kKvMetaHeader - tokens) {
    return bad("has " + str(entries) + " entries, but 4 + tokens (" + str(tokens) + ") + sequences (" + str(seqs) +
               ") * width (" + str(width) + ") are not that many");
  }
  const int64_t layer = kv_layer_bytes(a, block_size, *cache);
  int64_t end = 0;
  if (layer == 0 || __builtin_mul_overflow(a.kv_layer + 1, layer, &end)) {
    return bad("[1] block_size " + str(block_size) + " puts layer " + str(a.kv_layer) + "'s K and V past int64");
  }
  const int64_t* rows = meta.data() + kKvMetaHeader + tokens;
  std::vector<int64_t> last(static_cast<size_t>(seqs), -1);  // each sequence's last position so far
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t s = meta[static_cast<size_t>(kKvMetaHeader + t)], p = positions[static_cast<size_t>(t)];
    if (s < 0 || s >= seqs) {
      return bad("[" + str(kKvMetaHeader + t) + "] token " + str(t) + "'s sequence " + str(s) + " is outside [0, " +
                 str(seqs) + ")");
    }
    if (p < 0) return invalid_argument("positions[" + str(t) + "] is " + str(p) + ", must be at least 0");
    if (p / block_size >= width) {
      return bad("token " + str(t) + " at position " + str(p) + " needs block " + str(p / block_size) +
                 " of sequence " + str(s) + ", past the table's " + str(width) + " blocks of " + str(block_size));
    }
    int64_t& prev = last[static_cast<size_t>(s)];
    if (p <= prev) {
      return bad("token " + str(t) + " of sequence " + str(s) + " is at position " + str(p) +
                 ", not after its earlier token's " + str(prev) + " (a sequence's positions increase)");
    }
    prev = p;
  }
  for (int64_t s = 0; s < seqs; ++s) {
    const int64_t p = last[static_cast<size_t>(s)];
    for (int64_t b = 0; p >= 0 && b <= p / block_size; ++b) {
      if (rows[s * width + b] == 0) {
        return bad("[" + str(kKvMetaHeader + tokens + s * width + b) + "] sequence " + str(s) + "'s block " + str(b) +
                   " is 0, but its token at position " + str(p) + " attends to positions " + str(b * block_size) +
                   ".." + str(std::min(p, (b + 1) * block_size - 1)) + " there");
      }
    }
  }
  return Status::OK();
}

namespace op_detail {

void parse_kv_attention_attrs(AttrReader& r, LayerAttrs& a) {
  a.num_heads = r.integer("num_heads", 0, true, 1);
  a.num_kv_heads = r.integer("num_kv_heads", a.num_heads, false, 1);
  a.head_dim = r.integer("head_dim", 0, true, 1);
  a.kv_layer = r.integer("kv_layer", 0, true, 0);
  a.rope_dim = r.integer("rope_dim", 0, false, 0);
  a.scale = r.number("scale", 0.f, 0.f, std::numeric_limits<float>::max());
  if (!r.error().ok()) return;
  if (a.num_heads % a.num_kv_heads) r.fail("num_kv_heads", "must divide num_heads");
  if (a.head_dim > kKvMaxHeadDim) r.fail("head_dim", "must be at most " + std::to_string(kKvMaxHeadDim));
  if (a.rope_dim % 2 || a.rope_dim > a.head_dim) r.fail("rope_dim", "must be even and at most head_dim");
}

void kv_attention_attrs_to_json(const LayerAttrs& a, json& out) {
  out = {{"num_heads", a.num_heads}, {"num_kv_heads", a.num_kv_heads}, {"head_dim", a.head_dim},
         {"kv_layer", a.kv_layer},   {"rope_dim", a.rope_dim}};
  if (a.scale > 0.f) out["scale"] = a.scale;
}

Result<TensorDesc> infer_kv_attention(const LayerAttrs& a, std::span<const TensorDesc> in) {
  EMBER_RETURN_IF_ERROR(check_attrs(a));
  const TensorDesc& qkv = in[0];
  EMBER_RETURN_IF_ERROR(need_float(qkv, 0));
  EMBER_RETURN_IF_ERROR(need_rank(qkv, 2, 0));
  EMBER_RETURN_IF_ERROR(need_dim(qkv, 1, (a.num_heads + 2 * a.num_kv_heads) * a.head_dim,
                                 "(num_heads + 2 num_kv_heads) head_dim"));
  const int64_t tokens = qkv.shape[0];
  EMBER_RETURN_IF_ERROR(need_int64_vector(in[1], 1, "positions"));
  if (in[1].shape[0] != tokens) {
    return invalid_argument("input 1 (positions) " + describe(in[1]) + " must have one entry per token of qkv " +
                            qkv.shape.to_string());
  }
  // kv_meta's length, 4 + T + B * W, depends on its values: check_kv_meta checks it at run.
  EMBER_RETURN_IF_ERROR(need_int64_vector(in[2], 2, "kv_meta"));
  return TensorDesc{DType::f32, Shape{tokens, a.num_heads * a.head_dim}};
}

uint64_t kv_attention_scratch_bytes(const LayerAttrs& a, std::span<const TensorDesc> in) {
  return kv_attention_scratch(a, in[0].shape[0], in[2].shape[0]).bytes;
}

}  // namespace op_detail
}  // namespace ember::gpu
