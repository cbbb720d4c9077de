// libFuzzer target for model/manifest.cpp: parse_manifest on any text, which also runs the op
// table's attribute parsing and shape inference (model/ops.cpp).
//
// Input: the text of a model.json. On success the manifest must be what manifest.hpp promises:
// non-empty inputs, outputs and layers; every layer with a known op, its input count, and exactly
// the weight roles its attributes call for; a graph whose layers read only model inputs and
// earlier layers; and manifest_to_json() must round-trip (parse again, render the same text).
// On failure the Error names the file.
#include <string>

#include "model/manifest.hpp"
#include "tests/fuzz/fuzz_common.hpp"

using namespace ember;
using namespace ember::gpu;

namespace {

constexpr std::string_view kSource = "fuzz/model.json";

void check_manifest(const Manifest& m) {
  EMBER_FUZZ_CHECK(!m.name.empty() && m.name.size() <= 128);
  EMBER_FUZZ_CHECK(!m.inputs.empty() && !m.outputs.empty() && !m.layers.empty());
  EMBER_FUZZ_CHECK(m.serving.max_batch >= 1 && m.serving.max_batch <= 4096);
  EMBER_FUZZ_CHECK(m.serving.slo_percentile > 0 && m.serving.slo_percentile < 1);
  for (const auto* list : {&m.inputs, &m.outputs}) {
    for (const TensorSpec& t : *list) {
      EMBER_FUZZ_CHECK(t.dtype < DType::count && t.shape.rank <= Shape::kMaxRank);
      for (int i = 0; i < t.shape.rank; ++i) EMBER_FUZZ_CHECK(t.shape[i] == -1 || t.shape[i] > 0);
    }
  }
  for (const LayerSpec& l : m.layers) {
    EMBER_FUZZ_CHECK(l.op < OpKind::count);
    const auto [min_in, max_in] = input_count(l.op);
    EMBER_FUZZ_CHECK(static_cast<int>(l.inputs.size()) >= min_in && static_cast<int>(l.inputs.size()) <= max_in);
    // Bindings follow weight_specs() order; required roles are bound, absent optional ones are not.
    size_t next = 0;
    for (const WeightSpec& s : weight_specs(l.op, l.attrs)) {
      const bool bound = next < l.weights.size() && l.weights[next].role == s.role;
      EMBER_FUZZ_CHECK(bound == s.required);
      if (bound) ++next;
    }
    EMBER_FUZZ_CHECK(next == l.weights.size());
  }

  auto g = build_graph(m, kSource);
  EMBER_FUZZ_CHECK(g.ok());
  EMBER_FUZZ_CHECK(g->num_inputs == m.inputs.size() && g->num_layers() == m.layers.size());
  EMBER_FUZZ_CHECK(g->value_names.size() == m.inputs.size() + m.layers.size());
  EMBER_FUZZ_CHECK(g->outputs.size() == m.outputs.size());
  for (uint32_t l = 0; l < g->num_layers(); ++l) {
    EMBER_FUZZ_CHECK(g->layer_inputs[l].size() == m.layers[l].inputs.size());
    for (uint32_t v : g->layer_inputs[l]) EMBER_FUZZ_CHECK(v < g->layer_value(l));  // only earlier values
  }
  for (uint32_t v : g->outputs) EMBER_FUZZ_CHECK(v < g->value_names.size());
  // The whole model as one range reads the inputs it uses and produces the outputs it declares.
  for (uint32_t v : g->range_inputs({0, g->num_layers()})) EMBER_FUZZ_CHECK(v < g->num_inputs);
}

void check_round_trip(const Manifest& m) {
  const std::string text = manifest_to_json(m);
  auto again = parse_manifest(text, "rewritten/model.json");
  EMBER_FUZZ_CHECK(again.ok());
  EMBER_FUZZ_CHECK(manifest_to_json(*again) == text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = parse_manifest(fuzz::as_text(data, size), kSource);
  if (!m.ok()) {
    EMBER_FUZZ_CHECK(m.error().message().starts_with(kSource));
    return 0;
  }
  check_manifest(*m);
  check_round_trip(*m);
  return 0;
}
