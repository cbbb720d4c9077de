#include "actors/node/engine/generations.hpp"

#include <utility>

#include "text/tokenizer.hpp"

namespace ember::engine {

Result<GenerativeSpec> generative_spec(const gpu::Model& model) {
  const gpu::GenerationSpec* g = model.generation();
  if (!g) return invalid_argument("model '" + model.manifest().name + "' is not a generative model (no generation section)");
  GenerativeSpec s;
  s.layout.num_kv_layers = g->num_kv_layers;
  s.layout.num_kv_heads = g->num_kv_heads;
  s.layout.head_dim = g->head_dim;
  s.layout.dtype = g->kv_dtype;
  s.vocab_size = g->vocab_size;
  s.context_window = g->context_length;
  for (int64_t id : g->eos_token_ids) s.eos_ids.push_back(static_cast<int32_t>(id));
  EMBER_RETURN_IF_ERROR(s.layout.validate());
  return s;
}

Result<GenerationLoop*> Generations::loop(const model_key& key, const std::shared_ptr<const gpu::Model>& model,
                                          gpu::LayerExecutor& ex) {
  auto it = loops_.find(key);
  if (it == loops_.end()) {
    EMBER_ASSIGN_OR_RETURN(GenerativeSpec spec, generative_spec(*model));
    std::shared_ptr<const text::Tokenizer> tokenizer;
    if (!model->tokenizer_json().empty()) {
      auto t = text::Tokenizer::parse(model->tokenizer_json(), model->tokenizer_config_json());
      if (!t.ok()) return t.error().with_context("model '" + key.to_string() + "': its tokenizer");
      tokenizer = std::make_shared<const text::Tokenizer>(std::move(*t));
    }
    GenerationLoopConfig config = config_;
    config.kv.name = key.to_string();
    EMBER_ASSIGN_OR_RETURN(auto loop, GenerationLoop::create(device_, memory_, std::move(spec), std::move(tokenizer),
                                                             std::move(config)));
    it = loops_.emplace(key, std::move(loop)).first;
  }
  it->second->attach(&ex);
  return it->second.get();
}

Status Generations::join(const model_key& key, const std::shared_ptr<const gpu::Model>& model, gpu::LayerExecutor& ex,
                         const MakeGeneration& make, uint64_t now_us) {
  EMBER_ASSIGN_OR_RETURN(GenerationLoop * loop, this->loop(key, model, ex));
  EMBER_ASSIGN_OR_RETURN(GenerationJob job, make(loop->tokenizer()));
  return loop->submit(std::move(job), now_us);
}

Result<size_t> Generations::resume(const model_key& key, const std::shared_ptr<const gpu::Model>& model,
                                   gpu::LayerExecutor& ex, ParkedStreams& parked, uint64_t now_us) {
  EMBER_ASSIGN_OR_RETURN(GenerationLoop * loop, this->loop(key, model, ex));
  const size_t joined = loop->unpark(parked.take(), now_us);
  parked_resumed_[key].second += joined;
  return joined;
}

bool Generations::cancel(const model_key& key, const std::string& id) {
  auto it = loops_.find(key);
  return it != loops_.end() && it->second->cancel(id);
}

bool Generations::step(uint64_t now_us) {
  bool more = false;
  for (auto& [key, loop] : loops_) {
    if (loop->attached() && loop->busy()) more |= loop->step(now_us);
  }
  return more;
}

std::unique_ptr<ParkedStreams> Generations::evicting(const model_key& key) {
  auto it = loops_.find(key);
  if (it == loops_.end()) return nullptr;
  auto parked = it->second->park();
  it->second->attach(nullptr);
  if (parked) parked_resumed_[key].first += parked->streams();
  return parked;
}

void Generations::fail_all(const Error& error, bool resumable) {
  for (auto& [key, loop] : loops_) loop->fail_all(error, resumable);
}

bool Generations::busy() const {
  for (const auto& [key, loop] : loops_) {
    if (loop->busy()) return true;
  }
  return false;
}

GenerationsStats Generations::stats() const {
  GenerationsStats s;
  s.loops = loops_.size();
  for (const auto& [key, loop] : loops_) {
    const GenerationLoopStats l = loop->stats();
    GenerationModelStats& m = s.models[key];
    m.streams = l.streams;
    m.tokens_generated = l.tokens_generated;
    m.kv_blocks_in_use = l.kv.in_use;
    m.kv_blocks_swapped_bytes = l.kv.swapped_bytes;
    m.kv_device_bytes = l.kv.device_bytes;
    m.preempted_swap = l.batcher.preempted_swap;
    m.preempted_recompute = l.batcher.preempted_recompute;
    m.rejected = l.batcher.rejected;
    m.costs = l.costs;
    if (auto pr = parked_resumed_.find(key); pr != parked_resumed_.end()) {
      m.parked = pr->second.first;
      m.resumed = pr->second.second;
    }
    s.streams += m.streams;
    s.tokens_generated += m.tokens_generated;
    s.kv_blocks_in_use += m.kv_blocks_in_use;
    s.kv_blocks_swapped_bytes += m.kv_blocks_swapped_bytes;
    s.kv_device_bytes += m.kv_device_bytes;
    s.preempted_swap += m.preempted_swap;
    s.preempted_recompute += m.preempted_recompute;
    s.rejected += m.rejected;
    s.parked += m.parked;
    s.resumed += m.resumed;
  }
  return s;
}

}  // namespace ember::engine
