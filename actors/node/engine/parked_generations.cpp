#include "actors/node/engine/parked_generations.hpp"

#include <utility>

namespace ember::engine {

void fail_stream(StreamState& s, const Error& error) {
  GenerationOutput out;
  out.final = true;
  out.error = error;
  out.resumable = true;
  out.prompt_tokens = static_cast<uint32_t>(s.job.prompt.size());
  out.completion_tokens = static_cast<uint32_t>(s.generated);
  auto emit = std::move(s.job.emit);
  if (emit) emit(std::move(out));
}

ParkedStreams::~ParkedStreams() {
  fail(unavailable("generation streams set aside when their model left its device were never taken back"));
}

size_t ParkedStreams::streams() const {
  std::lock_guard lock(mu_);
  return streams_.size();
}

uint64_t ParkedStreams::host_bytes() const {
  std::lock_guard lock(mu_);
  uint64_t bytes = 0;
  for (const ParkedStream& p : streams_) bytes += p.kv.size_bytes();
  return bytes;
}

void ParkedStreams::fail(const Error& error) {
  for (ParkedStream& p : take()) fail_stream(p.state, error);
}

std::vector<ParkedStream> ParkedStreams::take() {
  std::lock_guard lock(mu_);
  return std::exchange(streams_, {});
}

}  // namespace ember::engine
