// ModelCatalog: the KServe v2 metadata body of every model version a gateway knows, built once per
// version. Owned by the gateway actor, which feeds it the entries of each routing update and puts
// the bodies into the RoutingView snapshots the HTTP threads answer metadata requests from.
//
// Why: a routing update arrives whenever any replica anywhere moves, and almost always changes
// replicas only. Parsing every model's manifest again for each one made the gateway's work per
// update proportional to the size of every manifest in the repository. Here:
//   - a version's manifest is parsed when the version first arrives and again only when its
//     manifest text differs from the one held (one string comparison per entry in an update);
//   - a body is rendered again only when its signature or the model's list of versions changed
//     (another version of the same model came or went), and then from the held signature;
//   - between changes metadata() hands out the same shared body, so snapshots share it.
//
// Pure: no CAF, no clock, no threads; one owner (the gateway actor) calls it. A manifest that does
// not parse gives an empty signature (empty inputs and outputs), as before: a model that cannot
// load still has metadata, and its readiness says why it cannot load. A generation section that does
// not parse makes the version non-generative here (the manager refuses to load it anyway).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "actors/gateway/http/kserve_json.hpp"
#include "actors/model_key.hpp"
#include "model/generation_spec.hpp"

namespace ember {

class ModelCatalog {
 public:
  /// An entry for `key` with model.json `manifest_json` arrived (new, or again in an update).
  void put(const model_key& key, const std::string& manifest_json);
  /// `key` left the routing table.
  void remove(const model_key& key);

  /// The metadata body of `key` (null for a key never put, or removed), rendering it first if it
  /// changed since the last call. The pointer stays the same until the body changes.
  std::shared_ptr<const std::string> metadata(const model_key& key);
  /// The inputs and outputs of `key` (null for a key never put, or removed).
  std::shared_ptr<const ModelSignature> signature(const model_key& key) const;
  /// The generation section of `key`'s model.json (null: not generative, never put, or removed),
  /// parsed with the signature, once per manifest text.
  std::shared_ptr<const gpu::GenerationSpec> generation(const model_key& key) const;

  size_t size() const { return versions_.size(); }
  /// Manifests parsed and bodies rendered so far: what the work per update costs.
  uint64_t parses() const { return parses_; }
  uint64_t renders() const { return renders_; }

 private:
  struct Version {
    std::string manifest_json;
    std::shared_ptr<const ModelSignature> signature;
    std::shared_ptr<const gpu::GenerationSpec> generation;
    std::shared_ptr<const std::string> body;  // null: render before handing out
  };

  /// Marks every version of `name` for rendering (its list of versions changed).
  void invalidate(const std::string& name);

  std::map<model_key, Version> versions_;
  uint64_t parses_ = 0;
  uint64_t renders_ = 0;
};

}  // namespace ember
