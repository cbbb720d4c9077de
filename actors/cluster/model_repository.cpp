#include "actors/cluster/model_repository.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/workflow_config.hpp"
#include "gpu/shadow_split.hpp"
#include "model/manifest.hpp"
#include "model/model.hpp"
#include "placement/shadow_profile.hpp"

namespace ember {

namespace fs = std::filesystem;

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// The version's profile.json, when there is one that describes this version.
void read_profile(RepositoryEntry& e, const gpu::Manifest& manifest) {
  auto profile = gpu::read_profile(e.dir);
  if (!profile.ok()) {
    if (profile.error().code() != ErrorCode::not_found) e.profile_error = profile.error().message();
    return;
  }
  bool same = profile->model == manifest.name && profile->weights_bytes == e.weights_bytes &&
              profile->layers.size() == manifest.layers.size();
  for (size_t i = 0; same && i < manifest.layers.size(); ++i) same = profile->layers[i].name == manifest.layers[i].name;
  if (!same) {
    e.profile_error = e.dir + "/" + gpu::kProfileFile +
                      " is stale: it describes another weights file or other layers; "
                      "run `ember model profile " +
                      e.dir + "` again";
    return;
  }
  e.profile = std::make_shared<const gpu::ModelProfile>(std::move(*profile));
}

RepositoryEntry read_version(const std::string& name, uint32_t version, const fs::path& dir) {
  RepositoryEntry e;
  e.key = {name, version};
  e.dir = dir.string();
  std::ifstream f(dir / gpu::kManifestFile, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  e.manifest_json = ss.str();
  auto checked = gpu::Model::check_dir(e.dir);
  if (checked.ok()) {
    e.weights_bytes = *checked;
    if (auto manifest = gpu::parse_manifest(e.manifest_json, e.dir); manifest.ok()) {
      e.autoscale = manifest->serving.autoscale;
      e.declared_slo = {manifest->serving.slo_deadline_us, manifest->serving.slo_percentile};
      read_profile(e, *manifest);
      const auto& serving = manifest->serving;
      if (e.profile && serving.slo_deadline_us) {
        e.capacity_rps = placement::replica_capacity(*e.profile, static_cast<double>(serving.slo_deadline_us),
                                               serving.dynamic_batching ? serving.max_batch : 1);
      }
    }
  } else {
    e.error = checked.error().message();
  }
  return e;
}

}  // namespace

std::vector<RepositoryEntry> scan_repository_model(const std::string& root, const std::string& name) {
  std::vector<RepositoryEntry> out;
  std::error_code ec;
  const fs::path folder = fs::path(root) / name;
  if (!fs::is_directory(folder, ec)) return out;
  if (fs::exists(folder / gpu::kManifestFile, ec)) {
    out.push_back(read_version(name, 1, folder));
    return out;
  }
  for (const auto& v : fs::directory_iterator(folder, ec)) {
    const std::string vname = v.path().filename().string();
    if (!v.is_directory() || !all_digits(vname)) continue;
    const auto version = static_cast<uint32_t>(std::stoul(vname));
    if (version == 0) continue;
    out.push_back(read_version(name, version, v.path()));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  return out;
}

std::vector<RepositoryEntry> scan_repository(const std::string& root) {
  std::vector<RepositoryEntry> out;
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& m : fs::directory_iterator(root, ec)) {
    const std::string name = m.path().filename().string();
    if (m.is_directory() && !name.empty() && name[0] != '.') names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    auto versions = scan_repository_model(root, name);
    out.insert(out.end(), versions.begin(), versions.end());
  }
  return out;
}

std::vector<workflow_entry> scan_workflows(const std::string& root) {
  std::vector<workflow_entry> out;
  std::error_code ec;
  for (const auto& m : fs::directory_iterator(root, ec)) {
    const std::string name = m.path().filename().string();
    if (!m.is_directory() || name.empty() || name[0] == '.' || !fs::exists(m.path() / kWorkflowFile, ec)) continue;
    workflow_entry w;
    w.name = name;
    const std::string source = name + "/" + kWorkflowFile;
    std::ifstream f(m.path() / kWorkflowFile, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    w.json = ss.str();
    if (!f) {
      w.error = source + ": cannot read";
    } else if (!scan_repository_model(root, name).empty()) {
      w.error = source + ": the folder also holds a model; a folder is one model or one workflow";
    } else if (auto parsed = parse_workflow(w.json, name, source); !parsed.ok()) {
      w.error = parsed.error().message();
    }
    out.push_back(std::move(w));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

RepositoryScan rescan_repository(const std::string& root, const std::string& model) {
  RepositoryScan out;
  if (!model.empty()) {
    out.models = scan_repository_model(root, model);
    return out;
  }
  out.models = scan_repository(root);
  out.workflows = scan_workflows(root);
  return out;
}

}  // namespace ember
