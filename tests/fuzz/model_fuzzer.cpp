// libFuzzer target for model/model.cpp: Model::from_memory on any manifest text and weights file,
// which parses both and checks that the weights are laid out layer after layer.
//
// Input layout:
//   1. 4 bytes  M, unsigned little-endian: length of the manifest text (clamped to what follows).
//   2. 4 bytes  E, unsigned little-endian: zero bytes appended to the weights file (at most
//               kMaxAppendedBytes), so a model with megabytes of weights stays a small input.
//   3. M bytes  model.json
//   4. rest     the first bytes of weights.safetensors
// On success the model must keep model.hpp's layout rule: layer byte ranges contiguous, in layer
// order, starting at 0 and covering the data section; every weight bound to a tensor inside its
// layer's range, of the shape its op needs; every tensor owned by exactly one layer. On failure
// the Error names the model.
#include <algorithm>
#include <cstring>
#include <set>

#include "model/model.hpp"
#include "tests/fuzz/fuzz_common.hpp"

using namespace ember;
using namespace ember::gpu;

namespace {

constexpr std::string_view kSource = "fuzz-model";
constexpr uint64_t kMaxAppendedBytes = 64ull << 20;  // mmap'd and never touched: costs no RSS

void check_layout(const Model& model) {
  const Manifest& m = model.manifest();
  const uint32_t n = model.num_layers();
  EMBER_FUZZ_CHECK(n == m.layers.size() && n > 0);
  EMBER_FUZZ_CHECK(model.graph().num_layers() == n);
  EMBER_FUZZ_CHECK(model.data_offset() + model.data_bytes() == model.file_bytes());
  EMBER_FUZZ_CHECK(model.data() == model.file()->data() + model.data_offset());

  uint64_t cursor = 0;
  std::set<const TensorInfo*> owned;
  for (uint32_t i = 0; i < n; ++i) {
    const ByteRange r = model.layer_bytes(i);
    EMBER_FUZZ_CHECK(r.offset == cursor);  // contiguous, in layer order
    EMBER_FUZZ_CHECK(r.end() >= r.offset && r.end() <= model.data_bytes());
    cursor = r.end();

    const LayerSpec& l = model.layer(i);
    const auto specs = weight_specs(l.op, l.attrs);
    const auto& bound = model.layer_weights(i);
    EMBER_FUZZ_CHECK(bound.size() == specs.size());
    uint64_t bytes = 0;
    for (size_t k = 0; k < specs.size(); ++k) {
      const TensorInfo* t = bound[k];
      EMBER_FUZZ_CHECK((t != nullptr) == (l.weight(specs[k].role) != nullptr));
      if (!t) continue;
      EMBER_FUZZ_CHECK(*l.weight(specs[k].role) == t->name);
      EMBER_FUZZ_CHECK(t->desc.dtype == DType::f32 && t->desc.shape == specs[k].shape);
      EMBER_FUZZ_CHECK(t->data.offset >= r.offset && t->data.end() <= r.end());
      EMBER_FUZZ_CHECK(owned.insert(t).second);  // one layer per tensor
      bytes += t->data.length;
    }
    EMBER_FUZZ_CHECK(bytes == r.length);  // the layer's range holds its tensors and nothing else
  }
  EMBER_FUZZ_CHECK(cursor == model.data_bytes());
  EMBER_FUZZ_CHECK(owned.size() == model.weights_index().tensors.size());
  EMBER_FUZZ_CHECK(model.range_bytes({0, n}) == (ByteRange{0, model.data_bytes()}));
  for (uint32_t i = 0; i < n; ++i) {
    EMBER_FUZZ_CHECK(model.range_bytes({i, n}).end() == model.data_bytes());
    EMBER_FUZZ_CHECK(model.range_bytes({0, i + 1}) == (ByteRange{0, model.layer_bytes(i).end()}));
  }
}

// The declared inputs with every -1 set to 2 are what parse_manifest checked the shapes with, so
// check_inputs must accept them (when their size is one a real request could have).
void check_declared_inputs(const Model& model) {
  std::vector<TensorDesc> inputs;
  for (const TensorSpec& spec : model.manifest().inputs) {
    TensorDesc d{spec.dtype, spec.shape};
    uint64_t numel = 1;
    for (int i = 0; i < d.shape.rank; ++i) {
      if (d.shape[i] < 0) d.shape[i] = 2;
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d.shape[i]), &numel) || numel > (1ull << 32)) return;
    }
    inputs.push_back(d);
  }
  auto values = model.check_inputs(inputs);
  EMBER_FUZZ_CHECK(values.ok());
  for (size_t i = 0; i < model.graph().outputs.size(); ++i) {
    const auto& got = (*values)[model.graph().outputs[i]];
    EMBER_FUZZ_CHECK(got.has_value() && got->shape.matches(model.manifest().outputs[i].shape));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const size_t manifest_bytes = fuzz::take_u32(data, size);
  const uint64_t appended = std::min<uint64_t>(fuzz::take_u32(data, size), kMaxAppendedBytes);
  const std::string_view manifest = fuzz::as_text(data, std::min(manifest_bytes, size));
  data += manifest.size();
  size -= manifest.size();

  auto weights = HostBuffer::allocate(size + appended);
  if (!weights.ok()) return 0;
  if (size) std::memcpy((*weights)->data(), data, size);
  auto model = Model::from_memory(manifest, std::move(*weights), kSource);
  if (!model.ok()) {
    EMBER_FUZZ_CHECK(model.error().message().starts_with(kSource));
    return 0;
  }
  check_layout(**model);
  check_declared_inputs(**model);
  return 0;
}
