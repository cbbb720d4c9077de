#include "actors/pipeline_messages.hpp"

#include "model/model.hpp"

namespace ember {

model_key stage_key::wire() const { return {gpu::stage_name(model.name, {first_layer, last_layer}), model.version}; }

model_key stage_key_of(const model_key& model, uint32_t first, uint32_t last) {
  return stage_key{model, first, last}.wire();
}

}  // namespace ember
