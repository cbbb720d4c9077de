// One generation between the service's sink and the HTTP thread (see generation_call.hpp).
#include "actors/gateway/http/generation_call.hpp"

#include <utility>

namespace ember {

GenerationService::Sink GenerationCall::sink() {
  return [self = shared_from_this()](Result<generate_chunk> item) { self->push(std::move(item)); };
}

void GenerationCall::push(Result<generate_chunk> item) {
  {
    std::lock_guard lock(mu_);
    if (final_ || overflowed_) return;
    if (!item.ok()) {
      if (!any_chunk_) {
        refusal_ = item.error();
        final_ = true;
      } else {  // an Error after a chunk: a failure after the first token
        generate_chunk failed;
        failed.finish = FinishReason::error;
        failed.error = {item.error().code(), item.error().message()};
        queue_.push_back(std::move(failed));
        final_ = true;
      }
    } else if (queue_.size() >= max_queued_) {
      overflowed_ = true;
    } else {
      any_chunk_ = true;
      final_ = item->is_final();
      queue_.push_back(std::move(*item));
    }
  }
  arrived_.notify_one();
}

GenerationCall::Next GenerationCall::next(std::chrono::milliseconds wait, generate_chunk& chunk,
                                          std::optional<Error>& refusal) {
  std::unique_lock lock(mu_);
  arrived_.wait_for(lock, wait, [&] { return !queue_.empty() || refusal_ || overflowed_; });
  if (!queue_.empty()) {
    chunk = std::move(queue_.front());
    queue_.pop_front();
    return Next::chunk;
  }
  if (refusal_) {
    refusal = refusal_;
    return Next::refused;
  }
  return overflowed_ ? Next::overflowed : Next::idle;
}

bool GenerationCall::closed() const {
  std::lock_guard lock(mu_);
  return final_ || overflowed_;
}

bool GenerationCall::overflowed() const {
  std::lock_guard lock(mu_);
  return overflowed_;
}

}  // namespace ember
