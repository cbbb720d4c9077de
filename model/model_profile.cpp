#include "model/model_profile.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/json_text.hpp"

namespace ember::gpu {

size_t ModelProfile::batch_index(uint32_t batch) const {
  size_t best = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    if (batches[i] <= batch) best = i;
  }
  return best;
}

double ModelProfile::batch_us(uint32_t batch) const {
  const size_t b = batch_index(batch);
  double sum = 0;
  for (const auto& l : layers) sum += b < l.exec_us.size() ? l.exec_us[b] : 0;
  return sum;
}

std::optional<double> ModelProfile::sensitivity_us(size_t i, uint32_t from, uint32_t to) const {
  auto at = [&](uint32_t b) { return std::find(batches.begin(), batches.end(), b); };
  if (i >= layers.size() || at(from) == batches.end() || at(to) == batches.end()) return std::nullopt;
  const auto& us = layers[i].exec_us;
  return us[static_cast<size_t>(at(to) - batches.begin())] - us[static_cast<size_t>(at(from) - batches.begin())];
}

Status ModelProfile::check_matches(const Model& m) const {
  const std::string what = "profile of '" + m.manifest().name + "'";
  if (model != m.manifest().name) return invalid_argument(what + " names model '" + model + "'");
  if (weights_bytes != m.file_bytes() || header_bytes != m.data_offset()) {
    return invalid_argument(what + " is stale: it was taken of a weights file of " + std::to_string(weights_bytes) +
                            " bytes, the file has " + std::to_string(m.file_bytes()));
  }
  if (layers.size() != m.num_layers()) {
    return invalid_argument(what + " has " + std::to_string(layers.size()) + " layers, the model " +
                            std::to_string(m.num_layers()));
  }
  for (uint32_t i = 0; i < m.num_layers(); ++i) {
    if (layers[i].name != m.layer(i).name || layers[i].bytes != m.layer_bytes(i).length) {
      return invalid_argument(what + " is stale at layers[" + std::to_string(i) + "] '" + layers[i].name + "'");
    }
  }
  return Status::OK();
}

std::string profile_to_json(const ModelProfile& p) {
  nlohmann::ordered_json j;
  j["format"] = "ember-profile";
  j["format_version"] = kProfileFormatVersion;
  j["model"] = p.model;
  j["weights_bytes"] = p.weights_bytes;
  j["header_bytes"] = p.header_bytes;
  j["header_sha256"] = p.header_sha256;
  j["device"] = p.device;
  j["batches"] = p.batches;
  j["seq_len"] = p.seq_len;
  auto& layers = j["layers"] = nlohmann::ordered_json::array();
  for (const LayerCost& l : p.layers) {
    nlohmann::ordered_json e;
    e["name"] = l.name;
    e["bytes"] = l.bytes;
    e["sha256"] = l.sha256;
    std::vector<double> us;
    for (double x : l.exec_us) us.push_back(std::round(x * 10) / 10);  // 0.1 us is plenty
    e["exec_us"] = us;
    e["out_bytes"] = l.out_bytes;
    e["macs"] = l.macs;
    layers.push_back(std::move(e));
  }
  return j.dump(1) + "\n";
}

namespace {

bool is_hex_digest(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

Result<ModelProfile> parse_profile(std::string_view text, std::string_view source) {
  const std::string where(source);
  auto parsed = parse_json_text(text);
  if (!parsed.ok()) return parsed.error().with_context(where);
  const nlohmann::json& j = *parsed;
  auto bad = [&](const std::string& field, const std::string& why) {
    return invalid_argument(where + ": " + field + ": " + why);
  };
  if (!j.is_object()) return bad("(top level)", "not an object");
  if (j.value("format", "") != "ember-profile") return bad("format", "not \"ember-profile\"");
  if (!j.contains("format_version") || j["format_version"] != kProfileFormatVersion) {
    return bad("format_version", "not " + std::to_string(kProfileFormatVersion));
  }
  ModelProfile p;
  try {
    p.model = j.at("model").get<std::string>();
    p.weights_bytes = j.at("weights_bytes").get<uint64_t>();
    p.header_bytes = j.at("header_bytes").get<uint64_t>();
    p.header_sha256 = j.at("header_sha256").get<std::string>();
    p.device = j.at("device").get<std::string>();
    p.batches = j.at("batches").get<std::vector<uint32_t>>();
    p.seq_len = j.at("seq_len").get<int64_t>();
    const auto& layers = j.at("layers");
    if (!layers.is_array()) return bad("layers", "not an array");
    for (size_t i = 0; i < layers.size(); ++i) {
      const auto& e = layers[i];
      LayerCost l;
      l.name = e.at("name").get<std::string>();
      l.bytes = e.at("bytes").get<uint64_t>();
      l.sha256 = e.at("sha256").get<std::string>();
      l.exec_us = e.at("exec_us").get<std::vector<double>>();
      l.out_bytes = e.at("out_bytes").get<std::vector<uint64_t>>();
      l.macs = e.value("macs", uint64_t{0});
      const std::string field = "layers[" + std::to_string(i) + "]";
      if (!is_hex_digest(l.sha256)) return bad(field + ".sha256", "not 64 lower-case hex digits");
      if (l.exec_us.size() != p.batches.size() || l.out_bytes.size() != p.batches.size()) {
        return bad(field, "exec_us and out_bytes need one entry per batch");
      }
      if (std::any_of(l.exec_us.begin(), l.exec_us.end(), [](double x) { return !(x >= 0); })) {
        return bad(field + ".exec_us", "negative or not a number");
      }
      p.layers.push_back(std::move(l));
    }
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(where + ": " + e.what());
  }
  if (!is_hex_digest(p.header_sha256)) return bad("header_sha256", "not 64 lower-case hex digits");
  if (p.batches.empty() || !std::is_sorted(p.batches.begin(), p.batches.end()) || p.batches.front() == 0) {
    return bad("batches", "must be ascending and positive");
  }
  if (p.header_bytes > p.weights_bytes) return bad("header_bytes", "larger than the weights file");
  uint64_t sum = p.header_bytes;
  for (const LayerCost& l : p.layers) sum += l.bytes;
  if (sum > p.weights_bytes) return bad("layers", "their bytes exceed the weights file");
  return p;
}

Result<ModelProfile> read_profile(const std::string& dir) {
  const std::string path = dir + "/" + kProfileFile;
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + " does not exist");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return io_error("cannot read " + path);
  return parse_profile(text.str(), path);
}

Status write_profile(const std::string& dir, const ModelProfile& profile) {
  const std::string path = dir + "/" + kProfileFile;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << profile_to_json(profile);
    if (!out) return io_error("cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return io_error("cannot rename " + tmp + " to " + path + ": " + ec.message());
  return Status::OK();
}

}  // namespace ember::gpu
