// model/ops_kv_attention.cpp: kv_attention's attributes survive model.json, bad ones are refused
// with the reason, shapes infer as ops.hpp says, a model using the op loads (and keeps its rotary
// frequencies float32 when narrowed), and check_kv_meta refuses every inconsistent kv_meta the
// kernels must never see, naming the entry.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "model/convert.hpp"
#include "model/model_builder.hpp"
#include "model/ops.hpp"
#include "tests/model/model_test_util.hpp"

namespace ember::gpu {
namespace ops_kv_attention_test {

using nlohmann::json;
using testing::must;

TensorDesc f32(Shape s) { return {DType::f32, s}; }
TensorDesc i64(Shape s) { return {DType::i64, s}; }

Result<LayerAttrs> parse(const json& j) {
  LayerAttrs a;
  EMBER_RETURN_IF_ERROR(parse_attrs(OpKind::kv_attention, j, a, "layer"));
  return a;
}

// Llama-style: 4 q heads over 2 kv heads of 8, the first 4 dims rotating.
const json kGqa = {{"num_heads", 4}, {"num_kv_heads", 2}, {"head_dim", 8}, {"kv_layer", 1}, {"rope_dim", 4}};

TEST(KvAttentionOp, IsNamedAndTakesThreeInputs) {
  EXPECT_EQ(op_name(OpKind::kv_attention), "kv_attention");
  EXPECT_EQ(must(parse_op("kv_attention")), OpKind::kv_attention);
  EXPECT_EQ(input_count(OpKind::kv_attention), (std::pair{3, 3}));
  EXPECT_TRUE(exact_weights(OpKind::kv_attention));
}

TEST(KvAttentionOp, AttributesRoundTripThroughModelJson) {
  for (json j : {kGqa, json{{"num_heads", 3}, {"head_dim", 5}, {"kv_layer", 0}, {"scale", 0.125}}}) {
    SCOPED_TRACE(j.dump());
    const LayerAttrs a = must(parse(j));
    json out;
    attrs_to_json(OpKind::kv_attention, a, out);
    const LayerAttrs b = must(parse(out));
    EXPECT_EQ(b.num_heads, a.num_heads);
    EXPECT_EQ(b.num_kv_heads, a.num_kv_heads);
    EXPECT_EQ(b.head_dim, a.head_dim);
    EXPECT_EQ(b.kv_layer, a.kv_layer);
    EXPECT_EQ(b.rope_dim, a.rope_dim);
    EXPECT_EQ(b.scale, a.scale);
  }
  // Defaults: kv heads = heads (multi-head attention), no rotary, scale 1/sqrt(head_dim).
  const LayerAttrs mha = must(parse({{"num_heads", 3}, {"head_dim", 16}, {"kv_layer", 0}}));
  EXPECT_EQ(mha.num_kv_heads, 3);
  EXPECT_EQ(mha.rope_dim, 0);
  EXPECT_EQ(kv_attention_scale(mha), 0.25f);
  EXPECT_EQ(kv_attention_scale(must(parse({{"num_heads", 3}, {"head_dim", 16}, {"kv_layer", 0}, {"scale", 0.5}}))),
            0.5f);
}

TEST(KvAttentionOp, RefusesBadAttributesWithTheReason) {
  const std::pair<json, std::string> cases[] = {
      {{{"num_heads", 4}, {"kv_layer", 0}}, "head_dim: required"},
      {{{"num_heads", 4}, {"head_dim", 8}}, "kv_layer: required"},
      {{{"num_heads", 4}, {"num_kv_heads", 3}, {"head_dim", 8}, {"kv_layer", 0}}, "num_kv_heads: must divide"},
      {{{"num_heads", 4}, {"head_dim", 8}, {"kv_layer", 0}, {"rope_dim", 3}}, "rope_dim: must be even"},
      {{{"num_heads", 4}, {"head_dim", 8}, {"kv_layer", 0}, {"rope_dim", 10}}, "rope_dim: must be even and at most"},
      {{{"num_heads", 1}, {"head_dim", 513}, {"kv_layer", 0}}, "head_dim: must be at most 512"},
      {{{"num_heads", 4}, {"head_dim", 8}, {"kv_layer", -1}}, "kv_layer: -1 is outside"},
      {{{"num_heads", 4}, {"head_dim", 8}, {"kv_layer", 0}, {"scale", -1}}, "scale: -1 is outside"},
      {{{"num_heads", 4}, {"head_dim", 8}, {"kv_layer", 0}, {"causal", true}}, "unknown attribute 'causal'"},
  };
  for (const auto& [j, why] : cases) {
    SCOPED_TRACE(j.dump());
    auto a = parse(j);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(a.error().message().find(why), std::string::npos) << a.error().message();
  }
}

TEST(KvAttentionOp, InfersOneRowOfHeadsPerToken) {
  const LayerAttrs a = must(parse(kGqa));
  // qkv width (4 + 2 * 2) * 8 = 64; kv_meta's length is checked at run, not here.
  auto out = infer_output(OpKind::kv_attention, a, std::vector{f32({10, 64}), i64({10}), i64({4 + 10 + 3 * 2})});
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_EQ(out->dtype, DType::f32);
  EXPECT_EQ(out->shape, (Shape{10, 32}));

  const std::pair<std::vector<TensorDesc>, std::string> bad[] = {
      {{f32({10, 48}), i64({10}), i64({20})}, "(num_heads + 2 num_kv_heads) head_dim"},
      {{f32({2, 5, 64}), i64({10}), i64({20})}, "expected rank 2"},
      {{{DType::f16, Shape{10, 64}}, i64({10}), i64({20})}, "expected float32"},
      {{f32({10, 64}), i64({9}), i64({20})}, "one entry per token"},
      {{f32({10, 64}), {DType::i32, Shape{10}}, i64({20})}, "(positions) is int32[10], expected int64"},
      {{f32({10, 64}), i64({10}), {DType::f32, Shape{20}}}, "(kv_meta) is float32[20], expected int64"},
      {{f32({10, 64}), i64({10}), i64({4, 5})}, "(kv_meta) is int64[4, 5]"},
      {{f32({10, 64}), i64({10})}, "takes 3 input(s), got 2"},
  };
  for (const auto& [in, why] : bad) {
    SCOPED_TRACE(why);
    auto r = infer_output(OpKind::kv_attention, a, in);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message().find(why), std::string::npos) << r.error().message();
  }
  // Attributes built in C++ without model.json are checked as parse_attrs checks them.
  LayerAttrs odd = a;
  odd.num_kv_heads = 3;
  EXPECT_FALSE(infer_output(OpKind::kv_attention, odd, std::vector{f32({10, 80}), i64({10}), i64({20})}).ok());
  odd = a;
  odd.rope_dim = 5;
  EXPECT_FALSE(infer_output(OpKind::kv_attention, odd, std::vector{f32({10, 64}), i64({10}), i64({20})}).ok());
}

TEST(KvAttentionOp, WeightsAndScratch) {
  const LayerAttrs a = must(parse(kGqa));
  const auto specs = weight_specs(OpKind::kv_attention, a);
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].role, "inv_freq");
  EXPECT_EQ(specs[0].shape, (Shape{2}));
  EXPECT_EQ(specs[0].dtype, DType::f32);
  EXPECT_TRUE(weight_specs(OpKind::kv_attention, must(parse({{"num_heads", 2}, {"head_dim", 4}, {"kv_layer", 0}}))).empty());
  // One 8-byte slot per kv_meta entry, then the rotated q heads [T, H * D] float32. Never the
  // half-precision room: inv_freq stays float32.
  const std::vector in{f32({10, 64}), i64({10}), i64({20})};
  EXPECT_EQ(workspace_bytes(OpKind::kv_attention, a, in), uint64_t{20 * 8 + 10 * 32 * 4});
  LayerAttrs half = a;
  half.weights = DType::f16;
  EXPECT_FALSE(widens_weights(OpKind::kv_attention, half));
  // A layer's K and V in a block: 2 * block_size * Hkv * D elements.
  EXPECT_EQ(kv_layer_bytes(a, 16, DType::bf16), int64_t{2 * 16 * 2 * 8 * 2});
  EXPECT_EQ(kv_layer_bytes(a, int64_t{1} << 60, DType::f32), 0);
  EXPECT_EQ(kv_cache_dtype(2), DType::bf16);
  EXPECT_FALSE(kv_cache_dtype(3).has_value());
}

// input_ids are not needed to exercise the op: qkv comes in directly, as a model input, through two
// kv_attention layers with a projection between them (the shape of a decoder's attention).
void write_two_layer_model(const std::string& dir) {
  ModelBuilder b("kv", 3);
  const std::string qkv = b.input("qkv", DType::f32, Shape{-1, 64});
  const std::string pos = b.input("positions", DType::i64, Shape{-1});
  const std::string meta = b.input("kv_meta", DType::i64, Shape{-1});
  LayerAttrs a = must(parse(kGqa));
  a.kv_layer = 0;
  std::string x = b.add("layers.0.attn", OpKind::kv_attention, a, {qkv, pos, meta}, "layers.0.attn.rotary_emb");
  LayerAttrs proj;
  proj.in_features = 32;
  proj.out_features = 64;
  x = b.add("layers.1.qkv", OpKind::linear, proj, {x});
  a.kv_layer = 1;
  x = b.add("layers.1.attn", OpKind::kv_attention, a, {x, pos, meta}, "layers.1.attn.rotary_emb");
  b.output(x, DType::f32, Shape{-1, 32});
  must(b.write(dir), "writing the model");
}

TEST(KvAttentionOp, AModelUsingItLoadsAndInfersShapes) {
  testing::TempDir dir;
  write_two_layer_model(dir / "m");
  const json manifest = json::parse(testing::read_file(dir / "m/model.json"));
  const json& layer = manifest["layers"][2];
  EXPECT_EQ(layer["op"], "kv_attention");
  EXPECT_EQ(layer["attrs"]["kv_layer"], 1);
  EXPECT_EQ(layer["attrs"]["num_kv_heads"], 2);
  EXPECT_EQ(layer["weights"]["inv_freq"], "layers.1.attn.rotary_emb.inv_freq");

  auto m = must(Model::load(dir / "m"));
  ASSERT_EQ(m->num_layers(), 3u);
  const TensorInfo* inv_freq = m->layer_weights(0)[0];
  ASSERT_NE(inv_freq, nullptr);
  EXPECT_EQ(inv_freq->desc.shape, (Shape{2}));
  // Seven tokens of two sequences with three blocks each: M = 4 + 7 + 2 * 3.
  auto shapes = m->check_inputs({f32({7, 64}), i64({7}), i64({17})});
  ASSERT_TRUE(shapes.ok()) << shapes.error().message();
  EXPECT_EQ((*shapes)[m->graph().outputs[0]]->shape, (Shape{7, 32}));
  auto wrong = m->check_inputs({f32({7, 64}), i64({6}), i64({17})});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message().find("positions"), std::string::npos) << wrong.error().message();
}

TEST(KvAttentionOp, NarrowedModelKeepsRotaryFrequenciesFloat32) {
  testing::TempDir dir;
  write_two_layer_model(dir / "m");
  must(convert_model_dir(dir / "m", dir / "half", DType::bf16));
  auto m = must(Model::load(dir / "half"));
  EXPECT_EQ(m->layer_weights(1)[0]->desc.dtype, DType::bf16);  // the projection narrows
  for (uint32_t l : {0u, 2u}) {
    EXPECT_EQ(m->layer_weights(l)[0]->desc.dtype, DType::f32);  // inv_freq does not
    EXPECT_EQ(m->layer(l).attrs.weights, DType::f32);
  }
  auto whole = must(Model::load(dir / "m"));
  const TensorInfo* a = whole->layer_weights(2)[0];
  const TensorInfo* b = m->layer_weights(2)[0];
  EXPECT_EQ(std::memcmp(whole->data() + a->data.offset, m->data() + b->data.offset, 8), 0);
}

// kv_meta for the GQA attributes: 3 sequences, blocks of 4, tables 3 wide, float16. Tokens: a
// prefill of sequence 0 at 0..4 (blocks 0 and 1), a decode of sequence 2 at 9 (blocks 0..2), a
// decode of sequence 1 at 2 (block 0).
struct Step {
  std::vector<int64_t> positions{0, 1, 2, 3, 4, 9, 2};
  std::vector<int64_t> meta{3, 4, 3, 1,
                            0, 0, 0, 0, 0, 2, 1,
                            0x1000, 0x2000, 0,  // sequence 0
                            0x3000, 0, 0,       // sequence 1
                            0x4000, 0x5000, 0x6000};
  Status check(const LayerAttrs& a) const { return check_kv_meta(a, positions, meta); }
};

TEST(KvAttentionOp, CheckKvMetaAcceptsAConsistentStep) {
  const LayerAttrs a = must(parse(kGqa));
  Step s;
  EXPECT_TRUE(s.check(a).ok()) << s.check(a).error().message();
  // Entries past the last position a sequence reaches may be anything (blocks reserved ahead).
  s.meta[4 + 7 + 2] = 0x7000;
  EXPECT_TRUE(s.check(a).ok());
}

TEST(KvAttentionOp, CheckKvMetaRefusesEachInconsistency) {
  const LayerAttrs a = must(parse(kGqa));
  struct Bad {
    std::string why;
    std::function<void(Step&)> spoil;
  };
  const Bad cases[] = {
      {"fewer than its header's 4 plus one per token", [](Step& s) { s.meta.resize(9); }},
      {"[0] sequences is 0", [](Step& s) { s.meta[0] = 0; }},
      {"[1] block_size is 0", [](Step& s) { s.meta[1] = 0; }},
      {"[1] block_size is -4", [](Step& s) { s.meta[1] = -4; }},
      {"[2] block-table width is 0", [](Step& s) { s.meta[2] = 0; }},
      {"[3] cache type 7", [](Step& s) { s.meta[3] = 7; }},
      {"are not that many", [](Step& s) { s.meta.push_back(0); }},
      {"are not that many", [](Step& s) { s.meta[0] = 2; }},
      {"are not that many", [](Step& s) { s.meta[0] = int64_t{1} << 62; }},
      {"past int64", [](Step& s) { s.meta[1] = int64_t{1} << 58; }},
      {"[9] token 5's sequence 3 is outside [0, 3)", [](Step& s) { s.meta[9] = 3; }},
      {"[4] token 0's sequence -1", [](Step& s) { s.meta[4] = -1; }},
      {"positions[6] is -2", [](Step& s) { s.positions[6] = -2; }},
      {"needs block 3 of sequence 2, past the table's 3 blocks", [](Step& s) { s.positions[5] = 12; }},
      {"token 3 of sequence 0 is at position 2, not after its earlier token's 2",
       [](Step& s) { s.positions[3] = 2; }},
      {"[12] sequence 0's block 1 is 0", [](Step& s) { s.meta[12] = 0; }},
      // Sequence 2 at 9 attends to block 0 too, not only to the block it writes.
      {"[17] sequence 2's block 0 is 0, but its token at position 9 attends to positions 0..3",
       [](Step& s) { s.meta[17] = 0; }},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.why);
    Step s;
    c.spoil(s);
    Status st = s.check(a);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(st.error().message().find(c.why), std::string::npos) << st.error().message();
  }
}

}  // namespace ops_kv_attention_test
}  // namespace ember::gpu
