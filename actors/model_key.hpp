// model_key: one version of one model, the key of everything a node holds of it. Its own header so
// that rooms below the actors' messages (the engine room, actors/node/engine/) name models without
// CAF; its `inspect` (for the messages that carry it) is in actors/wire_inspect.hpp.
//
// Pure data: anyone may build and read it on any thread.
#pragma once

#include <cstdint>
#include <string>

namespace ember {

/// One version of one model. version 0 means "the default version" (the highest) where a caller
/// may leave it open (HTTP paths without /versions/); actors past the gateway always see a real one.
struct model_key {
  std::string name;
  uint32_t version = 0;

  friend bool operator==(const model_key& a, const model_key& b) { return a.name == b.name && a.version == b.version; }
  friend bool operator<(const model_key& a, const model_key& b) {
    return a.name != b.name ? a.name < b.name : a.version < b.version;
  }
  std::string to_string() const { return name + "/" + std::to_string(version); }
};

}  // namespace ember
