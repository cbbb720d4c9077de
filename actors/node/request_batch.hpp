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
//
// Sequences of different lengths (BatchPadding, from the model's serving.dynamic_batching.pad):
// the padded inputs may also differ along dim 1 (each member's own inputs agreeing on it: its
// length); the batch pads every member's rows to the longest with the input's pad value, and an
// output declared [-1, -1, ...] is cut back to each member's length. Each member's answer is then
// what running it alone gives when the model ignores padded positions (its padding mask).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "actors/inference_messages.hpp"
#include "base/status.hpp"
#include "model/manifest.hpp"

namespace ember {

/// How sequences of different lengths join a batch (see the file comment); empty: they do not.
struct BatchPadding {
  std::vector<std::pair<std::string, double>> inputs;  // name, pad value
  std::vector<std::string> outputs;                    // cut back along dim 1
  /// From the manifest: serving.pad_inputs, and the outputs declared [-1, -1, ...].
  static BatchPadding of(const gpu::Manifest& manifest);
  bool empty() const { return inputs.empty(); }
  /// The pad value of input `name`, or nullptr when it is not padded.
  const double* value(const std::string& name) const;
  bool cuts(const std::string& output) const;
};

/// A request's sequence length under `padding`: dim 1 of its padded inputs; 0 when none is padded
/// or they disagree (such a request batches only with its own length).
int64_t sequence_length(const infer_request& req, const BatchPadding& padding);

/// The rows (first dimension) of a request's inputs; 0 when it has no inputs, an input of rank 0,
/// or inputs whose first dimensions differ (such a request runs alone).
int64_t batch_rows(const infer_request& req);

/// True when `other` can run in one batch with `lead` (see the file comment).
bool batch_compatible(const infer_request& lead, const infer_request& other, const BatchPadding& padding = {});

/// Whether a model may batch at all: every declared input and output has rank >= 1 and a free (-1)
/// first dimension. Otherwise why not, for the log.
Status batching_eligible(const gpu::Manifest& manifest);

/// One request holding every member's rows, in member order (padded inputs padded to the longest
/// member); the lead's id and model. Precondition: members non-empty and all batch_compatible with
/// members[0] under the same `padding`.
infer_request concat_requests(const std::vector<std::shared_ptr<const infer_request>>& members,
                              const BatchPadding& padding = {});

/// Each member's answer: its rows of every output (cut back to its length where `padding` says),
/// its own id; node, device and times copied. internal_error when an output's first dimension is
/// not the batch's total rows, or a cut output's dim 1 is not the batch's length (the model did not
/// keep rows apart: the members must run alone).
Result<std::vector<infer_reply>> split_reply(const infer_reply& batch,
                                             const std::vector<std::shared_ptr<const infer_request>>& members,
                                             const BatchPadding& padding = {});

}  // namespace ember
