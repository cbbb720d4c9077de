// `ember run DIR`: loads a model, binds a layer range of it to a device, runs inputs through it
// and prints (or writes) the outputs with timings. `ember workflow run DIR`: the same for a workflow
// (config/workflow_config.hpp), step by step. `ember devices`: what this host serves with.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "actors/node/engine/device_workflow.hpp"
#include "base/json_text.hpp"
#include "base/units.hpp"
#include "cli/commands.hpp"
#include "gpu/device_registry.hpp"
#include "gpu/executor.hpp"
#include "model/host_tensor.hpp"
#include "model/sample_inputs.hpp"
#include "placement/workflow_plan.hpp"

namespace ember::cli {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

struct RunOptions {
  std::string dir;
  std::string input;
  bool random = false;
  int64_t batch = 1;
  int64_t seq_len = 128;
  uint64_t seed = 1;
  std::string output;
  std::string layers;
  int repeat = 5;
  std::string device = "auto";
  std::string device_memory = "8GiB";
  uint32_t threads = 0;
  std::string config;
  int print = 8;
  bool profile = false;
  std::string handoff = "device";  // workflow run: device or host
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Result<std::string> read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found(path + ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// KServe v2 request body: {"inputs": [{name, datatype, shape, data}, ...]}.
Result<std::vector<gpu::HostTensor>> read_json_inputs(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(std::string text, read_text(path));
  auto parsed = parse_json_text(text);
  if (!parsed.ok()) return parsed.error().with_context(path);
  const nlohmann::json& j = *parsed;
  if (!j.is_object() || !j.contains("inputs") || !j["inputs"].is_array()) {
    return invalid_argument(path + ": expected a KServe v2 request {\"inputs\": [...]}");
  }
  std::vector<gpu::HostTensor> out;
  for (size_t i = 0; i < j["inputs"].size(); ++i) {
    EMBER_ASSIGN_OR_RETURN(auto t, gpu::tensor_from_kserve_json(j["inputs"][i], path + ": inputs[" + std::to_string(i) + "]"));
    out.push_back(std::move(t));
  }
  return out;
}

Result<gpu::LayerRange> parse_range(const std::string& text, uint32_t layers) {
  if (text.empty()) return gpu::LayerRange{0, layers};
  const auto colon = text.find(':');
  try {
    if (colon == std::string::npos) throw std::invalid_argument("");
    const std::string a = text.substr(0, colon), b = text.substr(colon + 1);
    const uint32_t first = a.empty() ? 0 : static_cast<uint32_t>(std::stoul(a));
    const uint32_t last = b.empty() ? layers : static_cast<uint32_t>(std::stoul(b));
    if (first >= last || last > layers) throw std::out_of_range("");
    return gpu::LayerRange{first, last};
  } catch (const std::exception&) {
    return invalid_argument("--layers '" + text + "': expected FIRST:LAST with 0 <= FIRST < LAST <= " +
                            std::to_string(layers));
  }
}

void print_tensor(const gpu::HostTensor& t, int max_values) {
  std::printf("output '%s' %s%s:", t.name.c_str(), std::string(gpu::dtype_name(t.desc.dtype)).c_str(),
              t.desc.shape.to_string().c_str());
  const int64_t n = t.desc.shape.numel();
  if (t.desc.dtype != gpu::DType::f32) {
    std::printf("\n");
    return;
  }
  const float* v = t.as<float>();
  for (int64_t i = 0; i < std::min<int64_t>(n, max_values); ++i) std::printf(" %.6g", v[i]);
  if (n > max_values) std::printf(" ...");
  const int64_t row = t.desc.shape.last();
  if (row > 1) {
    const int64_t best = std::max_element(v, v + row) - v;
    std::printf("  (argmax of the first row: %lld)", static_cast<long long>(best));
  }
  std::printf("\n");
}

// Per-op totals of the last (profiled) run, most expensive first.
void print_profile(const gpu::LayerExecutor& ex) {
  std::map<std::string, std::pair<double, int>> by_op;
  double total = 0;
  const auto& us = ex.last_layer_us();
  for (size_t i = 0; i < us.size(); ++i) {
    auto& e = by_op[std::string(gpu::op_name(ex.model().layer(ex.range().first + static_cast<uint32_t>(i)).op))];
    e.first += us[i];
    e.second += 1;
    total += us[i];
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> rows(by_op.begin(), by_op.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::printf("\n%-16s %8s %12s %7s\n", "op", "layers", "ms", "share");
  for (const auto& [op, e] : rows) {
    std::printf("%-16s %8d %12.3f %6.1f%%\n", op.c_str(), e.second, e.first / 1000, 100 * e.first / total);
  }
  std::printf("%-16s %8zu %12.3f\n", "total", us.size(), total / 1000);

  std::vector<size_t> order(us.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return us[a] > us[b]; });
  std::printf("\nslowest layers:\n");
  for (size_t i = 0; i < std::min<size_t>(10, order.size()); ++i) {
    const uint32_t l = ex.range().first + static_cast<uint32_t>(order[i]);
    std::printf("%5u  %-40s %-12s %10.3f ms\n", l, ex.model().layer(l).name.c_str(),
                std::string(gpu::op_name(ex.model().layer(l).op)).c_str(), us[order[i]] / 1000);
  }
}

Status write_outputs(const std::string& path, const std::string& model, const std::vector<gpu::HostTensor>& outputs) {
  if (ends_with(path, ".json")) {
    nlohmann::json body{{"model_name", model}, {"outputs", nlohmann::json::array()}};
    for (const auto& t : outputs) {
      nlohmann::json j;
      gpu::tensor_to_kserve_json(t, j);
      body["outputs"].push_back(std::move(j));
    }
    std::ofstream f(path);
    f << body.dump() << "\n";
    if (!f) return io_error(path + ": write failed");
    return Status::OK();
  }
  return gpu::write_tensor_file(path, outputs);
}

Result<DevicesConfig> devices_config(const RunOptions& o) {
  DevicesConfig config;
  if (!o.config.empty()) {
    EMBER_ASSIGN_OR_RETURN(std::string text, read_text(o.config));
    EMBER_ASSIGN_OR_RETURN(config, parse_devices_config(text, o.config));
  }
  auto kind = parse_device_kind(o.device);
  if (!kind.ok()) return kind.error().with_context("--device");
  config.kind = *kind;
  auto memory = parse_bytes(o.device_memory);
  if (!memory.ok()) return memory.error().with_context("--device-memory");
  config.sim.memory_bytes = *memory;
  if (o.threads) config.sim.compute_threads = o.threads;
  config.count = 1;
  EMBER_RETURN_IF_ERROR(validate(config, "command line"));
  return config;
}

int run(const RunOptions& o) {
  auto config = devices_config(o);
  if (!config.ok()) return report(config.error());
  auto t0 = Clock::now();
  auto loaded = gpu::Model::load(o.dir);
  if (!loaded.ok()) return report(loaded.error());
  const double load_ms = ms_since(t0);
  const auto& model = **loaded;
  auto range = parse_range(o.layers, model.num_layers());
  if (!range.ok()) return report(range.error());

  auto devices = gpu::open_devices(*config);
  if (!devices.ok()) return report(devices.error());
  gpu::Device& device = *devices->devices.front();

  t0 = Clock::now();
  auto executor = gpu::LayerExecutor::create(device, *loaded, *range);
  if (!executor.ok()) return report(executor.error());
  const double bind_ms = ms_since(t0);

  std::vector<gpu::HostTensor> inputs;
  if (!o.input.empty() && !o.random) {
    auto read = ends_with(o.input, ".json") ? read_json_inputs(o.input) : gpu::read_tensor_file(o.input);
    if (!read.ok()) return report(read.error());
    inputs = std::move(*read);
  } else {
    // Shapes for random inputs: the model's declared inputs with free dims set, then shape
    // inference up to the range for values produced by earlier layers.
    auto shapes = model.check_inputs(gpu::concrete_inputs(model, o.batch, o.seq_len));
    if (!shapes.ok()) return report(shapes.error().with_context("random inputs"));
    auto made = gpu::sample_inputs(model, (*executor)->input_values(), *shapes, o.seed);
    if (!made.ok()) return report(made.error());
    inputs = std::move(*made);
  }

  t0 = Clock::now();
  (*executor)->set_profiling(o.profile && o.repeat == 0);
  auto outputs = (*executor)->run_host(inputs);
  if (!outputs.ok()) return report(outputs.error());
  const double first_ms = ms_since(t0);
  std::vector<double> warm;
  for (int i = 0; i < o.repeat; ++i) {
    (*executor)->set_profiling(o.profile && i + 1 == o.repeat);
    t0 = Clock::now();
    auto again = (*executor)->run_host(inputs);
    if (!again.ok()) return report(again.error());
    warm.push_back(ms_since(t0));
  }
  std::sort(warm.begin(), warm.end());

  std::printf("model '%s': layers [%u, %u) of %u, %s of weights, on %s\n", model.manifest().name.c_str(), range->first,
              range->last, model.num_layers(), format_bytes((*executor)->weight_bytes()).c_str(),
              device.info().name.c_str());
  for (const auto& t : *outputs) print_tensor(t, o.print);
  std::printf("time: load %.1f ms, upload weights %.1f ms, first run %.2f ms", load_ms, bind_ms, first_ms);
  if (!warm.empty()) {
    std::printf(", warm run %.2f ms (median of %zu, min %.2f)", warm[warm.size() / 2], warm.size(), warm.front());
  }
  std::printf("; activations %s\n", format_bytes((*executor)->last_plan_bytes()).c_str());
  if (o.profile) print_profile(**executor);
  if (!o.output.empty()) {
    Status st = write_outputs(o.output, model.manifest().name, *outputs);
    if (!st.ok()) return report(st.error());
    std::printf("wrote %zu output(s) to %s\n", outputs->size(), o.output.c_str());
  }
  return 0;
}

int list_devices(const RunOptions& o) {
  auto config = devices_config(o);
  if (!config.ok()) return report(config.error());
  auto devices = gpu::open_devices(*config);
  if (!devices.ok()) return report(devices.error());
  if (!devices->cuda_unavailable_reason.empty()) std::printf("cuda: %s\n", devices->cuda_unavailable_reason.c_str());
  for (const auto& d : devices->devices) {
    const auto mem = d->memory();
    std::printf("%s: %s of memory (%s used)\n", d->info().name.c_str(), format_bytes(mem.capacity_bytes).c_str(),
                format_bytes(mem.used_bytes).c_str());
  }
  return 0;
}

/// The newest version of `model` under `root` (a folder holding model.json itself is version 1), or 0.
uint32_t newest_version(const std::string& root, const std::string& model) {
  namespace fs = std::filesystem;
  std::error_code ec;
  uint32_t newest = 0;
  for (const auto& e : fs::directory_iterator(fs::path(root) / model, ec)) {
    const std::string n = e.path().filename().string();
    if (n.empty() || n.size() > 9 || !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    const auto v = static_cast<uint32_t>(std::stoul(n));
    if (v > newest && !gpu::repository_version_dir(root, model, v).empty()) newest = v;
  }
  if (newest == 0 && !gpu::repository_version_dir(root, model, 1).empty()) newest = 1;
  return newest;
}

// `ember workflow run DIR`: a workflow (ROOT/<name>/workflow.json) run on one device of this host,
// its models from the same repository ROOT, each step on the host tensors of the steps before it.
int run_workflow_command(const RunOptions& o) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(o.dir).lexically_normal();
  const std::string name = (dir.has_filename() ? dir : dir.parent_path()).filename().string();
  const std::string root = (dir.has_filename() ? dir : dir.parent_path()).parent_path().string();
  auto text = read_text((dir / kWorkflowFile).string());
  if (!text.ok()) return report(text.error());
  auto wf = parse_workflow(*text, name, name + "/" + kWorkflowFile);
  if (!wf.ok()) return report(wf.error());
  const WorkflowPlan plan(*wf);
  if (o.input.empty()) {
    return report(
        invalid_argument("--input is required: a KServe v2 request .json or a .safetensors file holding "
                         "the workflow's inputs by name"));
  }
  auto read = ends_with(o.input, ".json") ? read_json_inputs(o.input) : gpu::read_tensor_file(o.input);
  if (!read.ok()) return report(read.error());

  auto config = devices_config(o);
  if (!config.ok()) return report(config.error());
  auto devices = gpu::open_devices(*config);
  if (!devices.ok()) return report(devices.error());
  gpu::Device& device = *devices->devices.front();
  // One executor per model version, shared by the steps that use it.
  std::map<std::string, std::unique_ptr<gpu::LayerExecutor>> executors;
  std::vector<gpu::LayerExecutor*> step_executor;
  for (const auto& step : wf->steps) {
    const uint32_t version = step.version ? step.version : newest_version(root, step.model);
    const std::string at = version ? gpu::repository_version_dir(root, step.model, version) : std::string();
    if (at.empty()) {
      return report(not_found("step '" + step.name + "': model '" + step.model + "'" +
                              (step.version ? " version " + std::to_string(step.version) : std::string()) +
                              " is not in the repository " + root));
    }
    auto& ex = executors[at];
    if (!ex) {
      auto loaded = gpu::Model::load(at);
      if (!loaded.ok()) return report(loaded.error().with_context("step '" + step.name + "'"));
      auto created = gpu::LayerExecutor::create(device, *loaded, {0, (*loaded)->num_layers()});
      if (!created.ok()) return report(created.error().with_context("step '" + step.name + "'"));
      ex = std::move(*created);
    }
    step_executor.push_back(ex.get());
  }
  gpu::DeviceWorkflowStats stats;
  const auto t0 = Clock::now();
  Result<std::vector<gpu::HostTensor>> answer = internal_error("not run");
  if (o.handoff == "device") {
    answer = gpu::run_workflow_on_device(*wf, plan, step_executor, *read, &stats);
  } else {
    stats.step_ms.assign(wf->steps.size(), 0.0);
    answer = run_workflow(*wf, plan, std::move(*read), [&](size_t s, std::vector<gpu::HostTensor> in) {
      const auto start = Clock::now();
      auto out = step_executor[s]->run_host(in);
      stats.step_ms[s] = ms_since(start);
      return out;
    });
  }
  if (!answer.ok()) return report(answer.error().with_context("workflow '" + name + "'"));
  const double total_ms = ms_since(t0);
  std::printf("workflow '%s': %zu steps, %zu models, on %s\n", name.c_str(), wf->steps.size(), executors.size(),
              device.info().name.c_str());
  for (const auto& t : *answer) print_tensor(t, o.print);
  std::printf("time: %.2f ms in all;", total_ms);
  for (size_t s = 0; s < wf->steps.size(); ++s) std::printf(" %s %.2f ms", wf->steps[s].name.c_str(), stats.step_ms[s]);
  std::printf("\n");
  if (o.handoff == "device") {
    std::printf("device hand-off: %llu bytes between steps on %s, none through the host; %llu bytes in, %llu out\n",
                static_cast<unsigned long long>(stats.handoff_bytes), device.info().name.c_str(),
                static_cast<unsigned long long>(stats.uploaded_bytes),
                static_cast<unsigned long long>(stats.downloaded_bytes));
  }
  if (!o.output.empty()) {
    Status st = write_outputs(o.output, name, *answer);
    if (!st.ok()) return report(st.error());
    std::printf("wrote %zu output(s) to %s\n", answer->size(), o.output.c_str());
  }
  return 0;
}

void add_device_options(CLI::App* cmd, RunOptions& o) {
  cmd->add_option("--device", o.device, "auto, sim or cuda")->default_val("auto");
  cmd->add_option("--device-memory", o.device_memory, "Simulated device memory")->default_val("8GiB");
  cmd->add_option("--threads", o.threads, "Compute threads of the simulated device (0: all cores)");
  cmd->add_option("--config", o.config, "Node config YAML (its devices: section)");
}

}  // namespace

void add_run_command(CLI::App& app, Runner& runner) {
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "Run a model (or a layer range of it) on one device");
  cmd->add_option("dir", o->dir, "Model version directory")->required();
  cmd->add_option("--input", o->input, "Inputs: a .safetensors file or a KServe v2 request .json");
  cmd->add_flag("--random", o->random, "Seeded random inputs (the default without --input)");
  cmd->add_option("--batch", o->batch, "Batch size for random inputs")->default_val(1)->check(CLI::Range(1, 4096));
  cmd->add_option("--seq-len", o->seq_len, "Sequence length for random inputs")->default_val(128)->check(CLI::Range(1, 65536));
  cmd->add_option("--seed", o->seed, "Seed for random inputs")->default_val(1);
  cmd->add_option("--output", o->output, "Write outputs to a .safetensors or .json file");
  cmd->add_option("--layers", o->layers, "Layer range FIRST:LAST (default: all)");
  cmd->add_option("--repeat", o->repeat, "Warm runs to time after the first")->default_val(5)->check(CLI::Range(0, 100000));
  cmd->add_option("--print", o->print, "Values of each output to print")->default_val(8);
  cmd->add_flag("--profile", o->profile, "Time every layer of the last run and print a table by op");
  add_device_options(cmd, *o);
  cmd->callback([o, &runner] { runner = [o] { return run(*o); }; });
}

void add_workflow_command(CLI::App& app, Runner& runner) {
  auto o = std::make_shared<RunOptions>();
  auto* workflow = app.add_subcommand("workflow", "Workflows: DAGs of models in the repository (workflow.json)");
  workflow->require_subcommand(1);
  auto* cmd = workflow->add_subcommand("run", "Run a workflow on one device of this host, step by step");
  cmd->add_option("dir", o->dir, "The workflow's folder in the repository (ROOT/NAME, holding workflow.json)")
      ->required();
  cmd->add_option("--input", o->input, "The workflow's inputs: a KServe v2 request .json or a .safetensors file")
      ->required();
  cmd->add_option("--output", o->output, "Write the answer to a .safetensors or .json file");
  cmd->add_option("--print", o->print, "Values of each output to print")->default_val(8);
  cmd->add_option("--handoff", o->handoff,
                  "device: intermediates stay on the device, only the answer is copied back; host: each step's "
                  "outputs come back to the host and go out again")
      ->check(CLI::IsMember({"device", "host"}))
      ->default_val("device");
  add_device_options(cmd, *o);
  cmd->callback([o, &runner] { runner = [o] { return run_workflow_command(*o); }; });
}

void add_devices_command(CLI::App& app, Runner& runner) {
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("devices", "List the devices this host would serve with");
  add_device_options(cmd, *o);
  cmd->callback([o, &runner] { runner = [o] { return list_devices(*o); }; });
}

}  // namespace ember::cli
