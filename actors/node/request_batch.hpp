// Dynamic batching's data work: which requests of one model can run as one, concatenating them
// along the batch (first) dimension, and splitting the answer back. The node router forms batches
// (node_router_late.cpp); this file only moves tensors.
//
// Pure; anyone, any thread; never throws. A request joins a batch only when every input has the
// lead's name, order, datatype and dimensions after the first, the same number of rows (first
// dimension) as its other inputs, and it asks for the same outputs: then each member's answer is
// the rows of the batch's answer that its own rows produced, as running it alone gives, provided
// the model computes each row independently (batching_eligible checks what the declaration can
// say: every input and output has a free first dimension).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "actors/inference_messages.hpp"
#include "base/status.hpp"
#include "model/manifest.hpp"

namespace ember {

/// The rows (first dimension) of a request's inputs; 0 when it has no inputs, an input of rank 0,
/// or inputs whose first dimensions differ (such a request runs alone).
int64_t batch_rows(const infer_request& req);

/// True when `other` can run in one batch with `lead` (see the file comment).
bool batch_compatible(const infer_request& lead, const infer_request& other);

/// Whether a model may batch at all: every declared input and output has rank >= 1 and a free (-1)
/// first dimension. Otherwise why not, for the log.
Status batching_eligible(const gpu::Manifest& manifest);

/// One request holding every member's rows, in member order; the lead's id and model.
/// Precondition: members non-empty and all batch_compatible with members[0].
infer_request concat_requests(const std::vector<std::shared_ptr<const infer_request>>& members);

/// Each member's answer: its rows of every output, its own id; node, device and times copied.
/// internal_error when an output's first dimension is not the batch's total rows (the model did
/// not keep rows apart: the members must run alone).
Result<std::vector<infer_reply>> split_reply(const infer_reply& batch,
                                             const std::vector<std::shared_ptr<const infer_request>>& members);

}  // namespace ember
