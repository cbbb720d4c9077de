#include "model/architectures.hpp"

namespace ember::gpu {

namespace {

LayerAttrs linear(int64_t in, int64_t out, bool bias = true) {
  LayerAttrs a;
  a.in_features = in;
  a.out_features = out;
  a.bias = bias;
  return a;
}

LayerAttrs conv(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad) {
  LayerAttrs a;
  a.in_channels = in;
  a.out_channels = out;
  a.kernel[0] = a.kernel[1] = k;
  a.stride[0] = a.stride[1] = stride;
  a.padding[0] = a.padding[1] = pad;
  a.bias = false;  // torchvision's ResNet convs have no bias: batch norm follows
  return a;
}

LayerAttrs norm(int64_t features, float eps) {
  LayerAttrs a;
  a.num_features = features;
  a.eps = eps;
  return a;
}

// --- MLP: 784-1024-1024-10 (tiny: 16-32-32-4), ReLU between the linears ------------------------

ModelBuilder mlp(const ArchitectureOptions& o) {
  const int64_t in = o.tiny ? 16 : 784, hidden = o.tiny ? 32 : 1024, classes = o.tiny ? 4 : 10;
  ModelBuilder b(o.name, o.seed);
  b.set_description("Multi-layer perceptron " + std::to_string(in) + "-" + std::to_string(hidden) + "-" +
                    std::to_string(hidden) + "-" + std::to_string(classes));
  std::string x = b.input("input", DType::f32, {-1, in});
  x = b.add("fc1", OpKind::linear, linear(in, hidden), {x});
  x = b.add("relu1", OpKind::relu, {}, {x});
  x = b.add("fc2", OpKind::linear, linear(hidden, hidden), {x});
  x = b.add("relu2", OpKind::relu, {}, {x});
  x = b.add("fc3", OpKind::linear, linear(hidden, classes), {x});
  b.output(x, DType::f32, {-1, classes});
  b.serving().slo_deadline_us = 10'000;
  return b;
}

// --- ResNet-50 as torchvision.models.resnet.ResNet(Bottleneck, [3, 4, 6, 3]) -------------------
// Tiny: blocks [1, 1, 1, 1], width_per_group 16, 10 classes, 32x32 images.

std::string conv_bn(ModelBuilder& b, const std::string& prefix, const std::string& conv_name,
                    const std::string& bn_name, const std::string& x, const LayerAttrs& c) {
  std::string y = b.add(prefix + conv_name, OpKind::conv2d, c, {x});
  return b.add(prefix + bn_name, OpKind::batch_norm, norm(c.out_channels, 1e-5f), {y});
}

ModelBuilder resnet50(const ArchitectureOptions& o) {
  const std::vector<int> blocks = o.tiny ? std::vector<int>{1, 1, 1, 1} : std::vector<int>{3, 4, 6, 3};
  const int64_t width_per_group = o.tiny ? 16 : 64, classes = o.tiny ? 10 : 1000, image = o.tiny ? 32 : 224;
  ModelBuilder b(o.name, o.seed);
  b.set_description("ResNet-50 (torchvision layout, bottleneck v1.5)" + std::string(o.tiny ? ", tiny variant" : ""));
  std::string x = b.input("image", DType::f32, {-1, 3, image, image});
  x = conv_bn(b, "", "conv1", "bn1", x, conv(3, 64, 7, 2, 3));
  x = b.add("relu", OpKind::relu, {}, {x});
  LayerAttrs pool;
  pool.kernel[0] = pool.kernel[1] = 3;
  pool.stride[0] = pool.stride[1] = 2;
  pool.padding[0] = pool.padding[1] = 1;
  x = b.add("maxpool", OpKind::max_pool2d, pool, {x});

  int64_t inplanes = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t planes = 64ll << stage;
    const int64_t width = planes * width_per_group / 64;
    for (int blk = 0; blk < blocks[static_cast<size_t>(stage)]; ++blk) {
      const std::string p = "layer" + std::to_string(stage + 1) + "." + std::to_string(blk) + ".";
      const int64_t stride = (blk == 0 && stage > 0) ? 2 : 1;
      const std::string identity = x;
      std::string y = conv_bn(b, p, "conv1", "bn1", x, conv(inplanes, width, 1, 1, 0));
      y = b.add(p + "relu1", OpKind::relu, {}, {y});
      y = conv_bn(b, p, "conv2", "bn2", y, conv(width, width, 3, stride, 1));
      y = b.add(p + "relu2", OpKind::relu, {}, {y});
      y = conv_bn(b, p, "conv3", "bn3", y, conv(width, planes * 4, 1, 1, 0));
      std::string shortcut = identity;
      if (blk == 0) shortcut = conv_bn(b, p, "downsample.0", "downsample.1", identity, conv(inplanes, planes * 4, 1, stride, 0));
      y = b.add(p + "add", OpKind::add, {}, {y, shortcut});
      x = b.add(p + "relu3", OpKind::relu, {}, {y});
      inplanes = planes * 4;
    }
  }
  x = b.add("avgpool", OpKind::global_avg_pool, {}, {x});
  LayerAttrs flat;
  flat.start_dim = 1;
  x = b.add("flatten", OpKind::flatten, flat, {x});
  x = b.add("fc", OpKind::linear, linear(inplanes, classes), {x});
  b.output(x, DType::f32, {-1, classes});
  b.serving().slo_deadline_us = o.tiny ? 50'000 : 200'000;
  return b;
}

// --- Transformers: torch.nn.TransformerEncoderLayer blocks ---------------------------------------

struct TransformerShape {
  int64_t vocab, positions, hidden, layers, heads, ffn;
  float eps;
};

// One TransformerEncoderLayer(batch_first=True). Post-norm (BERT): x = norm1(x + sa(x));
// x = norm2(x + ff(x)). Pre-norm (GPT-2, norm_first=True): x = x + sa(norm1(x)); x = x + ff(norm2(x)).
std::string encoder_layer(ModelBuilder& b, const std::string& p, std::string x, const TransformerShape& s,
                          bool pre_norm, bool causal, bool tanh_gelu) {
  LayerAttrs attn;
  attn.embed_dim = s.hidden;
  attn.num_heads = s.heads;
  attn.causal = causal;
  LayerAttrs gelu;
  gelu.tanh_approximation = tanh_gelu;
  const LayerAttrs ln = norm(s.hidden, s.eps);
  if (pre_norm) {
    std::string h = b.add(p + "norm1", OpKind::layer_norm, ln, {x});
    h = b.add(p + "self_attn", OpKind::attention, attn, {h});
    x = b.add(p + "add1", OpKind::add, {}, {x, h});
    h = b.add(p + "norm2", OpKind::layer_norm, ln, {x});
    h = b.add(p + "linear1", OpKind::linear, linear(s.hidden, s.ffn), {h});
    h = b.add(p + "gelu", OpKind::gelu, gelu, {h});
    h = b.add(p + "linear2", OpKind::linear, linear(s.ffn, s.hidden), {h});
    return b.add(p + "add2", OpKind::add, {}, {x, h});
  }
  std::string h = b.add(p + "self_attn", OpKind::attention, attn, {x});
  x = b.add(p + "add1", OpKind::add, {}, {x, h});
  x = b.add(p + "norm1", OpKind::layer_norm, ln, {x});
  h = b.add(p + "linear1", OpKind::linear, linear(s.hidden, s.ffn), {x});
  h = b.add(p + "gelu", OpKind::gelu, gelu, {h});
  h = b.add(p + "linear2", OpKind::linear, linear(s.ffn, s.hidden), {h});
  x = b.add(p + "add2", OpKind::add, {}, {x, h});
  return b.add(p + "norm2", OpKind::layer_norm, ln, {x});
}

LayerAttrs embedding(int64_t rows, int64_t dim, bool positional) {
  LayerAttrs a;
  a.num_embeddings = rows;
  a.embedding_dim = dim;
  a.positional = positional;
  return a;
}

// BERT-base (uncased): 12 post-norm layers of 768 with 12 heads, GELU (erf), LayerNorm eps 1e-12,
// word + position + token-type embeddings, and the tanh pooler over the first token.
ModelBuilder bert(const ArchitectureOptions& o) {
  const TransformerShape s = o.tiny ? TransformerShape{100, 32, 64, 2, 4, 128, 1e-12f}
                                    : TransformerShape{30522, 512, 768, 12, 12, 3072, 1e-12f};
  ModelBuilder b(o.name, o.seed);
  b.set_description("BERT-base encoder (torch.nn.TransformerEncoder layout)" + std::string(o.tiny ? ", tiny variant" : ""));
  const std::string ids = b.input("input_ids", DType::i64, {-1, -1});
  const std::string types = b.input("token_type_ids", DType::i64, {-1, -1});
  std::string w = b.add("embeddings.word_embeddings", OpKind::embedding, embedding(s.vocab, s.hidden, false), {ids});
  std::string p = b.add("embeddings.position_embeddings", OpKind::embedding, embedding(s.positions, s.hidden, true), {ids});
  std::string t = b.add("embeddings.token_type_embeddings", OpKind::embedding, embedding(2, s.hidden, false), {types});
  std::string x = b.add("embeddings.add1", OpKind::add, {}, {w, p});
  x = b.add("embeddings.add2", OpKind::add, {}, {x, t});
  x = b.add("embeddings.LayerNorm", OpKind::layer_norm, norm(s.hidden, s.eps), {x});
  for (int64_t i = 0; i < s.layers; ++i) {
    x = encoder_layer(b, "encoder.layers." + std::to_string(i) + ".", x, s, false, false, false);
  }
  const std::string hidden = x;
  LayerAttrs first;
  first.dim = 1;
  first.index = 0;
  std::string pooled = b.add("pooler.first_token", OpKind::select, first, {hidden});
  pooled = b.add("pooler.dense", OpKind::linear, linear(s.hidden, s.hidden), {pooled});
  pooled = b.add("pooler.activation", OpKind::tanh, {}, {pooled});
  b.output(hidden, DType::f32, {-1, -1, s.hidden});
  b.output(pooled, DType::f32, {-1, s.hidden});
  b.serving().slo_deadline_us = o.tiny ? 50'000 : 500'000;
  return b;
}

// GPT-2 small: 12 pre-norm causal layers of 768 with 12 heads, GELU (tanh), LayerNorm eps 1e-5,
// token + position embeddings, final LayerNorm and the LM head (stored separately from wte: in
// PyTorch they are tied, in Ember every layer owns its bytes).
// GPT-2 medium (`medium`): the same layout with 24 layers of 1024 and 16 heads; 1.6 GB of float32
// weights, the model the multicast benchmark moves (at least 1 GiB).
ModelBuilder gpt2(const ArchitectureOptions& o, bool medium = false) {
  const TransformerShape s = o.tiny   ? TransformerShape{100, 32, 64, 2, 4, 256, 1e-5f}
                             : medium ? TransformerShape{50257, 1024, 1024, 24, 16, 4096, 1e-5f}
                                      : TransformerShape{50257, 1024, 768, 12, 12, 3072, 1e-5f};
  ModelBuilder b(o.name, o.seed);
  b.set_description(std::string(medium ? "GPT-2 medium" : "GPT-2 small") +
                    " decoder (torch.nn.TransformerEncoder, norm_first, causal)" +
                    std::string(o.tiny ? ", tiny variant" : ""));
  const std::string ids = b.input("input_ids", DType::i64, {-1, -1});
  std::string tok = b.add("wte", OpKind::embedding, embedding(s.vocab, s.hidden, false), {ids});
  std::string pos = b.add("wpe", OpKind::embedding, embedding(s.positions, s.hidden, true), {ids});
  std::string x = b.add("embed_add", OpKind::add, {}, {tok, pos});
  for (int64_t i = 0; i < s.layers; ++i) {
    x = encoder_layer(b, "encoder.layers." + std::to_string(i) + ".", x, s, true, true, true);
  }
  x = b.add("ln_f", OpKind::layer_norm, norm(s.hidden, s.eps), {x});
  x = b.add("lm_head", OpKind::linear, linear(s.hidden, s.vocab, false), {x});
  b.output(x, DType::f32, {-1, -1, s.vocab});
  b.serving().slo_deadline_us = o.tiny ? 50'000 : 500'000;
  return b;
}

}  // namespace

const std::vector<std::string_view>& architecture_names() {
  static const std::vector<std::string_view> kNames = {"mlp", "resnet50", "bert-base", "gpt2", "gpt2-medium"};
  return kNames;
}

Result<ModelBuilder> build_architecture(std::string_view arch, const ArchitectureOptions& options) {
  ArchitectureOptions o = options;
  if (o.name.empty()) o.name = std::string(arch) + (o.tiny ? "-tiny" : "");
  if (arch == "mlp") return mlp(o);
  if (arch == "resnet50") return resnet50(o);
  if (arch == "bert-base") return bert(o);
  if (arch == "gpt2") return gpt2(o);
  if (arch == "gpt2-medium") return gpt2(o, true);
  return invalid_argument("unknown architecture '" + std::string(arch) +
                          "' (known: mlp, resnet50, bert-base, gpt2, gpt2-medium)");
}

}  // namespace ember::gpu
