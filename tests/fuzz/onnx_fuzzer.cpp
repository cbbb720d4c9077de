// libFuzzer target for importer/: convert_onnx on any bytes (an ONNX ModelProto, or not), with no
// model folder, so external data is refused and nothing is read from disk.
//
// Input layout: the whole input is the .onnx file.
// On success the importer's promise must hold: a model that imports serves. The manifest parses;
// the weights are float32 tensors in layer order, each layer's roles in weight_specs order with
// the shapes the roles need; the safetensors file they make loads with Model::from_memory (which
// checks the byte-range rule); and the declared inputs, every -1 set to 2, pass check_inputs. On
// failure the Error names the model.
#include <cstring>

#include "importer/onnx_import.hpp"
#include "model/model.hpp"
#include "model/safetensors.hpp"
#include "tests/fuzz/fuzz_common.hpp"

using namespace ember;
using namespace ember::gpu;

namespace {

constexpr std::string_view kSource = "fuzz.onnx";

void check_serves(const importer::Imported& m) {
  const std::string json = manifest_to_json(m.manifest);
  EMBER_FUZZ_CHECK(parse_manifest(json, kSource).ok());

  size_t w = 0;
  std::vector<TensorToWrite> tensors;
  uint64_t data_bytes = 0;
  for (const LayerSpec& layer : m.manifest.layers) {
    for (const WeightSpec& spec : weight_specs(layer.op, layer.attrs)) {
      const std::string* bound = layer.weight(spec.role);
      EMBER_FUZZ_CHECK((bound != nullptr) == spec.required);
      if (!bound) continue;
      EMBER_FUZZ_CHECK(w < m.weights.size());
      const importer::ImportedWeight& iw = m.weights[w++];
      EMBER_FUZZ_CHECK(iw.tensor == *bound && iw.shape == spec.shape);
      EMBER_FUZZ_CHECK(iw.values && iw.values->size() == static_cast<size_t>(spec.shape.numel()));
      tensors.push_back({iw.tensor, {DType::f32, iw.shape}, iw.values->data()});
      data_bytes += tensors.back().desc.bytes();
    }
  }
  EMBER_FUZZ_CHECK(w == m.weights.size());

  const std::string header = safetensors_header(tensors);
  auto file = HostBuffer::allocate(header.size() + data_bytes);
  EMBER_FUZZ_CHECK(file.ok());
  std::memcpy((*file)->data(), header.data(), header.size());
  uint64_t at = header.size();
  for (const auto& t : tensors) {
    std::memcpy((*file)->data() + at, t.data, t.desc.bytes());
    at += t.desc.bytes();
  }
  auto model = Model::from_memory(json, std::move(*file), kSource);
  if (!model.ok()) std::fprintf(stderr, "%s\n", model.error().message().c_str());
  EMBER_FUZZ_CHECK(model.ok());

  std::vector<TensorDesc> inputs;
  for (const TensorSpec& spec : m.manifest.inputs) {
    TensorDesc d{spec.dtype, spec.shape};
    uint64_t numel = 1;
    for (int i = 0; i < d.shape.rank; ++i) {
      if (d.shape[i] < 0) d.shape[i] = 2;
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d.shape[i]), &numel) || numel > (1ull << 32)) return;
    }
    inputs.push_back(d);
  }
  EMBER_FUZZ_CHECK((*model)->check_inputs(inputs).ok());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  importer::ImportOptions options;
  options.name = "fuzz";
  auto imported = importer::convert_onnx(fuzz::as_text(data, size), "", options, kSource);
  if (!imported.ok()) {
    // Internal errors are bugs: the importer promised a manifest it could not make valid.
    if (imported.error().code() == ErrorCode::internal) std::fprintf(stderr, "%s\n", imported.error().message().c_str());
    EMBER_FUZZ_CHECK(imported.error().code() != ErrorCode::internal);
    EMBER_FUZZ_CHECK(imported.error().message().starts_with(kSource));
    return 0;
  }
  check_serves(*imported);
  return 0;
}
