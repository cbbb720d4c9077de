// fuzz_seed_maker: turns model directories written by `ember model new` into seed inputs for the
// fuzz targets of this folder, in each target's input layout (see the comment atop each target).
//
//   fuzz_seed_maker OUT_DIR MODEL_DIR...
//
// writes, per model directory NAME (its last path component):
//   OUT_DIR/safetensors/NAME-header   [E = data bytes][8-byte prefix + JSON header]
//   OUT_DIR/safetensors/NAME-whole    [E = 0][whole weights file]              (small files only)
//   OUT_DIR/manifest/NAME.json        model.json
//   OUT_DIR/model/NAME-header         [M][E = data bytes][model.json][prefix + header]
//   OUT_DIR/model/NAME-whole          [M][E = 0][model.json][whole weights file] (small files only)
//   OUT_DIR/kserve_json/NAME.json     a KServe request with every declared input, -1 dims set to 2
//                                     (small requests only)
// Seeds stay small: a data section is replaced by the E count the targets append as zeros.
// A tool of the fuzz build, run by the fuzz_corpus CTest fixture; not part of Ember.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Larger seeds would raise libFuzzer's -max_len (the largest seed) and slow every run.
constexpr uint64_t kMaxWholeFileBytes = 64 << 10;
constexpr uint64_t kMaxRequestBytes = 8 << 10;

std::string read_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(path.string() + ": cannot open");
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error(path.string() + ": cannot write");
}

std::string u32(uint64_t v) {
  if (v > UINT32_MAX) throw std::runtime_error("value " + std::to_string(v) + " does not fit 4 bytes");
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A KServe v2 request with one tensor per declared input: floats count up from 0.5, ids from 1.
json kserve_request(const json& manifest) {
  static const std::map<std::string, std::string> kKserve = {
      {"float32", "FP32"}, {"int64", "INT64"}, {"int32", "INT32"}, {"uint8", "UINT8"},
      {"float16", "FP16"}, {"bfloat16", "BF16"}};
  json request = {{"inputs", json::array()}};
  for (const auto& in : manifest.at("inputs")) {
    std::vector<int64_t> shape;
    int64_t numel = 1;
    for (int64_t d : in.at("shape").get<std::vector<int64_t>>()) {
      shape.push_back(d < 0 ? 2 : d);
      numel *= shape.back();
    }
    const std::string dtype = in.at("dtype").get<std::string>();
    json data = json::array();
    for (int64_t i = 0; i < numel; ++i) {
      if (dtype == "float32") data.push_back(0.5 + static_cast<double>(i % 7));
      else data.push_back(1 + i % 5);
    }
    request["inputs"].push_back(
        {{"name", in.at("name")}, {"datatype", kKserve.at(dtype)}, {"shape", shape}, {"data", data}});
  }
  return request;
}

void make_seeds(const fs::path& out, const fs::path& model_dir) {
  const std::string name = model_dir.filename().string();
  const std::string manifest = read_file(model_dir / "model.json");
  const std::string weights = read_file(model_dir / "weights.safetensors");
  if (weights.size() < 8) throw std::runtime_error(name + ": weights file too short");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(weights[static_cast<size_t>(i)]);
  if (n > weights.size() - 8) throw std::runtime_error(name + ": weights header length out of range");
  const std::string header = weights.substr(0, 8 + n);
  const uint64_t data_bytes = weights.size() - header.size();

  write_file(out / "safetensors" / (name + "-header"), u32(data_bytes) + header);
  write_file(out / "manifest" / (name + ".json"), manifest);
  write_file(out / "model" / (name + "-header"), u32(manifest.size()) + u32(data_bytes) + manifest + header);
  if (weights.size() <= kMaxWholeFileBytes) {
    write_file(out / "safetensors" / (name + "-whole"), u32(0) + weights);
    write_file(out / "model" / (name + "-whole"), u32(manifest.size()) + u32(0) + manifest + weights);
  }
  const std::string request = kserve_request(json::parse(manifest)).dump();
  if (request.size() <= kMaxRequestBytes) write_file(out / "kserve_json" / (name + ".json"), request);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR MODEL_DIR...\n", argv[0]);
    return 2;
  }
  try {
    for (int i = 2; i < argc; ++i) make_seeds(argv[1], argv[i]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_seed_maker: %s\n", e.what());
    return 1;
  }
  return 0;
}
