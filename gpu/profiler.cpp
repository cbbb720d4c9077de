#include "gpu/profiler.hpp"

#include <algorithm>
#include <optional>

#include "gpu/executor.hpp"
#include "model/ops.hpp"
#include "model/sample_inputs.hpp"

namespace ember::gpu {

namespace {

/// Bytes that cross a cut after each layer at the given input shapes: every value produced at or
/// before the layer (or a model input) and read after it, or a model output produced before it.
std::vector<uint64_t> cut_bytes_per_layer(const Model& model, const std::vector<std::optional<TensorDesc>>& shapes) {
  const Graph& g = model.graph();
  std::vector<uint64_t> out(model.num_layers(), 0);
  for (uint32_t k = 0; k + 1 < model.num_layers(); ++k) {
    for (uint32_t v : g.range_inputs({k + 1, model.num_layers()})) {
      if (shapes[v]) out[k] += shapes[v]->bytes();
    }
  }
  // After the last layer: what the model answers.
  if (model.num_layers() > 0) {
    for (uint32_t v : g.outputs) {
      if (shapes[v]) out.back() += shapes[v]->bytes();
    }
  }
  return out;
}

}  // namespace

Result<ModelProfile> measure_profile(const std::shared_ptr<const Model>& model, Device& device,
                                     const std::vector<uint32_t>& batches, int64_t seq_len, const HashHex& hash) {
  if (batches.empty() || !std::is_sorted(batches.begin(), batches.end()) || batches.front() == 0) {
    return invalid_argument("profile batches must be ascending and positive");
  }
  ModelProfile p;
  p.model = model->manifest().name;
  p.weights_bytes = model->file_bytes();
  p.header_bytes = model->data_offset();
  p.header_sha256 = hash(model->file()->data(), model->data_offset());
  p.device = device.info().name;
  p.batches = batches;
  p.seq_len = seq_len;
  p.layers.resize(model->num_layers());
  for (uint32_t i = 0; i < model->num_layers(); ++i) {
    LayerCost& l = p.layers[i];
    l.name = model->layer(i).name;
    const ByteRange r = model->layer_bytes(i);
    l.bytes = r.length;
    l.sha256 = hash(model->data() + r.offset, r.length);
  }

  {
    // Multiply-adds per sample, from the shapes at batch 1.
    EMBER_ASSIGN_OR_RETURN(auto shapes, model->check_inputs(concrete_inputs(*model, 1, seq_len)));
    const Graph& g = model->graph();
    for (uint32_t i = 0; i < model->num_layers(); ++i) {
      std::vector<TensorDesc> in;
      for (uint32_t v : g.layer_inputs[i]) in.push_back(*shapes[v]);
      p.layers[i].macs =
          static_cast<uint64_t>(flops(model->layer(i).op, model->layer(i).attrs, in, *shapes[g.layer_value(i)]) / 2);
    }
  }
  EMBER_ASSIGN_OR_RETURN(auto exec, LayerExecutor::create(device, model, {0, model->num_layers()}));
  exec->set_profiling(true);
  for (uint32_t batch : batches) {
    const std::string at = "profiling '" + p.model + "' at batch " + std::to_string(batch);
    EMBER_ASSIGN_OR_RETURN(auto inputs, sample_model_inputs(*model, batch, seq_len, 1));
    for (int run = 0; run < 2; ++run) {  // cold (plans, first touches), then warm
      auto out = exec->run_host(inputs);
      if (!out.ok()) return out.error().with_context(at);
    }
    const std::vector<double>& us = exec->last_layer_us();
    EMBER_ASSIGN_OR_RETURN(auto shapes, model->check_inputs(concrete_inputs(*model, batch, seq_len)));
    const std::vector<uint64_t> cut = cut_bytes_per_layer(*model, shapes);
    for (uint32_t i = 0; i < model->num_layers(); ++i) {
      p.layers[i].exec_us.push_back(us[i]);
      p.layers[i].out_bytes.push_back(cut[i]);
    }
  }
  return p;
}

}  // namespace ember::gpu
