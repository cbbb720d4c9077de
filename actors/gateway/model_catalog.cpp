// Model metadata built once per version (see model_catalog.hpp).
#include "actors/gateway/model_catalog.hpp"

#include <nlohmann/json.hpp>
#include <vector>

namespace ember {

namespace {

/// The "generation" section of a model.json text, or null (none, or not parsing).
std::shared_ptr<const gpu::GenerationSpec> parse_generation_section(const std::string& manifest_json,
                                                                    const std::string& where) {
  auto j = nlohmann::json::parse(manifest_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return nullptr;
  auto section = j.find("generation");
  if (section == j.end() || !section->is_object()) return nullptr;
  auto spec = gpu::parse_generation(*section, where + ": generation");
  if (!spec.ok()) return nullptr;
  return std::make_shared<const gpu::GenerationSpec>(std::move(*spec));
}

}  // namespace

void ModelCatalog::put(const model_key& key, const std::string& manifest_json) {
  auto [it, added] = versions_.try_emplace(key);
  Version& v = it->second;
  if (!added && v.manifest_json == manifest_json) return;  // the usual case: only replicas moved
  v.manifest_json = manifest_json;
  ++parses_;
  auto signature = parse_model_signature(manifest_json, key.to_string() + "/model.json");
  v.signature = std::make_shared<const ModelSignature>(signature.ok() ? std::move(*signature) : ModelSignature{});
  v.generation = parse_generation_section(manifest_json, key.to_string() + "/model.json");
  v.body = nullptr;
  if (added) invalidate(key.name);  // the other versions list this one now
}

void ModelCatalog::remove(const model_key& key) {
  if (versions_.erase(key) > 0) invalidate(key.name);
}

std::shared_ptr<const std::string> ModelCatalog::metadata(const model_key& key) {
  auto it = versions_.find(key);
  if (it == versions_.end()) return nullptr;
  Version& v = it->second;
  if (!v.body) {
    std::vector<uint32_t> versions;
    for (auto s = versions_.lower_bound({key.name, 0}); s != versions_.end() && s->first.name == key.name; ++s) {
      versions.push_back(s->first.version);
    }
    ++renders_;
    v.body = std::make_shared<const std::string>(render_model_metadata(key.name, versions, *v.signature));
  }
  return v.body;
}

std::shared_ptr<const ModelSignature> ModelCatalog::signature(const model_key& key) const {
  auto it = versions_.find(key);
  return it == versions_.end() ? nullptr : it->second.signature;
}

std::shared_ptr<const gpu::GenerationSpec> ModelCatalog::generation(const model_key& key) const {
  auto it = versions_.find(key);
  return it == versions_.end() ? nullptr : it->second.generation;
}

void ModelCatalog::invalidate(const std::string& name) {
  for (auto s = versions_.lower_bound({name, 0}); s != versions_.end() && s->first.name == name; ++s) {
    s->second.body = nullptr;
  }
}

}  // namespace ember
