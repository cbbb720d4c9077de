// Concatenating requests along the batch dimension and splitting answers (see request_batch.hpp).
#include "actors/node/request_batch.hpp"

#include <algorithm>
#include <cstring>

#include "model/half.hpp"

namespace ember {

namespace {

// Elements after the first two dims of `t` (the bytes of one position of one row, / the element).
int64_t inner_of(const tensor_msg& t) {
  int64_t n = 1;
  for (size_t d = 2; d < t.shape.size(); ++d) n *= t.shape[d];
  return n;
}

// Whether t's bytes are its shape's (so rows and positions can be cut out of it).
bool well_formed(const tensor_msg& t) {
  if (t.dtype >= static_cast<uint8_t>(gpu::DType::count)) return false;
  int64_t n = 1;
  for (int64_t d : t.shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return false;
  }
  return t.data.size() == static_cast<size_t>(n) * gpu::dtype_size(static_cast<gpu::DType>(t.dtype));
}

// One element of `dtype` holding `value` (validated by the manifest for integer types).
std::vector<uint8_t> pad_element(uint8_t dtype, double value) {
  const auto t = static_cast<gpu::DType>(dtype);
  std::vector<uint8_t> out(gpu::dtype_size(t));
  auto put = [&](auto v) { std::memcpy(out.data(), &v, sizeof v); };
  switch (t) {
    case gpu::DType::f32: put(static_cast<float>(value)); break;
    case gpu::DType::f16: put(gpu::f32_to_f16(static_cast<float>(value))); break;
    case gpu::DType::bf16: put(gpu::f32_to_bf16(static_cast<float>(value))); break;
    case gpu::DType::i64: put(static_cast<int64_t>(value)); break;
    case gpu::DType::i32: put(static_cast<int32_t>(value)); break;
    case gpu::DType::u8: put(static_cast<uint8_t>(value)); break;
    default: break;
  }
  return out;
}

}  // namespace

BatchPadding BatchPadding::of(const gpu::Manifest& manifest) {
  BatchPadding p;
  p.inputs = manifest.serving.pad_inputs;
  if (p.inputs.empty()) return p;
  for (const auto& o : manifest.outputs) {
    if (o.shape.rank >= 2 && o.shape[0] == -1 && o.shape[1] == -1) p.outputs.push_back(o.name);
  }
  return p;
}

const double* BatchPadding::value(const std::string& name) const {
  for (const auto& [n, v] : inputs)
    if (n == name) return &v;
  return nullptr;
}

bool BatchPadding::cuts(const std::string& output) const {
  return std::find(outputs.begin(), outputs.end(), output) != outputs.end();
}

int64_t sequence_length(const infer_request& req, const BatchPadding& padding) {
  int64_t len = 0;
  for (const auto& t : req.inputs) {
    if (!padding.value(t.name)) continue;
    if (t.shape.size() < 2 || t.shape[1] < 1 || (len && t.shape[1] != len)) return 0;
    len = t.shape[1];
  }
  return len;
}

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

bool batch_compatible(const infer_request& lead, const infer_request& other, const BatchPadding& padding) {
  if (lead.model != other.model || lead.inputs.size() != other.inputs.size() || lead.outputs != other.outputs) {
    return false;
  }
  if (batch_rows(lead) == 0 || batch_rows(other) == 0) return false;
  // Padded sequences: each member's padded inputs agree on its length and their bytes are their
  // shape's, so that rows can be padded (a malformed request runs alone, where decoding says why).
  const bool padded = !padding.empty() && sequence_length(lead, padding) != sequence_length(other, padding);
  if (padded && (sequence_length(lead, padding) == 0 || sequence_length(other, padding) == 0)) return false;
  for (size_t i = 0; i < lead.inputs.size(); ++i) {
    const tensor_msg& a = lead.inputs[i];
    const tensor_msg& b = other.inputs[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape.size() != b.shape.size()) return false;
    if (padded && padding.value(a.name)) {
      if (!well_formed(a) || !well_formed(b) || !std::equal(a.shape.begin() + 2, a.shape.end(), b.shape.begin() + 2)) {
        return false;
      }
      continue;
    }
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

infer_request concat_requests(const std::vector<std::shared_ptr<const infer_request>>& members,
                              const BatchPadding& padding) {
  const infer_request& lead = *members.front();
  int64_t longest = 0;
  bool ragged = false;
  if (!padding.empty()) {
    for (const auto& m : members) {
      const int64_t len = sequence_length(*m, padding);
      ragged = ragged || (longest && len != longest);
      longest = std::max(longest, len);
    }
  }
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
    if (const double* value = padding.value(t.name); ragged && value) {
      // Each member's rows, every row's positions followed by pad values up to the longest.
      t.shape[1] = longest;
      const size_t elem = gpu::dtype_size(static_cast<gpu::DType>(t.dtype));
      const size_t position = static_cast<size_t>(inner_of(t)) * elem;
      const std::vector<uint8_t> pad = pad_element(t.dtype, *value);
      t.data.resize(static_cast<size_t>(rows * longest) * position);
      uint8_t* at = t.data.data();
      for (const auto& m : members) {
        const tensor_msg& src = m->inputs[i];
        const size_t row = static_cast<size_t>(src.shape[1]) * position;
        const size_t gap = static_cast<size_t>(longest - src.shape[1]) * position;
        for (int64_t r = 0; r < src.shape[0]; ++r) {
          if (row) std::memcpy(at, src.data.data() + static_cast<size_t>(r) * row, row);
          at += row;
          for (size_t b = 0; b < gap; b += elem) std::memcpy(at + b, pad.data(), elem);
          at += gap;
        }
      }
      out.inputs.push_back(std::move(t));
      continue;
    }
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
                                             const std::vector<std::shared_ptr<const infer_request>>& members,
                                             const BatchPadding& padding) {
  int64_t total = 0, longest = 0;
  bool ragged = false;
  for (const auto& m : members) {
    total += batch_rows(*m);
    if (padding.empty()) continue;
    const int64_t len = sequence_length(*m, padding);
    ragged = ragged || (longest && len != longest);
    longest = std::max(longest, len);
  }
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
    if (ragged && padding.cuts(t.name)) {
      if (t.shape.size() < 2 || t.shape[1] != longest || longest == 0) {
        return internal_error("output '" + t.name + "' of a batch padded to " + std::to_string(longest) +
                              " positions does not have them as its second dimension");
      }
      const size_t position = row_bytes / static_cast<size_t>(longest);
      int64_t first = 0;  // member k's first row in the batch
      for (size_t k = 0; k < members.size(); ++k) {
        const int64_t rows = batch_rows(*members[k]), len = sequence_length(*members[k], padding);
        tensor_msg part;
        part.name = t.name;
        part.dtype = t.dtype;
        part.shape = t.shape;
        part.shape[0] = rows;
        part.shape[1] = len;
        part.data.reserve(static_cast<size_t>(rows * len) * position);
        for (int64_t r = 0; r < rows; ++r) {
          const uint8_t* row = t.data.data() + static_cast<size_t>(first + r) * row_bytes;
          part.data.insert(part.data.end(), row, row + static_cast<size_t>(len) * position);
        }
        first += rows;
        out[k].outputs.push_back(std::move(part));
      }
      continue;
    }
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
