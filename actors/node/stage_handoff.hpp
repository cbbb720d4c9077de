// What a pipeline stage does to the tensors it carries (Flashpoint's pipeline, issue 14), without
// an actor: which of them later stages (or the answer) still read, the answer the last stage gives,
// and their hand-off over the data plane. Between stages the carried tensors travel over the data
// plane (TCP, or UCX when configured): the upstream packs them into one buffer, hashes it and lets
// its blob server hold it under a handoff key (pack_handoff); the stage_request names the key, the
// sizes and the digest; the downstream fetches it on the node's hand-off queue, off its actor, and
// checks the digest (fetch_handoff), and only then sends its credit, at which the upstream drops
// the buffer (StageCredits). The answer returns hop by hop as the actors' replies.
//
// Called by the node's stage host (actors/node/stage_host.cpp): pack_handoff and the trimming on its
// actor, fetch_handoff on the hand-off queue (it blocks for the fetch). No CAF, no clock of its own
// (the fetch's timeout is the transport's).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/inference_messages.hpp"
#include "actors/pipeline_messages.hpp"
#include "base/status.hpp"
#include "config/choices.hpp"
#include "model/host_buffer.hpp"
#include "model/model.hpp"
#include "transport/ticket.hpp"
#include "transport/tls_stream.hpp"

namespace ember {

class BlobStore;

/// Handed-off tensors beyond this are refused: a forged size must not allocate the node away.
constexpr uint64_t kMaxHandoffBytes = uint64_t{4} << 30;

/// The carried tensors a later stage (or the answer) still needs after stage `range` of `whole`:
/// values read after its last layer, and the model's outputs.
std::vector<tensor_msg> still_needed(const gpu::Model& whole, gpu::LayerRange range, std::vector<tensor_msg> carried,
                                     std::vector<tensor_msg> produced);

/// The answer of the last stage: the model's outputs (those the client named, when it named any).
/// internal_error when the pipeline lost one; invalid_argument for a name the model does not output.
Result<std::vector<tensor_msg>> answer_of(const gpu::Model& whole, std::vector<tensor_msg> carried,
                                          const std::vector<std::string>& wanted);

/// Packs `tensors`' bytes into one buffer that `store` serves under `key` (their names, dtypes and
/// shapes stay; their data is emptied): the handoff the downstream fetches from `from`, with a
/// ticket for `receiver` (the next stage's node, by name: with security.ticket_receiver:
/// certificate only its certificate opens it) from `tickets` when the data plane needs one (null: none).
Result<tensor_handoff> pack_handoff(BlobStore& store, const std::string& key, const HostPort& from,
                                    const transport::TicketKeys* tickets, const std::string& receiver,
                                    std::vector<tensor_msg>& tensors);

/// The tensors handed over as `h`, `total` bytes, fetched with `transport` (and `tls`, when set) and
/// checked against the digest: corrupt when they do not match. Blocks for the fetch.
Result<std::shared_ptr<gpu::HostBuffer>> fetch_handoff(TransportKind transport,
                                                       const std::shared_ptr<const transport::DataTls>& tls,
                                                       const tensor_handoff& h, uint64_t total);

}  // namespace ember
