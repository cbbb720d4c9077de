// Helpers for the actor tests: an actor system configured as Ember's processes configure theirs
// (without the network), a repository of tiny models, and a blocking ask() with a timeout.
//
// These tests run the real actors on CAF's normal scheduler, with real engine and fetcher threads:
// the behaviour under test (de-duplication, retries, re-placement) is about concurrency, which the
// deterministic coordinator would hide. Every wait has a timeout, so a bug fails a test, never
// hangs it.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "actors/actor_system.hpp"
#include "actors/errors.hpp"
#include "actors/model_key.hpp"
#include "base/status.hpp"
#include "model/model.hpp"
#include "tests/gpu/test_util.hpp"
#include "tests/must.hpp"

namespace ember::testing {

inline std::unique_ptr<caf::actor_system> make_system() {
  static caf::actor_system_config* cfg = [] {
    auto* c = new caf::actor_system_config();
    ActorSystemOptions o;
    o.network = false;
    configure_actor_system(*c, o);
    return c;
  }();
  return std::make_unique<caf::actor_system>(*cfg);
}

/// Sends `msg...` and waits up to `timeout` for an answer of type T.
template <class T, class Handle, class... Ts>
Result<T> ask(caf::actor_system& sys, const Handle& dest, std::chrono::milliseconds timeout, Ts&&... msg) {
  caf::scoped_actor self{sys};
  Result<T> out = internal_error("no answer");
  self->request(dest, timeout, std::forward<Ts>(msg)...)
      .receive([&](T& x) { out = std::move(x); }, [&](caf::error& e) { out = from_caf(e); });
  return out;
}

/// One version of a test repository, as the manager describes it to a node (its model.json and the
/// size of its weights file); the premise that it exists and is valid is must()'d.
struct RepositoryVersion {
  model_key key;
  std::string manifest_json;
  uint64_t weights_bytes = 0;
};

inline RepositoryVersion repository_version(const std::string& root, const std::string& name, uint32_t version) {
  const std::string where = name + "/" + std::to_string(version) + " in " + root;
  const std::string dir = gpu::repository_version_dir(root, name, version);
  if (dir.empty()) throw std::runtime_error("the test repository has no " + where);
  RepositoryVersion v{{name, version}, gpu::testing::read_file(dir + "/" + gpu::kManifestFile), 0};
  v.weights_bytes = must(gpu::Model::check_dir(dir), where);
  return v;
}

/// A repository with tiny models: mlp (version 1 and 2), bert (1) and resnet as a version folder.
struct Repository {
  gpu::testing::TempDir dir;
  Repository() {
    write("mlp", "mlp/1", 1);
    write("mlp", "mlp/2", 2);
    write("bert-base", "bert/1", 3);
    write("resnet50", "resnet", 4);
  }
  void write(const std::string& arch, const std::string& where, uint64_t seed, bool tiny = true) {
    auto b = must(gpu::build_architecture(arch, {tiny, seed, {}}), "building " + arch);
    must(b.write(dir / where), "writing " + where);
  }
  std::string path() const { return dir.path(); }
};

}  // namespace ember::testing
