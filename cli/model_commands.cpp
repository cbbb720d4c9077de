// `ember model new`, `ember model inspect` and `ember model profile`.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/units.hpp"
#include "cli/commands.hpp"
#include "gpu/architectures.hpp"
#include "gpu/device_registry.hpp"
#include "gpu/model.hpp"
#include "gpu/model_profile.hpp"
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

int run_inspect(const std::string& dir, bool as_json) {
  auto loaded = gpu::Model::load(dir);
  if (!loaded.ok()) return report(loaded.error());
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
};

int run_profile(const ProfileOptions& o) {
  auto model = gpu::Model::load(o.dir);
  if (!model.ok()) return report(model.error());
  std::vector<uint32_t> batches = o.batches;
  if (batches.empty()) {
    batches = {1};
    if ((*model)->manifest().serving.max_batch > 1) batches.push_back((*model)->manifest().serving.max_batch);
  }
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  DevicesConfig devices;
  auto memory = parse_bytes(o.device_memory);
  if (!memory.ok()) return report(memory.error().with_context("--device-memory"));
  devices.sim.memory_bytes = *memory;
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

  auto dir = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  auto* inspect = model->add_subcommand("inspect", "Validate a model and print its layers, sizes and byte ranges");
  inspect->add_option("dir", *dir, "Model version directory")->required();
  inspect->add_flag("--json", *as_json, "Machine-readable output");
  inspect->callback([dir, as_json, &runner] { runner = [dir, as_json] { return run_inspect(*dir, *as_json); }; });

  auto p = std::make_shared<ProfileOptions>();
  auto* profile =
      model->add_subcommand("profile",
                            "Measure every layer (bytes, SHA-256, time, activation bytes) and write DIR/profile.json, "
                            "which the partition planner and the nodes read");
  profile->add_option("dir", p->dir, "Model version directory")->required();
  profile->add_option("--batches", p->batches, "Batch sizes to time (default: 1 and serving.max_batch)")
      ->delimiter(',');
  profile->add_option("--seq-len", p->seq_len, "Length of free non-batch input dims")
      ->default_val(16)
      ->check(CLI::Range(1, 1 << 16));
  profile->add_option("--device-memory", p->device_memory, "Memory of the simulated device (without a GPU)")
      ->default_val("16GiB");
  profile->callback([p, &runner] { runner = [p] { return run_profile(*p); }; });
}

}  // namespace ember::cli
