// ScriptedGeneration: a GenerationService (actors/gateway/generation_service.hpp) that answers
// each request from a script, for the front ends' tests. It keeps the service's threading contract:
// a refusal is the sink's first call on the caller's thread (before generate() returns); chunks go
// out on a thread of the service's own, one per request, in order; a cancel stops the generation
// before its next chunk and ends it with a final chunk (which the front end ignores); each sink is
// dropped after its final call.
//
// Holds: a script may stop before one of its chunks until the test releases it or the request is
// cancelled (a client that disconnects mid-stream, a timeout). Every wait is bounded (10 s), so a
// broken front end fails a test instead of hanging it.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/gateway/generation_service.hpp"

namespace ember::testing {

/// What the service does with one request.
struct GenerationScript {
  /// Answer this before any chunk (and nothing else).
  std::optional<Error> refuse;
  /// Then these, in order; ids are filled in; the last should be final.
  std::vector<generate_chunk> chunks;
  /// Before sending chunks[hold_before], wait for release() or a cancel.
  size_t hold_before = SIZE_MAX;
};

/// A chunk of one token (id 100 + i) per piece of text, the last one final with `finish` and usage
/// {prompt_tokens, pieces}.
inline GenerationScript script_of(const std::vector<std::string>& pieces, FinishReason finish = FinishReason::stop,
                                  uint32_t prompt_tokens = 3) {
  GenerationScript s;
  for (size_t i = 0; i < pieces.size(); ++i) {
    generate_chunk c;
    c.tokens = {static_cast<int32_t>(100 + i)};
    c.text = pieces[i];
    s.chunks.push_back(std::move(c));
  }
  if (s.chunks.empty()) s.chunks.emplace_back();
  s.chunks.back().finish = finish;
  s.chunks.back().usage = {prompt_tokens, static_cast<uint32_t>(pieces.size())};
  return s;
}

class ScriptedGeneration final : public GenerationService {
 public:
  using Scripter = std::function<GenerationScript(const generate_request&)>;

  explicit ScriptedGeneration(Scripter scripter) : scripter_(std::move(scripter)) {}
  ~ScriptedGeneration() override {
    release();
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    changed_.notify_all();
    for (auto& t : threads_) t.join();
  }

  /// What models() lists.
  std::vector<GenerativeModel> listed = {{"gpt2", 1, 1700000000, 1024}};
  /// When set, models() fails with it.
  std::optional<Error> models_error;

  Result<std::vector<GenerativeModel>> models() override {
    if (models_error) return *models_error;
    return listed;
  }

  void generate(generate_request request, Sink sink) override {
    GenerationScript script = scripter_(request);
    {
      std::lock_guard lock(mu_);
      requests_.push_back(request);
    }
    if (script.refuse) {
      sink(*script.refuse);
      return;
    }
    std::lock_guard lock(mu_);
    ++running_;
    threads_.emplace_back([this, id = request.id, script = std::move(script), sink = std::move(sink)]() mutable {
      run(id, std::move(script), std::move(sink));
    });
  }

  void cancel(const std::string& request_id) override {
    {
      std::lock_guard lock(mu_);
      cancels_.push_back(request_id);
    }
    changed_.notify_all();
  }

  // -- the test's side --

  std::vector<generate_request> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }
  std::vector<std::string> cancels() {
    std::lock_guard lock(mu_);
    return cancels_;
  }
  /// Waits (at most `limit`) until `id` is cancelled.
  bool wait_cancelled(const std::string& id, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, limit, [&] { return cancelled(id); });
  }
  /// Waits (at most `limit`) until every generation has sent its final chunk.
  bool wait_finished(std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, limit, [&] { return running_ == 0; });
  }
  /// Lets every held script go on.
  void release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    changed_.notify_all();
  }

 private:
  bool cancelled(const std::string& id) const {
    return std::find(cancels_.begin(), cancels_.end(), id) != cancels_.end();
  }

  void run(const std::string& id, GenerationScript script, Sink sink) {
    for (size_t i = 0; i < script.chunks.size(); ++i) {
      if (i == script.hold_before) {
        std::unique_lock lock(mu_);
        changed_.wait_for(lock, std::chrono::seconds(10), [&] { return released_ || stopping_ || cancelled(id); });
      }
      bool stop = false;
      {
        std::lock_guard lock(mu_);
        stop = cancelled(id) || stopping_;
      }
      generate_chunk c = script.chunks[i];
      c.id = id;
      if (stop) {  // the contract's ending after a cancel: a final chunk, ignored by the front end
        generate_chunk last;
        last.id = id;
        last.finish = FinishReason::stop;
        sink(std::move(last));
        break;
      }
      sink(std::move(c));
    }
    sink = nullptr;  // dropped after the final call
    {
      std::lock_guard lock(mu_);
      --running_;
    }
    changed_.notify_all();
  }

  Scripter scripter_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<generate_request> requests_;
  std::vector<std::string> cancels_;
  std::vector<std::thread> threads_;
  size_t running_ = 0;
  bool released_ = false;
  bool stopping_ = false;
};

}  // namespace ember::testing
