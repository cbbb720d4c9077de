// hf_greedy: greedy decoding of an imported generative model through Ember's own executor, for the
// PyTorch equality test (hf_torch_test.py): a SimDevice, one LayerExecutor over every layer,
// KV blocks allocated on the device one by one (so their addresses are wherever the allocator puts
// them, listed in kv_meta in position order) and each step's four inputs built here by hand: the
// prompt in one step, then one token per step, the next token the argmax of the step's logits
// (the lowest id on ties, as torch.argmax), or the given one with --force (teacher forcing).
//
//   hf_greedy MODEL_DIR --prompt 1,2,3 [--steps 64] [--force 4,5,...] [--cache fp32|fp16|bf16]
//             [--block-size 16] [--logits-npy FILE] [--threads N]
//
// Prints {"tokens": [...]} and with --logits-npy writes every step's logits, float32 [steps, vocab].
//
// The step inputs are built here on purpose, and only for a single sequence: the executor engine's
// own generation loop (actors/node/engine/) replaces this when it exists; keep this test's copy
// until then, so the importer's equality check does not wait on it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/executor.hpp"
#include "gpu/sim_device.hpp"
#include "model/host_tensor.hpp"
#include "model/model.hpp"

namespace {

using namespace ember;
using namespace ember::gpu;

int fail(const std::string& what) {
  std::fprintf(stderr, "hf_greedy: %s\n", what.c_str());
  return 2;
}

std::vector<int64_t> ids(const std::string& list) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at < list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    if (comma > at) out.push_back(std::stoll(list.substr(at, comma - at)));
    at = comma + 1;
  }
  return out;
}

HostTensor int64s(const std::string& name, const std::vector<int64_t>& v) {
  HostTensor t = HostTensor::allocate(name, {DType::i64, Shape{static_cast<int64_t>(v.size())}}).value();
  std::memcpy(t.as<int64_t>(), v.data(), v.size() * 8);
  return t;
}

bool write_npy(const std::string& path, const std::vector<float>& data, size_t rows, size_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const char magic[] = "\x93NUMPY\x01\x00";
  const uint16_t n = static_cast<uint16_t>(header.size());
  bool ok = std::fwrite(magic, 1, 8, f) == 8 && std::fwrite(&n, 2, 1, f) == 1 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            std::fwrite(data.data(), 4, data.size(), f) == data.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return fail("usage: hf_greedy MODEL_DIR --prompt IDS [--steps N] [--force IDS] [--cache fp32|fp16|bf16] "
                            "[--block-size N] [--logits-npy FILE] [--threads N]");
  const std::string dir = argv[1];
  std::vector<int64_t> prompt, forced;
  int64_t steps = 64, block_size = 16;
  std::string cache = "fp32", logits_path;
  uint32_t threads = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--prompt") prompt = ids(v);
    else if (k == "--force") forced = ids(v);
    else if (k == "--steps") steps = std::stoll(v);
    else if (k == "--cache") cache = v;
    else if (k == "--block-size") block_size = std::stoll(v);
    else if (k == "--logits-npy") logits_path = v;
    else if (k == "--threads") threads = static_cast<uint32_t>(std::stoul(v));
    else return fail("unknown option " + k);
  }
  if (prompt.empty() || steps < 1 || block_size < 1) return fail("--prompt, --steps and --block-size must be given and positive");
  const int64_t cache_code = cache == "fp32" ? 0 : cache == "fp16" ? 1 : cache == "bf16" ? 2 : -1;
  if (cache_code < 0) return fail("--cache: fp32, fp16 or bf16");
  const DType cache_dtype = *kv_cache_dtype(cache_code);

  auto loaded = Model::load(dir);
  if (!loaded.ok()) return fail(loaded.error().message());
  std::shared_ptr<const Model> model = *loaded;
  const GenerationSpec* g = model->generation();
  if (!g) return fail(dir + ": not a generative model");

  SimDeviceConfig config;
  config.memory_bytes = 4ull << 30;
  config.compute_threads = threads;
  auto device = SimDevice::create(config, 0);
  if (!device.ok()) return fail(device.error().message());
  auto exec = LayerExecutor::create(**device, model, {0, model->num_layers()});
  if (!exec.ok()) return fail(exec.error().message());

  // The sequence's KV blocks: enough for every position, each its own allocation.
  const int64_t positions = static_cast<int64_t>(prompt.size()) + steps;
  const int64_t blocks = (positions + block_size - 1) / block_size;
  const uint64_t block_bytes = uint64_t{g->num_kv_layers} * 2 * static_cast<uint64_t>(block_size) * g->num_kv_heads *
                               g->head_dim * dtype_size(cache_dtype);
  std::vector<std::shared_ptr<DeviceBuffer>> kv;
  for (int64_t b = 0; b < blocks; ++b) {
    auto buffer = DeviceBuffer::allocate(**device, block_bytes);
    if (!buffer.ok()) return fail(buffer.error().message());
    kv.push_back(*buffer);
  }

  std::vector<int64_t> tokens;
  std::vector<float> all_logits;
  std::vector<int64_t> feed = prompt;
  int64_t start = 0;
  for (int64_t step = 0; step < steps; ++step) {
    const auto t = static_cast<int64_t>(feed.size());
    std::vector<int64_t> pos(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i) pos[static_cast<size_t>(i)] = start + i;
    // kv_meta: B = 1, block_size, W = blocks, cache type; every token in sequence 0; its block row.
    std::vector<int64_t> meta = {1, block_size, blocks, cache_code};
    meta.insert(meta.end(), static_cast<size_t>(t), 0);
    for (const auto& b : kv) meta.push_back(static_cast<int64_t>(b->ptr().addr));
    std::vector<HostTensor> inputs = {int64s("input_ids", feed), int64s("positions", pos), int64s("kv_meta", meta),
                                      int64s("last_index", {t - 1})};
    auto out = (*exec)->run_host(inputs);
    if (!out.ok()) return fail("step " + std::to_string(step) + ": " + out.error().message());
    const HostTensor& logits = out->front();
    const float* row = logits.as<float>();
    const int64_t vocab = logits.desc.shape[1];
    all_logits.insert(all_logits.end(), row, row + vocab);
    const int64_t best = std::max_element(row, row + vocab) - row;  // the first of equal maxima
    tokens.push_back(best);
    start += t;
    feed = {step < static_cast<int64_t>(forced.size()) ? forced[static_cast<size_t>(step)] : best};
  }
  if (!logits_path.empty() &&
      !write_npy(logits_path, all_logits, static_cast<size_t>(steps), all_logits.size() / static_cast<size_t>(steps))) {
    return fail("cannot write " + logits_path);
  }
  std::printf("{\"tokens\": [");
  for (size_t i = 0; i < tokens.size(); ++i) std::printf("%s%lld", i ? ", " : "", static_cast<long long>(tokens[i]));
  std::printf("]}\n");
  return 0;
}
