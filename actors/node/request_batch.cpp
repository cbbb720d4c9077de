// Concatenating requests along the batch dimension and splitting answers (see request_batch.hpp).
#include "actors/node/request_batch.hpp"

#include <cstring>

namespace ember {

int64_t batch_rows(const infer_request& req) {
  if (req.inputs.empty()) return 0;
  int64_t rows = -1;
  for (const auto& t : req.inputs) {
    if (t.shape.empty() || t.shape[0] < 1) return 0;
    if (rows >= 0 && t.shape[0] != rows) return 0;
    rows = t.shape[0];
  }
  return rows;
}

bool batch_compatible(const infer_request& lead, const infer_request& other) {
  if (lead.model != other.model || lead.inputs.size() != other.inputs.size() || lead.outputs != other.outputs) {
    return false;
  }
  if (batch_rows(lead) == 0 || batch_rows(other) == 0) return false;
  for (size_t i = 0; i < lead.inputs.size(); ++i) {
    const tensor_msg& a = lead.inputs[i];
    const tensor_msg& b = other.inputs[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape.size() != b.shape.size()) return false;
    if (!std::equal(a.shape.begin() + 1, a.shape.end(), b.shape.begin() + 1)) return false;
  }
  return true;
}

Status batching_eligible(const gpu::Manifest& manifest) {
  auto check = [](const std::vector<gpu::TensorSpec>& specs, const char* what) -> Status {
    for (const auto& t : specs) {
      if (t.shape.rank < 1 || t.shape[0] != -1) {
        return invalid_argument(std::string(what) + " '" + t.name + "' has shape " + t.shape.to_string() +
                                ": batching needs a free (-1) first dimension on every input and output");
      }
    }
    return Status::OK();
  };
  EMBER_RETURN_IF_ERROR(check(manifest.inputs, "input"));
  return check(manifest.outputs, "output");
}

infer_request concat_requests(const std::vector<std::shared_ptr<const infer_request>>& members) {
  const infer_request& lead = *members.front();
  infer_request out;
  out.model = lead.model;
  out.id = lead.id;
  out.outputs = lead.outputs;
  int64_t rows = 0;
  for (const auto& m : members) rows += batch_rows(*m);
  out.inputs.reserve(lead.inputs.size());
  for (size_t i = 0; i < lead.inputs.size(); ++i) {
    tensor_msg t;
    t.name = lead.inputs[i].name;
    t.dtype = lead.inputs[i].dtype;
    t.shape = lead.inputs[i].shape;
    t.shape[0] = rows;
    size_t bytes = 0;
    for (const auto& m : members) bytes += m->inputs[i].data.size();
    t.data.resize(bytes);
    size_t at = 0;
    for (const auto& m : members) {
      const auto& d = m->inputs[i].data;
      if (!d.empty()) std::memcpy(t.data.data() + at, d.data(), d.size());
      at += d.size();
    }
    out.inputs.push_back(std::move(t));
  }
  return out;
}

Result<std::vector<infer_reply>> split_reply(const infer_reply& batch,
                                             const std::vector<std::shared_ptr<const infer_request>>& members) {
  int64_t total = 0;
  for (const auto& m : members) total += batch_rows(*m);
  std::vector<infer_reply> out(members.size());
  for (size_t k = 0; k < members.size(); ++k) {
    out[k].model = batch.model;
    out[k].id = members[k]->id;
    out[k].node = batch.node;
    out[k].device = batch.device;
    out[k].queue_us = batch.queue_us;
    out[k].compute_us = batch.compute_us;
    out[k].outputs.reserve(batch.outputs.size());
  }
  for (const auto& t : batch.outputs) {
    if (t.shape.empty() || t.shape[0] != total || total == 0 || t.data.size() % static_cast<size_t>(total) != 0) {
      return internal_error("output '" + t.name + "' of a batch of " + std::to_string(total) +
                            " rows does not have them as its first dimension");
    }
    const size_t row_bytes = t.data.size() / static_cast<size_t>(total);
    size_t at = 0;
    for (size_t k = 0; k < members.size(); ++k) {
      const int64_t rows = batch_rows(*members[k]);
      tensor_msg part;
      part.name = t.name;
      part.dtype = t.dtype;
      part.shape = t.shape;
      part.shape[0] = rows;
      const size_t n = row_bytes * static_cast<size_t>(rows);
      part.data.assign(t.data.begin() + static_cast<std::ptrdiff_t>(at),
                       t.data.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
      out[k].outputs.push_back(std::move(part));
    }
  }
  return out;
}

}  // namespace ember
