// ModelProfile: what a model version costs, layer by layer, measured once at registration and
// stored beside the version as DIR/profile.json. The partition planner (placement/partition_planner.hpp)
// reads it to cut a model into pipeline stages; a node reads the digests to verify exactly the layer
// range it holds.
//
// Layout of profile.json (a JSON object):
//   "format": "ember-profile", "format_version": 1, "model": the manifest's name,
//   "weights_bytes": size of weights.safetensors, "header_bytes": its header (the data offset),
//   "header_sha256": SHA-256 of [0, header_bytes) (hex),
//   "device": what ran the measurement ("sim", a GPU's name), "batches": [b1, b2, ...] ascending,
//   "seq_len": the length free non-batch dims were set to,
//   "layers": [{"name", "bytes", "sha256", "exec_us": [one per batch], "out_bytes": [one per batch],
//               "macs": multiply-adds per sample (at seq_len; absent in profiles written before it)}]
// A layer's bytes are Model::layer_bytes(i) (data-section offsets are cumulative, so they are not
// stored); its sha256 is of those bytes (of nothing for a layer without weights); exec_us is the
// wall time of the layer in a warm run (the executor's profiling mode: each layer waited for),
// out_bytes the size of the value it outputs.
//
// Pure: anyone, any thread; measuring one is gpu/profiler.hpp's (it runs the model on a device).
// Parsing never throws; every problem is an invalid_argument naming the file and field. Hashing is
// the caller's (model/ and gpu/ link no crypto): HashHex returns the hex SHA-256 of a byte range.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "model/model.hpp"

namespace ember::gpu {

inline constexpr const char* kProfileFile = "profile.json";
inline constexpr int kProfileFormatVersion = 1;

struct LayerCost {
  std::string name;
  uint64_t bytes = 0;
  std::string sha256;               // hex
  std::vector<double> exec_us;      // per ModelProfile::batches entry
  std::vector<uint64_t> out_bytes;  // per ModelProfile::batches entry
  uint64_t macs = 0;                // multiply-adds per sample (ops::flops / 2 at batch 1)
};

struct ModelProfile {
  std::string model;
  uint64_t weights_bytes = 0;
  uint64_t header_bytes = 0;
  std::string header_sha256;
  std::string device;
  std::vector<uint32_t> batches;
  int64_t seq_len = 0;
  std::vector<LayerCost> layers;

  /// Index of the largest batch <= `batch` (the first when all are larger).
  size_t batch_index(uint32_t batch) const;
  /// Microseconds a batch of batches[batch_index(batch)] took through every layer (0: no layer).
  double batch_us(uint32_t batch) const;
  /// AsyFunc's sensitivity of layer `i` to compute: how much longer it runs at batch `to` than at
  /// `from` (us); nullopt unless both batches were measured.
  std::optional<double> sensitivity_us(size_t i, uint32_t from = 2, uint32_t to = 4) const;
  /// Checks the profile describes `model` (name, sizes, layer names and bytes): a stale profile
  /// left beside a rewritten model is invalid_argument, not silently used.
  Status check_matches(const Model& model) const;
};

/// Hex SHA-256 of `bytes` bytes at `data`.
using HashHex = std::function<std::string(const uint8_t* data, uint64_t bytes)>;

std::string profile_to_json(const ModelProfile& profile);
/// `source` names the file in errors.
Result<ModelProfile> parse_profile(std::string_view json, std::string_view source);

/// DIR/profile.json: not_found when absent, invalid_argument when it does not parse.
Result<ModelProfile> read_profile(const std::string& dir);
/// Writes DIR/profile.json (through a temporary file and a rename).
Status write_profile(const std::string& dir, const ModelProfile& profile);

}  // namespace ember::gpu
