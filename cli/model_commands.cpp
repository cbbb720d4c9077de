// `ember model new`, `ember model import`, `ember model convert`, `ember model inspect` and `ember model profile`.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "base/units.hpp"
#include "cli/commands.hpp"
#include "gpu/device_registry.hpp"
#include "gpu/profiler.hpp"
#include "gpu/shadow_split.hpp"
#include "importer/hf_import.hpp"
#include "importer/onnx_import.hpp"
#include "model/architectures.hpp"
#include "model/convert.hpp"
#include "model/layer_blocks.hpp"
#include "model/model.hpp"
#include "model/model_profile.hpp"
#include "model/ops.hpp"
#include "placement/shadow_profile.hpp"
#include "transport/checksum.hpp"

namespace ember::cli {

namespace {

struct NewOptions {
  std::string arch;
  bool tiny = false;
  uint64_t seed = 0;
  std::string out;
  std::string name;
  bool manifest_only = false;
};

int run_new(const NewOptions& o) {
  auto builder = gpu::build_architecture(o.arch, {o.tiny, o.seed, o.name});
  if (!builder.ok()) return report(builder.error());
  Status st = builder->write(o.out, o.manifest_only);
  if (!st.ok()) return report(st.error());
  std::printf("wrote %s (%s, %zu layers, %llu parameters%s) to %s\n", builder->manifest().name.c_str(), o.arch.c_str(),
              builder->manifest().layers.size(), static_cast<unsigned long long>(builder->parameters()),
              o.manifest_only ? ", manifest only" : "", o.out.c_str());
  return 0;
}

std::string shape_list(const std::vector<gpu::TensorSpec>& specs) {
  std::string s;
  for (const auto& t : specs) {
    if (!s.empty()) s += ", ";
    s += t.name + ":" + std::string(gpu::dtype_name(t.dtype)) + t.shape.to_string();
  }
  return s;
}

struct ImportOptions {
  std::string file;
  std::string out;
  importer::ImportOptions importer;
  std::string batch_dim = "graph";
  std::vector<std::string> input_shapes;
  std::string dtype;  // "": fp32 for ONNX, the checkpoint's width for a Hugging Face folder
};

struct ConvertOptions {
  std::string dir, dtype, out;
};

gpu::DType width_of(const std::string& dtype) {
  return dtype == "fp16" ? gpu::DType::f16 : dtype == "bf16" ? gpu::DType::bf16 : gpu::DType::f32;
}

int run_convert(const ConvertOptions& o) {
  const gpu::DType width = width_of(o.dtype);
  auto stats = gpu::convert_model_dir(o.dir, o.out.empty() ? o.dir : o.out, width);
  if (!stats.ok()) return report(stats.error());
  std::printf("converted %s: %llu tensors to %s, weights %s -> %s%s\n", o.dir.c_str(),
              static_cast<unsigned long long>(stats->tensors_converted), std::string(gpu::dtype_name(width)).c_str(),
              format_bytes(stats->bytes_before).c_str(), format_bytes(stats->bytes_after).c_str(),
              stats->profile_removed ? " (profile.json removed: run `ember model profile` again)" : "");
  return 0;
}

/// A Hugging Face folder: a decoder-only language model imported as a generative model.
int run_import_hf(const ImportOptions& o) {
  if (o.batch_dim != "graph" || !o.input_shapes.empty()) {
    return report(invalid_argument("--batch-dim and --input-shape are for ONNX files; a Hugging Face folder's "
                                   "inputs are the generation graph's (docs/design/generation.md)"));
  }
  importer::HfImportOptions h;
  h.name = o.importer.name;
  if (!o.dtype.empty()) h.width = width_of(o.dtype);
  auto imported = importer::import_hf_folder(o.file, o.out, h);
  if (!imported.ok()) return report(imported.error());
  const auto& m = imported->manifest;
  const auto& c = imported->config;
  const auto& g = *m.generation;
  std::printf("imported Hugging Face folder %s (%s, %lld layers, %lld heads / %lld kv heads of %lld, vocab %lld, "
              "context %lld; %zu safetensors file%s) -> %zu layers\n",
              o.file.c_str(), c.model_type.c_str(), static_cast<long long>(c.layers), static_cast<long long>(c.heads),
              static_cast<long long>(c.kv_heads), static_cast<long long>(c.head_dim),
              static_cast<long long>(c.vocab_size), static_cast<long long>(c.context_length), imported->shards,
              imported->shards == 1 ? "" : "s", m.layers.size());
  std::printf("wrote %s: model '%s', %llu parameters at %s", o.out.c_str(), m.name.c_str(),
              static_cast<unsigned long long>(imported->parameters),
              std::string(gpu::dtype_name(imported->width)).c_str());
  if (imported->duplicated_bytes) {
    std::printf(" (%s written twice: the tied head)", format_bytes(imported->duplicated_bytes).c_str());
  }
  std::printf("\ngeneration: KV cache %llu bytes per token (%s), eos", static_cast<unsigned long long>(g.kv_bytes_per_token()),
              std::string(gpu::dtype_name(g.kv_dtype)).c_str());
  for (int64_t id : g.eos_token_ids) std::printf(" %lld", static_cast<long long>(id));
  std::printf("%s; tokenizer %s; chat template %s\n", g.eos_token_ids.empty() ? " none" : "",
              imported->tokenizer ? "carried (tokenizer.json)" : "none (token ids only)",
              g.chat_template.empty() ? "not recognised" : g.chat_template.c_str());
  return 0;
}

int run_import(ImportOptions o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(o.file, ec)) {
    if (!importer::is_hf_folder(o.file)) {
      return report(invalid_argument(o.file + ": a directory without config.json; `ember model import` reads an .onnx "
                                              "file or a Hugging Face model folder"));
    }
    return run_import_hf(o);
  }
  if (o.dtype.empty()) o.dtype = "fp32";
  if (o.batch_dim != "graph") {
    try {
      o.importer.batch_dim = std::stoi(o.batch_dim);
    } catch (const std::exception&) {
      o.importer.batch_dim = -1;
    }
    if (o.importer.batch_dim < 0) return report(invalid_argument("--batch-dim: expected 'graph' or a dim index, got '" + o.batch_dim + "'"));
  }
  for (const auto& spec : o.input_shapes) {
    if (auto st = importer::parse_input_shape(spec, o.importer.input_shapes); !st.ok()) return report(st.error());
  }
  auto imported = importer::import_onnx_file(o.file, o.out, o.importer);
  if (!imported.ok()) return report(imported.error());
  const auto& m = imported->manifest;
  const auto& s = imported->stats;
  std::printf("imported %s (opset %lld): %u nodes -> %zu layers (%u folded, %u removed, %u fused)\n", o.file.c_str(),
              static_cast<long long>(s.opset), s.nodes, m.layers.size(), s.folded, s.removed, s.fused);
  std::printf("inputs  %s\noutputs %s\n", shape_list(m.inputs).c_str(), shape_list(m.outputs).c_str());
  std::printf("wrote %s: model '%s', %llu parameters", o.out.c_str(), m.name.c_str(),
              static_cast<unsigned long long>(s.parameters));
  if (s.duplicated_bytes) {
    std::printf(" (%s written twice: weights read by several layers)", format_bytes(s.duplicated_bytes).c_str());
  }
  std::printf("\n");
  if (o.dtype != "fp32") {
    ConvertOptions c{o.out, o.dtype, ""};
    return run_convert(c);
  }
  return 0;
}

/// Spearman's rank correlation of x and y (ties ranked by their mean rank); 0 for fewer than 2.
double rank_correlation(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = x.size();
  if (n < 2) return 0;
  auto ranks = [n](const std::vector<double>& v) {
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
    std::vector<double> r(n);
    for (size_t i = 0; i < n;) {
      size_t j = i;
      while (j + 1 < n && v[order[j + 1]] == v[order[i]]) ++j;
      for (size_t k = i; k <= j; ++k) r[order[k]] = (static_cast<double>(i + j) / 2) + 1;
      i = j + 1;
    }
    return r;
  };
  const auto rx = ranks(x), ry = ranks(y);
  const double mean = (static_cast<double>(n) + 1) / 2;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (rx[i] - mean) * (ry[i] - mean);
    sxx += (rx[i] - mean) * (rx[i] - mean);
    syy += (ry[i] - mean) * (ry[i] - mean);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0;
}

/// `ember model inspect --profile`: the stored profile layer by layer, with AsyFunc's view of it:
/// each layer's sensitivity to compute (time at batch 4 minus batch 2), its weights and
/// multiply-adds, and where a Shadow's range may start or end (cut points, gpu/shadow_split.hpp).
/// What layer-level scaling (placement/shadow_policy.hpp) would give this model a Shadow of, at
/// `slo_ms` (0: the model's serving SLO), by each ranking.
void print_shadow_choice(const gpu::Model& m, const gpu::ModelProfile& profile, double slo_ms) {
  if (slo_ms <= 0) slo_ms = static_cast<double>(m.manifest().serving.slo_deadline_us) / 1000.0;
  if (slo_ms <= 0) {
    std::printf("a Shadow: give --slo-ms (the model sets no serving SLO)\n");
    return;
  }
  const auto p = placement::shadow_profile(m, profile);
  const uint32_t max_batch = std::max<uint32_t>(m.manifest().serving.max_batch, profile.batches.back());
  const auto alone = placement::body_capacity(p, slo_ms * 1000, max_batch);
  std::printf("\nat an SLO of %.1f ms, batches up to %u: the Body alone serves %.1f rows/s (batch %u)\n", slo_ms,
              max_batch, alone.rows_per_s, alone.batch);
  uint64_t total = 0;
  for (const auto& b : p.blocks) total += b.weight_bytes;
  // The greatest benefit by each search, then the fewest bytes that add a quarter of the Body's rate.
  const std::pair<placement::BlockOrder, double> searches[] = {{placement::BlockOrder::exhaustive, 0},
                                                               {placement::BlockOrder::macs_per_byte, 0},
                                                               {placement::BlockOrder::sensitivity, 0},
                                                               {placement::BlockOrder::exhaustive, 0.25}};
  for (const auto& [order, need] : searches) {
    std::string by = order == placement::BlockOrder::exhaustive      ? "every span"
                     : order == placement::BlockOrder::macs_per_byte ? "greedy, MACs per byte"
                                                                     : "greedy, sensitivity";
    if (need > 0) by += ", fewest bytes adding 25%";
    auto c = placement::choose_shadow(p, slo_ms * 1000, max_batch, order, need * alone.rows_per_s);
    if (!c.ok()) {
      std::printf("  by %s: %s\n", by.c_str(), c.error().message().c_str());
      continue;
    }
    if (!c->has_value()) {
      std::printf("  by %s: no Shadow helps\n", by.c_str());
      continue;
    }
    const auto& s = **c;
    std::printf(
        "  by %s: a Shadow of layers [%u, %u) (blocks %zu-%zu, %s of %s), batch %u split %u/%u, %.2f ms a batch: "
        "%.1f rows/s (+%.0f%%), loads in %.2f ms at 12 GB/s\n",
        by.c_str(), s.first_layer, s.last_layer, s.first_block, s.last_block - 1, format_bytes(s.weight_bytes).c_str(),
        format_bytes(total).c_str(), s.batch, s.split.body_rows, s.split.shadow_rows, s.split.latency_us / 1000,
        s.rows_per_s, alone.rows_per_s > 0 ? 100 * s.gain_rows_per_s / alone.rows_per_s : 0.0, s.load_us / 1000);
  }
}

int run_inspect_profile(const std::string& dir, const gpu::Model& m, bool as_json, double slo_ms) {
  auto profile = gpu::read_profile(dir);
  if (!profile.ok()) {
    return report(profile.error().with_context("run `ember model profile " + dir + "` first"));
  }
  if (Status st = profile->check_matches(m); !st.ok()) return report(st.error());
  const auto cuts = gpu::cut_points(m.graph());
  // The correlations are over the layers with weights (AsyFunc's scatter): a weight-free layer
  // (an activation, an addition) is small in both and would only tie the ranks.
  std::vector<double> sens, bytes, ratio;
  bool measured = true;
  for (size_t i = 0; i < profile->layers.size(); ++i) {
    auto s = profile->sensitivity_us(i);
    if (!s) {
      measured = false;
      break;
    }
    const auto& l = profile->layers[i];
    if (l.bytes == 0) continue;
    sens.push_back(*s);
    bytes.push_back(static_cast<double>(l.bytes));
    ratio.push_back(static_cast<double>(l.macs) / static_cast<double>(l.bytes));
  }
  if (as_json) {
    nlohmann::ordered_json j;
    j["model"] = m.manifest().name;
    j["device"] = profile->device;
    j["batches"] = profile->batches;
    j["cut_points"] = cuts;
    j["layers"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < profile->layers.size(); ++i) {
      const auto& l = profile->layers[i];
      nlohmann::ordered_json e{
          {"index", i},     {"name", l.name},       {"op", gpu::op_name(m.layer(i).op)}, {"bytes", l.bytes},
          {"macs", l.macs}, {"exec_us", l.exec_us}, {"out_bytes", l.out_bytes}};
      if (auto s = profile->sensitivity_us(i)) e["sensitivity_us"] = *s;
      j["layers"].push_back(std::move(e));
    }
    if (measured) {
      j["rank_correlation_sensitivity_bytes"] = rank_correlation(sens, bytes);
      j["rank_correlation_sensitivity_macs_per_byte"] = rank_correlation(sens, ratio);
    }
    std::cout << j.dump(1) << "\n";
    return 0;
  }
  std::printf("profile    %s/%s on %s, batches", dir.c_str(), gpu::kProfileFile, profile->device.c_str());
  for (uint32_t b : profile->batches) std::printf(" %u", b);
  std::printf(", seq len %lld\n", static_cast<long long>(profile->seq_len));
  std::printf("\n%5s  %-36s %-14s %12s %14s %10s %14s  %s\n", "#", "layer", "op", "bytes", "MACs/sample", "MACs/byte",
              measured ? "2->4 us" : "sensitivity", "cut after");
  for (size_t i = 0; i < profile->layers.size(); ++i) {
    const auto& l = profile->layers[i];
    auto s = profile->sensitivity_us(i);
    const bool cut = std::binary_search(cuts.begin(), cuts.end(), static_cast<uint32_t>(i + 1));
    std::printf("%5zu  %-36s %-14s %12llu %14llu %10.1f %14s  %s\n", i, l.name.c_str(),
                std::string(gpu::op_name(m.layer(static_cast<uint32_t>(i)).op)).c_str(),
                static_cast<unsigned long long>(l.bytes), static_cast<unsigned long long>(l.macs),
                l.bytes ? static_cast<double>(l.macs) / static_cast<double>(l.bytes) : 0.0,
                s ? std::to_string(static_cast<int64_t>(std::lround(*s))).c_str() : "-", cut ? "|" : "");
  }
  std::printf("\n%zu cut points, %zu blocks\n", cuts.size(), gpu::layer_blocks(m.graph()).size());
  if (measured) {
    std::printf(
        "over the %zu layers with weights, rank correlation of sensitivity with weight bytes %.2f (AsyFunc: "
        "negative on CNNs), with MACs per byte %.2f\n",
        sens.size(), rank_correlation(sens, bytes), rank_correlation(sens, ratio));
  } else {
    std::printf("sensitivity needs batches 2 and 4 in the profile (ember model profile --batches 1,2,4)\n");
  }
  print_shadow_choice(m, *profile, slo_ms);
  return 0;
}

int run_inspect(const std::string& dir, bool as_json, bool with_profile, double slo_ms) {
  auto loaded = gpu::Model::load(dir);
  if (!loaded.ok()) return report(loaded.error());
  if (with_profile) return run_inspect_profile(dir, **loaded, as_json, slo_ms);
  const gpu::Model& m = **loaded;
  const auto& g = m.graph();
  // Shapes shown for batch 1 and, where a dim is free, 128 (or the declared input's limit).
  std::vector<gpu::TensorDesc> inputs;
  for (const auto& in : m.manifest().inputs) {
    gpu::TensorDesc d{in.dtype, in.shape};
    for (int i = 0; i < d.shape.rank; ++i)
      if (d.shape[i] < 0) d.shape[i] = i == 0 ? 1 : 16;
    inputs.push_back(d);
  }
  auto values = m.check_inputs(inputs);

  if (as_json) {
    nlohmann::ordered_json j;
    j["name"] = m.manifest().name;
    j["layers"] = m.num_layers();
    j["file_bytes"] = m.file_bytes();
    j["data_offset"] = m.data_offset();
    j["layer_table"] = nlohmann::ordered_json::array();
    for (uint32_t i = 0; i < m.num_layers(); ++i) {
      const auto r = m.layer_bytes(i);
      j["layer_table"].push_back({{"index", i},
                                  {"name", m.layer(i).name},
                                  {"op", gpu::op_name(m.layer(i).op)},
                                  {"data_offset", r.offset},
                                  {"bytes", r.length}});
    }
    std::cout << j.dump(1) << "\n";
    return 0;
  }

  std::printf("model      %s\n", m.manifest().name.c_str());
  if (!m.manifest().description.empty()) std::printf("about      %s\n", m.manifest().description.c_str());
  std::printf("inputs     %s\n", shape_list(m.manifest().inputs).c_str());
  std::printf("outputs    %s\n", shape_list(m.manifest().outputs).c_str());
  std::printf("layers     %u, %zu weight tensors, %s of weights\n", m.num_layers(), m.weights_index().tensors.size(),
              format_bytes(m.data_bytes()).c_str());
  std::printf("file       %s/%s: %llu bytes, data section at byte %llu\n", dir.c_str(), gpu::kWeightsFile,
              static_cast<unsigned long long>(m.file_bytes()), static_cast<unsigned long long>(m.data_offset()));
  if (const gpu::GenerationSpec* gen = m.generation()) {
    std::printf("generation %s, context %u, vocab %u, KV cache %u layers x %u heads x %u (%s, %llu bytes per token), "
                "tokenizer %s, chat template %s\n",
                gen->family.c_str(), gen->context_length, gen->vocab_size, gen->num_kv_layers, gen->num_kv_heads,
                gen->head_dim, std::string(gpu::dtype_name(gen->kv_dtype)).c_str(),
                static_cast<unsigned long long>(gen->kv_bytes_per_token()),
                m.tokenizer_json().empty() ? "none" : format_bytes(m.tokenizer_json().size()).c_str(),
                gen->chat_template.empty() ? "none" : gen->chat_template.c_str());
  }
  std::printf("serving    slo %.1f ms at p%.0f, max batch %u\n",
              static_cast<double>(m.manifest().serving.slo_deadline_us) / 1000.0,
              m.manifest().serving.slo_percentile * 100, m.manifest().serving.max_batch);
  std::printf("\n%5s  %-40s %-15s %-22s %12s  %s\n", "#", "layer", "op", values.ok() ? "output (batch 1)" : "output",
              "bytes", "file bytes [begin, end)");
  for (uint32_t i = 0; i < m.num_layers(); ++i) {
    const auto r = m.layer_bytes(i);
    std::string out = values.ok() ? (*values)[g.layer_value(i)]->shape.to_string() : "";
    std::printf("%5u  %-40s %-15s %-22s %12llu  [%llu, %llu)\n", i, m.layer(i).name.c_str(),
                std::string(gpu::op_name(m.layer(i).op)).c_str(), out.c_str(),
                static_cast<unsigned long long>(r.length), static_cast<unsigned long long>(m.data_offset() + r.offset),
                static_cast<unsigned long long>(m.data_offset() + r.end()));
  }
  return 0;
}

struct ProfileOptions {
  std::string dir;
  std::vector<uint32_t> batches;
  int64_t seq_len = 16;
  std::string device_memory = "16GiB";
  uint32_t threads = 0;
};

int run_profile(const ProfileOptions& o) {
  auto model = gpu::Model::load(o.dir);
  if (!model.ok()) return report(model.error());
  std::vector<uint32_t> batches = o.batches;
  if (batches.empty()) {
    batches = {1, 2, 4};  // 2 and 4: the sensitivity of each layer to compute (AsyFunc)
    if ((*model)->manifest().serving.max_batch > 1) batches.push_back((*model)->manifest().serving.max_batch);
  }
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  DevicesConfig devices;
  auto memory = parse_bytes(o.device_memory);
  if (!memory.ok()) return report(memory.error().with_context("--device-memory"));
  devices.sim.memory_bytes = *memory;
  devices.sim.compute_threads = o.threads;
  auto opened = gpu::open_devices(devices);
  if (!opened.ok()) return report(opened.error());
  auto hash = [](const uint8_t* data, uint64_t bytes) { return transport::to_hex(transport::Sha256::of(data, bytes)); };
  auto profile = gpu::measure_profile(*model, *opened->devices[0], batches, o.seq_len, hash);
  if (!profile.ok()) return report(profile.error());
  Status st = gpu::write_profile(o.dir, *profile);
  if (!st.ok()) return report(st.error());
  double total = 0;
  for (const auto& l : profile->layers) total += l.exec_us.back();
  std::printf("wrote %s/%s: %zu layers on %s, batches", o.dir.c_str(), gpu::kProfileFile, profile->layers.size(),
              profile->device.c_str());
  for (uint32_t b : batches) std::printf(" %u", b);
  std::printf(" (seq len %lld); %.1f ms per run at batch %u\n", static_cast<long long>(o.seq_len), total / 1000.0,
              batches.back());
  return 0;
}

}  // namespace

void add_model_commands(CLI::App& app, Runner& runner) {
  auto* model = app.add_subcommand("model", "Create and inspect model directories");
  model->require_subcommand(1);

  auto o = std::make_shared<NewOptions>();
  auto* create = model->add_subcommand("new", "Write a model with deterministic random weights");
  create->add_option("--arch", o->arch, "mlp, resnet50, bert-base, gpt2 or gpt2-medium")->required()
      ->check(CLI::IsMember({"mlp", "resnet50", "bert-base", "gpt2", "gpt2-medium"}));
  create->add_flag("--tiny", o->tiny, "Small variant for tests");
  create->add_option("--seed", o->seed, "Seed of the weights")->default_val(0);
  create->add_option("--out", o->out, "Model version directory to write")->required();
  create->add_option("--name", o->name, "Model name (default: the architecture's)");
  create->add_flag("--manifest-only", o->manifest_only, "Write model.json only (for importing trained weights)");
  create->callback([o, &runner] { runner = [o] { return run_new(*o); }; });

  auto imp = std::make_shared<ImportOptions>();
  auto* import = model->add_subcommand(
      "import", "Convert an ONNX model or a Hugging Face folder (GPT-2, Llama, Mistral, Qwen2) into a model directory");
  import->add_option("file", imp->file,
                     "The .onnx file (external data files beside it), or a Hugging Face folder (config.json, "
                     "*.safetensors, tokenizer.json): a language model imported for generation")
      ->required();
  import->add_option("--out", imp->out, "Model version directory to write")->required();
  import->add_option("--name", imp->importer.name, "Model name (default: the file's name without .onnx, or the folder's)");
  import->add_option("--batch-dim", imp->batch_dim,
                     "graph: free dims are the ONNX graph's symbolic dims (default); N: dim N of every input is "
                     "free too")
      ->default_val("graph");
  import->add_option("--input-shape", imp->input_shapes,
                     "NAME=D0,D1,...: an input's dims as imported, each a size (fixes a free dim) or ? (frees "
                     "one); repeat per input")
      ->allow_extra_args(false)
      ->take_all();
  import->add_option("--dtype", imp->dtype,
                     "Width the float weights are held at: fp32, fp16 or bf16 (default: fp32 for ONNX, the "
                     "checkpoint's own for a Hugging Face folder)")
      ->check(CLI::IsMember({"fp16", "bf16", "fp32"}));
  import->callback([imp, &runner] { runner = [imp] { return run_import(*imp); }; });

  auto conv = std::make_shared<ConvertOptions>();
  auto* convert = model->add_subcommand("convert", "Rewrite a model's float weights as float16, bfloat16 or float32");
  convert->add_option("dir", conv->dir, "Model version directory")->required();
  convert->add_option("--dtype", conv->dtype, "fp16, bf16 or fp32")->required()->check(CLI::IsMember({"fp16", "bf16", "fp32"}));
  convert->add_option("--out", conv->out, "Directory to write (default: convert DIR in place)");
  convert->callback([conv, &runner] { runner = [conv] { return run_convert(*conv); }; });

  auto dir = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  auto* inspect = model->add_subcommand("inspect", "Validate a model and print its layers, sizes and byte ranges");
  inspect->add_option("dir", *dir, "Model version directory")->required();
  inspect->add_flag("--json", *as_json, "Machine-readable output");
  auto with_profile = std::make_shared<bool>(false);
  inspect->add_flag("--profile", *with_profile,
                    "Show the stored profile: per layer time per batch, sensitivity (batch 2 to 4), weights, "
                    "MACs, cut points");
  auto slo_ms = std::make_shared<double>(0);
  inspect
      ->add_option("--slo-ms", *slo_ms,
                   "With --profile: the SLO a Shadow is chosen for (default: the model's serving SLO)")
      ->check(CLI::NonNegativeNumber);
  inspect->callback([dir, as_json, with_profile, slo_ms, &runner] {
    runner = [dir, as_json, with_profile, slo_ms] { return run_inspect(*dir, *as_json, *with_profile, *slo_ms); };
  });

  auto p = std::make_shared<ProfileOptions>();
  auto* profile =
      model->add_subcommand("profile",
                            "Measure every layer (bytes, SHA-256, time, activation bytes) and write DIR/profile.json, "
                            "which the partition planner and the nodes read");
  profile->add_option("dir", p->dir, "Model version directory")->required();
  profile->add_option("--batches", p->batches, "Batch sizes to time (default: 1, 2, 4 and serving.max_batch)")
      ->delimiter(',');
  profile->add_option("--seq-len", p->seq_len, "Length of free non-batch input dims")
      ->default_val(16)
      ->check(CLI::Range(1, 1 << 16));
  profile->add_option("--device-memory", p->device_memory, "Memory of the simulated device (without a GPU)")
      ->default_val("16GiB");
  profile->add_option("--threads", p->threads,
                      "Compute threads of the simulated device (0: all cores; as a node's --threads to match it)");
  profile->callback([p, &runner] { runner = [p] { return run_profile(*p); }; });
}

}  // namespace ember::cli
