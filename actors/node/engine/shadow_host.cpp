#include "actors/node/engine/shadow_host.hpp"

#include <algorithm>
#include <cmath>

namespace ember::engine {

ShadowHost::Held::~Held() {
  ex.reset();  // its stream drained before its weights go back
  if (!pool_name.empty()) memory->free(pool_name);
}

Result<uint64_t> ShadowHost::load(const model_key& key, const std::shared_ptr<const gpu::Model>& model,
                                  gpu::LayerRange range) {
  {
    std::lock_guard lock(mu_);
    shadows_.erase(key);  // one Shadow a key: its memory goes back once no split holds it
  }
  EMBER_RETURN_IF_ERROR(memory_.pin_host(model));
  auto shadow = std::make_shared<Held>();
  shadow->memory = &memory_;
  // A name of its own: a Shadow it replaces may still be held by a split, and frees its own.
  shadow->pool_name = "#shadow/" + key.to_string() + "/" + std::to_string(++serial_);
  auto ex = worker_.guarded(
      [&] { return gpu::LayerExecutor::create(device_, model, range, memory_.placer(shadow->pool_name)); });
  if (!ex.ok()) {
    memory_.free(shadow->pool_name);
    shadow->pool_name.clear();
    return ex.error().with_context("a Shadow of " + key.to_string() + " on " + device_.info().name);
  }
  (*ex)->set_activation_pool(&memory_.activations());
  (*ex)->set_staging(memory_.staging());
  const uint64_t bytes = (*ex)->weight_bytes();
  shadow->ex = std::move(*ex);
  memory_.commit();  // the pool's free bytes, as others read them
  std::lock_guard lock(mu_);
  shadows_[key] = std::move(shadow);
  return bytes;
}

bool ShadowHost::drop(const model_key& key) {
  std::shared_ptr<Held> gone;
  {
    std::lock_guard lock(mu_);
    auto it = shadows_.find(key);
    if (it == shadows_.end()) return false;
    gone = std::move(it->second);
    shadows_.erase(it);
  }
  gone.reset();  // unless a split still runs on it
  return true;
}

std::shared_ptr<ShadowHost::Held> ShadowHost::held(const model_key& key) const {
  std::lock_guard lock(mu_);
  auto it = shadows_.find(key);
  return it == shadows_.end() ? nullptr : it->second;
}

std::vector<std::string> ShadowHost::pool_names() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> names;
  for (const auto& [key, shadow] : shadows_) names.push_back(shadow->pool_name);
  return names;
}

void ShadowHost::clear() {
  std::map<model_key, std::shared_ptr<Held>> gone;
  {
    std::lock_guard lock(mu_);
    gone.swap(shadows_);
  }
}

Result<std::vector<gpu::HostTensor>> run_body_split(Resident& body, const model_key& key,
                                                    const std::vector<gpu::HostTensor>& inputs,
                                                    const ShadowHost::Held* shadow, double share, gpu::SplitStats& st,
                                                    gpu::Stream& stream, gpu::PinnedStaging* staging) {
  EMBER_ASSIGN_OR_RETURN(gpu::Activations in, body.ex->upload_inputs(inputs, stream));
  int64_t rows = 0;
  for (const auto& [id, v] : in) rows = std::max<int64_t>(rows, v.desc.shape.rank ? v.desc.shape[0] : 0);
  const int64_t theirs =
      share > 0 && rows >= 2 ? std::clamp<int64_t>(std::llround(share * static_cast<double>(rows)), 1, rows - 1) : 0;
  // A Body whose weights are still arriving (just swapped in) runs alone: views need them there.
  const bool warm = body.ex->weights_resident();
  if (!shadow || !warm || theirs <= 0 || theirs >= rows) {
    st.shadow_failed = true;
    st.shadow_lost = !shadow;
    st.shadow_error = !shadow ? "no Shadow of " + key.to_string() + " is held there (dropped, or its device restarted)"
                      : !warm ? "the Body's weights are still arriving"
                              : "a batch of " + std::to_string(rows) + " rows is too small to split";
    EMBER_ASSIGN_OR_RETURN(auto whole, body.ex->run(in));
    return gpu::download(stream, whole, body.model->graph().value_names, staging);
  }
  const gpu::LayerRange range = shadow->ex->range();
  const uint32_t n = body.model->num_layers();
  gpu::ShadowSplit split;
  if (range.first > 0) {
    EMBER_ASSIGN_OR_RETURN(split.before, body.view({0, range.first}));
  }
  EMBER_ASSIGN_OR_RETURN(split.body, body.view(range));
  split.shadow = shadow->ex.get();
  if (range.last < n) {
    EMBER_ASSIGN_OR_RETURN(split.after, body.view({range.last, n}));
  }
  EMBER_ASSIGN_OR_RETURN(auto values, gpu::run_split(split, in, theirs, &st));
  return gpu::download(stream, values, body.model->graph().value_names, staging);
}

}  // namespace ember::engine
