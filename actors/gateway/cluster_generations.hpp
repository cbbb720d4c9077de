// ClusterGenerations: the gateway's GenerationService (generation_service.hpp) over the cluster.
// It lists the generative models of the gateway's RoutingView (a version whose model.json has a
// "generation" section: ModelView::generation), refuses what it can tell at once on the calling
// thread, and runs every other generation as one relay actor (spawned in the gateway's actor
// system, so no front-end thread ever waits on a stream) that speaks the node protocol of
// actors/node_router_interface.hpp with a replica's node and hands the chunks to the front end's sink.
//
// A relay's life (one generation):
//
//   spawned ──ready replica──▶ sent (generate_request + sink = the relay) ──chunk…──▶ final ──▶ ends
//     │  none ready: ensure_atom to the gateway, look   │ final chunk with error.resume, or the
//     │  at the view every poll interval, ensure again  │ node monitored goes down before the final:
//     ▼  every ensure interval                          ▼ re-sent with resume_tokens = original +
//   waiting ──replica──▶ sent            another ready replica (not one that failed this stream)
//     └─ cold_start_timeout, model failed/unloaded ──▶ refused (the sink's Error)
//   refused by a node (unavailable) ─▶ the next replica; other refusals ─▶ the sink's Error
//   attempts (sends) past max_attempts, or no other ready replica ─▶ unavailable: the sink's Error
//   before any chunk was forwarded, a final error chunk after
//   cancel(id) ─▶ cancel_atom to the node, a final chunk (or Error) the front end ignores, ends
//
// Exactly-once tokens: the relay records every token it forwarded; a continuation is asked with
// resume_tokens = the request's own + those, so the new replica sends only what follows them
// (its usage counts them). Chunks of a node the relay gave up on are dropped (the relay takes
// chunks only from the stream it sent last: after a resume final or a down, the old node sends none).
//
// Who calls it: any front-end thread (generate, cancel, models), all at once. generate() reads the
// view and spawns; cancel() sends one message; neither blocks. The sink is called from the relay
// actor only, in order, never twice at once, and dropped after its final call.
// Time: the relay's actor clock (deterministic tests move it). Counted in the instruments (per
// model): time to first token, inter-token latency, generated tokens, streams resumed, requests by
// outcome; every stream is in the ReplicaChooser's in-flight count of its node while it runs there,
// and in the view's DirectTraffic (arrivals, completions, in flight: the gateway's load reports to
// the autoscaler), so a model with open streams is not idle.
//
// Lifetime: shutdown() (or the destructor) stops every relay still running and waits for them; the
// actor system, the view and the instruments must outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/gateway/generation_service.hpp"
#include "actors/gateway_interface.hpp"

namespace ember {

class GatewayInstruments;
class RoutingView;

struct ClusterGenerationsOptions {
  /// How long a generation waits for a ready replica of a cold model before it is refused
  /// (unavailable); the gateway's gateway.cold_start_timeout.
  std::chrono::microseconds cold_start_timeout{30'000'000};
  /// Sends of one generation at most (the first and its continuations or retries elsewhere).
  int max_attempts = 3;
  /// While waiting for a replica: how often the relay looks at the view again (a timer, cheap: one
  /// snapshot read), and how often it asks the gateway again to ensure the model.
  std::chrono::microseconds poll_interval{20'000};
  std::chrono::microseconds ensure_interval{500'000};
};

class ClusterGenerations final : public GenerationService {
 public:
  /// `gateway` receives ensure_atom for cold models (null: nobody is asked; a cold model waits for
  /// a replica someone else brings up). `instruments` may be null (nothing counted).
  ClusterGenerations(caf::actor_system& sys, std::shared_ptr<RoutingView> view, gateway_actor gateway,
                     GatewayInstruments* instruments, ClusterGenerationsOptions options = {});
  ~ClusterGenerations() override;

  Result<std::vector<GenerativeModel>> models() override;
  void generate(generate_request request, Sink sink) override;
  void cancel(const std::string& request_id) override;

  /// Stops every relay still running (their sinks are dropped without a final call) and waits for
  /// them to end. Later generate() calls refuse with unavailable. Idempotent.
  void shutdown();
  /// Relays running now.
  size_t streams() const;

  /// What relays share with the service (internal; the relays keep it alive).
  struct Shared;

 private:
  caf::actor_system& sys_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace ember
