#include "actors/node/generation_streams.hpp"

namespace ember {

Status GenerationStreams::add(const std::string& id, const model_key& model, uint64_t sink, uint64_t held) {
  if (by_id_.count(id)) return invalid_argument("request '" + id + "' is generating already");
  if (by_id_.size() >= capacity_) {
    return unavailable("too many generations in flight (" + std::to_string(capacity_) + "); retry");
  }
  by_id_.emplace(id, Stream{model, sink, held, std::nullopt});
  return Status::OK();
}

void GenerationStreams::joined(const std::string& id, uint32_t device) {
  if (auto it = by_id_.find(id); it != by_id_.end()) it->second.device = device;
}

const GenerationStreams::Stream* GenerationStreams::find(const std::string& id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

std::optional<GenerationStreams::Stream> GenerationStreams::take(const std::string& id) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  Stream s = std::move(it->second);
  by_id_.erase(it);
  return s;
}

std::vector<std::pair<std::string, GenerationStreams::Stream>> GenerationStreams::sink_down(uint64_t sink) {
  std::vector<std::pair<std::string, Stream>> out;
  for (auto it = by_id_.begin(); it != by_id_.end();) {
    if (it->second.sink == sink) {
      out.emplace_back(it->first, std::move(it->second));
      it = by_id_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

bool GenerationStreams::has_sink(uint64_t sink) const {
  for (const auto& [id, s] : by_id_) {
    if (s.sink == sink) return true;
  }
  return false;
}

}  // namespace ember
