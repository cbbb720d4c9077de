#include "importer/hf_families.hpp"

#include <algorithm>
#include <set>

namespace ember::importer {

namespace {

using gpu::DType;
using gpu::LayerAttrs;
using gpu::OpKind;
using gpu::Shape;

std::string shape_text(const Shape& s) { return s.to_string(); }

// One weight of a layer being planned: its role and how it is made.
struct RoleRecipe {
  std::string role;
  Shape shape;
  WeightRecipe recipe;
};

class Planner {
 public:
  Planner(const HfConfig& config, const HfCheckpoint& checkpoint, HfPlan& plan)
      : config_(config), ckpt_(checkpoint), plan_(plan) {}

  const Status& status() const { return status_; }

  /// Checkpoint tensor `name` must be a float of shape `want`; remembered as read.
  void expect(const std::string& name, const Shape& want) {
    if (!status_.ok()) return;
    const HfTensor* t = ckpt_.find(name);
    if (!t) {
      status_ = not_found("the checkpoint has no tensor '" + name + "' (a " + std::string(family_name(config_.family)) +
                          " model of this config needs it, " + shape_text(want) + ")");
      return;
    }
    if (!gpu::is_float(t->info.desc.dtype)) {
      status_ = unsupported(t->file + ": tensor '" + name + "' is " + std::string(gpu::dtype_name(t->info.desc.dtype)) +
                            "; the importer reads float32, float16 and bfloat16 weights (not quantized ones)");
      return;
    }
    if (t->info.desc.shape != want) {
      status_ = invalid_argument(t->file + ": tensor '" + name + "' has shape " + shape_text(t->info.desc.shape) +
                                 "; config.json implies " + shape_text(want));
      return;
    }
    used_.insert(name);
  }
  void ignore(const std::string& name) {
    if (ckpt_.find(name) && used_.insert(name).second) plan_.ignored.push_back(name);
  }

  RoleRecipe copy(const std::string& role, const std::string& from, const Shape& shape) {
    expect(from, shape);
    return {role, shape, {WeightRecipe::Kind::copy, {from}, {}}};
  }
  // A Conv1D weight stored [in, out], Ember's [out, in].
  RoleRecipe transposed(const std::string& role, const std::string& from, int64_t in, int64_t out) {
    expect(from, Shape{in, out});
    return {role, Shape{out, in}, {WeightRecipe::Kind::transpose, {from}, {}}};
  }
  // Row blocks stacked: each part [rows_i, cols...].
  RoleRecipe stacked(const std::string& role, const std::vector<std::pair<std::string, Shape>>& parts) {
    RoleRecipe r{role, parts.front().second, {WeightRecipe::Kind::concat_rows, {}, {}}};
    r.shape[0] = 0;
    for (const auto& [name, shape] : parts) {
      expect(name, shape);
      r.recipe.from.push_back(name);
      r.shape[0] += shape[0];
    }
    return r;
  }

  /// Appends a layer; returns its name (its output value).
  std::string layer(const std::string& name, OpKind op, const LayerAttrs& attrs, std::vector<std::string> inputs,
                    std::vector<RoleRecipe> weights = {}) {
    gpu::LayerSpec l;
    l.name = name;
    l.op = op;
    l.attrs = attrs;
    l.inputs = std::move(inputs);
    for (const gpu::WeightSpec& spec : gpu::weight_specs(op, attrs)) {
      auto it = std::find_if(weights.begin(), weights.end(), [&](const RoleRecipe& r) { return r.role == spec.role; });
      if (it == weights.end()) {
        if (spec.required && status_.ok()) status_ = internal_error("plan: layer '" + name + "' lacks " + std::string(spec.role));
        continue;
      }
      if (it->shape != spec.shape && status_.ok()) {
        status_ = internal_error("plan: layer '" + name + "' " + it->role + " is " + shape_text(it->shape) + ", the op takes " +
                                 shape_text(spec.shape));
      }
      const std::string tensor = name + "." + it->role;
      l.weights.push_back({it->role, tensor});
      const auto n = static_cast<uint64_t>(it->shape.numel());
      plan_.parameters += n;
      if (it->recipe.kind == WeightRecipe::Kind::copy && !copied_.insert(it->recipe.from.front()).second) {
        plan_.duplicated_elements += n;
      }
      plan_.weights.push_back({tensor, it->shape, gpu::exact_weights(op), std::move(it->recipe)});
    }
    plan_.manifest.layers.push_back(std::move(l));
    return name;
  }

  /// Every checkpoint tensor must have been read or deliberately ignored.
  Status leftovers() const {
    if (!status_.ok()) return status_;
    std::vector<std::string> left;
    for (const auto& name : ckpt_.names())
      if (!used_.count(name)) left.push_back(name);
    if (left.empty()) return Status::OK();
    std::string list;
    for (size_t i = 0; i < left.size() && i < 8; ++i) list += (i ? ", " : "") + left[i];
    if (left.size() > 8) list += ", ... (" + std::to_string(left.size()) + " in all)";
    return unsupported("the checkpoint has tensors a " + std::string(family_name(config_.family)) + " (" +
                       config_.model_type + ") model of this config does not use: " + list +
                       " (another architecture or layout?)");
  }

 private:
  const HfConfig& config_;
  const HfCheckpoint& ckpt_;
  HfPlan& plan_;
  Status status_;
  std::set<std::string> used_;
  std::set<std::string> copied_;  // sources copied once already (a second copy is a duplicate)
};

LayerAttrs linear(int64_t in, int64_t out, bool bias) {
  LayerAttrs a;
  a.in_features = in;
  a.out_features = out;
  a.bias = bias;
  return a;
}

LayerAttrs norm(int64_t n, float eps) {
  LayerAttrs a;
  a.num_features = n;
  a.eps = eps;
  return a;
}

LayerAttrs embedding(int64_t rows, int64_t dim) {
  LayerAttrs a;
  a.num_embeddings = rows;
  a.embedding_dim = dim;
  return a;
}

LayerAttrs kv_attention(const HfConfig& c, int64_t layer, bool rotary) {
  LayerAttrs a;
  a.num_heads = c.heads;
  a.num_kv_heads = c.kv_heads;
  a.head_dim = c.head_dim;
  a.kv_layer = layer;
  a.rope_dim = rotary ? c.head_dim : 0;
  a.scale = attention_scale(c, layer);
  return a;
}

void declare_io(gpu::Manifest& m, int64_t vocab) {
  for (const char* name : {"input_ids", "positions", "kv_meta", "last_index"}) {
    m.inputs.push_back({name, DType::i64, Shape{-1}});
  }
  m.outputs.push_back({"logits", DType::f32, Shape{-1, vocab}});
}

// The tail both families share: the last rows gathered, the final norm, the head.
void plan_tail(Planner& p, const std::string& h, OpKind norm_op, const std::string& norm_name,
               std::vector<RoleRecipe> norm_weights, float eps, int64_t e, RoleRecipe head) {
  LayerAttrs g;
  g.dim = 0;
  const std::string rows = p.layer("last_rows", OpKind::gather, g, {h, "last_index"});
  const std::string normed = p.layer(norm_name, norm_op, norm(e, eps), {rows}, std::move(norm_weights));
  p.layer("logits", OpKind::linear, linear(e, head.shape[0], false), {normed}, {std::move(head)});
}

void plan_gpt2(const HfConfig& c, const HfCheckpoint& ckpt, Planner& p) {
  const int64_t e = c.hidden, inner = c.intermediate, v = c.vocab_size;
  // transformers' GPT2LMHeadModel saves "transformer.*"; the original openai checkpoints have no prefix.
  const std::string src = ckpt.find("transformer.wte.weight") ? "transformer." : "";
  const std::string wte = p.layer("transformer.wte", OpKind::embedding, embedding(v, e), {"input_ids"},
                                  {p.copy("weight", src + "wte.weight", Shape{v, e})});
  const std::string wpe = p.layer("transformer.wpe", OpKind::embedding, embedding(c.context_length, e), {"positions"},
                                  {p.copy("weight", src + "wpe.weight", Shape{c.context_length, e})});
  std::string h = p.layer("transformer.embed", OpKind::add, {}, {wte, wpe});
  auto ln = [&](const std::string& at, const std::string& name, const std::string& x) {
    return p.layer("transformer." + at + name, OpKind::layer_norm, norm(e, c.norm_eps), {x},
                   {p.copy("weight", src + at + name + ".weight", Shape{e}),
                    p.copy("bias", src + at + name + ".bias", Shape{e})});
  };
  auto conv1d = [&](const std::string& at, const std::string& name, const std::string& x, int64_t in, int64_t out) {
    return p.layer("transformer." + at + name, OpKind::linear, linear(in, out, true), {x},
                   {p.transposed("weight", src + at + name + ".weight", in, out),
                    p.copy("bias", src + at + name + ".bias", Shape{out})});
  };
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string at = "h." + std::to_string(i) + ".";
    p.ignore(src + at + "attn.bias");  // the causal mask buffer older checkpoints saved
    p.ignore(src + at + "attn.masked_bias");
    const std::string qkv = conv1d(at, "attn.c_attn", ln(at, "ln_1", h), e, 3 * e);
    const std::string attn =
        p.layer("transformer." + at + "attn.kv", OpKind::kv_attention, kv_attention(c, i, false), {qkv, "positions", "kv_meta"});
    h = p.layer("transformer." + at + "attn_residual", OpKind::add, {}, {h, conv1d(at, "attn.c_proj", attn, e, e)});
    const std::string fc = conv1d(at, "mlp.c_fc", ln(at, "ln_2", h), e, inner);
    std::string act;
    if (c.activation == HfActivation::relu) {
      act = p.layer("transformer." + at + "mlp.act", OpKind::relu, {}, {fc});
    } else {
      LayerAttrs g;
      g.tanh_approximation = c.activation == HfActivation::gelu_tanh;
      act = p.layer("transformer." + at + "mlp.act", OpKind::gelu, g, {fc});
    }
    h = p.layer("transformer." + at + "mlp_residual", OpKind::add, {}, {h, conv1d(at, "mlp.c_proj", act, inner, e)});
  }
  RoleRecipe head = c.tie_word_embeddings ? p.copy("weight", src + "wte.weight", Shape{v, e})
                                          : p.copy("weight", "lm_head.weight", Shape{v, e});
  if (c.tie_word_embeddings) p.ignore("lm_head.weight");
  plan_tail(p, h, OpKind::layer_norm, "transformer.ln_f",
            {p.copy("weight", src + "ln_f.weight", Shape{e}), p.copy("bias", src + "ln_f.bias", Shape{e})}, c.norm_eps, e,
            std::move(head));
}

void plan_llama(const HfConfig& c, Planner& p) {
  const int64_t e = c.hidden, inner = c.intermediate, v = c.vocab_size, d = c.head_dim;
  const int64_t q_rows = c.heads * d, kv_rows = c.kv_heads * d;
  std::string h = p.layer("model.embed_tokens", OpKind::embedding, embedding(v, e), {"input_ids"},
                          {p.copy("weight", "model.embed_tokens.weight", Shape{v, e})});
  auto rms = [&](const std::string& name, const std::string& x) {
    return p.layer(name, OpKind::rms_norm, norm(e, c.norm_eps), {x}, {p.copy("weight", name + ".weight", Shape{e})});
  };
  auto proj = [&](const std::string& name, const std::string& x, int64_t in, int64_t out, bool bias) {
    std::vector<RoleRecipe> w{p.copy("weight", name + ".weight", Shape{out, in})};
    if (bias) w.push_back(p.copy("bias", name + ".bias", Shape{out}));
    return p.layer(name, OpKind::linear, linear(in, out, bias), {x}, std::move(w));
  };
  const std::vector<float> inv_freq = rope_inv_freq(c);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string at = "model.layers." + std::to_string(i) + ".";
    p.ignore(at + "self_attn.rotary_emb.inv_freq");  // a buffer older checkpoints saved
    const std::string x = rms(at + "input_layernorm", h);
    std::vector<RoleRecipe> qkv_w{p.stacked("weight", {{at + "self_attn.q_proj.weight", Shape{q_rows, e}},
                                                       {at + "self_attn.k_proj.weight", Shape{kv_rows, e}},
                                                       {at + "self_attn.v_proj.weight", Shape{kv_rows, e}}})};
    if (c.qkv_bias) {
      qkv_w.push_back(p.stacked("bias", {{at + "self_attn.q_proj.bias", Shape{q_rows}},
                                         {at + "self_attn.k_proj.bias", Shape{kv_rows}},
                                         {at + "self_attn.v_proj.bias", Shape{kv_rows}}}));
    }
    const std::string qkv = p.layer(at + "self_attn.qkv_proj", OpKind::linear, linear(e, q_rows + 2 * kv_rows, c.qkv_bias),
                                    {x}, std::move(qkv_w));
    const std::string attn =
        p.layer(at + "self_attn.kv_attention", OpKind::kv_attention, kv_attention(c, i, true), {qkv, "positions", "kv_meta"},
                {{"inv_freq", Shape{d / 2}, {WeightRecipe::Kind::values, {}, inv_freq}}});
    h = p.layer(at + "attn_residual", OpKind::add, {}, {h, proj(at + "self_attn.o_proj", attn, q_rows, e, c.o_bias)});
    const std::string y = rms(at + "post_attention_layernorm", h);
    const std::string gate = proj(at + "mlp.gate_proj", y, e, inner, c.mlp_bias);
    const std::string up = proj(at + "mlp.up_proj", y, e, inner, c.mlp_bias);
    LayerAttrs silu;
    silu.fn = static_cast<uint8_t>(gpu::UnaryFn::silu);
    LayerAttrs mul;
    mul.fn = static_cast<uint8_t>(gpu::BinaryFn::mul);
    const std::string act = p.layer(at + "mlp.act", OpKind::unary, silu, {gate});
    const std::string prod = p.layer(at + "mlp.gate_up", OpKind::binary, mul, {act, up});
    h = p.layer(at + "mlp_residual", OpKind::add, {}, {h, proj(at + "mlp.down_proj", prod, inner, e, c.mlp_bias)});
  }
  RoleRecipe head = c.tie_word_embeddings ? p.copy("weight", "model.embed_tokens.weight", Shape{v, e})
                                          : p.copy("weight", "lm_head.weight", Shape{v, e});
  if (c.tie_word_embeddings) p.ignore("lm_head.weight");
  plan_tail(p, h, OpKind::rms_norm, "model.norm", {p.copy("weight", "model.norm.weight", Shape{e})}, c.norm_eps, e,
            std::move(head));
}

}  // namespace

Result<HfPlan> plan_hf_model(const HfConfig& config, const HfCheckpoint& checkpoint, const std::string& name) {
  HfPlan plan;
  plan.manifest.name = name;
  declare_io(plan.manifest, config.vocab_size);
  Planner p(config, checkpoint, plan);
  if (config.family == HfFamily::gpt2) {
    plan_gpt2(config, checkpoint, p);
  } else {
    plan_llama(config, p);
  }
  EMBER_RETURN_IF_ERROR(p.leftovers());
  return plan;
}

}  // namespace ember::importer
