#include "model/convert.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "model/half.hpp"
#include "model/model.hpp"
#include "model/model_profile.hpp"
#include "model/safetensors.hpp"

namespace ember::gpu {

namespace {

float load(DType t, const uint8_t* p) {
  uint16_t h;
  switch (t) {
    case DType::f16: std::memcpy(&h, p, 2); return f16_to_f32(h);
    case DType::bf16: std::memcpy(&h, p, 2); return bf16_to_f32(h);
    default: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
  }
}

// Writes `v` at `width`; false when a finite value does not fit (float16's range).
bool store(DType width, float v, uint8_t* p) {
  switch (width) {
    case DType::f16: {
      const uint16_t h = f32_to_f16(v);
      std::memcpy(p, &h, 2);
      return !std::isfinite(v) || std::isfinite(f16_to_f32(h));
    }
    case DType::bf16: {
      const uint16_t h = f32_to_bf16(v);
      std::memcpy(p, &h, 2);
      return !std::isfinite(v) || std::isfinite(bf16_to_f32(h));
    }
    default: std::memcpy(p, &v, 4); return true;
  }
}

Result<std::string> read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

Result<ConvertStats> convert_model_dir(const std::string& src_dir, const std::string& dst_dir, DType width) {
  if (!is_float(width)) {
    return invalid_argument("weights can be held as float32, float16 or bfloat16, not " + std::string(dtype_name(width)));
  }
  EMBER_ASSIGN_OR_RETURN(auto model, Model::load(src_dir));
  EMBER_ASSIGN_OR_RETURN(std::string manifest, read_text(src_dir + "/" + kManifestFile));
  ConvertStats stats;
  stats.bytes_before = model->file_bytes();
  // The tensors in file order, each converted unless an exact_weights layer's (a constant's value,
  // a kv_attention's inv_freq).
  std::vector<const TensorInfo*> keep;  // exact weights, by tensor
  for (uint32_t i = 0; i < model->num_layers(); ++i) {
    if (!exact_weights(model->layer(i).op)) continue;
    for (const TensorInfo* t : model->layer_weights(i))
      if (t) keep.push_back(t);
  }
  std::vector<std::vector<uint8_t>> converted;
  converted.reserve(model->weights_index().tensors.size());
  std::vector<TensorToWrite> out;
  for (const TensorInfo& t : model->weights_index().tensors) {
    const uint8_t* src = model->data() + t.data.offset;
    if (std::find(keep.begin(), keep.end(), &t) != keep.end() || t.desc.dtype == width || !is_float(t.desc.dtype)) {
      out.push_back({t.name, t.desc, src});
      continue;
    }
    const int64_t n = t.desc.shape.numel();
    std::vector<uint8_t>& bytes = converted.emplace_back(static_cast<size_t>(n) * dtype_size(width));
    const uint32_t in_size = dtype_size(t.desc.dtype), out_size = dtype_size(width);
    for (int64_t e = 0; e < n; ++e) {
      const float v = load(t.desc.dtype, src + e * in_size);
      if (!store(width, v, bytes.data() + e * out_size)) {
        return invalid_argument("tensor '" + t.name + "' element " + std::to_string(e) + " (" + std::to_string(v) +
                                ") is outside " + std::string(dtype_name(width)) + "'s range");
      }
    }
    out.push_back({t.name, TensorDesc{width, t.desc.shape}, bytes.data()});
    ++stats.tensors_converted;
  }
  std::error_code ec;
  std::filesystem::create_directories(dst_dir, ec);
  if (ec) return io_error("cannot create " + dst_dir + ": " + ec.message());
  const bool in_place = std::filesystem::equivalent(src_dir, dst_dir, ec);
  if (!in_place) {
    std::ofstream f(dst_dir + "/" + kManifestFile, std::ios::binary | std::ios::trunc);
    f.write(manifest.data(), static_cast<std::streamsize>(manifest.size()));
    if (!f.flush()) return io_error("cannot write " + dst_dir + "/" + kManifestFile);
  }
  EMBER_RETURN_IF_ERROR(write_safetensors(dst_dir + "/" + kWeightsFile, out, model->weights_index().metadata));
  // A profile measured the old bytes (their sizes, hashes and times): it no longer describes them.
  stats.profile_removed = std::filesystem::remove(dst_dir + "/" + kProfileFile, ec);
  EMBER_ASSIGN_OR_RETURN(stats.bytes_after, Model::check_dir(dst_dir));
  return stats;
}

}  // namespace ember::gpu
