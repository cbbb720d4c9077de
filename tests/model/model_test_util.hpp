// Helpers shared by the model/ and gpu/ tests: temporary directories, generated models, seeded tensors
// (no device: tests/gpu/test_util.hpp adds SimDevices).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "model/architectures.hpp"
#include "model/host_tensor.hpp"
#include "model/model.hpp"
#include "tests/must.hpp"

namespace ember::gpu::testing {

using ember::testing::must;

/// A directory under $TMPDIR removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ember-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Writes architecture `arch` (tiny) into `dir` and loads it.
inline std::shared_ptr<const Model> tiny_model(const std::string& arch, const std::string& dir, uint64_t seed = 1) {
  auto builder = must(build_architecture(arch, {true, seed, {}}), "building " + arch);
  must(builder.write(dir), "writing " + arch);
  return must(Model::load(dir), "loading " + arch);
}

/// A tensor of uniform floats in [lo, hi) or uniform ids in [0, vocab).
inline HostTensor random_tensor(const std::string& name, TensorDesc desc, uint64_t seed, float lo = -1.f,
                                float hi = 1.f, int64_t vocab = 2) {
  HostTensor t = must(HostTensor::allocate(name, desc), "allocating " + name);
  std::mt19937_64 rng(seed);
  const int64_t n = desc.shape.numel();
  for (int64_t i = 0; i < n; ++i) {
    if (desc.dtype == DType::f32) t.as<float>()[i] = std::uniform_real_distribution<float>(lo, hi)(rng);
    else if (desc.dtype == DType::i64) t.as<int64_t>()[i] = std::uniform_int_distribution<int64_t>(0, vocab - 1)(rng);
    else if (desc.dtype == DType::i32) t.as<int32_t>()[i] = static_cast<int32_t>(std::uniform_int_distribution<int64_t>(0, vocab - 1)(rng));
  }
  return t;
}

/// Inputs for a tiny architecture at batch `batch` (and sequence length `seq` for transformers).
inline std::vector<HostTensor> arch_inputs(const Model& m, int64_t batch, int64_t seq, uint64_t seed) {
  std::vector<HostTensor> out;
  for (const auto& in : m.manifest().inputs) {
    TensorDesc d{in.dtype, in.shape};
    for (int i = 0; i < d.shape.rank; ++i)
      if (d.shape[i] < 0) d.shape[i] = i == 0 ? batch : seq;
    const int64_t vocab = in.name == "input_ids" ? 100 : 2;
    out.push_back(random_tensor(in.name, d, seed++, -1.f, 1.f, vocab));
  }
  return out;
}

/// max |a - b| / max |b| over float tensors of one shape.
inline double relative_error(const HostTensor& a, const HostTensor& b) {
  EXPECT_EQ(a.desc.shape, b.desc.shape);
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.desc.shape.numel(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(a.as<float>()[i] - b.as<float>()[i])));
    scale = std::max(scale, static_cast<double>(std::abs(b.as<float>()[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

inline bool bitwise_equal(const HostTensor& a, const HostTensor& b) {
  return a.desc.shape == b.desc.shape && a.desc.dtype == b.desc.dtype &&
         std::memcmp(a.data(), b.data(), a.desc.bytes()) == 0;
}

}  // namespace ember::gpu::testing
