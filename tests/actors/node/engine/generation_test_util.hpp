// The generation tests' shared decoder (engine room): a small GPT-2-shaped model over
// docs/design/generation.md's four inputs (learned positions, two kv_attention blocks with
// grouped-query heads, one with rotary), its loop spec, and the greedy tokens it gives when each
// step recomputes the whole sequence (the reference the cached, batched paths must match).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <memory>
#include <vector>

#include "actors/node/engine/generation_loop.hpp"
#include "actors/node/engine/step_inputs.hpp"
#include "model/model_builder.hpp"

namespace ember::engine::generation_test {

using gpu::DType;
using gpu::LayerAttrs;
using gpu::OpKind;
using gpu::Shape;

inline constexpr uint64_t KiB = 1ull << 10;
inline constexpr uint64_t MiB = 1ull << 20;
inline constexpr int64_t kVocab = 97, kEmbed = 32, kHeads = 4, kKvHeads = 2, kHeadDim = 8, kLayers = 2, kContext = 128;

// A GPT-2-shaped decoder over docs/design/generation.md's inputs, random weights (seeded); with
// `generative`, model.json's generation section too (no tokenizer), as the engine needs it.
inline std::shared_ptr<const gpu::Model> decoder(const std::filesystem::path& dir, bool generative = false) {
  gpu::ModelBuilder b("tiny-decoder", 11);
  const std::string ids = b.input("input_ids", DType::i64, Shape{-1});
  const std::string pos = b.input("positions", DType::i64, Shape{-1});
  const std::string meta = b.input("kv_meta", DType::i64, Shape{-1});
  const std::string last = b.input("last_index", DType::i64, Shape{-1});
  LayerAttrs emb;
  emb.num_embeddings = kVocab, emb.embedding_dim = kEmbed;
  const std::string wte = b.add("wte", OpKind::embedding, emb, {ids}, "wte");
  emb.num_embeddings = kContext;
  const std::string wpe = b.add("wpe", OpKind::embedding, emb, {pos}, "wpe");
  std::string h = b.add("embed", OpKind::add, {}, {wte, wpe});
  LayerAttrs norm;
  norm.num_features = kEmbed;
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string p = "h" + std::to_string(l) + ".";
    const std::string n = b.add(p + "ln", OpKind::layer_norm, norm, {h}, p + "ln");
    LayerAttrs qkv;
    qkv.in_features = kEmbed, qkv.out_features = (kHeads + 2 * kKvHeads) * kHeadDim;
    const std::string q = b.add(p + "qkv", OpKind::linear, qkv, {n}, p + "qkv");
    LayerAttrs attn;
    attn.num_heads = kHeads, attn.num_kv_heads = kKvHeads, attn.head_dim = kHeadDim, attn.kv_layer = l;
    attn.rope_dim = l == 0 ? 0 : kHeadDim;  // one block with rotary, one without
    const std::string a = b.add(p + "attn", OpKind::kv_attention, attn, {q, pos, meta}, p + "attn");
    LayerAttrs out;
    out.in_features = kHeads * kHeadDim, out.out_features = kEmbed;
    h = b.add(p + "residual", OpKind::add, {}, {h, b.add(p + "proj", OpKind::linear, out, {a}, p + "proj")});
  }
  LayerAttrs gather;
  gather.dim = 0;
  const std::string g = b.add("last", OpKind::gather, gather, {h, last});
  const std::string f = b.add("ln_f", OpKind::layer_norm, norm, {g}, "ln_f");
  LayerAttrs head;
  head.in_features = kEmbed, head.out_features = kVocab, head.bias = false;
  b.output(b.add("logits", OpKind::linear, head, {f}, "lm_head"), DType::f32, Shape{-1, kVocab});
  if (generative) {
    gpu::GenerationSpec g;
    g.family = "gpt2";
    g.context_length = kContext;
    g.vocab_size = kVocab;
    g.num_kv_layers = kLayers;
    g.num_kv_heads = kKvHeads;
    g.head_dim = kHeadDim;
    b.generation() = g;
  }
  EXPECT_TRUE(b.write(dir.string()).ok());
  auto model = gpu::Model::load(dir);
  EXPECT_TRUE(model.ok()) << model.error().message();
  return *model;
}

inline GenerativeSpec spec() {
  GenerativeSpec s;
  s.layout.num_kv_layers = kLayers;
  s.layout.num_kv_heads = kKvHeads;
  s.layout.head_dim = kHeadDim;
  s.layout.block_size = 4;  // small: sequences cross blocks often
  s.vocab_size = kVocab;
  s.context_window = kContext;
  return s;
}


// The reference: greedy tokens, each from the whole sequence so far run in one step on `ex` over
// blocks of its own (no cache carried between steps).
inline std::vector<int32_t> recomputed(gpu::Device& device, gpu::LayerExecutor& ex, std::vector<int32_t> tokens,
                                       size_t n) {
  std::vector<int32_t> out;
  auto pool = gpu::DeviceBuffer::allocate(device, 64 * spec().layout.block_bytes());
  EXPECT_TRUE(pool.ok());
  std::vector<gpu::DevicePtr> table;
  for (uint64_t b = 0; b < 64; ++b) table.push_back((*pool)->ptr() + b * spec().layout.block_bytes());
  for (size_t i = 0; i < n; ++i) {
    StepSequence s;
    s.tokens.assign(tokens.begin(), tokens.end());
    s.table = table;
    auto in = build_step_inputs({s}, spec().layout.block_size, DType::f32);
    EXPECT_TRUE(in.ok()) << in.error().message();
    auto logits = ex.run_host(in->take());
    EXPECT_TRUE(logits.ok()) << logits.error().message();
    const float* row = (*logits)[0].as<float>();
    const int32_t next = static_cast<int32_t>(std::max_element(row, row + kVocab) - row);
    out.push_back(next);
    tokens.push_back(next);
  }
  return out;
}

// What one request received through its emit.
struct Received {
  std::vector<int32_t> tokens;
  std::vector<GenerationOutput> finals;
};

// A greedy request of `max_tokens` whose outputs land in got[id].
inline GenerationJob job(const std::string& id, std::vector<int32_t> prompt, int64_t max_tokens,
                         std::map<std::string, Received>& got) {
  GenerationJob j;
  j.id = id;
  j.prompt = std::move(prompt);
  j.sampling.temperature = 0;
  j.stop.max_tokens = max_tokens;
  j.emit = [&got, id](GenerationOutput out) {
    Received& r = got[id];
    r.tokens.insert(r.tokens.end(), out.tokens.begin(), out.tokens.end());
    if (out.final) r.finals.push_back(std::move(out));
  };
  return j;
}

}  // namespace ember::engine::generation_test
